/*
 * What each output format's writer reads: the reporter, with the report being written, and the figures the text
 * and JSON formats derive from it alike. Only report/ includes it; report.c's table of formats names the writers.
 */
#ifndef ML_EMIT_H
#define ML_EMIT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "report/reportopts.h"
#include "report/stackview.h"
#include "report/statview.h"

struct ml_overhead;
struct unwind_loading;
struct ml_victim;
struct ml_cuda_oom;
struct findings;
struct ml_exit_view;
struct ml_judgement;
struct steps;
struct ml_rank_view;

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
	const struct steps *steps;
	const struct ml_rank_view *ranks;
};

/*
 * A format's writer: one report of s, its verdicts jv and its row order; 0 or a negative errno. seq counts the
 * reports; final is the last one.
 */
int ml_emit_text(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		 uint64_t seq, bool final);
int ml_emit_json(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		 uint64_t seq, bool final);
int ml_emit_folded(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		   uint64_t seq, bool final);
int ml_emit_pprof(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		  uint64_t seq, bool final);

/* When the run started, on the snapshots' clock. */
uint64_t ml_run_start(const struct reporter *r, const struct ml_snapshot *s);
/* How long the row's oldest record has been outstanding, in seconds; 0 when unknown. */
double ml_row_age_s(const struct ml_snapshot *s, const struct ml_row *row);
/* The failing CUDA request's stack (r->cuda_oom), as a row's frames. */
size_t ml_cuda_oom_frames(struct reporter *r, const struct ml_frame *const **frames);
/* What the shown rows' Python frames cost to decode as their stacks came, and how many stayed undecoded. */
struct ml_py_tally ml_python_tally(struct reporter *r, const struct ml_snapshot *s, const size_t *order, size_t shown);

#endif
