/* The fleet outputs of a run: selected processes as followers, metrics by rank and role, profiles to a store. */
#define _GNU_SOURCE
#include "session/fleet.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "collect/cost.h"
#include "collect/ledger.h"
#include "collect/sizeweights.h"
#include "lib/log.h"
#include "report/metrics.h"
#include "report/pprof.h"
#include "report/push.h"
#include "session/follow.h"
#include "session/tracee.h"

int fleet__node_add(struct followers *f, bool follow, int pid)
{
	struct ml_child *kids = NULL;
	size_t nkids = 0;
	int err = followers__add(f, pid, 0);

	if (err)
		return err;
	if (follow && ml_descendants(pid, &kids, &nkids) == 0)
		for (size_t i = 0; i < nkids; i++)
			followers__add(f, kids[i].pid, kids[i].parent);
	free(kids);
	return 0;
}

/* Every traced process, the first one first; *n of them in a malloc'd array. NULL: out of memory. */
static struct tracee **all_of(struct fleet_procs p, size_t *n)
{
	size_t nf = p.followers ? followers__count(p.followers) : 0, k = 0;
	struct tracee **v = calloc(nf + 1, sizeof(*v));
	int *pids = calloc(nf + 1, sizeof(*pids));

	if (!v || !pids) {
		free(v);
		free(pids);
		return NULL;
	}
	if (p.root)
		v[k++] = p.root;
	nf = p.followers ? followers__pids(p.followers, pids, nf) : 0;
	for (size_t i = 0; i < nf; i++) {
		struct tracee *t = followers__find(p.followers, pids[i]);

		if (t)
			v[k++] = t;
	}
	free(pids);
	*n = k;
	return v;
}

void fleet__weigh_sizes(struct fleet_procs p, struct ledger *l, struct sizeweights *sw, uint64_t since_ns)
{
	size_t n = 0, due = 0;
	struct tracee **v = all_of(p, &n);
	struct sizeweights_proc *procs = v ? calloc(n + 1, sizeof(*procs)) : NULL;

	for (size_t i = 0; procs && i < n; i++) {
		tracee__size_base(v[i], l, since_ns);
		due += tracee__size_due(v[i], sw, since_ns, &procs[due]);
	}
	if (due && sizeweights__weigh(sw, ledger__slots(l), procs, due))
		ml_info("cannot weigh the C heap's records by size: %s", strerror(ENOMEM));
	free(procs);
	free(v);
}

/*
 * Of the processes whose heap walks (walk) or smaps_rollup reads are paced, the one whose next is due the
 * longest: the only one that may make it this report. n when none.
 */
static size_t longest_due(struct tracee **v, size_t n, bool walk)
{
	size_t best = n;

	for (size_t i = 0; i < n; i++) {
		bool paced = walk ? v[i]->frag_ok : tracee__rollup_paced(v[i]);

		if (paced && (best == n || (walk ? v[i]->frag_next_ns < v[best]->frag_next_ns
						 : v[i]->rollup_next_ns < v[best]->rollup_next_ns)))
			best = i;
	}
	return best;
}

size_t fleet__sample_memory(struct fleet_procs p, struct ledger *l, double walk_pace, enum tracee_walk how, int **pids)
{
	uint64_t all_ns = 0, all_rollup_ns = 0;
	size_t n = 0, walker, roller;
	struct tracee **v = all_of(p, &n);

	*pids = v ? calloc(n + 1, sizeof(**pids)) : NULL;
	if (!*pids) {
		free(v);
		return 0;
	}
	/*
	 * One paced walk a report, all of them paced as one, the longest due first: sixteen ranks each walked at
	 * its own pace took 16 % of a core (175 ms walks of PyPI's torch 2.15), and all came due in the same
	 * reports. Likewise their 12-ms smaps_rollup reads, a third of what was left.
	 */
	for (size_t i = 0; i < n; i++) {
		all_ns += v[i]->frag.scan_ns;
		all_rollup_ns += v[i]->rollup_ns;
	}
	walker = longest_due(v, n, true);
	roller = longest_due(v, n, false);
	for (size_t i = 0; i < n; i++) {
		bool others = how == TRACEE_WALK_PACED;

		tracee__sample_memory(v[i], walk_pace, all_rollup_ns - v[i]->rollup_ns,
				      others && i != roller ? TRACEE_WALK_EARLY : how);
		tracee__scan_heap(v[i], l, walk_pace, all_ns - v[i]->frag.scan_ns,
				  others && i != walker ? TRACEE_WALK_EARLY : how);
		(*pids)[i] = v[i]->pid;
	}
	free(v);
	return n;
}

void fleet__publish_metrics(struct metrics_server *m, struct fleet_procs p, const struct ml_snapshot *snap,
			    const struct ml_judgement *judged, const struct steps *steps,
			    const struct ml_rank_view *ranks, unsigned int layers, const struct ml_overhead *ov,
			    uint64_t reports)
{
	size_t n = 0;
	struct tracee **v = all_of(p, &n);
	struct ml_metric_proc *procs = v ? calloc(n + 1, sizeof(*procs)) : NULL;
	char *text = NULL;
	size_t len = 0;

	for (size_t i = 0; procs && i < n; i++)
		procs[i] = (struct ml_metric_proc){
		    .pid = v[i]->pid, .rank = v[i]->labels.rank, .role = v[i]->role ? v[i]->role : "main"};
	if (!procs || ml_metrics_render(&(struct ml_metrics_in){.s = snap,
								.j = judged,
								.steps = steps,
								.ranks = ranks,
								.procs = procs,
								.nprocs = n,
								.layers = layers,
								.overhead_ratio = ov->measured ? ov->pct / 100 : -1,
								.reports = reports},
					&text, &len)) {
		ml_notice("out of memory making the metrics: /metrics keeps the previous report's");
		goto out;
	}
	metrics_server__publish(m, text, len);
out:
	free(procs);
	free(v);
}

void fleet__push(struct pusher *push, struct fleet_procs p, const struct ml_snapshot *snap,
		 const struct ml_judgement *judged, const struct steps *steps, struct stackview *sv, uint64_t seq)
{
	size_t n = 0;
	struct tracee **v = all_of(p, &n);
	struct timespec now;

	if (!v) {
		ml_notice("out of memory making this report's profiles");
		return;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	for (size_t i = 0; i < n; i++) {
		/* at its interpreter's teardown a profile would show what the exit frees: its last one stands */
		if (v[i]->py_exiting)
			continue;
		const struct tracee *t = v[i];
		struct push_meta m = {.pid = t->pid,
				      .seq = seq,
				      .rank = t->labels.rank,
				      .role = t->role,
				      .job = t->labels.job,
				      .until_s = (uint64_t)now.tv_sec};
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		int err;

		if (!f) {
			ml_notice("out of memory making pid %d's profile", t->pid);
			continue;
		}
		m.from_s = m.until_s - (uint64_t)(snap->elapsed_s + 0.5);
		err = ml_pprof_write(f, snap, judged, sv, steps, NULL, (uint64_t)(snap->elapsed_s * 1e9), t->pid);
		if (fclose(f) && !err)
			err = -ENOMEM;
		if (err) {
			free(buf);
			ml_notice("cannot make pid %d's profile: %s", t->pid, strerror(-err));
			continue;
		}
		pusher__submit(push, &m, buf, len);
	}
	free(v);
}
