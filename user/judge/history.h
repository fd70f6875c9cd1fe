/*
 * One stack's history across reports (history.c): a sample a report, the recent ones kept, the older folded. What
 * the verdicts (verdict.c) judge a row on.
 */
#ifndef ML_HISTORY_H
#define ML_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include "collect/ledger.h"
#include "judge/trend.h"

#define ML_HIST_SHORT 8 /* the last reports, one sample each */
#define ML_HIST_LONG 8	/* older history, one sample per ML_HIST_FOLD reports */
#define ML_HIST_FOLD 8
_Static_assert(ML_HIST_SHORT + ML_HIST_LONG <= ML_SERIES_MAX, "a history is judged as one series");

/* A stack at one report: its bytes and count as reported, and its records' own bytes and number. */
struct sample {
	double t, b, c;
	float rb, rc;	/* what weighed rows are judged on (by_records) */
	float wb, wc;	/* of those, the weighed records' bytes and number */
	uint32_t seq;	/* the report whose values these are */
	float wmean;	/* a C heap window row's weighed records' mean window weight (0: none) */
	double steps;	/* its process's steps then (0: none counted yet) */
	double sampled; /* of them, those made in tensor sampling's on phases, at the report */
};

/* The history of one stack: recent samples, and older ones folded (the last sample of each fold kept). */
struct hist {
	struct ml_agg_key key;
	uint32_t n_short, n_long, folded;
	struct sample recent[ML_HIST_SHORT], old[ML_HIST_LONG];
	struct ml_judgement last; /* the judgement of the last report */
};

/* The samples of h in order, oldest first: hist__len of them, the folded ones, then the recent. */
static inline uint32_t hist__len(const struct hist *h)
{
	return h->n_long + h->n_short;
}

static inline const struct sample *hist__at(const struct hist *h, uint32_t i)
{
	return i < h->n_long ? &h->old[i] : &h->recent[i - h->n_long];
}

void hist__push(struct hist *h, const struct sample *s);
/* A sample that replaces the last one: a report that came too soon after it to be an interval of its own. */
void hist__restate(struct hist *h, const struct sample *s);
/* The history as one series of times, bytes and counts; their number. */
size_t hist__series(const struct hist *h, double *t, double *b, double *c);
/*
 * The history's records at today's weights (rb bytes, rc allocations): those that weigh 1 as they are, the
 * weighed ones at what the row's weighed records stand for now (fb bytes a byte, fc allocations a record),
 * each sample's in proportion to its mean window weight then against wmean now (0: none kept, as they are).
 */
void hist__reweighed(const struct hist *h, double fb, double fc, double wmean, double *rb, double *rc);
/* The report whose values the history's sample at time t holds (its trends' first); 0 if none is at t. */
uint64_t hist__report_at(const struct hist *h, double t);

#endif
