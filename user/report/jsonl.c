/* The JSON Lines format: one report as one JSON object on one line, with the evidence behind each verdict. */
#include <time.h>
#include "attach/allocators.h"
#include "collect/steps.h"
#include "judge/findings.h"
#include "judge/verdict.h"
#include "judge/victims.h"
#include "lib/clock.h"
#include "report/costview.h"
#include "report/devview.h"
#include "report/emit.h"
#include "report/findview.h"
#include "report/fragview.h"
#include "report/json.h"
#include "report/oomview.h"
#include "report/procview.h"
#include "report/rankview.h"

static void json_cuda_oom(struct jw *w, struct reporter *r)
{
	const struct ml_frame *const *frames;
	size_t n = ml_cuda_oom_frames(r, &frames);

	jw_obj_begin(w, "cuda_oom");
	ml_json_cuda_oom(w, r->cuda_oom);
	ml_json_frames(w, frames, n);
	jw_obj_end(w);
}

/*
 * The "totals" object: bytes, count and growth of each active layer. A process's own totals also keep an
 * inactive layer whose growth since the last report is not zero (the records that went with it).
 */
static void json_totals(struct jw *w, const struct ml_layer_total *layers, bool with_gone, const struct steps *st,
			int tgid)
{
	jw_obj_begin(w, "totals");
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		const struct ml_layer_total *t = &layers[layer];
		double per_step;
		uint64_t nsteps;

		if (!t->active && !(with_gone && t->growth_bytes))
			continue;
		jw_obj_begin(w, ml_layer_name(layer));
		jw_u64(w, "bytes", t->bytes);
		jw_u64(w, "count", t->count);
		jw_i64(w, "growth_bytes", t->growth_bytes);
		if (layer == ML_LAYER_RSS)
			jw_u64(w, "cow_bytes", t->cow_bytes);
		if (tgid ? steps__layer_rate(steps__of(st, tgid), layer, &per_step, &nsteps)
			 : steps__total_rate(st, layer, &per_step, &nsteps)) {
			jw_obj_begin(w, "per_step");
			jw_double(w, "bytes", per_step);
			jw_u64(w, "steps", nsteps);
			jw_obj_end(w);
		}
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

/* processes[].steps: the process's step clock, null while it counted none. */
static void json_proc_steps(struct jw *w, const struct steps *st, int tgid)
{
	const struct step_count *c = steps__of(st, tgid);

	if (!c) {
		jw_null(w, "steps");
		return;
	}
	jw_obj_begin(w, "steps");
	jw_u64(w, "count", c->count);
	jw_u64(w, "since_report", c->delta);
	jw_double(w, "paused_s", c->paused_s);
	jw_double(w, "pause_s", c->pause_s);
	jw_obj_end(w);
}

/* The report's "steps": the step clock's function and the most steps a process made; null without a clock. */
static void json_steps(struct jw *w, const struct steps *st)
{
	uint64_t most;
	size_t n = steps__procs(st, &most);

	if (!st) {
		jw_null(w, "steps");
		return;
	}
	jw_obj_begin(w, "steps");
	jw_str(w, "clock", steps__func(st));
	jw_u64(w, "processes", n);
	jw_u64(w, "most", most);
	jw_obj_end(w);
}

/* stacks[].per_step: the row's growth per step over its judged reports, when its process steps. */
static void json_row_steps(struct jw *w, const struct ml_judgement *j)
{
	if (!j->steps)
		return;
	jw_obj_begin(w, "per_step");
	jw_double(w, "bytes", j->bytes_per_step);
	jw_double(w, "count", j->count_per_step);
	jw_u64(w, "steps", j->steps);
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
	json_proc_steps(w, r->steps, tgid);
	json_totals(w, p ? p->layers : none, true, r->steps, tgid);
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
	/* Heap-growth mode's address space and the windows' weighed blocks describe the same heap: told apart. */
	jw_bool(w, "address_space", ml_row_address_space(row));
	jw_bool(w, "estimated", !!(row->traits & ML_ROW_WEIGHED));
	jw_double(w, "oldest_age_s", ml_row_age_s(s, row));
	jw_i64(w, "growth_bytes", row->growth_bytes);
	jw_i64(w, "count_growth", j->count_growth);
	jw_str(w, "verdict", ml_verdict_name(j->verdict));
	jw_bool(w, "possible_fragmentation", ml_row_possible_frag(r->sv, row));
	if (v && j->verdict == ML_V_VICTIM)
		ml_json_victim(w, v, s, order);
	jw_double(w, "leak_score", j->leak_score);
	jw_double(w, "growth_bytes_per_s", j->growth_bytes_per_s);
	jw_double(w, "growth_bytes_per_interval", j->growth_per_interval);
	json_row_steps(w, j);
	jw_obj_begin(w, "evidence");
	jw_u64(w, "intervals", j->intervals);
	jw_double(w, "monotonic", j->monotonic);
	jw_double(w, "oldest_age_s", ml_row_age_s(s, row));
	jw_double(w, "window_s", j->window_s);
	jw_u64(w, "from_report", j->from_report);
	json_trend(w, "bytes", &j->bytes);
	json_trend(w, "count", &j->count);
	jw_obj_end(w);
	ml_json_row_peak(w, r->findings, row, r->exited != NULL, ml_run_start(r, s));
	jw_bool(w, "python_truncated", !!(flags & (ML_STACK_PY_TRUNCATED | ML_STACK_PY_BROKEN)));
	ml_json_frames(w, frames, n);
	jw_obj_end(w);
}

/* One JSON Lines report. 0, or -ENOMEM when the writer ran out of memory and the line was cut short. */
int ml_emit_json(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		 uint64_t seq, bool final)
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
	ml_json_exit(&w, r->exited, ml_run_start(r, s));
	ml_json_peak(&w, r->sv, r->findings, ml_run_start(r, s));
	json_totals(&w, s->layers, false, r->steps, 0);
	json_steps(&w, r->steps);
	ml_json_devices(&w, s, order);
	if (r->cuda_oom)
		json_cuda_oom(&w, r);
	if (r->ov) {
		ml_json_overhead(&w, r->ov);
	}
	json_processes(&w, r, s);
	ml_json_ranks(&w, r, s, order, shown);
	ml_json_all_stats(&w, s, shown, ml_python_tally(r, s, order, shown), r->tables);
	jw_arr_begin(&w, "stacks");
	for (size_t i = 0; i < shown; i++)
		json_row(&w, r, s, &s->rows[order[i]], &jv[order[i]], order);
	jw_arr_end(&w);
	jw_obj_end(&w);
	fputc('\n', r->out);
	return jw_finish(&w); /* the caller says the report could not be written */
}
