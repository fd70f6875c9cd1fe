/* Report output: one snapshot as human text or as one JSON Lines object. */
#ifndef ML_REPORT_H
#define ML_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "collect/ledger.h"

enum ml_format { ML_FMT_TEXT, ML_FMT_JSON, ML_FMT_FOLDED, ML_FMT_PPROF };

struct stackview;
struct reporter;

struct report_opts {
	enum ml_format format;
	uint32_t top;
	int pid;
	bool native;          /* text: every native frame, not only those outside the interpreter */
	uint64_t duration_ns; /* pprof: how long the profile covers, set before the final report */
};

struct reporter *reporter__new(FILE *out, const struct report_opts *o, struct stackview *sv);
void reporter__free(struct reporter *r);
void reporter__set_duration(struct reporter *r, uint64_t ns);
/* The tool's cost, as every report shows it (measured by session/overhead.c). */
struct ml_overhead {
	double pct;          /* share of the traced processes' time (CPU time, or elapsed time if more) in probes */
	double budget_pct;   /* --max-overhead */
	double hits_per_s;   /* probe hits (entries and returns) */
	double hit_ns;       /* one probe hit (the trap, calibrated at start-up) */
	double ret_ns;       /* one return-probe hit */
	double bpf_ns_per_s; /* time in the BPF programs (kernel statistics) */
	double cpu_per_s;    /* CPU seconds the traced processes used per second */
	bool measured;       /* a sample has been taken */
	bool heap_mode;      /* the C heap is followed through its system calls, its probes are off */
	double full_pct;     /* the cost measured when heap-growth mode was entered */
	uint64_t heap_since_report; /* the report the mode began before */
};

/* The tool's cost and the C heap's mode, shown in every report from now on (NULL: not shown). */
void reporter__set_overhead(struct reporter *r, const struct ml_overhead *ov);
struct ml_judgement;

/*
 * Write one report, rows in the given order with their verdicts (both from verdicts__update); 0 or a
 * negative errno (the output could not be written).
 */
int reporter__emit(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *j, const size_t *order,
		   uint64_t seq, bool final);

/* The i-th drop counter: its stats slot and JSON name; 0 past the last one. */
size_t ml_drop_stat(size_t i, unsigned int *slot, const char **name);

/* An output file (-o, --json, --pprof): 0600, never through a symbolic link; stdout for NULL. NULL: said why. */
FILE *ml_open_output(const char *path);
/*
 * The traced processes now: processes[] lists every one of them, also those holding no traced memory, with
 * its resident memory. The reporter keeps a copy.
 */
void reporter__set_traced(struct reporter *r, const int *pids, size_t n);

struct jw;
struct ml_frame;
/* A stack's "frames" array, innermost first, as the stacks[] objects carry it. */
void ml_json_frames(struct jw *w, const struct ml_frame *const *frames, size_t n);
/* A name from the target in text: control bytes and backslashes as \xNN. */
void ml_put_safe(FILE *f, const char *s);

/* "12.0 KiB" style, for text. */
void ml_fmt_bytes(char *buf, size_t len, double bytes);
/* A count with thousands separators ("1,706"), with its sign always when sign, else only when negative. */
void ml_fmt_count(char *buf, size_t len, int64_t n, bool sign);

#endif
