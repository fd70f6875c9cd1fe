/*
 * What a run found while its processes lived. A job's exit frees what it kept (an interpreter's teardown frees
 * every object a live job would hold), so the final report after the target's exit shows the last report made
 * while it lived, with its verdicts, each row's peak and what the exit freed. Peaks (high-water marks) are kept
 * per row and per layer, with the rows that held memory at the highest total.
 */
#ifndef ML_FINDINGS_H
#define ML_FINDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/snapshot.h"
#include "judge/verdict.h"

/* A new peak of the total snapshots its rows again only when it passes the last one snapshotted by 1/this. */
#define FINDINGS_PEAK_MARGIN 20 /* 5 % */
#define FINDINGS_PEAK_ROWS 64	/* the largest rows kept of the peak's moment */

struct ml_high {
	uint64_t bytes, count;
	uint64_t at_ns; /* CLOCK_MONOTONIC of the report that saw it; 0: never seen */
};

/* One process's peaks: per layer, and its resident memory's high-water mark. */
struct ml_proc_peak {
	int tgid;
	struct ml_high layers[ML_LAYER_MAX];
	uint64_t rss_hwm; /* VmHWM, bytes; 0: not read */
};

/* Of exact records only: those that stand for more (ML_ROW_WEIGHED: sampled) give estimates, not a peak. */
struct ml_peak {
	struct ml_high layers[ML_LAYER_MAX];
	struct ml_high total; /* every layer that is not memory another layer holds (torch_cuda, torch_host, rss) */
	struct ml_row *rows;  /* the largest rows when the total was within the margin of its peak */
	size_t nrows;
	int rss_pid;		    /* the traced process with the highest resident memory high-water mark */
	uint64_t rss_hwm;	    /* its VmHWM, bytes */
	struct ml_proc_peak *procs; /* each traced process's, by first seen */
	size_t nprocs;
	uint64_t keep_ns; /* what keeping the findings cost since the start (the tool's own time) */
};

/* The final report of a run whose target exited: the last report made while it lived. */
struct ml_exit_view {
	struct ml_snapshot s; /* its rows, totals, processes and counters */
	const struct ml_judgement *j;
	const size_t *order;
	uint64_t live_seq; /* the report they come from */
	uint64_t live_ns;
	uint64_t freed_bytes; /* what the exit freed, over the layers the total counts */
};

struct findings;

int findings__new(struct findings **out);
void findings__free(struct findings *f); /* NULL-safe */

/*
 * A report judged while its processes lived: kept as the run's findings (copied), and every row's and
 * layer's peak raised where it is higher. 0 or -ENOMEM (the findings stay the previous report's).
 */
int findings__keep(struct findings *f, const struct ml_snapshot *s, const struct ml_judgement *j, const size_t *order,
		   uint64_t seq);
/* A traced process's resident memory high-water mark (VmHWM) as read while it lived. */
void findings__rss_peak(struct findings *f, int tgid, uint64_t hwm_bytes);
/* Whether a report was kept. */
bool findings__have(const struct findings *f);

/*
 * After the target's exit: the kept report, and what the exit freed of each row and in all, against now
 * (collected after the exit). 0, -ENOENT when nothing was kept, or -ENOMEM.
 */
int findings__at_exit(struct findings *f, const struct ml_snapshot *now, struct ml_exit_view *out);

/* A row's peak, and what the exit freed of it (0 before findings__at_exit). false when the row was never kept. */
bool findings__row(const struct findings *f, const struct ml_agg_key *k, struct ml_high *peak, uint64_t *freed);
const struct ml_peak *findings__peak(const struct findings *f);
/* Whether a layer counts in the peak's total (memory no other layer already holds). */
bool findings__in_total(unsigned int layer);

#endif
