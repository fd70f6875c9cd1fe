/*
 * A run's event loop: signals, the target's exit, forks and execs, the budget's timer, library rescans, and
 * every interval a report (collect, judge, write every output).
 */
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "collect/heaplive.h"
#include "collect/ledger.h"
#include "collect/rsspages.h"
#include "collect/steps.h"
#include "judge/findings.h"
#include "judge/verdict.h"
#include "lib/clock.h"
#include "lib/frames.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/procmem.h"
#include "python/pyframes.h"
#include "report/html.h"
#include "report/report.h"
#include "report/stackview.h"
#include "session/budget.h"
#include "session/copies.h"
#include "session/diverge.h"
#include "session/fleet.h"
#include "session/follow.h"
#include "session/overhead.h"
#include "session/procevents.h"
#include "session/select.h"
#include "session/state.h"
#include "memleak.skel.h"

static const struct budget_env *budget_env_of(struct session *ss)
{
	ss->benv = (struct budget_env){.skel = ss->skel,
				       .root_pid = ss->root.pid,
				       .root = ss->root.probes,
				       .followers = ss->followers,
				       .ledger = ss->ledger,
				       .ov = ss->ov,
				       .layers = &ss->layers};
	return &ss->benv;
}

/* The sampled C heap by its sizes' growth, when the budget says so (a program without PyTorch in heap windows). */
static void weigh_sizes(struct session *ss)
{
	uint64_t since = 0;

	fleet__weigh_sizes(procevents__fleet_of(ss), ss->ledger, ss->sizes,
			   budget__heap_by_size(ss->budget, &since) ? since : 0);
}

/* A scan tick: followers and the first process rescanned, the cost sampled against the budget. */
static void session_scan(struct session *ss)
{
	uint64_t expirations;
	size_t np;
	bool full;
	int n;

	if (read(ss->scan_fd, &expirations, sizeof(expirations)) < 0)
		expirations = 0;
	if (++ss->scans == FAST_SCANS)
		session__arm_timer(ss->scan_fd, 1.0);
	full = ss->scans == 1 || ss->scans % FULL_SCAN_EVERY == 0;
	if (ss->sel) { /* new matches first: they are followers from here on */
		n = selector__scan(ss->sel, procevents__node_add, ss);
		if (n < 0)
			ml_notice("cannot look for new processes to trace: %s", strerror(-n));
	}
	if (ss->followers)
		followers__sync(ss->followers, full, procevents__follower_gone, ss);
	rsspages__tick(ss->rss, ml_clock_ns(CLOCK_MONOTONIC));
	np = procevents__traced_pids(ss);
	if (np)
		budget__act(ss->budget, budget_env_of(ss), overhead__sample(ss->ov, ss->pids, np), ss->seq + 1);
	weigh_sizes(ss);
	if (ss->root.pid && tracee__needs_scan(&ss->root, full) && target__alive(&ss->tgt)) {
		n = tracee__sync(&ss->root, &ss->env);
		if (n < 0 && n != -ESRCH && n != -ENOENT)
			ml_notice("rescanning pid %d's libraries failed: %s", ss->root.pid, strerror(-n));
	}
}

/* Records a heap window made, asked at most this many a report (a few µs each: two or three reads). */
#define HEAP_SWEEP_MAX 65536

static int heap_block_live(void *ctx, uint32_t tgid, uint64_t addr, uint64_t size)
{
	return heaplive__check(ctx, (int)tgid, addr, size);
}

/* Between heap windows: the blocks they recorded that glibc has released since are dropped. */
static void heap_sweep(struct session *ss)
{
	struct heaplive hl = HEAPLIVE_INIT;
	uint64_t since, asked, freed;

	if (!budget__heap_sweepable(ss->budget, &since))
		return;
	freed = ledger__sweep(ss->ledger, ML_LAYER_LIBC, since, HEAP_SWEEP_MAX, heap_block_live, &hl, &asked);
	heaplive__close(&hl);
	overhead__heap_swept(ss->ov, asked, freed);
}

static const struct ml_heapfrag *frag_of(void *ctx, int tgid)
{
	struct session *ss = ctx;
	struct tracee *t = tgid == ss->root.pid ? &ss->root : NULL;

	if (!t && ss->followers)
		t = followers__find(ss->followers, tgid);
	return t && t->frag_ok ? &t->frag : NULL;
}

static enum ml_verdict again(void *ctx, const struct ml_agg_key *k)
{
	const struct session *ss = ctx;

	if (victims__of(ss->victims.v, ss->victims.n, k))
		return ML_V_VICTIM;
	return victims__held(ss->victims.held, ss->victims.nheld, k) ? ML_V_NEW : ML_V_GROWING;
}

/*
 * After the heap walks: growing rows of fresh heap that is free again, or filled by other rows, are victims,
 * not leak candidates; those grown since the last walk wait for the next one, which comes at the next report.
 */
static void judge_victims(struct session *ss, const struct ml_snapshot *snap, const struct ml_judgement *judged)
{
	struct ml_victims v;
	int err;

	err = victims__find(snap, judged, ss->ledger, frag_of, ss, &ss->victims, &v);
	if (err)
		ml_notice("cannot tell fragmentation's victims: %s", strerror(-err));
	victims__clear(&ss->victims);
	ss->victims = v;	     /* none on an error; the reports show them */
	ss->walk_soon = v.nheld > 0; /* the next report walks the heap whatever the pace */
	if (v.n || v.nheld)
		verdicts__rejudge(ss->verdicts, snap, ss->o->sort_bytes, again, ss);
}

/* Once the rss layer no longer traces faults, the children's copies are found from their page tables. */
static void find_copies(struct session *ss)
{
	size_t n = ss->followers ? followers__count(ss->followers) : 0, k = 0;
	int *pids;

	/* Made before there is a child: a fork is compared at once (copies__fork). */
	if (!ss->rss || rsspages__faults_traced(ss->rss) || (!ss->copies && copies__new(ss->ledger, &ss->copies)) || !n)
		return;
	pids = malloc(2 * n * sizeof(*pids));
	if (!pids)
		return;
	for (size_t i = 0; i < n; i++) {
		const struct tracee *t = followers__at(ss->followers, i);

		if (t->parent > 0) {
			pids[k] = t->pid;
			pids[n + k++] = t->parent;
		}
	}
	if (k)
		copies__pass(ss->copies, pids, pids + n, k);
	free(pids);
}

/* Every output of a report: the main one, --json, --pprof, then the fleet's and, the last time, the HTML page. */
static int write_outputs(struct session *ss, const struct report_in *in)
{
	const struct ml_opts *o = ss->o;
	int err = 0;

	for (int i = 0; i < N_OUTPUTS; i++) {
		if (!ss->reps[i])
			continue;
		err = reporter__emit(ss->reps[i], in);
		if (err) {
			ml_err("cannot write the report%s%s: %s", i ? " to " : "",
			       i == 1	? o->json
			       : i == 2 ? o->pprof
					: "",
			       strerror(-err));
			return err;
		}
	}
	ss->cuda_oom_due = false;
	if (ss->metrics)
		fleet__publish_metrics(ss->metrics, procevents__fleet_of(ss), in->snap, in->judged, ss->steps,
				       in->ranks, ss->layers, overhead__info(ss->ov), ss->seq);
	if (ss->push)
		fleet__push(ss->push, procevents__fleet_of(ss), in->snap, in->judged, ss->steps, ss->sv, ss->seq);
	if (in->final && o->html) {
		struct html_opts ho = {.pid = ss->root.pid,
				       .top = o->top,
				       .reports = ss->seq,
				       .findings = ss->findings,
				       .exited = in->exited != NULL};

		err = ml_html_write(o->html, &ho, ss->timeline, in->snap, in->judged, in->order, ss->verdicts, ss->sv);
		if (err)
			ml_err("cannot write the HTML report '%s': %s", o->html, strerror(-err));
	}
	return err;
}

/*
 * The final report of a run whose first process exited after its interpreter's teardown began: what it found
 * while the job kept its memory (the report taken at the teardown with -c, the last one before it with -p),
 * with what the exit freed. A process that exits without one (a C program, a killed job) frees nothing on
 * the way out: what it held at exit is still in the table, and the final report collects it as usual.
 */
static bool exited_view(struct session *ss, bool final, const struct ml_snapshot *now, struct ml_exit_view *xv)
{
	if (!final || !ss->root.pid || !ss->py_teardown || target__alive(&ss->tgt) || !findings__have(ss->findings))
		return false;
	return findings__at_exit(ss->findings, now, xv) == 0;
}

/*
 * A report made while the processes live is the run's findings so far (not once the first process's
 * interpreter tears down: it frees what the job kept); their resident high-water marks too.
 */
static void keep_findings(struct session *ss, const struct ml_snapshot *snap, const struct ml_judgement *judged,
			  const size_t *order)
{
	size_t n = procevents__traced_pids(ss);
	int err = ss->py_teardown ? 0 : findings__keep(ss->findings, snap, judged, order, ss->seq);

	if (err)
		ml_notice("cannot keep report #%" PRIu64 " as the run's findings: %s", ss->seq, strerror(-err));
	for (size_t i = 0; i < n; i++) {
		uint64_t hwm;

		if (!ml_proc_hwm(ss->pids[i], &hwm))
			findings__rss_peak(ss->findings, ss->pids[i], hwm);
	}
}

static uint64_t row_site(void *ctx, const struct ml_row *r)
{
	return stackview__site(((struct session *)ctx)->sv, r);
}

/*
 * The step clock at this report (read as the records were counted: session.c's read_steps): what each stepping
 * process's layers hold at its count, for its per-step growth.
 */
static void count_steps(struct session *ss, const struct ml_snapshot *snap)
{
	if (!ss->steps)
		return;
	for (size_t i = 0; i < snap->nprocs; i++) {
		int64_t b[ML_LAYER_MAX];

		const struct tracee *t = procevents__tracee_of(ss, (int)snap->procs[i].tgid);

		/* what the interpreter's teardown frees is not the job's growth: the last live report's rates stand */
		if ((ss->py_teardown && snap->procs[i].tgid == ss->root.pid) || (t && t->py_exiting))
			continue;
		for (unsigned int l = 0; l < ML_LAYER_MAX; l++)
			b[l] = (int64_t)snap->procs[i].layers[l].bytes;
		steps__keep_bytes(ss->steps, snap->procs[i].tgid, b);
	}
	verdicts__steps(ss->verdicts, ss->steps);
}

/* Judge a report made while the processes live; the order and verdicts into *judged and *order. */
static int judge(struct session *ss, const struct ml_snapshot *snap, bool restate, const struct ml_judgement **judged,
		 const size_t **order)
{
	int err;

	verdicts__heap_window(ss->verdicts, budget__heap_window_ns(ss->budget));
	verdicts__tensor_phase(ss->verdicts, budget__tensor_phase_ns(ss->budget));
	verdicts__report_seq(ss->verdicts, ss->seq);
	err = verdicts__update(ss->verdicts, snap, ss->o->sort_bytes, restate ? ss->o->interval_s : 0, judged, order);
	if (err)
		return err;
	pyframes__trim(ss->root.py);
	judge_victims(ss, snap, *judged);
	verdicts__spread(ss->verdicts, snap, ss->o->sort_bytes, row_site, ss);
	keep_findings(ss, snap, *judged, *order);
	return 0;
}

/*
 * The free memory of the tool's own heaps back to the kernel after each report: the unwinding builder's and a
 * report's passing arrays (tens of MiB) otherwise stay resident once glibc has raised its mmap and trim
 * thresholds, and sixteen ranks' tool kept 150 MiB more from a minute on. 0.1-2.3 ms a report beside a torch loop.
 */
static void give_back_memory(void)
{
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);

	malloc_trim(0);
	ml_dbg("malloc_trim: %.1f ms", (double)(ml_clock_ns(CLOCK_MONOTONIC) - t0) / 1e6);
}

/* A report: collect, judge, write every output (and, the last time, the HTML page). 0 or a negative errno. */
static int session_report(struct session *ss, bool *final)
{
	const struct ml_opts *o = ss->o;
	const struct ml_snapshot *snap;
	const struct ml_judgement *judged = NULL;
	const size_t *order = NULL;
	struct ml_exit_view xv;
	struct report_in in;
	struct unwind_loading tables;
	struct ml_rank_view ranks = {0};
	int *traced = NULL, err;
	size_t ntraced;
	bool exited;

	heap_sweep(ss);
	find_copies(ss);
	if (o->count && ss->seq + 1 >= o->count)
		*final = true;
	/* The memory and heap walks before the records are counted: the C heap's size weights hold for them. */
	ntraced = fleet__sample_memory(procevents__fleet_of(ss), ss->ledger, 200.0 / o->max_overhead,
				       *final	       ? TRACEE_WALK_LAST
				       : ss->walk_soon ? TRACEE_WALK_NOW
						       : TRACEE_WALK_PACED,
				       &traced);
	weigh_sizes(ss);
	overhead__self_tick(ss->ov); /* own CPU from snapshot to snapshot, the times reports give: walks included */
	err = ledger__collect(ss->ledger, &snap);
	if (err) {
		ml_err("cannot collect the report: %s", strerror(-err));
		free(traced);
		return err;
	}
	if (ss->rss)
		rsspages__tune(ss->rss, snap); /* from the next report on: this one stands as collected */
	ss->seq++;
	count_steps(ss, snap);
	exited = exited_view(ss, *final, snap, &xv);
	err = exited ? 0 : judge(ss, snap, *final || ss->py_exit_due, &judged, &order);
	if (!err && ss->timeline && html_timeline__add(ss->timeline, snap, ss->seq))
		err = -ENOMEM;
	if (err) {
		ml_err("cannot %s: %s", ss->timeline ? "judge the report, or keep its timeline" : "judge the report",
		       strerror(-err));
		free(traced);
		return err;
	}
	if (ss->followers)
		followers__trim(ss->followers);
	if (exited)
		snap = &xv.s; /* the last live report's rows, shown after the exit */
	else if (diverge__report(ss, snap, traced, ntraced, &ranks))
		ml_notice("out of memory comparing the ranks: this report leaves them out");
	if (ss->env.uw) {
		unwinder__tick(ss->env.uw);
		unwinder__loading(ss->env.uw, &tables);
	}
	in = (struct report_in){.snap = snap,
				.judged = exited ? xv.j : judged,
				.order = exited ? xv.order : order,
				.seq = ss->seq,
				.final = *final,
				.duration_ns = snap->now_ns - ss->start_ns,
				.ov = ss->ov ? overhead__info(ss->ov) : NULL,
				.traced = traced,
				.ntraced = ntraced,
				.victims = ss->victims.v,
				.nvictims = ss->victims.n,
				.findings = ss->findings,
				.exited = exited ? &xv : NULL,
				.cuda_oom = ss->cuda_oom_due ? &ss->cuda_oom : NULL,
				.tables = ss->env.uw ? &tables : NULL,
				.steps = ss->steps,
				.ranks = exited ? NULL : &ranks};
	err = write_outputs(ss, &in);
	free(traced);
	if (!*final)
		give_back_memory();
	return err;
}

/*
 * The event sources, in the order their events are handled within one wake-up: the order matters (see
 * each handler). A handler is called at every wake-up, told whether its fd is ready and whether the final
 * report is due (which it may decide); it returns 0 to go on, LOOP_DONE once the final report is written,
 * or a negative errno that ends the run.
 */
#define LOOP_DONE 1
#define LOOP_SOURCES 8 /* loop_sources() */

/* SIGCHLD is the target held at its dynamic loader (-c); any other signal asks for the final report. */
static int on_signal(struct session *ss, bool ready, bool *final)
{
	struct signalfd_siginfo si;

	if (!ready)
		return 0;
	if (read(ss->sfd, &si, sizeof(si)) != sizeof(si)) {
		*final = true;
	} else if (si.ssi_signo == SIGCHLD) {
		procevents__loader_stopped(ss);
	} else {
		ml_info("signal %u: final report", si.ssi_signo);
		*final = true;
	}
	return 0;
}

static int on_target_exit(struct session *ss, bool ready, bool *final)
{
	if (ready && ss->root.pid) {
		ml_notice("pid %d exited", ss->root.pid);
		*final = true;
	}
	return 0;
}

#define OOM_RAISE_WAIT_MS 500

/*
 * A failed CUDA call in a PyTorch process is followed by the caching allocator's retry and then its raise,
 * whose message names the device: wait for it a little, so that the burst's one report has both.
 */
static void await_oom_raise(struct session *ss)
{
	uint64_t end = ml_clock_ns(CLOCK_MONOTONIC) + OOM_RAISE_WAIT_MS * 1000000ULL, now;

	while (ss->cuda_oom_due && ss->cuda_oom.failed && !ss->cuda_oom.raised &&
	       (now = ml_clock_ns(CLOCK_MONOTONIC)) < end)
		if (ring_buffer__poll(ss->proc_rb, (int)((end - now) / 1000000 + 1)) < 0)
			break;
}

/*
 * The first process's interpreter began to finalize, which frees what the job kept. A -c target waits
 * stopped (py_exit's SIGSTOP): a report is made now, and kept as the run's findings. A -p target is never
 * stopped, and a report would race its teardown: the last one before it stands. Reports made from here on
 * are not the findings (keep_findings).
 */
static int py_exit_report(struct session *ss, bool *final)
{
	uint64_t stops = READ_ONCE_U64(ss->skel->bss->py_exit_stops);
	int err = 0;

	ss->py_exit_due = false;
	if (stops == ss->py_exit_seen) {
		ss->py_teardown = true;
		return 0;
	}
	err = session_report(ss, final); /* its collect drains the stack ring: their code objects decoded as read */
	ss->py_teardown = true;
	ss->py_exit_seen = stops;
	kill(ss->root.pid, SIGCONT);
	if (err || *final)
		return err ? err : LOOP_DONE;
	return 0;
}

static int on_proc_events(struct session *ss, bool ready, bool *final)
{
	int err;

	/* Events the final report must include (an OOM kill, released pages) can come with the exit that ends
	 * the run: the ring is read before the final report too. */
	if (*final) {
		if (ss->proc_rb) {
			ss->closing = true;
			ring_buffer__consume(ss->proc_rb);
		}
		return 0;
	}
	/* Forks and execs come before the scan tick: a new child is probed before its first scan. */
	if (!ready)
		return 0;
	ring_buffer__consume(ss->proc_rb);
	if (ss->root_exec) {
		procevents__root_exec(ss);
		ss->root_exec = false;
	}
	if (ss->py_exit_due) /* the interpreter's teardown begins: what it is about to free is the findings */
		return py_exit_report(ss, final);
	if (ss->oom_report) { /* before the victim's exit takes its records away */
		await_oom_raise(ss);
		ss->oom_report = false;
		err = session_report(ss, final);
		if (err || *final)
			return err ? err : LOOP_DONE;
	}
	return 0;
}

static int on_budget_timer(struct session *ss, bool ready, bool *final)
{
	if (ready && !*final)
		budget__timer(ss->budget, budget_env_of(ss));
	return 0;
}

static int on_heap_timer(struct session *ss, bool ready, bool *final)
{
	if (ready && !*final)
		budget__heap_timer(ss->budget, budget_env_of(ss));
	return 0;
}

static int on_step_timer(struct session *ss, bool ready, bool *final)
{
	if (ready && !*final)
		budget__step_timer(ss->budget, budget_env_of(ss));
	return 0;
}

static int on_scan_timer(struct session *ss, bool ready, bool *final)
{
	if (ready && !*final)
		session_scan(ss);
	return 0;
}

/*
 * -c: a target in a burst of dlopens (an import of many extension modules) stops at each of them. A report in
 * between (seconds, with a million stacks) would hold it stopped that long every time: while stops keep
 * coming within LD_BURST_MS of each other, they are handled first, for one report interval at most.
 */
#define LD_BURST_MS 100

static void loader_burst(struct session *ss, bool *final)
{
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC), end = now + (uint64_t)(ss->o->interval_s * 1e9);
	struct pollfd p = {.fd = ss->sfd, .events = POLLIN};

	while (!*final && ss->ld_stop && ss->ld_last_ns && now - ss->ld_last_ns < LD_BURST_MS * 1000000ULL &&
	       now < end) {
		if (poll(&p, 1, LD_BURST_MS) <= 0)
			break;
		on_signal(ss, true, final);
		now = ml_clock_ns(CLOCK_MONOTONIC);
	}
}

/* Last: the report (the final one too) sees what every other source changed. */
static int on_report_tick(struct session *ss, bool ready, bool *final)
{
	uint64_t expirations;
	int err;

	if (!ready && !*final)
		return 0;
	loader_burst(ss, final);
	if (ready && read(ss->tick_fd, &expirations, sizeof(expirations)) < 0)
		expirations = 0;
	err = session_report(ss, final);
	if (err || *final)
		return err ? err : LOOP_DONE;
	return 0;
}

/* An event source: its fd, and what is done when it is ready (see LOOP_DONE). */
struct loop_source {
	int fd;
	int (*handle)(struct session *ss, bool ready, bool *final);
};

/*
 * The sources in the order they are handled. Their fds are read again at every wake-up: one may come or go
 * (-1, which poll ignores) while the run goes on.
 */
static void loop_sources(struct session *ss, struct loop_source src[LOOP_SOURCES])
{
	const struct loop_source all[LOOP_SOURCES] = {
	    {ss->sfd, on_signal},
	    {ss->tgt.pidfd, on_target_exit},
	    {ss->proc_rb ? ring_buffer__epoll_fd(ss->proc_rb) : -1, on_proc_events},
	    {budget__timer_fd(ss->budget), on_budget_timer},
	    {budget__heap_timer_fd(ss->budget), on_heap_timer},
	    {budget__step_timer_fd(ss->budget), on_step_timer},
	    {ss->scan_fd, on_scan_timer},
	    {ss->tick_fd, on_report_tick},
	};

	memcpy(src, all, sizeof(all));
}

int session__arm_timer(int fd, double secs)
{
	struct itimerspec its = {};

	ml_timespec(&its.it_value, secs);
	its.it_interval = its.it_value;
	return timerfd_settime(fd, 0, &its, NULL) ? -errno : 0;
}

int session__loop(struct session *ss)
{
	for (;;) {
		struct loop_source src[LOOP_SOURCES];
		struct pollfd all[LOOP_SOURCES];
		bool final = false;
		int err;

		loop_sources(ss, src);
		for (size_t i = 0; i < LOOP_SOURCES; i++)
			all[i] = (struct pollfd){.fd = src[i].fd, .events = POLLIN};
		if (poll(all, LOOP_SOURCES, -1) < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			ml_err("cannot wait for events: %s", strerror(-err));
			return err;
		}
		for (size_t i = 0; i < LOOP_SOURCES; i++) {
			err = src[i].handle(ss, all[i].revents != 0, &final);
			if (err)
				return err == LOOP_DONE ? 0 : err;
		}
	}
}
