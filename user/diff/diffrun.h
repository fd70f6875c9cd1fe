/*
 * One side of `memleak-ai diff`: the stacks of one report, read from JSON Lines or a pprof profile, merged by
 * what identifies them across runs. A stack with Python frames is known by its layer and Python lines alone; one
 * without by its layer and native function names. Addresses never match across runs, and the native frames
 * under one Python line vary with the build, so neither takes part.
 */
#ifndef ML_DIFFRUN_H
#define ML_DIFFRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One frame as a reader found it; line < 0 when unknown, func or file NULL when unknown. */
struct diff_frame {
	bool python;
	const char *func, *file;
	int64_t line;
};

/* What one stack (or several merged) holds, and how fast it grew. */
struct diff_figs {
	double bytes, count, peak_bytes;
	double per_s;	 /* least-squares growth per second over the judged reports */
	double per_step; /* the same per step; valid when stepped */
	bool stepped;
};

struct diff_row {
	char *key;  /* the layer, then the frames matched, one per line */
	char *text; /* a copy of key cut at its newlines: layer and frames point into it */
	const char *layer;
	char **frames; /* the frames matched, innermost first: "FILE:LINE in FUNC" or a native name */
	size_t nframes;
	size_t site; /* frames[site]: the innermost line of the job's own code (not site-packages, not the
			standard library); 0 when none is */
	bool python;
	struct diff_figs f;
};

struct diff_layer {
	char *name;
	struct diff_figs f;
};

struct diff_run {
	char *path;
	const char *format; /* "json" or "pprof" */
	uint64_t seq;	    /* the report read from JSON Lines; 0 for a profile */
	bool stepped;	    /* its step clock ran: per-step figures are known, 0 until a step is counted */
	double steps;	    /* the most steps one process had made */
	bool partial;	    /* the report listed its top stacks only (--top) */
	double smallest;    /* then: the bytes of the smallest stack it listed */
	struct diff_row *rows;
	size_t nrows, caprows;
	uint32_t *slots; /* row index + 1 by key hash, 0 = empty; at most half full */
	size_t nslots;
	struct diff_layer *layers;
	size_t nlayers, caplayers;
};

int diffrun__new(const char *path, const char *format, struct diff_run **out);
void diffrun__free(struct diff_run *r); /* NULL-safe */
/* Add one stack's figures to the row of its layer and frames (innermost first); 0 or -ENOMEM. */
int diffrun__add(struct diff_run *r, const char *layer, const struct diff_frame *fr, size_t n,
		 const struct diff_figs *f);
/* Add figures to a layer's total; 0 or -ENOMEM. */
int diffrun__add_layer(struct diff_run *r, const char *layer, const struct diff_figs *f);
/* The row of key, or NULL. */
const struct diff_row *diffrun__find(const struct diff_run *r, const char *key);
const struct diff_layer *diffrun__layer(const struct diff_run *r, const char *name);
/* A number read from a file as an integer: clamped, NaN as 0 (a cast out of range is undefined). */
static inline int64_t diff_i64(double v)
{
	return v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? -INT64_MAX : (int64_t)v;
}

/* A reader's refusal: *why set to the message (NULL when out of memory), -EINVAL returned. */
int diff__fail(char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
