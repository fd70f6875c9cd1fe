/*
 * The process events of a run, read from the proc_events ring: forks and execs (--follow), a -c target's stops
 * at its loader's dlopen reports, the OOM killer's choices, CUDA out-of-memory errors, the rss layer's releases;
 * and the set of traced processes they change. Called by the run's set-up (session.c) and its loop (loop.c).
 */
#define _GNU_SOURCE
#include "session/procevents.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "collect/ledger.h"
#include "collect/rsspages.h"
#include "collect/steps.h"
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "session/bgobj.h"
#include "session/budget.h"
#include "session/copies.h"
#include "session/follow.h"
#include "session/state.h"
#include "memleak.skel.h"

struct probes_opts procevents__root_probes(struct session *ss)
{
	/* Test hook: PyTorch's USDT probes never attached, their semaphores left off (only the symbols probed). */
	bool no_usdt = getenv("MEMLEAK_AI_TEST_NO_USDT") != NULL;

	return (struct probes_opts){.pid = ss->root.pid,
				    .rows = &ss->rows,
				    .layers = ss->layers,
				    .torch_raw = ss->o->torch_raw,
				    .step = ml_opts_step(ss->o),
				    .multi = ss->multi,
				    .usdt_prog = no_usdt ? NULL : bgobj__usdt_prog,
				    .usdt_ctx = ss->usdt_obj};
}

/* The traced process with this pid, the first one or a follower, or NULL. */
struct tracee *procevents__tracee_of(struct session *ss, int tgid)
{
	if (ss->root.pid && tgid == ss->root.pid)
		return &ss->root;
	return ss->followers ? followers__find(ss->followers, tgid) : NULL;
}

/*
 * The first process ran exec: its new image gets new probes, its Python interpreter (if any) is looked for
 * anew and its program break starts over. (Links made for the old image do not reliably fire in the new
 * one: after an exec by a thread other than the leader the task they were made for is gone, and they were
 * seen to stop after some other execs too.)
 */
void procevents__root_exec(struct session *ss)
{
	struct probes_opts po = procevents__root_probes(ss);
	int err;

	if (budget__heap_on(ss->budget))
		ml_heap_track(ss->skel, ss->root.pid);
	session__learn_with(ss, NULL); /* the old image's decoder goes */
	err = tracee__reprobe(&ss->root, &ss->env, &po);
	session__learn_with(ss, ss->root.py);
	if (err && err != -ESRCH && err != -ENOENT) {
		ml_notice("pid %d ran exec; probing its new image failed: %s", ss->root.pid, strerror(-err));
		return;
	}
	if (!err) {
		probes__started(ss->root.probes);
		ml_info("pid %d ran exec: its new image is probed", ss->root.pid);
	}
}

/*
 * -c: the target stopped at its dynamic loader's report of a dlopen (before the new library's code runs):
 * probe what it mapped, then let it go on. A stop that memleak-ai did not ask for is left alone.
 */
void procevents__loader_stopped(struct session *ss)
{
	siginfo_t si = {};
	uint64_t asked, t0;
	int n;

	if (waitid(P_PID, (id_t)ss->root.pid, &si, WSTOPPED | WNOHANG) || si.si_pid != ss->root.pid)
		return;
	asked = READ_ONCE_U64(ss->skel->bss->ldso_stops);
	if (asked == ss->ld_stops_seen)
		return;
	ss->ld_stops_seen = asked;
	t0 = ml_clock_ns(CLOCK_MONOTONIC);
	n = tracee__sync_held(&ss->root, &ss->env);
	if (n < 0 && n != -ESRCH && n != -ENOENT)
		ml_notice("probing pid %d's new libraries failed: %s", ss->root.pid, strerror(-n));
	kill(ss->root.pid, SIGCONT);
	ss->ld_last_ns = ml_clock_ns(CLOCK_MONOTONIC);
	ss->ld_held_ns += ss->ld_last_ns - t0;
	ss->ld_handled++;
}

void procevents__follower_gone(void *ctx, int pid)
{
	struct session *ss = ctx;

	ledger__forget(ss->ledger, pid, UINT64_MAX);
	copies__gone(ss->copies, pid);
	steps__forget(ss->steps, pid);
}

#define CUDA_OOM_BURST_NS (2ULL * 1000000000) /* failures closer than this to the last are one burst */

/*
 * A failed cuda-layer call or a raised out-of-memory error. The caching allocator frees its cache and
 * tries again before it raises: one report a burst, with the first of each kind that came before it.
 */
static void cuda_oom_event(struct session *ss, const void *data, size_t len)
{
	const struct ml_proc_event *e = data;
	struct ml_cuda_oom *o = &ss->cuda_oom;
	bool raise = e->type == ML_PROC_OOM_RAISE;

	if (len < (raise ? sizeof(o->raise) : sizeof(o->fail)))
		return;
	if (!ss->cuda_oom_ns || e->ts_ns - ss->cuda_oom_ns > CUDA_OOM_BURST_NS) {
		memset(o, 0, sizeof(*o));
		ss->cuda_oom_due = true;
		ss->oom_report = true;
	}
	ss->cuda_oom_ns = e->ts_ns;
	if (!ss->cuda_oom_due)
		return; /* its report is out */
	if (raise && !o->raised) {
		memcpy(&o->raise, data, sizeof(o->raise));
		o->raise.msg[ML_OOM_MSG - 1] = '\0'; /* the target's text: never trust its end */
		o->raised = true;
	} else if (!raise && !o->failed) {
		memcpy(&o->fail, data, sizeof(o->fail));
		o->failed = true;
	}
}

static int on_proc_event(void *ctx, void *data, size_t len)
{
	struct session *ss = ctx;
	const struct ml_proc_event *e = data;

	if (len < sizeof(*e))
		return 0;
	if (e->type == ML_PROC_OOM && len >= sizeof(struct ml_oom_event)) {
		struct tracee *t = procevents__tracee_of(ss, (int)e->tgid);

		if (t && tracee__oom_chosen(t, data) && t != &ss->root)
			ss->oom_report = true; /* the first process's own exit ends the run with its final report */
		return 0;
	}
	if (e->type == ML_PROC_CUDA_FAIL || e->type == ML_PROC_OOM_RAISE) {
		cuda_oom_event(ss, data, len);
		return 0;
	}
	if (e->type == ML_PROC_PY_EXIT) {
		struct tracee *t = procevents__tracee_of(ss, (int)e->tgid);

		if (t)
			t->py_exiting = true;
		ss->py_exit_due |= (int)e->tgid == ss->root.pid;
		return 0;
	}
	if ((e->type == ML_PROC_RSS_RELEASE || e->type == ML_PROC_RSS_MOVE) && len >= sizeof(struct ml_rss_event)) {
		if (ss->rss)
			rsspages__event(ss->rss, data);
		return 0;
	}
	if (ss->closing && (e->type == ML_PROC_FORK || e->type == ML_PROC_DLOPEN))
		return 0; /* the run ends: nothing new is probed */
	if (e->type == ML_PROC_FORK) {
		if (!ss->o
			 ->follow) { /* a whole-node run with --no-follow: the selected processes, not their children */
			__u32 key = e->tgid;

			bpf_map_delete_elem(bpf_map__fd(ss->skel->maps.traced), &key);
			return 0;
		}
		copies__fork(ss->copies, (int)e->tgid, (int)e->parent); /* first: its copies begin at once */
		followers__add(ss->followers, (int)e->tgid, (int)e->parent);
	} else if (e->type == ML_PROC_DLOPEN) {
		struct tracee *t = procevents__tracee_of(ss, (int)e->tgid);
		int n = t ? tracee__sync(t, &ss->env) : -ENOENT;

		if (n < 0 && n != -ESRCH && n != -ENOENT)
			ml_notice("probing pid %u's new libraries failed: %s", e->tgid, strerror(-n));
	} else if (e->type == ML_PROC_EXEC) {
		/* What the old image had allocated went away with it. */
		if (ss->ledger)
			ledger__forget(ss->ledger, (int)e->tgid, e->ts_ns);
		copies__gone(ss->copies, (int)e->tgid);
		steps__forget(ss->steps, (int)e->tgid); /* the new image's steps count from 0 */
		if ((int)e->tgid == ss->root.pid)
			ss->root_exec =
			    true; /* a launcher script can exec several times in a row: probe the last image */
		else if (!ss->closing)
			followers__exec(ss->followers, (int)e->tgid);
	}
	return 0;
}

int procevents__open_ring(struct session *ss)
{
	if (!ss->proc_rb)
		ss->proc_rb = ring_buffer__new(bpf_map__fd(ss->skel->maps.proc_events), on_proc_event, ss, NULL);
	return ss->proc_rb ? 0 : -errno;
}

/* --follow: fork and exec of the traced processes, and the descendants the first one has already. */
int procevents__follow(struct session *ss)
{
	/* The first process's probes options (each follower's pid set by follow.c), every layer asked for. */
	struct follow_opts fo = {.probes = procevents__root_probes(ss),
				 .python = ss->o->python,
				 .uw = ss->env.uw,
				 .debug_dir = ss->o->debug_dir,
				 .max = MAX_FOLLOWERS,
				 .root = ss->root.pid ? &ss->root : NULL};
	__u32 key = (__u32)ss->root.pid, one = 1;
	struct ml_child *kids = NULL;
	size_t nkids = 0;
	int err;

	fo.probes.layers = ss->o->layers;
	err = followers__new(ss->skel, &fo, &ss->followers);
	if (err) {
		ml_err("cannot follow pid %d's children: %s", ss->root.pid, strerror(-err));
		return err;
	}
	if (ss->root.pid && bpf_map_update_elem(bpf_map__fd(ss->skel->maps.traced), &key, &one, BPF_ANY)) {
		err = -errno;
		ml_err("cannot follow pid %d's children: %s (--no-follow goes without)", ss->root.pid, strerror(-err));
		return err;
	}
	ss->fork_link = bpf_program__attach(ss->skel->progs.follow_fork);
	ss->exec_link = ss->fork_link ? bpf_program__attach(ss->skel->progs.follow_exec) : NULL;
	/* Without it the run goes on; an OOM kill is then an exit like any other. */
	ss->oom_link = bpf_program__attach(ss->skel->progs.oom_victim);
	if (!ss->oom_link)
		ml_info("cannot attach the OOM killer's tracepoint (mark_victim): %s", strerror(errno));
	if (!ss->exec_link) {
		err = -errno;
		ml_err("cannot attach the fork and exec tracepoints for --follow: %s (--no-follow goes without)",
		       strerror(-err));
		return err;
	}
	err = procevents__open_ring(ss);
	if (err) {
		ml_err("cannot follow pid %d's children: %s (--no-follow goes without)", ss->root.pid, strerror(-err));
		return err;
	}
	if (ss->root.pid && ml_descendants(ss->root.pid, &kids, &nkids) == 0)
		for (size_t i = 0; i < nkids; i++)
			followers__add(ss->followers, kids[i].pid, kids[i].parent);
	free(kids);
	return 0;
}

/* A process a whole-node selector picked: traced with the children it has already (those it forks later, by BPF). */
int procevents__node_add(void *ctx, int pid)
{
	struct session *ss = ctx;

	return fleet__node_add(ss->followers, ss->o->follow, pid);
}

/* The traced processes as the fleet outputs see them: the first one (if any), then the followers. */
struct fleet_procs procevents__fleet_of(struct session *ss)
{
	return (struct fleet_procs){.root = ss->root.pid ? &ss->root : NULL, .followers = ss->followers};
}

/* ss->pids: the traced processes' pids, the first one's first. How many (0: none, or out of memory). */
size_t procevents__traced_pids(struct session *ss)
{
	size_t np = 1 + (ss->followers ? followers__count(ss->followers) : 0), first = ss->root.pid ? 1 : 0;

	if (ml_grow(&ss->pids, &ss->cap_pids, np, sizeof(*ss->pids)))
		return 0;
	ss->pids[0] = ss->root.pid;
	return first + (ss->followers ? followers__pids(ss->followers, ss->pids + first, ss->cap_pids - first) : 0);
}
