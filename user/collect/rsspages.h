/* The rss layer's user-space side: its programs, the processes it traces, large releases and sampling. */
#ifndef ML_RSSPAGES_H
#define ML_RSSPAGES_H

#include <stdbool.h>
#include <stdint.h>
#include "collect/ledger.h"
#include "memleak.h"

struct memleak_bpf;
struct slots;
struct rsspages;

struct rsspages_opts {
	uint64_t max_records;	/* records kept at once before the sampling interval doubles */
	double max_pages_per_s; /* pages recorded a second before it doubles */
	uint32_t shift;		/* the interval to start from (2^shift) */
};

/* Attaches the layer's four programs. */
int rsspages__new(struct memleak_bpf *skel, struct ledger *l, const struct rsspages_opts *o, struct rsspages **out);
void rsspages__free(struct rsspages *r); /* NULL-safe; detaches */

/* pid's faults are traced from now on (its forks follow by themselves); 0 or a negative errno. */
int ml_rss_track(struct memleak_bpf *skel, int pid);
void ml_rss_untrack(struct memleak_bpf *skel, int pid);

/* A range too large for the system call's BPF program (ML_PROC_RSS_RELEASE, ML_PROC_RSS_MOVE). */
void rsspages__event(struct rsspages *r, const struct ml_rss_event *e);

/*
 * After a snapshot: over the record limit, the sampling interval doubles (as often as needed), and the
 * records the new test rejects are dropped. Returns how many times it doubled.
 */
int rsspages__tune(struct rsspages *r, const struct ml_snapshot *s);
/* At a scan tick (NULL-safe): over the rate limit since the last one (half a second at least), the same. */
int rsspages__tick(struct rsspages *r, uint64_t now_ns);

/* The budget's hook (session/overhead.h): one doubling of its sampling interval, or its faults off. */
void rsspages__shed(void *ctx, bool off);

uint32_t rsspages__shift(const struct rsspages *r);
/* Whether its faults are traced still (the budget's last step stops that). */
bool rsspages__faults_traced(const struct rsspages *r);
uint64_t rsspages__dropped(const struct rsspages *r); /* records dropped by doublings since attach */

/* Drop (to == 0) or move the records of tgid in [lo, hi) made before before_ns, in the mapped table. */
uint64_t ml_rss_range(struct slots *t, uint32_t shift, uint32_t tgid, uint64_t lo, uint64_t hi, uint64_t to,
		      uint64_t before_ns, uint64_t *lost);

/*
 * Write rec (tgid, addr as the key, size, stack_id, caller, spec, ts_ns) as an rss record into the mapped table:
 * the one at its key is replaced; size 0 drops it. 0, or -ENOSPC when its probe chain is full.
 */
int ml_rss_put(struct slots *t, const struct ml_slot *rec);

#endif
