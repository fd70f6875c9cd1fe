/*
 * Ranks that diverge: the ranks of one job traced together (--match, --cgroup, --all-python), compared at each
 * report layer by layer. A rank stands apart in a layer when its outstanding bytes lie more than RANKS_MIN_BYTES and
 * RANKS_SHARE of the others' median above that median, or its growth (per step when every rank steps, else per
 * second, over the last RANKS_KEEP reports) more than RANKS_MIN_GROWTH and half the others' median growth above it,
 * with RANKS_MIN_GROWN_BYTES over the median already. At least three ranks of a job: two have no median to stand
 * apart from.
 */
#ifndef ML_RANKS_H
#define ML_RANKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

#define RANKS_MIN_BYTES (16ULL << 20)	    /* outstanding: at least 16 MiB over the others' median ... */
#define RANKS_SHARE 0.25		    /* ... and a quarter of it */
#define RANKS_MIN_GROWTH_STEP (64.0 * 1024) /* growth: 64 KiB a step over their median ... */
#define RANKS_MIN_GROWTH_S (256.0 * 1024)   /* ... or 256 KiB a second, when not every rank steps ... */
#define RANKS_MIN_GROWN_BYTES (4ULL << 20)  /* ... with 4 MiB over their median outstanding already */
#define RANKS_KEEP 6			    /* reports the growth is measured over */

/* One rank at one report: its processes (main and workers) summed. */
struct rank_in {
	const char *job;  /* TORCHELASTIC_RUN_ID, or NULL: ranks are compared within a job */
	const char *rank; /* its RANK */
	int pid;	  /* its main process */
	uint64_t bytes[ML_LAYER_MAX];
	uint64_t steps; /* its main process's steps (0: no step clock, or none yet) */
};

/* A rank that stands apart in a layer. */
struct rank_apart {
	const char *job, *rank; /* the input's strings */
	int pid;
	unsigned int layer;
	size_t others; /* the ranks of its job it is measured against */
	uint64_t bytes;
	double median_bytes;
	double growth, median_growth; /* per step when per_step, else per second; 0 before two reports */
	bool per_step;
};

/* One report's divergent ranks, for the reporter: each with the row of its site in the snapshot. */
struct ml_rank_view {
	const struct rank_apart *apart;
	size_t n;
	const size_t *row; /* per apart: its site's largest row (an index into the snapshot's rows), SIZE_MAX: none */
	size_t compared;   /* ranks compared (of jobs with three or more) */
};

struct ranks;

int ranks__new(struct ranks **out);
void ranks__free(struct ranks *r); /* NULL-safe */
/*
 * This report's ranks (in[0..n), the caller's) at time now_s: kept for the growth, then compared. *out (NULL when
 * none) and *nout: the ranks that stand apart, valid until the next call. 0 or -ENOMEM.
 */
int ranks__update(struct ranks *r, const struct rank_in *in, size_t n, double now_s, const struct rank_apart **out,
		  size_t *nout);
/* The jobs' ranks compared at the last update (those of jobs with three ranks or more). */
size_t ranks__compared(const struct ranks *r);

#endif
