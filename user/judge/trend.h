/*
 * The classification of one series (trend.c): the verdicts, the growth tests and the judgement they make, which
 * verdict.c keeps per stack; and the slope it fits per-step growth with too.
 */
#ifndef ML_TREND_H
#define ML_TREND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most samples a series judged holds (a stack's whole history: history.h). */
#define ML_SERIES_MAX 16

enum ml_verdict {
	ML_V_NEW,     /* too few reports yet to judge */
	ML_V_GROWING, /* keeps growing: a leak candidate */
	ML_V_STABLE,  /* steady state: caches, pools, weights */
	ML_V_SHRINKING,
	ML_V_CHURN,  /* short-lived allocations: nothing survives long */
	ML_V_IMPORT, /* made while importing a module: start-up, never a leak candidate (ranked below them) */
	ML_V_VICTIM, /* fresh heap free again, pinned by other rows' blocks (judge/victims.h): not a candidate */
};

/*
 * One signal's growth test over the judged window (outstanding bytes, or the number of live allocations).
 * It rises when, with at least four samples: it set a new high (above every earlier sample) in at least three
 * in four intervals, one of them among the last two; it ended above where it started (for the count, by at
 * least one allocation per interval); everything it lost on the way down is at most a quarter of that net
 * rise; and its rises are even (the per-second rates' coefficient of variation at most 0.5 with under six
 * samples, at most 1 from six on). A level that takes at most three values never rises: four distinct
 * values are needed for the three highs of the shortest window.
 */
struct ml_trend {
	bool rising;
	uint32_t highs;	   /* intervals that set a new high */
	double regularity; /* 1 - CV/2 of the per-second rates (CV capped at 1): 0.5 (ragged) to 1 (even) */
	double net;	   /* last sample less the first of the window */
	double per_s;	   /* least-squares slope */
	double evidence;   /* 0..1 when rising: highs/intervals x regularity x (0.5 + 0.5 min(1, net/first)) */
};

struct ml_judgement {
	enum ml_verdict verdict;
	double leak_score;	   /* 0..1, for growing stacks: min(1, intervals/6) x the stronger signal's evidence */
	double growth_bytes_per_s; /* least-squares slope over the judged window */
	double growth_per_interval;
	uint32_t intervals;   /* reports in the judged window */
	double window_s;      /* seconds the judged window spans */
	double from_t;	      /* the time of the first sample the trends judged: retained is counted from it */
	uint64_t from_report; /* the report whose counts that sample holds (0: none judged) */
	double monotonic;     /* share of report-to-report changes that went the trend's way (bytes) */
	int64_t count_growth; /* allocations since the previous report (all of them when the stack is new) */
	struct ml_trend bytes, count;
	/* Its process's step clock (collect/steps.h): growth per step over the judged samples that stepped. */
	uint64_t steps; /* the steps they span; 0: no per-step rates */
	double bytes_per_step, count_per_step;
};

/* Least-squares slope of y over t; 0 when the t do not spread. */
double ml_slope(const double *t, const double *y, size_t n);

/*
 * The classification alone, on a series of (seconds, bytes, allocation count) samples: exposed for unit tests.
 * counts may be NULL (bytes alone are judged). A stack is growing when either signal rises (see ml_trend).
 * step: the bytes each record stands for, in a row of weighed records (sampled), else 0.
 */
struct ml_judgement ml_judge(const double *t, const double *bytes, const double *counts, size_t n, double oldest_age_s,
			     double interval_s, double step);

#endif
