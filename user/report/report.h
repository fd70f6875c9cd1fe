/* Report output: one snapshot as text, JSON Lines, folded stacks or pprof (and the --json/--pprof/--html files). */
#ifndef ML_REPORT_H
#define ML_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "collect/ledger.h"
#include "judge/victims.h"
#include "report/reportopts.h"
#include "unwind/unwind.h"

/* A format's name, as -f takes it (report.c's one table of formats); NULL past the last. */
const char *ml_format_name(unsigned int format);

struct stackview;
struct reporter;
struct ml_overhead;

int reporter__new(FILE *out, const struct report_opts *o, struct stackview *sv, struct reporter **res);
void reporter__free(struct reporter *r);

struct ml_judgement;
struct findings;
struct ml_exit_view;
struct ml_cuda_oom;
struct steps;
struct ml_rank_view;

/*
 * One report's input: the snapshot with its verdicts and row order (verdicts__update), and what the session
 * knows beside them. Every pointer is the caller's, read until reporter__emit returns.
 */
struct report_in {
	const struct ml_snapshot *snap;
	const struct ml_judgement *judged;
	const size_t *order;
	uint64_t seq;
	bool final;
	uint64_t duration_ns;	      /* since the run began: pprof's duration, the peaks' times */
	const struct ml_overhead *ov; /* the tool's cost and the C heap's mode (NULL: not shown) */
	const int *traced;	      /* every traced process now: processes[] lists each, memory or not */
	size_t ntraced;
	const struct ml_victim *victims; /* this report's victims of fragmentation (judge/victims.h), by key */
	size_t nvictims;
	const struct findings *findings;     /* the run's findings (judge/findings.h), for the peaks */
	const struct ml_exit_view *exited;   /* the final report after the target's exit: its last live rows */
	const struct ml_cuda_oom *cuda_oom;  /* the CUDA out-of-memory burst this report is written at, or NULL */
	const struct unwind_loading *tables; /* the unwinding tables' background building, or NULL */
	const struct steps *steps;	     /* the step clocks (collect/steps.h), or NULL */
	const struct ml_rank_view *ranks;    /* ranks that stand apart (session/diverge.h), or NULL: none */
};

/* Write one report in the reporter's format; 0 or a negative errno (the output could not be written). */
int reporter__emit(struct reporter *r, const struct report_in *in);

/* An output file (-o, --json, --pprof): 0600, never through a symbolic link; stdout for NULL. */
int ml_open_output(const char *path, FILE **out);

#endif
