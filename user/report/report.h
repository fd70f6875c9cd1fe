/* Report output: one snapshot as text, JSON Lines, folded stacks or pprof (and the --json/--pprof/--html files). */
#ifndef ML_REPORT_H
#define ML_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "collect/ledger.h"
#include "judge/victims.h"

enum ml_format { ML_FMT_TEXT, ML_FMT_JSON, ML_FMT_FOLDED, ML_FMT_PPROF };
/* A format's name, as -f takes it (report.c's one table of formats); NULL past the last. */
const char *ml_format_name(unsigned int format);

struct stackview;
struct reporter;
struct ml_overhead;

struct report_opts {
	enum ml_format format;
	uint32_t top;
	int pid;
	bool native;	      /* text: every native frame, not only those outside the interpreter */
	uint64_t duration_ns; /* pprof: how long the profile covers, set before the final report */
};

int reporter__new(FILE *out, const struct report_opts *o, struct stackview *sv, struct reporter **res);
void reporter__free(struct reporter *r);
void reporter__set_duration(struct reporter *r, uint64_t ns);
/* The tool's cost and the C heap's mode, shown in every report from now on (NULL: not shown). */
void reporter__set_overhead(struct reporter *r, const struct ml_overhead *ov);
struct ml_judgement;

/*
 * Write one report, rows in the given order with their verdicts (both from verdicts__update); 0 or a
 * negative errno (the output could not be written).
 */
int reporter__emit(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *j, const size_t *order,
		   uint64_t seq, bool final);

/* An output file (-o, --json, --pprof): 0600, never through a symbolic link; stdout for NULL. */
int ml_open_output(const char *path, FILE **out);
/*
 * The traced processes now: processes[] lists every one of them, also those holding no traced memory, with
 * its resident memory. The reporter keeps a copy.
 */
void reporter__set_traced(struct reporter *r, const int *pids, size_t n);
/* This report's victims of fragmentation (judge/victims.h; by key, kept by the caller until the report is out). */
void reporter__set_victims(struct reporter *r, const struct ml_victim *v, size_t n);
struct findings;
struct ml_exit_view;
/*
 * The run's findings (judge/findings.h), for the peaks every report shows; exited: the final report after the
 * target's exit, which shows the last live report's rows (NULL otherwise). Kept by the caller.
 */
void reporter__set_findings(struct reporter *r, const struct findings *f, const struct ml_exit_view *exited);
struct ml_cuda_oom;
/* This report is written at a CUDA out-of-memory burst: o (kept by the caller until the report is out), or NULL. */
void reporter__set_cuda_oom(struct reporter *r, const struct ml_cuda_oom *o);

#endif
