/* Report output: one snapshot as human text or as one JSON Lines object. */
#include "report/report.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "judge/findings.h"
#include "judge/verdict.h"
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/path.h"
#include "python/pyframes.h"
#include "report/costview.h"
#include "report/devview.h"
#include "report/findview.h"
#include "report/format.h"
#include "report/fragview.h"
#include "report/json.h"
#include "report/oomview.h"
#include "report/pprof.h"
#include "report/procview.h"
#include "report/stackview.h"
#include "report/statview.h"

struct reporter {
	FILE *out;
	struct report_opts o;
	struct stackview *sv;
	char label[ML_FRAME_LABEL_MAX];
	/* The report being written: its input's parts (struct report_in), while reporter__emit runs. */
	uint64_t duration_ns;
	const struct ml_overhead *ov;
	const struct unwind_loading *tables;
	const int *traced;
	size_t ntraced;
	const struct ml_victim *victims;
	size_t nvictims;
	const struct ml_cuda_oom *cuda_oom;
	const struct findings *findings;
	const struct ml_exit_view *exited;
};

/* When the run started, on the snapshots' clock. */
static uint64_t start_of(const struct reporter *r, const struct ml_snapshot *s)
{
	return s->now_ns > r->duration_ns ? s->now_ns - r->duration_ns : 0;
}

int ml_open_output(const char *path, FILE **out)
{
	int fd, err;

	*out = stdout;
	if (!path)
		return 0;
	/* Reports can name a user's code paths: readable by the owner only; never follow a planted symlink. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		*out = NULL;
		return -errno;
	}
	*out = fdopen(fd, "w");
	if (!*out) {
		err = -errno;
		close(fd);
		return err;
	}
	return 0;
}

/* The failing request as a row: its stack, for its frames. */
static size_t cuda_oom_frames(struct reporter *r, const struct ml_frame *const **frames)
{
	struct ml_row row = {.key = {.layer = ML_LAYER_CUDA}};

	ml_oom_stack(r->cuda_oom, &row.key.tgid, &row.key.stack_id, &row.key.caller);
	return stackview__frames(r->sv, &row, frames, NULL);
}

int reporter__new(FILE *out, const struct report_opts *o, struct stackview *sv, struct reporter **res)
{
	struct reporter *r = calloc(1, sizeof(*r));

	*res = r;
	if (!r)
		return -ENOMEM;
	r->out = out;
	r->o = *o;
	r->sv = sv;
	return 0;
}

void reporter__free(struct reporter *r)
{
	free(r);
}

/* A leak candidate's line: which signals rose, what the window retained, how fast, and how surely. */
static void text_candidate(FILE *f, const struct ml_judgement *j, unsigned int layer)
{
	char c[40], b[32], rate[32];
	bool bc = j->bytes.rising && j->count.rising;
	const char *what = layer == ML_LAYER_RSS ? "pages" : "objects"; /* an rss row counts pages */

	ml_fmt_count(c, sizeof(c), (int64_t)j->count.net, true);
	ml_fmt_bytes(b, sizeof(b), j->bytes.net);
	ml_fmt_bytes(rate, sizeof(rate), j->growth_bytes_per_s);
	fprintf(f,
		"    LEAK CANDIDATE: growing by %s: %s %s, %s%s over %u reports (%.1f s), %.1f %s/s, %s/s; "
		"new highs in %u of %u (count), %u of %u (bytes); score %.2f\n",
		bc		  ? "count and bytes"
		: j->count.rising ? "count"
				  : "bytes",
		c, what, j->bytes.net >= 0 ? "+" : "", b, j->intervals, j->window_s, j->count.per_s, what, rate,
		j->count.highs, j->intervals, j->bytes.highs, j->intervals, j->leak_score);
}

static double age_s(const struct ml_snapshot *s, const struct ml_row *row)
{
	if (row->oldest_ts_ns == ~0ULL || row->oldest_ts_ns > s->now_ns)
		return 0;
	return (double)(s->now_ns - row->oldest_ts_ns) / 1e9;
}

/* A frame on its own line: "func+0x1a (module) file:line", or "train.py:42 in train_step" for Python. */
static void put_frame(FILE *f, const struct ml_frame *fr)
{
	fputs("      ", f);
	if (fr->kind == ML_FRAME_PYTHON) {
		if (!fr->func) {
			fprintf(f, "[python frame unresolved: %s]\n", ml_frame_unresolved(fr));
			return;
		}
		ml_put_safe(f, fr->file ? fr->file : "?");
		if (fr->line > 0)
			fprintf(f, ":%d", fr->line);
		fputs(" in ", f);
		ml_put_safe(f, fr->func);
		fputc('\n', f);
		return;
	}
	if (fr->func) {
		ml_put_safe(f, fr->func);
		fprintf(f, "+0x%" PRIx64, fr->offset);
	} else {
		fprintf(f, "0x%" PRIx64, fr->addr);
	}
	if (fr->module) {
		fputs(" (", f);
		ml_put_safe(f, ml_base_name(fr->module));
		fputc(')', f);
	}
	if (fr->file) {
		fputc(' ', f);
		ml_put_safe(f, fr->file);
		fprintf(f, ":%d", fr->line);
	}
	fputc('\n', f);
}

/* An rss row: pages, not allocations; the copies among them said. */
static void text_rss_row(FILE *f, const struct ml_snapshot *s, const struct ml_row *row, const char *b1, const char *b2)
{
	char b3[32];

	fprintf(f, "rss: %" PRIu64 " bytes (%s) resident in %" PRIu64 " pages, oldest %.1f s, %s%s since last",
		row->bytes, b1, (uint64_t)(row->bytes / ML_PAGE_BYTES), age_s(s, row),
		row->growth_bytes >= 0 ? "+" : "", b2);
	if (row->cow_bytes) {
		ml_fmt_bytes(b3, sizeof(b3), (double)row->cow_bytes);
		fprintf(f, "; copy-on-write: %s of them copied from pages shared with another process%s", b3,
			row->traits & ML_ROW_COPY_SCAN
			    ? " (its parent's, found in the page tables: the stack built what "
			      "lives there)"
			    : "");
	}
	fputc('\n', f);
}

static bool foldable(const struct ml_frame *fr)
{
	return fr->kind == ML_FRAME_NATIVE && (!fr->func || ml_frame_is_interpreter(fr));
}

/*
 * The frames of a row. A stack with Python frames shows them and the native code outside the interpreter
 * (extensions, libraries); each run of the interpreter's own and unresolved frames is one line, and what
 * lies outside the outermost Python frame (the interpreter's start) another. --native shows every frame.
 */
static void put_frames(struct reporter *r, const struct ml_frame *const *frames, size_t n)
{
	FILE *f = r->out;
	size_t last_py = n;

	for (size_t k = 0; k < n; k++)
		if (frames[k]->kind == ML_FRAME_PYTHON)
			last_py = k;
	if (r->o.native || last_py == n) {
		for (size_t k = 0; k < n; k++)
			put_frame(f, frames[k]);
		return;
	}
	for (size_t k = 0; k < n;) {
		size_t run = 0, interp = 0;

		if (k > last_py) {
			fprintf(f, "      … %zu frames of the interpreter's start\n", n - k);
			break;
		}
		while (k + run < n && k + run < last_py && foldable(frames[k + run]))
			interp += ml_frame_is_interpreter(frames[k + run]), run++;
		if (!run) {
			put_frame(f, frames[k++]);
			continue;
		}
		fprintf(f, "      … %zu %s frame%s\n", run,
			interp == run ? "interpreter"
			: interp      ? "interpreter and unresolved"
				      : "unresolved",
			run == 1 ? "" : "s");
		k += run;
	}
}

/* The innermost Python frame of the job's own code, or NULL. */
static const struct ml_frame *user_line(const struct ml_frame *const *frames, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (ml_frame_is_user_code(frames[k]))
			return frames[k];
	return NULL;
}

/* The report's first line: which report, of what, when. */
static void text_title(struct reporter *r, const struct ml_snapshot *s, uint64_t seq, bool final)
{
	char ts[64];
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (r->o.pid)
		fprintf(r->out, "=== memleak-ai %sreport #%" PRIu64 " pid %d at %s (%.1f s since last) ===\n",
			final ? "final " : "", seq, r->o.pid, ts, s->elapsed_s);
	else /* whole-node selectors: every traced process is under its own pid below */
		fprintf(r->out, "=== memleak-ai %sreport #%" PRIu64 " node-wide at %s (%.1f s since last) ===\n",
			final ? "final " : "", seq, ts, s->elapsed_s);
}

/* One line per active layer: what it holds, how it grew, its call rates. */
static void text_layers(struct reporter *r, const struct ml_snapshot *s)
{
	FILE *f = r->out;
	const char *heap = stackview__heap(r->sv, r->o.pid);
	char b1[32], b2[32];

	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		const struct ml_layer_total *t = &s->layers[layer];
		uint64_t a = s->stats_delta[ML_STAT_LAYER_ALLOCS(layer)],
			 fr = s->stats_delta[ML_STAT_LAYER_FREES(layer)];

		if (!t->active)
			continue;
		ml_fmt_bytes(b1, sizeof(b1), (double)t->bytes);
		ml_fmt_bytes(b2, sizeof(b2), (double)t->growth_bytes);
		fprintf(f,
			"%-6s outstanding %" PRIu64 " bytes (%s) in %" PRIu64 " allocations, %s%s since last; "
			"%.0f allocs/s, %.0f frees/s",
			ml_layer_name(layer), t->bytes, b1, t->count, t->growth_bytes >= 0 ? "+" : "", b2,
			s->elapsed_s > 0 ? (double)a / s->elapsed_s : 0,
			s->elapsed_s > 0 ? (double)fr / s->elapsed_s : 0);
		if (layer == ML_LAYER_LIBC && heap)
			fprintf(f, "; heap allocator %s", heap);
		fputc('\n', f);
	}
}

/* A process's line under --follow: its pid indented by its depth in the tree, its heap, labels and layers. */
static void text_proc(struct reporter *r, const struct ml_proc_total *p, unsigned int depth)
{
	FILE *f = r->out;
	const char *heap = stackview__heap(r->sv, p->tgid);
	char b1[32], b2[32];

	fprintf(f, "  %*spid %d%s%s%s", (int)(2 * depth), "", p->tgid, heap ? " [" : "", heap ? heap : "",
		heap ? "]" : "");
	ml_text_labels(f, r->sv, p->tgid);
	fputc(':', f);
	for (unsigned int layer = 0, first = 1; layer < ML_LAYER_MAX; layer++) {
		const struct ml_layer_total *t = &p->layers[layer];

		if (!t->active && !t->growth_bytes)
			continue;
		ml_fmt_bytes(b1, sizeof(b1), (double)t->bytes);
		ml_fmt_bytes(b2, sizeof(b2), (double)t->growth_bytes);
		fprintf(f, "%s %s %s in %" PRIu64 " allocations (%s%s)", first ? "" : ",", ml_layer_name(layer), b1,
			t->count, t->growth_bytes >= 0 ? "+" : "", b2);
		first = 0;
	}
	fputc('\n', f);
}

/*
 * With --follow: each process's share, the first one and its children, each under its own pid. Returns
 * whether the rows name their process: false also when out of memory (the totals above stand).
 */
static bool text_procs(struct reporter *r, const struct ml_snapshot *s)
{
	size_t *tree = NULL;
	unsigned int *depth = NULL;
	bool multi = ml_snapshot_multi(s, r->o.pid);

	if (multi && (!(tree = malloc(s->nprocs * sizeof(*tree))) || !(depth = malloc(s->nprocs * sizeof(*depth))) ||
		      ml_proc_tree(r->sv, s, tree, depth)))
		multi = false;
	for (size_t k = 0; multi && k < s->nprocs; k++)
		text_proc(r, &s->procs[tree[k]], depth[k]);
	free(tree);
	free(depth);
	return multi;
}

/* A row's first line: its size, age and growth; an rss row counts pages. */
static void text_row_size(FILE *f, const struct ml_snapshot *s, const struct ml_row *row, const struct ml_judgement *j)
{
	char b1[32], b2[32], cg[40];

	ml_fmt_bytes(b1, sizeof(b1), (double)row->bytes);
	ml_fmt_bytes(b2, sizeof(b2), (double)row->growth_bytes);
	ml_fmt_count(cg, sizeof(cg), j->count_growth, true);
	if (row->key.layer == ML_LAYER_RSS)
		text_rss_row(f, s, row, b1, b2);
	else
		fprintf(f,
			"%s: %" PRIu64 " bytes (%s) in %" PRIu64
			" allocations, oldest %.1f s, %s%s, %s allocations since last\n",
			ml_layer_name(row->key.layer), row->bytes, b1, row->count, age_s(s, row),
			row->growth_bytes >= 0 ? "+" : "", b2, cg);
}

/* The job's own line first: the rest of the block says how it got to the allocator. */
static void text_user_line(FILE *f, const struct ml_frame *const *frames, size_t n)
{
	const struct ml_frame *u = user_line(frames, n);

	if (!u)
		return;
	fputs("    at ", f);
	ml_put_safe(f, u->file);
	if (u->line > 0)
		fprintf(f, ":%d", u->line);
	fputs(" in ", f);
	ml_put_safe(f, u->func);
	fputc('\n', f);
}

/* The i-th row shown: its size, verdict, and frames. */
static void text_row(struct reporter *r, const struct ml_snapshot *s, const struct ml_row *row,
		     const struct ml_judgement *j, size_t i, bool multi, const size_t *order)
{
	const struct ml_victim *v = victims__of(r->victims, r->nvictims, &row->key);
	FILE *f = r->out;
	const struct ml_frame *const *frames;
	unsigned int flags;
	size_t n = stackview__frames(r->sv, row, &frames, &flags);

	fprintf(f, "[%zu] ", i + 1);
	if (multi)
		fprintf(f, "pid %u ", row->key.tgid);
	text_row_size(f, s, row, j);
	if (j->verdict == ML_V_GROWING) {
		text_candidate(f, j, row->key.layer);
	} else if (j->verdict == ML_V_IMPORT) {
		fprintf(f, "    import: made while a module was imported (start-up, not judged)\n");
	} else if (j->verdict == ML_V_VICTIM && v) {
		ml_text_victim(f, v, s, order);
	} else {
		fprintf(f, "    %s\n", ml_verdict_name(j->verdict));
	}
	ml_text_row_peak(f, r->findings, row, r->exited != NULL, start_of(r, s));
	if (ml_row_possible_frag(r->sv, row) && !v)
		fprintf(f,
			"    possible fragmentation: fresh heap from the break while pid %u's C heap holds free "
			"memory (its C heap line)\n",
			row->key.tgid);
	if (n == 0 && row->traits & ML_ROW_COPY_SCAN)
		fprintf(f,
			"      [no row of the parent's holds these pages: it built them before memleak-ai attached, or "
			"while none of its allocations were recorded]\n");
	else if (n == 0)
		fprintf(f, "      [no frames captured]\n");
	else if (row->key.stack_id == ML_STACK_NONE && row->key.caller && ml_log_level >= 1)
		fprintf(f, "      (caller only: no frame-pointer chain above it)\n");
	text_user_line(f, frames, n);
	put_frames(r, frames, n);
	if (flags & ML_STACK_PY_TRUNCATED)
		fprintf(f, "      [outer Python frames not captured: deeper than %d]\n", ML_MAX_PYFRAMES);
	if (flags & ML_STACK_PY_BROKEN)
		fprintf(f, "      [outer Python frames not captured: the frame chain was unreadable]\n");
}

/* "CUDA out of memory: ..." with the failing request's stack; the report that follows is the memory then. */
static void text_cuda_oom(struct reporter *r)
{
	const struct ml_frame *const *frames;
	size_t n = cuda_oom_frames(r, &frames);

	ml_text_cuda_oom(r->out, r->cuda_oom);
	text_user_line(r->out, frames, n);
	put_frames(r, frames, n);
}

static void json_cuda_oom(struct jw *w, struct reporter *r)
{
	const struct ml_frame *const *frames;
	size_t n = cuda_oom_frames(r, &frames);

	jw_obj_begin(w, "cuda_oom");
	ml_json_cuda_oom(w, r->cuda_oom);
	ml_json_frames(w, frames, n);
	jw_obj_end(w);
}

/* The top rows in the given order: the leak candidates, then the rest, each group under its heading. */
static void text_rows(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv,
		      const size_t *order, bool multi)
{
	FILE *f = r->out;
	size_t shown = s->nrows < r->o.top ? s->nrows : r->o.top;

	fprintf(f, "showing %zu of %zu stacks, leak candidates (growing) first, then largest\n", shown, s->nrows);
	for (size_t i = 0; i < shown; i++) {
		const struct ml_judgement *j = &jv[order[i]];

		if (i == 0 && j->verdict == ML_V_GROWING)
			fprintf(f, "--- leak candidates: growing stacks, strongest first ---\n");
		if (j->verdict != ML_V_GROWING && (i == 0 || jv[order[i - 1]].verdict == ML_V_GROWING))
			fprintf(f, "--- not growing: largest first ---\n");
		text_row(r, s, &s->rows[order[i]], j, i, multi, order);
	}
}

/* What the shown rows' Python frames cost to decode as their stacks came, and how many stayed undecoded. */
static struct ml_py_tally python_tally(struct reporter *r, const struct ml_snapshot *s, const size_t *order,
				       size_t shown)
{
	struct ml_py_tally t = {.unresolved = stackview__unresolved(r->sv, s, order, shown)};
	struct ml_resolver res;

	if (!stackview__proc(r->sv, r->o.pid, &res))
		pyframes__learn_stats(res.py, &t.learned, &t.learn_ns);
	return t;
}

/*
 * Beside the overhead line, the part of the tool's own time its findings take: Python code objects decoded as
 * their stacks came, and the findings kept (peaks, the last live report).
 */
static void text_findings_cost(FILE *f, struct ml_py_tally t, const struct findings *fd)
{
	const struct ml_peak *p = findings__peak(fd);

	fprintf(f,
		"overhead of the findings (in memleak-ai's own time): %.1f ms decoding %" PRIu64
		" Python code objects as their stacks came, %.1f ms keeping the last live report and the peaks\n",
		(double)t.learn_ns / 1e6, t.learned, p ? (double)p->keep_ns / 1e6 : 0.0);
}

/* Python frames of the stacks shown that could not be decoded (each says why). */
static void text_unresolved(FILE *f, struct ml_py_tally t)
{
	if (t.unresolved)
		fprintf(f, "python frames: %" PRIu64 " of the stacks shown unresolved\n", t.unresolved);
}

static int emit_text(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv,
		     const size_t *order, uint64_t seq, bool final)
{
	struct ml_py_tally py;
	bool multi;

	text_title(r, s, seq, final);
	ml_text_exit(r->out, r->exited, start_of(r, s));
	if (final)
		ml_text_peak(r->out, r->sv, r->findings, start_of(r, s));
	ml_text_oom(r->out, r->sv, s, r->o.pid);
	if (r->cuda_oom)
		text_cuda_oom(r);
	ml_text_memory(r->out, r->sv, s, r->traced, r->ntraced);
	ml_text_victims(r->out, r->victims, r->nvictims, s, order);
	text_layers(r, s);
	py = python_tally(r, s, order, s->nrows < r->o.top ? s->nrows : r->o.top);
	if (r->ov)
		ml_text_overhead(r->out, r->ov);
	text_findings_cost(r->out, py, r->findings);
	multi = text_procs(r, s);
	ml_text_devices(r->out, s, order);
	ml_text_counters(r->out, s, r->tables);
	text_unresolved(r->out, py);
	text_rows(r, s, jv, order, multi);
	fputc('\n', r->out);
	return 0;
}

/*
 * The "totals" object: bytes, count and growth of each active layer. A process's own totals also keep an
 * inactive layer whose growth since the last report is not zero (the records that went with it).
 */
static void json_totals(struct jw *w, const struct ml_layer_total *layers, bool with_gone)
{
	jw_obj_begin(w, "totals");
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		const struct ml_layer_total *t = &layers[layer];

		if (!t->active && !(with_gone && t->growth_bytes))
			continue;
		jw_obj_begin(w, ml_layer_name(layer));
		jw_u64(w, "bytes", t->bytes);
		jw_u64(w, "count", t->count);
		jw_i64(w, "growth_bytes", t->growth_bytes);
		if (layer == ML_LAYER_RSS)
			jw_u64(w, "cow_bytes", t->cow_bytes);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

/* One signal's growth test, under a stack's evidence. */
static void json_trend(struct jw *w, const char *key, const struct ml_trend *t)
{
	jw_obj_begin(w, key);
	jw_bool(w, "rising", t->rising);
	jw_u64(w, "new_highs", t->highs);
	jw_double(w, "regularity", t->regularity);
	jw_double(w, "retained", t->net);
	jw_double(w, "per_s", t->per_s);
	jw_double(w, "score", t->evidence);
	jw_obj_end(w);
}

/* One entry of processes[]: p is its share of the snapshot, or NULL when it holds nothing traced. */
static void json_process(struct jw *w, struct reporter *r, int tgid, const struct ml_proc_total *p)
{
	static const struct ml_layer_total none[ML_LAYER_MAX];

	jw_obj_begin(w, NULL);
	jw_i64(w, "pid", tgid);
	jw_str(w, "heap_allocator", stackview__heap(r->sv, tgid));
	ml_json_proc(w, r->sv, tgid, p);
	json_totals(w, p ? p->layers : none, true);
	jw_obj_end(w);
}

/* processes[]: those holding traced memory, then every other traced process, its memory all the same. */
static void json_processes(struct jw *w, struct reporter *r, const struct ml_snapshot *s)
{
	jw_arr_begin(w, "processes");
	for (size_t p = 0; p < s->nprocs; p++)
		json_process(w, r, s->procs[p].tgid, &s->procs[p]);
	for (size_t i = 0; i < r->ntraced; i++) {
		bool listed = false;

		for (size_t p = 0; p < s->nprocs && !listed; p++)
			listed = (int)s->procs[p].tgid == r->traced[i];
		if (!listed)
			json_process(w, r, r->traced[i], NULL);
	}
	jw_arr_end(w);
}

/* One entry of stacks[]: the row, its verdict with the evidence for it, and its frames. */
static void json_row(struct jw *w, struct reporter *r, const struct ml_snapshot *s, const struct ml_row *row,
		     const struct ml_judgement *j, const size_t *order)
{
	const struct ml_victim *v = victims__of(r->victims, r->nvictims, &row->key);
	const struct ml_frame *const *frames;
	unsigned int flags;
	size_t n = stackview__frames(r->sv, row, &frames, &flags);

	jw_obj_begin(w, NULL);
	jw_i64(w, "pid", row->key.tgid);
	jw_str(w, "layer", ml_layer_name(row->key.layer));
	jw_u64(w, "bytes", row->bytes);
	jw_u64(w, "count", row->count);
	if (row->key.layer == ML_LAYER_RSS) {
		jw_u64(w, "cow_bytes", row->cow_bytes);
		jw_str(w, "cow_found_by",
		       !row->cow_bytes			? NULL
		       : row->traits & ML_ROW_COPY_SCAN ? "page_tables"
							: "faults");
	}
	jw_double(w, "oldest_age_s", age_s(s, row));
	jw_i64(w, "growth_bytes", row->growth_bytes);
	jw_i64(w, "count_growth", j->count_growth);
	jw_str(w, "verdict", ml_verdict_name(j->verdict));
	jw_bool(w, "possible_fragmentation", ml_row_possible_frag(r->sv, row));
	if (v && j->verdict == ML_V_VICTIM)
		ml_json_victim(w, v, s, order);
	jw_double(w, "leak_score", j->leak_score);
	jw_double(w, "growth_bytes_per_s", j->growth_bytes_per_s);
	jw_double(w, "growth_bytes_per_interval", j->growth_per_interval);
	jw_obj_begin(w, "evidence");
	jw_u64(w, "intervals", j->intervals);
	jw_double(w, "monotonic", j->monotonic);
	jw_double(w, "oldest_age_s", age_s(s, row));
	jw_double(w, "window_s", j->window_s);
	json_trend(w, "bytes", &j->bytes);
	json_trend(w, "count", &j->count);
	jw_obj_end(w);
	ml_json_row_peak(w, r->findings, row, r->exited != NULL, start_of(r, s));
	jw_bool(w, "python_truncated", !!(flags & (ML_STACK_PY_TRUNCATED | ML_STACK_PY_BROKEN)));
	ml_json_frames(w, frames, n);
	jw_obj_end(w);
}

/* One JSON Lines report. 0, or -ENOMEM when the writer ran out of memory and the line was cut short. */
static int emit_json(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv,
		     const size_t *order, uint64_t seq, bool final)
{
	struct jw w;
	size_t shown = s->nrows < r->o.top ? s->nrows : r->o.top;
	/* When the snapshot was taken, not when it is written: the judged window's times are the snapshots'. */
	uint64_t taken = ml_clock_ns(CLOCK_REALTIME) - (s->now_ns ? ml_clock_ns(CLOCK_MONOTONIC) - s->now_ns : 0);

	jw_init(&w, r->out);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", "report");
	jw_u64(&w, "seq", seq);
	jw_double(&w, "time_unix", (double)taken / 1e9);
	jw_i64(&w, "pid", r->o.pid);
	jw_str(&w, "heap_allocator", stackview__heap(r->sv, r->o.pid));
	jw_bool(&w, "final", final);
	jw_double(&w, "interval_s", s->elapsed_s);
	ml_json_exit(&w, r->exited, start_of(r, s));
	ml_json_peak(&w, r->sv, r->findings, start_of(r, s));
	json_totals(&w, s->layers, false);
	ml_json_devices(&w, s, order);
	if (r->cuda_oom)
		json_cuda_oom(&w, r);
	if (r->ov) {
		ml_json_overhead(&w, r->ov);
	}
	json_processes(&w, r, s);
	ml_json_all_stats(&w, s, shown, python_tally(r, s, order, shown), r->tables);
	jw_arr_begin(&w, "stacks");
	for (size_t i = 0; i < shown; i++)
		json_row(&w, r, s, &s->rows[order[i]], &jv[order[i]], order);
	jw_arr_end(&w);
	jw_obj_end(&w);
	fputc('\n', r->out);
	return jw_finish(&w); /* the caller says the report could not be written */
}

/* A frame's name in folded output: ';' separates frames and ' ' the weight, so neither may appear inside. */
static void put_folded(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		fputc(*p == ';' || *p == ' ' || *p < 0x20 || *p == 0x7f ? '_' : *p, f);
}

/*
 * Folded stacks of the final report, every stack (not only the top N): layer as the root frame, then the
 * frames from the outermost caller down to the allocation site, and outstanding bytes as the weight.
 */
static int emit_folded(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv,
		       const size_t *order, uint64_t seq, bool final)
{
	bool multi = ml_snapshot_multi(s, r->o.pid);

	if (!final)
		return 0;
	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *row = &s->rows[i];
		const struct ml_frame *const *frames;
		size_t n = stackview__frames(r->sv, row, &frames, NULL);

		if (multi)
			fprintf(r->out, "pid_%u;", row->key.tgid);
		put_folded(r->out, ml_layer_name(row->key.layer));
		for (size_t k = n; k-- > 0;) {
			fputc(';', r->out);
			put_folded(r->out, ml_frame_label(frames[k], r->label, ML_FRAME_LABEL_MAX));
		}
		fprintf(r->out, " %" PRIu64 "\n", row->bytes);
	}
	return 0;
}

/* The final report as a profile.proto, gzipped; the others write nothing in this format. */
static int emit_pprof(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv,
		      const size_t *order, uint64_t seq, bool final)
{
	return final ? ml_pprof_write(r->out, s, jv, r->sv, r->findings, r->duration_ns, 0) : 0;
}

/* The output formats, one row each: the name -f takes, and what writes a report in it. */
static const struct {
	const char *name;
	int (*emit)(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		    uint64_t seq, bool final);
} formats[] = {
    [ML_FMT_TEXT] = {"text", emit_text},
    [ML_FMT_JSON] = {"json", emit_json},
    [ML_FMT_FOLDED] = {"folded", emit_folded},
    [ML_FMT_PPROF] = {"pprof", emit_pprof},
};

const char *ml_format_name(unsigned int format)
{
	return format < sizeof(formats) / sizeof(formats[0]) ? formats[format].name : NULL;
}

int reporter__emit(struct reporter *r, const struct report_in *in)
{
	int err;

	r->duration_ns = in->duration_ns;
	r->ov = in->ov;
	r->traced = in->traced;
	r->ntraced = in->ntraced;
	r->victims = in->victims;
	r->nvictims = in->nvictims;
	r->cuda_oom = in->cuda_oom;
	r->tables = in->tables;
	r->findings = in->findings;
	r->exited = in->exited;
	err = formats[r->o.format].emit(r, in->snap, in->judged, in->order, in->seq, in->final);

	if (err)
		return err;
	if (fflush(r->out) || ferror(r->out))
		return errno ? -errno : -EIO;
	return 0;
}
