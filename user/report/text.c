/* The text format: one report as lines for a person, leak candidates first, Python frames folded as a traceback. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "attach/allocators.h"
#include "collect/steps.h"
#include "judge/findings.h"
#include "judge/verdict.h"
#include "judge/victims.h"
#include "lib/log.h"
#include "lib/path.h"
#include "report/costview.h"
#include "report/devview.h"
#include "report/emit.h"
#include "report/findview.h"
#include "report/format.h"
#include "report/fragview.h"
#include "report/oomview.h"
#include "report/procview.h"
#include "report/rankview.h"

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
	if (j->steps) {
		ml_fmt_bytes(rate, sizeof(rate), j->bytes_per_step);
		ml_fmt_count(c, sizeof(c), (int64_t)j->steps, false);
		fprintf(f, "    per step: %s%s/step, %.2f %s/step (%s steps)\n", j->bytes_per_step >= 0 ? "+" : "",
			rate, j->count_per_step, what, c);
	}
}

/* A layer's growth per step, when the processes step: "; +4.6 MiB/step (1,208 steps)". */
static void text_per_step(FILE *f, const struct steps *st, unsigned int layer)
{
	char b[32], c[40];
	double per_step;
	uint64_t nsteps;

	if (!steps__total_rate(st, layer, &per_step, &nsteps))
		return;
	ml_fmt_bytes(b, sizeof(b), per_step);
	ml_fmt_count(c, sizeof(c), (int64_t)nsteps, false);
	fprintf(f, "; %s%s/step (%s steps)", per_step >= 0 ? "+" : "", b, c);
}

/* The step clock's line: the most steps a process made, and what counts them. */
static void text_steps(struct reporter *r)
{
	char c[40];
	uint64_t most;
	size_t n = steps__procs(r->steps, &most);

	if (!n)
		return;
	ml_fmt_count(c, sizeof(c), (int64_t)most, false);
	fprintf(r->out, "steps  %s in %zu process%s, counted at ", c, n, n == 1 ? "" : "es");
	if (!strcmp(steps__func(r->steps), ML_STEP_DEFAULT))
		fputs("the autograd engine's backward passes\n", r->out);
	else {
		ml_put_safe(r->out, steps__func(r->steps));
		fputc('\n', r->out);
	}
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
		row->bytes, b1, (uint64_t)(row->bytes / ML_PAGE_BYTES), ml_row_age_s(s, row),
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
		text_per_step(f, r->steps, layer);
		fputc('\n', f);
	}
	text_steps(r);
	ml_text_ranks(r, s);
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
			ml_layer_name(row->key.layer), row->bytes, b1, row->count, ml_row_age_s(s, row),
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
	ml_text_row_peak(f, r->findings, row, r->exited != NULL, ml_run_start(r, s));
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
	size_t n = ml_cuda_oom_frames(r, &frames);

	ml_text_cuda_oom(r->out, r->cuda_oom);
	text_user_line(r->out, frames, n);
	put_frames(r, frames, n);
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

int ml_emit_text(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		 uint64_t seq, bool final)
{
	struct ml_py_tally py;
	bool multi;

	text_title(r, s, seq, final);
	ml_text_exit(r->out, r->exited, ml_run_start(r, s));
	if (final)
		ml_text_peak(r->out, r->sv, r->findings, ml_run_start(r, s));
	ml_text_oom(r->out, r->sv, s, r->o.pid);
	if (r->cuda_oom)
		text_cuda_oom(r);
	ml_text_memory(r->out, r->sv, s, r->traced, r->ntraced);
	ml_text_victims(r->out, r->victims, r->nvictims, s, order);
	text_layers(r, s);
	py = ml_python_tally(r, s, order, s->nrows < r->o.top ? s->nrows : r->o.top);
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
