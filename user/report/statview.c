/* The counters since attach in a report: events, drops, Python frames, unwinding, the rss layer, probe hits. */
#include "report/statview.h"
#include <inttypes.h>
#include "attach/allocators.h"
#include "lib/log.h"
#include "report/json.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct stat_name {
	unsigned int idx; /* an enum ml_stat, or a slot past them (ML_STAT_UW_END() ...) */
	const char *json;
	const char *text;
};

static const struct stat_name event_stats[] = {
    {ML_STAT_ALLOC_CALLS, "allocs", "allocs"},
    {ML_STAT_FREE_CALLS, "frees", "frees"},
    {ML_STAT_ALLOC_FAILED, "failed_allocs", "failed (not recorded)"},
    {ML_STAT_FREE_NULL, "free_null", "free(NULL)"},
    {ML_STAT_FREE_MATCHED, "frees_matched", "matched"},
    {ML_STAT_FREE_UNKNOWN, "frees_unknown", "of untracked blocks (from before attach, or filtered out)"},
    {ML_STAT_NESTED, "nested_calls", "nested"},
    {ML_STAT_REALLOC_RACE, "realloc_races", "realloc races"},
    {ML_STAT_TAKEOVER, "takeovers", "records replaced (address handed out again before its release was seen)"},
    {ML_STAT_FILTERED, "filtered", "outside --min-size/--max-size"},
};

static const struct stat_name drop_stats[] = {
    {ML_STAT_DROP_ALLOCS_FULL, "allocs_table_full", "allocation table full (raise --max-allocs)"},
    {ML_STAT_DROP_STACK, "stack_unavailable", "new stack not handed over (ring buffer full; sent again next time)"},
    {ML_STAT_DROP_THREAD, "thread_state", "no per-thread state"},
    {ML_STAT_DROP_LOST_RETURN, "lost_return", "allocator return not seen"},
    {ML_STAT_DROP_PROC_EVENT, "proc_events", "fork or exec not followed (event buffer full)"},
};

size_t ml_drop_stat(size_t i, unsigned int *slot, const char **name)
{
	if (i >= sizeof(drop_stats) / sizeof(drop_stats[0]))
		return 0;
	*slot = drop_stats[i].idx;
	*name = drop_stats[i].json;
	return 1;
}

/* Python frame capture: shown once a Python interpreter is being walked. */
static const struct stat_name python_stats[] = {
    {ML_STAT_PY_FRAMES, "with_frames", "allocations with Python frames"},
    {ML_STAT_PY_NO_THREAD, "without_frames", "without (thread not running Python code)"},
    {ML_STAT_PY_TRUNCATED, "truncated", "deeper than the frames kept (outermost missing)"},
    {ML_STAT_PY_BROKEN, "unreadable", "frame chain unreadable (outermost missing)"},
};

/* Native unwinding with the tables: shown once a stack was unwound with them. */
static const struct stat_name unwind_stats[] = {
    {ML_STAT_UW_STACKS, "stacks", "stacks unwound with tables"},
    {ML_STAT_UW_FP, "fp_frames", "frames by frame pointer (no table)"},
    {ML_STAT_UW_STOP, "stopped", "stopped early (frame not trusted)"},
    {ML_STAT_UW_TRUNCATED, "truncated", "deeper than the frames kept"},
    {ML_STAT_UW_MEMO, "replayed", "replayed from a remembered walk"},
};

/* Why each walk ended (-v, and JSON's stop_reasons): the Python walks, then the native ones. */
static const struct stat_name python_ends[] = {
    {ML_STAT_PY_END(ML_PY_END_NO_THREAD), "no_thread_state", "no thread state"},
    {ML_STAT_PY_END(ML_PY_END_CHAIN_END), "chain_end", "chain read to its end"},
    {ML_STAT_PY_END(ML_PY_END_UNREADABLE), "frame_unreadable", "frame unreadable"},
    {ML_STAT_PY_END(ML_PY_END_DEPTH), "depth_limit", "frames kept full"},
    {ML_STAT_PY_END(ML_PY_END_STEPS), "step_limit", "walk's steps ran out"},
};

static const struct stat_name unwind_ends[] = {
    {ML_STAT_UW_END(ML_UW_END_OUTERMOST), "outermost", "outermost frame (its rule ends the stack)"},
    {ML_STAT_UW_END(ML_UW_END_NULL_RET), "null_return", "return address 0"},
    {ML_STAT_UW_END(ML_UW_END_DEPTH), "depth_limit", "frames kept full"},
    {ML_STAT_UW_END(ML_UW_END_STEPS), "step_limit", "walk's steps ran out"},
    {ML_STAT_UW_END(ML_UW_END_RBP_LOST), "rbp_lost", "CFA from rbp, rbp lost"},
    {ML_STAT_UW_END(ML_UW_END_NO_PROGRESS), "no_progress", "CFA not above the stack pointer"},
    {ML_STAT_UW_END(ML_UW_END_RET_UNREADABLE), "return_unreadable", "return address unreadable"},
    {ML_STAT_UW_END(ML_UW_END_RBP_UNREADABLE), "rbp_unreadable", "saved rbp unreadable"},
    {ML_STAT_UW_END(ML_UW_END_SIGNAL), "signal_unreadable", "signal frame unreadable"},
    {ML_STAT_UW_END(ML_UW_END_NO_FDE), "no_fde", "no table row, frame pointer failed"},
    {ML_STAT_UW_END(ML_UW_END_NO_TABLE), "no_table", "no table, frame pointer failed"},
    {ML_STAT_UW_END(ML_UW_END_BAD_RET), "bad_return", "return address outside user space"},
};
_Static_assert(sizeof(python_ends) / sizeof(python_ends[0]) == ML_PY_ENDS, "a name for each Python walk's end");
_Static_assert(sizeof(unwind_ends) / sizeof(unwind_ends[0]) == ML_UW_ENDS, "a name for each native walk's end");

/* The rss layer: shown once it saw a fault. */
static const struct stat_name rss_stats[] = {
    {ML_STAT_RSS_FAULTS, "faults", "faults on anonymous memory"},
    {ML_STAT_RSS_PAGES, "pages", "pages made resident"},
    {ML_STAT_RSS_COPIES, "copies", "pages copied on write"},
    {ML_STAT_RSS_SAMPLED_OUT, "sampled_out", "left out by sampling"},
    {ML_STAT_RSS_VMA_BUSY, "mapping_busy", "not looked at (mapping lock busy)"},
    {ML_STAT_RSS_LOST, "table_full", "not recorded (table full)"},
    {ML_STAT_RSS_MOVE_LOST, "move_sampled_out", "moved by mremap where sampling keeps no record"},
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* "label: v text, v text (since attach)" for a table of counters. */
static void text_stats(FILE *f, const char *label, const struct stat_name *tab, size_t n, const uint64_t *stats)
{
	fprintf(f, "%s:", label);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s %" PRIu64 " %s", i ? "," : "", stats[tab[i].idx], tab[i].text);
	fprintf(f, " (since attach)\n");
}

/* Text without --native: a run of these in a Python stack is folded into one line. */
/*
 * The unwinding tables built in the background: how many are still loading, whose frames meanwhile follow frame
 * pointers (walks cut short there are merged into their stacks once complete), then when the last came.
 */
static void text_tables(FILE *f, const struct ml_snapshot *s, const struct unwind_loading *t)
{
	if (!t || !t->queued)
		return;
	if (t->pending)
		fprintf(f,
			"unwinding tables: %u of %" PRIu64 " still loading (their frames by frame pointer meanwhile; "
			"%" PRIu64 " walks stopped in a file without one)\n",
			t->pending, t->queued, s->stats[ML_STAT_UW_END(ML_UW_END_NO_TABLE)]);
	else if (t->background)
		fprintf(f,
			"unwinding tables: all %" PRIu64 " loaded, %.1f s after they were asked for (%u in the "
			"background); %" PRIu64 " cut walks merged into their stacks\n",
			t->queued, t->all_loaded_s, t->background, s->stopped_merged);
}

/* The counters since attach: events, drops, and those of Python, unwinding and the rss layer once in use. */
void ml_text_counters(FILE *f, const struct ml_snapshot *s, const struct unwind_loading *tables)
{
	bool any_drop = false;

	fprintf(f, "events:");
	for (size_t i = 0; i < ARRAY_LEN(event_stats); i++)
		fprintf(f, "%s %" PRIu64 " %s", i ? "," : "", s->stats[event_stats[i].idx], event_stats[i].text);
	fprintf(f, ", %" PRIu64 " records dropped with their process's exit or exec (or the heap-growth switch)",
		s->forgotten);
	fprintf(f, " (since attach)\n");
	fprintf(f, "dropped:");
	for (size_t i = 0; i < ARRAY_LEN(drop_stats); i++) {
		uint64_t v = s->stats[drop_stats[i].idx];

		if (!v)
			continue;
		fprintf(f, "%s %" PRIu64 " %s", any_drop ? "," : "", v, drop_stats[i].text);
		any_drop = true;
	}
	fprintf(f, "%s\n", any_drop ? "" : " none");
	if (s->stats[ML_STAT_PY_FRAMES] || s->stats[ML_STAT_PY_NO_THREAD]) {
		text_stats(f, "python", python_stats, ARRAY_LEN(python_stats), s->stats);
		if (ml_log_level >= 1)
			text_stats(f, "python walks ended", python_ends, ARRAY_LEN(python_ends), s->stats);
	}
	if (s->stats[ML_STAT_UW_STACKS]) {
		text_stats(f, "unwind", unwind_stats, ARRAY_LEN(unwind_stats), s->stats);
		if (ml_log_level >= 1)
			text_stats(f, "unwind walks ended", unwind_ends, ARRAY_LEN(unwind_ends), s->stats);
	}
	text_tables(f, s, tables);
	if (s->stats[ML_STAT_RSS_FAULTS]) {
		text_stats(f, "rss", rss_stats, ARRAY_LEN(rss_stats), s->stats);
		if (s->rss_shift)
			fprintf(f, "rss: one page in %u recorded (each record stands for %u pages)\n",
				1U << s->rss_shift, 1U << s->rss_shift);
	}
}

/* An object of counters named by a table, with the object "stop_reasons" of the table ends (nends 0: none). */
static void json_stats(struct jw *w, const char *key, const struct stat_name *tab, size_t n,
		       const struct stat_name *ends, size_t nends, const uint64_t *stats)
{
	jw_obj_begin(w, key);
	for (size_t i = 0; i < n; i++)
		jw_u64(w, tab[i].json, stats[tab[i].idx]);
	if (nends)
		json_stats(w, "stop_reasons", ends, nends, NULL, 0, stats);
	jw_obj_end(w);
}

/* Every trap of every probe since attach, by layer: what the cost counts (session/overhead.c). */
static void json_hits(struct jw *w, const struct ml_snapshot *s)
{
	jw_obj_begin(w, "hits");
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		if (!s->stats[ML_STAT_ENTRY_HITS(layer)] && !s->stats[ML_STAT_RET_HITS(layer)])
			continue;
		jw_obj_begin(w, ml_layer_name(layer));
		jw_u64(w, "entry", s->stats[ML_STAT_ENTRY_HITS(layer)]);
		jw_u64(w, "return", s->stats[ML_STAT_RET_HITS(layer)]);
		jw_obj_end(w);
	}
	jw_u64(w, "loader", s->stats[ML_STAT_LOADER_HITS]);
	jw_u64(w, "step", s->stats[ML_STAT_STEP_HITS]);
	jw_obj_end(w);
}

/* Each active layer's calls since attach and their rates over the last interval. */
static void json_layer_calls(struct jw *w, const struct ml_snapshot *s)
{
	jw_obj_begin(w, "layers");
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		uint64_t a = s->stats_delta[ML_STAT_LAYER_ALLOCS(layer)],
			 fr = s->stats_delta[ML_STAT_LAYER_FREES(layer)];

		if (!s->layers[layer].active)
			continue;
		jw_obj_begin(w, ml_layer_name(layer));
		jw_u64(w, "allocs", s->stats[ML_STAT_LAYER_ALLOCS(layer)]);
		jw_u64(w, "frees", s->stats[ML_STAT_LAYER_FREES(layer)]);
		jw_double(w, "allocs_per_s", s->elapsed_s > 0 ? (double)a / s->elapsed_s : 0);
		jw_double(w, "frees_per_s", s->elapsed_s > 0 ? (double)fr / s->elapsed_s : 0);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

/* The "stats" object: every counter since attach, the stack store's size, and how many rows are shown. */
/* The "python" object: the walks' counters, then what user space decoded. */
static void json_python(struct jw *w, const struct ml_snapshot *s, struct ml_py_tally py)
{
	jw_obj_begin(w, "python");
	for (size_t i = 0; i < ARRAY_LEN(python_stats); i++)
		jw_u64(w, python_stats[i].json, s->stats[python_stats[i].idx]);
	json_stats(w, "stop_reasons", python_ends, ARRAY_LEN(python_ends), NULL, 0, s->stats);
	jw_u64(w, "unresolved_frames", py.unresolved);
	jw_u64(w, "code_objects_learned", py.learned);
	jw_double(w, "learn_ms", (double)py.learn_ns / 1e6);
	jw_obj_end(w);
}

/* stats.unwind_tables: files queued, still pending, built in the background, and when the last came (or null). */
static void json_tables(struct jw *w, const struct unwind_loading *t)
{
	if (!t)
		return;
	jw_obj_begin(w, "unwind_tables");
	jw_u64(w, "queued", t->queued);
	jw_u64(w, "pending", t->pending);
	jw_u64(w, "background", t->background);
	if (t->queued && !t->pending)
		jw_double(w, "all_loaded_s", t->all_loaded_s);
	else
		jw_null(w, "all_loaded_s");
	jw_obj_end(w);
}

void ml_json_all_stats(struct jw *w, const struct ml_snapshot *s, size_t shown, struct ml_py_tally py,
		       const struct unwind_loading *tables)
{
	jw_obj_begin(w, "stats");
	jw_obj_begin(w, "events");
	for (size_t i = 0; i < ARRAY_LEN(event_stats); i++)
		jw_u64(w, event_stats[i].json, s->stats[event_stats[i].idx]);
	jw_u64(w, "forgotten", s->forgotten);
	jw_obj_end(w);
	json_stats(w, "dropped", drop_stats, ARRAY_LEN(drop_stats), NULL, 0, s->stats);
	json_python(w, s, py);
	json_stats(w, "unwind", unwind_stats, ARRAY_LEN(unwind_stats), unwind_ends, ARRAY_LEN(unwind_ends), s->stats);
	json_tables(w, tables);
	json_stats(w, "rss", rss_stats, ARRAY_LEN(rss_stats), NULL, 0, s->stats);
	jw_u64(w, "rss_sample_every", 1ULL << s->rss_shift);
	json_hits(w, s);
	json_layer_calls(w, s);
	jw_obj_begin(w, "stack_store");
	jw_u64(w, "stacks", s->stacks.stacks);
	jw_u64(w, "frames", s->stacks.frames);
	jw_u64(w, "bytes", s->stacks.bytes);
	jw_u64(w, "received", s->stacks.received);
	jw_u64(w, "collisions", s->stacks.collisions);
	jw_u64(w, "malformed", s->stacks.malformed);
	jw_u64(w, "stopped_walks_merged", s->stopped_merged);
	jw_obj_end(w);
	jw_obj_begin(w, "table");
	jw_u64(w, "levels", s->table.levels);
	jw_u64(w, "slots", s->table.slots);
	jw_u64(w, "bytes", s->table.bytes);
	jw_obj_end(w);
	jw_u64(w, "stacks_total", s->nrows);
	jw_u64(w, "stacks_shown", shown);
	jw_obj_end(w);
}
