/* Leak verdicts: per-stack history of outstanding bytes across reports, and growing/stable/shrinking/churn calls. */
#ifndef ML_VERDICT_H
#define ML_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/ledger.h"

enum ml_verdict {
	ML_V_NEW,     /* too few reports yet to judge */
	ML_V_GROWING, /* keeps growing: a leak candidate */
	ML_V_STABLE,  /* steady state: caches, pools, weights */
	ML_V_SHRINKING,
	ML_V_CHURN,  /* short-lived allocations: nothing survives long */
	ML_V_IMPORT, /* made while importing a module: start-up, never a leak candidate (ranked below them) */
	ML_V_VICTIM, /* fresh heap free again, pinned by other rows' blocks (judge/victims.h): not a candidate */
};

#define ML_HIST_SHORT 8 /* the last reports, one sample each */
#define ML_HIST_LONG 8	/* older history, one sample per ML_HIST_FOLD reports */
#define ML_HIST_FOLD 8

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

struct verdicts;

int verdicts__new(struct verdicts **out);
void verdicts__free(struct verdicts *v);
/*
 * Judge every row of a snapshot against the history of its stack (rows keep their order). Returns an array
 * parallel to s->rows, valid until the next call, and in *order the row indices in report order: growing
 * stacks first by leak score, then the rest by outstanding bytes (or all by bytes when by_bytes). A snapshot
 * under 0.9 restate_s after the last one (the final report's: the report interval; 0 for the others) replaces
 * the last sample instead of adding one.
 */
int verdicts__update(struct verdicts *v, const struct ml_snapshot *s, bool by_bytes, double restate_s,
		     const struct ml_judgement **out, const size_t **order);
/*
 * When the C heap's last sampling window closed, or the windows began before the first (CLOCK_MONOTONIC ns; 0:
 * no windows): its sampled rows gain records only in windows (one every 2 s or more, reports every 2), so their
 * samples are timed at the window, and a report with none since restates the last sample rather than add a
 * flat one, which would read as a leak that stopped growing.
 */
void verdicts__heap_window(struct verdicts *v, uint64_t closed_ns);
/*
 * When tensor sampling's last on phase closed, or sampling began before the first (CLOCK_MONOTONIC ns, as
 * snapshots' now_ns; 0: not sampling): torch_cpu rows gain records only in on phases, so their samples are timed
 * there, not at the report.
 */
void verdicts__tensor_phase(struct verdicts *v, uint64_t closed_ns);
struct steps;
/*
 * The traced processes' step clocks for the next update (NULL: none): a row's clock stands still while its
 * process pauses (no step, up to STEPS_PAUSE_MAX_S), its samples restated, and its growth is also judged per step.
 */
void verdicts__steps(struct verdicts *v, const struct steps *st);
/* The number of the report the next update judges (its samples carry it, see ml_judgement's from_report). */
void verdicts__report_seq(struct verdicts *v, uint64_t seq);
/*
 * After the heap walk: each growing row takes the verdict again(ctx, key) gives it (victims, see
 * judge/victims.h, or new while a walk must tell; ML_V_GROWING keeps it), and the order is made again. The
 * same arrays as verdicts__update's, updated in place.
 */
void verdicts__rejudge(struct verdicts *v, const struct ml_snapshot *s, bool by_bytes,
		       enum ml_verdict (*again)(void *ctx, const struct ml_agg_key *k), void *ctx);
/*
 * After the rejudging: the growing rows' order spread over their sites (site(ctx, row): where a user would fix
 * it, e.g. its Python stack), each site's first row in rank order, then the other rows of those sites in rank
 * order. A site's second and third rows no longer hide another site's first. Nothing moves when by_bytes.
 */
void verdicts__spread(struct verdicts *v, const struct ml_snapshot *s, bool by_bytes,
		      uint64_t (*site)(void *ctx, const struct ml_row *r), void *ctx);
const char *ml_verdict_name(enum ml_verdict v);
/* Bytes the history holds now: one fixed-size record per stack in the last report. */
size_t verdicts__memory(const struct verdicts *v);
/*
 * The kept history of a stack (the report each sample's values are from, bytes), oldest first; the number of
 * samples. By report, not by time: a sampled row's samples are timed at its windows or phases.
 */
size_t verdicts__series(const struct verdicts *v, const struct ml_agg_key *key, uint64_t *seq, double *bytes,
			size_t max);

/*
 * The classification alone, on a series of (seconds, bytes, allocation count) samples: exposed for unit tests.
 * counts may be NULL (bytes alone are judged). A stack is growing when either signal rises (see ml_trend).
 * step: the bytes each record stands for, in a row of weighed records (sampled), else 0.
 */
struct ml_judgement ml_judge(const double *t, const double *bytes, const double *counts, size_t n, double oldest_age_s,
			     double interval_s, double step);

#endif
