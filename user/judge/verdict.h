/* Leak verdicts: per-stack history of outstanding bytes across reports, and growing/stable/shrinking/churn calls. */
#ifndef ML_VERDICT_H
#define ML_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/ledger.h"
#include "judge/history.h"
#include "judge/trend.h"

struct verdicts;

int verdicts__new(struct verdicts **out);
void verdicts__free(struct verdicts *v);
/*
 * Judge every row of a snapshot against the history of its stack (rows keep their order). Returns an array
 * parallel to s->rows, valid until the next call, and in *order the row indices in report order: growing
 * stacks first by leak score, then the rest by outstanding bytes (or all by bytes when by_bytes). A snapshot
 * under 0.9 restate_s after the last one (the final report's: the report interval; 0 for the others) replaces
 * the last sample instead of adding one; in such a report (restate_s > 0), a row growing at the last that freed
 * nothing since stays growing.
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

#endif
