/*
 * What the fleet outputs need of the traced processes: a whole-node selector's picks made followers, and each
 * report as Prometheus metrics (by rank and role) and as one profile per process for a store.
 */
#ifndef ML_FLEET_H
#define ML_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "session/tracee.h" /* enum tracee_walk */

struct followers;
struct ledger;
struct metrics_server;
struct ml_judgement;
struct ml_overhead;
struct steps;
struct ml_rank_view;
struct ml_snapshot;
struct pusher;
struct sizeweights;
struct stackview;
struct tracee;

/* The traced processes: the first one (NULL with a whole-node selector) and the followers (may be NULL). */
struct fleet_procs {
	struct tracee *root;
	struct followers *followers;
};

/* A process a selector picked: a follower without a parent, with the children it has (unless !follow). 0 or -errno. */
int fleet__node_add(struct followers *f, bool follow, int pid);

/*
 * Each traced process's resident memory read for this report, and its C heap walked as how says
 * (tracee__scan_heap: paced, or every one now: the final report, or a row of fresh heap waiting to be told);
 * their pids in *pids (malloc'd), the count returned.
 */
size_t fleet__sample_memory(struct fleet_procs p, struct ledger *l, double walk_pace, enum tracee_walk how, int **pids);
/*
 * The sampled C heap weighed by size from the last walks (tracee__size_due; since_ns, the windows' start, or 0:
 * not by size). A process without PyTorch is walked (or read) once out of turn at the start (tracee__size_base).
 */
void fleet__weigh_sizes(struct fleet_procs p, struct ledger *l, struct sizeweights *sw, uint64_t since_ns);

/* This report (NULL before the first) is what /metrics serves from now on. */
void fleet__publish_metrics(struct metrics_server *m, struct fleet_procs p, const struct ml_snapshot *snap,
			    const struct ml_judgement *judged, const struct steps *steps,
			    const struct ml_rank_view *ranks, unsigned int layers, const struct ml_overhead *ov,
			    uint64_t reports);

/* --push, --pprof-dir: one profile per traced process, of this report's interval. */
void fleet__push(struct pusher *push, struct fleet_procs p, const struct ml_snapshot *snap,
		 const struct ml_judgement *judged, const struct steps *steps, struct stackview *sv, uint64_t seq);

#endif
