/*
 * A run of memleak-ai: sets up the BPF object, the traced processes (one model, struct tracee, for the first
 * one and every follower), the collectors and the outputs, then runs the event loop: signals, the target's
 * exit, forks and execs, library rescans, and every interval a report (collect, judge, write).
 */
#define _GNU_SOURCE
#include "session/session.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "attach/planahead.h"
#include "attach/probes.h"
#include "attach/uprobe_multi.h"
#include "collect/ledger.h"
#include "collect/rsspages.h"
#include "collect/sizeweights.h"
#include "collect/slots.h"
#include "collect/stackstore.h"
#include "collect/steps.h"
#include "judge/findings.h"
#include "judge/ranks.h"
#include "judge/verdict.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "python/pyframes.h"
#include "report/html.h"
#include "report/metrics.h"
#include "report/push.h"
#include "report/report.h"
#include "report/stackview.h"
#include "session/bgobj.h"
#include "session/budget.h"
#include "session/copies.h"
#include "session/fleet.h"
#include "session/follow.h"
#include "session/overhead.h"
#include "session/procevents.h"
#include "session/select.h"
#include "session/state.h"
#include "session/target.h"
#include "session/tracee.h"
#include "symbolize/symbolizer.h"
#include "unwind/unwind.h"
#include "memleak.skel.h"

/* Test hook: widen the window between attaching and checking that the target still lives. */
static void test_attach_delay(void)
{
	const char *s = getenv("MEMLEAK_AI_TEST_ATTACH_DELAY_MS");
	uint64_t ms;

	if (s && ml_parse_u64(s, 0, 60000, &ms) == 0 && ms)
		usleep((useconds_t)(ms * 1000));
}

/* Where a traced process's frames resolve, the first one's or a follower's. */
static int resolver(void *ctx, int tgid, struct ml_resolver *out)
{
	const struct tracee *t = procevents__tracee_of(ctx, tgid);

	if (!t)
		return -ENOENT;
	tracee__resolver(t, out);
	return 0;
}

/* The first process: its probes, Python decoder and unwinding tables before anything else runs, then its symbolizer. */
static int attach_root(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	struct probes_opts po = procevents__root_probes(ss);
	int n = tracee__attach(&ss->root, &ss->env, &po), err;

	if (n == -ESRCH || (n == -ENOENT && !target__alive(&ss->tgt))) {
		ml_err("pid %d exited during attach", ss->root.pid);
		return -ESRCH;
	}
	if (n < 0) {
		ml_err("cannot attach to pid %d: %s", ss->root.pid, strerror(-n));
		return n;
	}
	if ((o->layers & (1U << ML_LAYER_LIBC)) && !(probes__active_layers(ss->root.probes) & (1U << ML_LAYER_LIBC))) {
		/* Its files cannot be opened once it is gone: that is an exit, not a missing C library. */
		if (!target__alive(&ss->tgt)) {
			ml_err("pid %d exited during attach", ss->root.pid);
			return -ESRCH;
		}
		ml_err("pid %d has no C library with malloc and free to probe (a static binary without symbols?)",
		       ss->root.pid);
		return -ENOENT;
	}
	err = tracee__symbolize(&ss->root, &ss->env);
	if (err)
		ml_err("cannot start the symbolizer: %s", strerror(-err));
	tracee__label(&ss->root, NULL);
	return err;
}

/*
 * The step clock, read as the ledger counts the records: a report's steps and bytes are of one moment (read
 * after the pass over the records, the count ran 6 steps ahead of the bytes under ASan on a loaded machine). A
 * failed read leaves the counts of the last: a report is never lost to it.
 */
static void read_steps(void *ctx, uint64_t now_ns, double elapsed_s)
{
	struct session *ss = ctx;
	int err = steps__read(ss->steps, elapsed_s, now_ns, budget__step_on_ns(ss->budget, now_ns));

	if (err)
		ml_notice("cannot read the step clock: %s", strerror(-err));
}

/* The collectors: stack store, ledger, verdicts, the HTML timeline and the stack view. */
static int open_collectors(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	const char *what = "cannot set up the collectors";
	int err;

	err = stackstore__new(&ss->stacks);
	if (err)
		goto fail;
	stackstore__on_new(ss->stacks, session__learn_stack, ss);
	err = stackstore__attach(ss->stacks, bpf_map__fd(ss->skel->maps.stack_events));
	if (err) {
		what = "cannot read the stacks' ring buffer";
		goto fail;
	}
	err = sizeweights__new(&ss->sizes);
	if (!err)
		err = ledger__new(ss->skel,
				  &(struct ledger_opts){.tgid = ss->root.pid,
							.min_age_ns = (uint64_t)(o->min_age_s * 1e9),
							.stacks = ss->stacks,
							.sizes = ss->sizes,
							.slots = ss->slots},
				  &ss->ledger);
	if (err) {
		what = "cannot map the allocation table";
		goto fail;
	}
	err = verdicts__new(&ss->verdicts);
	if (!err && ml_opts_step(o))
		err = steps__new(bpf_map__fd(ss->skel->maps.steps), ml_opts_step(o), &ss->steps);
	if (!err)
		err = findings__new(&ss->findings);
	if (!err && o->html)
		err = html_timeline__new(&ss->timeline);
	if (!err)
		err = stackview__new(ss->ledger, resolver, ss, &ss->sv);
	if (err)
		goto fail;
	ledger__set_canon(ss->ledger, stackview__canon, ss->sv);
	if (ss->steps)
		ledger__on_collect(ss->ledger, read_steps, ss);
	return 0;
fail:
	ml_err("%s: %s", what, strerror(-err));
	return err;
}

/* The rss layer: without its tracepoints the run goes on without it. */
static void start_rss(struct session *ss)
{
	struct rsspages_opts ro = {.max_records = ss->o->max_allocs / 4, .max_pages_per_s = RSS_MAX_RATE};
	const char *t = getenv("MEMLEAK_AI_TEST_RSS_MAX_RECORDS"); /* test hooks: sampling without GiBs, */
	const char *rate = getenv("MEMLEAK_AI_TEST_RSS_MAX_RATE"); /* exact counts of large bursts */
	uint64_t v;
	int err;

	if (t)
		ml_parse_u64(t, 1, UINT32_MAX, &ro.max_records);
	if (rate && !ml_parse_u64(rate, 1, UINT32_MAX, &v))
		ro.max_pages_per_s = (double)v;
	err = rsspages__new(ss->skel, ss->ledger, &ro, &ss->rss);
	if (err) {
		ml_notice("the rss layer cannot start (its tracepoints): %s", strerror(-err));
		ss->layers &= ~(1U << ML_LAYER_RSS);
		return;
	}
	overhead__set_rss(ss->ov, rsspages__shed, ss->rss);
	if (getenv("MEMLEAK_AI_TEST_RSS_NO_FAULTS")) /* test hook: as after the budget's last step */
		rsspages__shed(ss->rss, true);
}

/* The outputs: one reporter per output, after the collectors. */
static int open_outputs(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	const char *paths[N_OUTPUTS - 1] = {o->json, o->pprof};
	const enum ml_format fmts[N_OUTPUTS - 1] = {ML_FMT_JSON, ML_FMT_PPROF};
	int err;

	err = open_collectors(ss);
	if (err)
		return err;
	if (ss->layers & (1U << ML_LAYER_RSS))
		start_rss(ss);
	err = reporter__new(
	    ss->out,
	    &(struct report_opts){.format = o->format, .top = o->top, .pid = ss->root.pid, .native = o->native}, ss->sv,
	    &ss->reps[0]);
	for (int i = 0; !err && i < N_OUTPUTS - 1; i++) {
		if (!paths[i])
			continue;
		err = ml_open_output(paths[i], &ss->extra_out[i]);
		if (err) {
			ml_err("cannot write output file '%s': %s", paths[i], strerror(-err));
			return err;
		}
		err = reporter__new(ss->extra_out[i],
				    &(struct report_opts){.format = fmts[i], .top = o->top, .pid = ss->root.pid},
				    ss->sv, &ss->reps[i + 1]);
	}
	if (err)
		ml_err("cannot set up the reports: %s", strerror(-err));
	return err;
}

/* -o, then what to trace: the processes a whole-node selector picks, a pid (-p) or a command held before it runs. */
static int open_target(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	int err;

	err = ml_check_system();
	if (err)
		return err;
	err = ml_open_output(o->output, &ss->out);
	if (err) {
		ml_err("cannot write output file '%s': %s", o->output, strerror(-err));
		return err;
	}
	if (!ml_opts_node(o)) {
		err = o->pid ? target__open_pid(&ss->tgt, o->pid) : target__spawn(&ss->tgt, o->cmd_argv);
		if (!err)
			ss->root.pid = ss->tgt.pid;
		return err;
	}
	err = selector__new(&(struct selector_opts){.match = o->match ? &o->match_re : NULL,
						    .cgroup = o->cgroup,
						    .all_python = o->all_python,
						    .self = getpid()},
			    &ss->sel);
	if (err && o->cgroup && err != -ENOMEM)
		ml_err("--cgroup %s: neither a cgroup directory (with a cgroup.procs) nor a cgroup path as "
		       "/proc/PID/cgroup shows one: %s",
		       o->cgroup, strerror(-err));
	else if (err)
		ml_err("cannot select the processes to trace: %s", strerror(-err));
	return err;
}

/* --push and --pprof-dir: the directory made, the sender thread started. */
static int open_pusher(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	int err;

	err = o->pprof_dir ? pusher__make_dir(o->pprof_dir) : 0;
	if (err == -ENOTDIR)
		ml_err("--pprof-dir %s: not a directory", o->pprof_dir);
	else if (err)
		ml_err("--pprof-dir %s: cannot create it: %s", o->pprof_dir, strerror(-err));
	if (err)
		return err;
	err = pusher__new(&(struct pusher_opts){.url = o->push_url,
						.tenant = o->push_tenant,
						.service = o->push_service,
						.token = getenv("MEMLEAK_AI_PUSH_TOKEN"),
						.user = getenv("MEMLEAK_AI_PUSH_USER"),
						.password = getenv("MEMLEAK_AI_PUSH_PASSWORD"),
						.dir = o->pprof_dir,
						.keep = o->pprof_keep,
						.max_age_s = o->pprof_max_age_s},
			  &ss->push);
	if (err)
		ml_err("%s: cannot start: %s", o->push_url ? "--push" : "--pprof-dir", strerror(-err));
	return err;
}

/* The metrics server and the pusher, whose threads take no signal: SIGINT and SIGTERM are the event loop's. */
static int open_servers(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	struct ml_listen addr;
	const char *why;
	sigset_t all, old;
	int err = 0;

	if (o->metrics_listen) {
		err = ml_parse_listen(o->metrics_listen, &addr, &why);
		if (err) {
			ml_err("--metrics-listen '%s': %s", o->metrics_listen, why ? why : strerror(-err));
			return err;
		}
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (o->metrics_listen) {
		err = metrics_server__new(&addr, &ss->metrics);
		if (err)
			ml_err("--metrics-listen %s: cannot listen: %s", o->metrics_listen, strerror(-err));
	}
	if (!err && (o->push_url || o->pprof_dir))
		err = open_pusher(ss);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err && ss->metrics)
		ml_notice("serving Prometheus metrics on port %d (/metrics)", metrics_server__port(ss->metrics));
	return err;
}

/*
 * The budget, and the background verification of its heap-growth and USDT programs while the probes are
 * attached; calib is how the start of the probe-hit timing went.
 */
static int start_budget(struct session *ss, int calib)
{
	const struct ml_opts *o = ss->o;
	int err;

	err = budget__new(ss->skel, o->max_overhead, &ss->budget);
	if (!err && (o->layers & (1U << ML_LAYER_TORCH_CUDA)) &&
	    !(ss->usdt_obj = bgobj__start(ss->skel, bgobj__usdt_progs)))
		err = -ENOMEM;
	if (err) {
		ml_err("cannot set up the overhead budget: %s", strerror(-err));
		return err;
	}
	bgobj__count_in(ss->usdt_obj, ss->ov);
	calib = calib ? calib : overhead__bind(ss->ov, ss->skel);
	if (calib)
		ml_info("cannot time a probe hit (%s): counting 1 us a hit", strerror(-calib));
	return 0;
}

/* The unwinding tables' maps and their builder (--unwind tables). */
static int open_unwinder(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	int err;

	ss->env = (struct tracee_env){.skel = ss->skel, .python = o->python, .debug_dir = o->debug_dir};
	if (!o->unwind_tables)
		return 0;
	err = unwinder__new(
	    ss->skel,
	    &(struct unwind_opts){
		.debug_dir = o->debug_dir, .mem = o->unwind_mem, .background = true, .sync_ms = UNWIND_SYNC_MS},
	    &ss->env.uw);
	if (err)
		ml_err("cannot map the unwinding tables: %s", strerror(-err));
	return err;
}

/* Everything up to the target's release: BPF object, the first process, collectors, outputs, calibration. */
static int session_open(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	struct planahead *ahead = NULL;
	int err, n;

	err = open_target(ss);
	if (err)
		return err;
	ml_protect_from_oom(); /* after -c's fork: the command keeps its own score */
	err = open_servers(ss);
	if (err)
		return err;
	/* MEMLEAK_AI_NO_UPROBE_MULTI: the tests' way to run the single-probe path kernels before 6.6 take */
	ss->multi = !getenv("MEMLEAK_AI_NO_UPROBE_MULTI") && ml_uprobe_multi_supported();
	ml_info("uprobe_multi links %s", ss->multi ? "supported: one link per program and library" : "not supported");
	err = overhead__new(o->max_overhead, &ss->ov);
	if (err) {
		ml_err("cannot set up the overhead budget: %s", strerror(-err));
		return err;
	}
	/* In the background, while the BPF object is verified and the probes attached: nothing waits for it but
	 * the budget's first decision. */
	n = overhead__calibrate_start(ss->ov, ss->multi);
	/* -p: the running process's objects planned meanwhile (a failure only leaves them to the attach). */
	if (o->pid &&
	    planahead__start(&(struct plan_opts){ss->root.pid, &ss->rows, ss->layers, o->torch_raw, ml_opts_step(o)},
			     &ahead))
		ahead = NULL;
	err = session__load_bpf(o, ss->multi, &ss->skel);
	/* The table's first level before any probe: a record with nowhere to go would be dropped. */
	if (!err && ((err = slots__new(ss->skel, ledger_table_slots(o->max_allocs), &ss->slots)) ||
		     (err = slots__watch(ss->slots))))
		ml_err("cannot make the allocation table: %s", strerror(-err));
	err = err ? err : start_budget(ss, n);
	err = err ? err : open_unwinder(ss);
	planahead__join(ahead);
	if (err)
		return err;
	err = ss->root.pid ? attach_root(ss) : 0;
	session__learn_with(ss, ss->root.py);
	err = err ? err : open_outputs(ss);
	if (err)
		return err;
	return 0;
}

/*
 * -c: release the command, held before its first instruction, and probe its image; a dynamically linked one
 * runs to its loader's two reports (before and after mapping its libraries), each probed before any library
 * code runs. The loader's stop stays on for the libraries it dlopens later.
 */
static int start_command(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	struct ml_maps maps = {};
	struct bpf_link *hold = NULL;
	int err, n;

	err = target__release(&ss->tgt, o->cmd_argv[0]);
	if (err)
		return err;
	/* After -c's own exec (that one is the start, not a new image to probe again), before it runs. */
	if (o->follow && (err = procevents__follow(ss)))
		return err;
	n = tracee__sync(&ss->root, &ss->env);
	if (n >= 0 && ml_maps__read(ss->root.pid, &maps) == 0) {
		if ((o->layers & (1U << ML_LAYER_LIBC)) && probes__libc_missing(ss->root.probes, &maps)) {
			ml_err(
			    "'%s' has no C library with malloc and free to probe (a static binary without symbols?); "
			    "not started",
			    o->cmd_argv[0]);
			kill(ss->root.pid, SIGKILL); /* held before its first instruction: it never ran */
			n = -ENOENT;
		} else {
			hold = probes__loader_stop(ss->root.probes, &maps);
		}
	}
	ml_maps__clear(&maps);
	/* Synced in full, not as held: every stack needs the tables of the image and the libraries it starts with. */
	for (int stops = 0; hold && n >= 0 && stops < 2; stops++) {
		if (target__run_until_stop(&ss->tgt, 2000))
			break;
		n = tracee__sync(&ss->root, &ss->env);
	}
	ss->ld_stop = hold;
	ss->ld_stops_seen = READ_ONCE_U64(ss->skel->bss->ldso_stops);
	/* A library mapped from now on is probed (by a scan or at the stop) before its code runs. */
	probes__held(ss->root.probes, hold != NULL);
	tracee__relabel(&ss->root); /* the command's own name and environment, no longer memleak-ai's */
	if (n == -ENOENT)
		return n;
	target__resume(&ss->tgt);
	if (n < 0)
		ml_err("cannot attach to pid %d: %s", ss->root.pid, strerror(-n));
	return n < 0 ? n : 0;
}

/* What the first process's events on the ring drive (they need the ring: --follow or the rss layer). */
static void watch_target(struct session *ss)
{
	if (!ss->root.pid || !ss->proc_rb)
		return;
	/* -c: the target stops at its interpreter's teardown until the findings are taken. */
	if (ss->tgt.spawned)
		ss->skel->bss->py_exit_stop_tgid = (__u32)ss->root.pid;
	/* -p: rescans driven by its loader's reports, which arrive with the fork and exec events (--follow). */
	else
		tracee__watch_loader(&ss->root);
}

/* The target runs: following, the signals and timers of the event loop, and the "attached" notice. */
static int session_start(struct session *ss)
{
	const struct ml_opts *o = ss->o;
	unsigned int nf, nobj, missing;
	sigset_t mask;
	int err;

	test_attach_delay();
	if (ss->sel) {
		err = procevents__follow(ss);
		if (err)
			return err;
		err = selector__scan(ss->sel, procevents__node_add, ss);
		if (err < 0) {
			ml_err("cannot look for processes to trace: %s", strerror(-err));
			return err;
		}
	} else if (ss->tgt.spawned) {
		err = start_command(ss);
		if (err)
			return err;
	} else if (!target__alive(&ss->tgt)) {
		ml_err("pid %d exited during attach", ss->root.pid);
		return -ESRCH;
	} else if (o->follow && (err = procevents__follow(ss))) {
		return err;
	}
	/* The rss layer's large releases come on the same ring, --follow or not. */
	if (ss->rss && (err = procevents__open_ring(ss)))
		ml_notice("the rss layer cannot read its events: %s", strerror(-err));
	watch_target(ss);
	/* Taken from here on by the event loop: a signal right after the "attached" notice gets its final report. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	if (ss->ld_stop)
		sigaddset(&mask, SIGCHLD); /* the -c target stopped at a dlopen */
	sigprocmask(SIG_BLOCK, &mask, NULL);
	ss->sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (ss->sel) {
		nf = nobj = 0;
		missing = 0;
		ml_notice("watching the node: %zu processes traced now (%s), more as they start",
			  followers__count(ss->followers),
			  o->match	  ? (o->cgroup ? "--match in --cgroup" : "--match")
			  : o->all_python ? (o->cgroup ? "--all-python in --cgroup" : "--all-python")
					  : "--cgroup");
	} else {
		nobj = probes__n_probed(ss->root.probes, &nf);
		missing = o->layers & ~probes__active_layers(ss->root.probes) & ((1U << ML_LAYER_MAX) - 1) &
			  ~(1U << ML_LAYER_CUDA_MAP) & ~(1U << ML_LAYER_RSS) &
			  ~(o->torch_raw ? 0 : 1U << ML_LAYER_TORCH_HOST); /* probed only with --torch-raw-alloc */
		ml_notice("attached to pid %d: %u probes in %u objects", ss->root.pid, nf, nobj);
		probes__started(ss->root.probes);
	}
	for (unsigned int l = 0; l < ML_LAYER_MAX; l++)
		if (missing & (1U << l) && strcmp(ml_layer_name(l), "unknown"))
			ml_info("layer %s not active yet: will attach when its library is loaded", ml_layer_name(l));
	ss->start_ns = ml_clock_ns(CLOCK_MONOTONIC);
	nf = (unsigned int)procevents__traced_pids(ss);
	overhead__start(ss->ov, ss->pids, nf);
	overhead__set_tensor_sampling(ss->ov, ss->multi);
	overhead__set_step_sampling(ss->ov, ss->multi);
	if (ss->metrics) /* the processes, at zero, until the first report */
		fleet__publish_metrics(ss->metrics, procevents__fleet_of(ss), NULL, NULL, NULL, NULL, ss->layers,
				       overhead__info(ss->ov), 0);
	ss->tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	ss->scan_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (ss->sfd < 0 || ss->tick_fd < 0 || ss->scan_fd < 0 || session__arm_timer(ss->tick_fd, o->interval_s) ||
	    session__arm_timer(ss->scan_fd, FAST_SCAN_S)) {
		err = -errno;
		ml_err("cannot set up the event loop: %s", strerror(-err));
		return err;
	}
	return 0;
}

/* What the budget's actions change. */
/* Undo everything; ok is whether the run went well. Returns the exit status. */
static int session_close(struct session *ss, bool ok)
{
	if (!ok && ss->tgt.spawned && ss->tgt.stopped)
		kill(ss->tgt.pid, SIGKILL); /* -c: held before its first instruction, it never ran */
	if (ss->ld_stop) {
		ml_info("pid %d was held %.0f ms at %" PRIu64
			" reports of its dynamic loader (dlopen), its new libraries "
			"probed before their code ran",
			ss->root.pid, (double)ss->ld_held_ns / 1e6, ss->ld_handled);
		bpf_link__destroy(ss->ld_stop);
		/* A dlopen stop asked for and not handled yet: let it go on. */
		if (READ_ONCE_U64(ss->skel->bss->ldso_stops) != ss->ld_stops_seen && target__alive(&ss->tgt))
			kill(ss->tgt.pid, SIGCONT);
	}
	/* A stop at the interpreter's teardown asked for and not handled yet: let it go on. */
	if (ss->skel && READ_ONCE_U64(ss->skel->bss->py_exit_stops) != ss->py_exit_seen && target__alive(&ss->tgt))
		kill(ss->tgt.pid, SIGCONT);
	for (int i = 0; i < N_OUTPUTS; i++)
		reporter__free(ss->reps[i]);
	for (int i = 0; i < N_OUTPUTS - 1; i++)
		if (ss->extra_out[i] && fclose(ss->extra_out[i])) {
			ml_err("cannot write output file '%s': %s", i ? ss->o->pprof : ss->o->json, strerror(errno));
			ok = false;
		}
	stackview__free(ss->sv);
	ring_buffer__free(ss->proc_rb);
	copies__free(ss->copies);
	rsspages__free(ss->rss);
	budget__free(ss->budget);
	bpf_link__destroy(ss->fork_link);
	bpf_link__destroy(ss->exec_link);
	bpf_link__destroy(ss->oom_link);
	followers__free(ss->followers);
	selector__free(ss->sel);
	metrics_server__free(ss->metrics);
	if (ss->push) {
		struct push_stats st;

		pusher__free_after(ss->push, &st);
		if (ss->o->push_url)
			ml_notice("--push: %" PRIu64 " profiles sent, %" PRIu64 " refused or not answered, %" PRIu64
				  " dropped unsent (a full queue, or left at exit)",
				  st.sent, st.failed, st.dropped);
	}
	overhead__free(ss->ov);
	verdicts__free(ss->verdicts);
	steps__free(ss->steps);
	ranks__free(ss->ranks);
	free(ss->rank_rows);
	findings__free(ss->findings);
	victims__clear(&ss->victims);
	html_timeline__free(ss->timeline);
	ledger__free(ss->ledger);
	slots__free(ss->slots);
	sizeweights__free(ss->sizes);
	stackstore__free(ss->stacks); /* its reader thread first: it may be learning with the first process's decoder */
	tracee__release(&ss->root, &ss->env);
	pthread_mutex_destroy(&ss->learn_lock);
	rowcache__clear(&ss->rows);
	bgobj__free(ss->usdt_obj); /* after every link to its programs */
	unwinder__free(ss->env.uw);
	memleak_bpf__destroy(ss->skel);
	target__close(&ss->tgt);
	free(ss->pids);
	if (ss->sfd >= 0)
		close(ss->sfd);
	if (ss->tick_fd >= 0)
		close(ss->tick_fd);
	if (ss->scan_fd >= 0)
		close(ss->scan_fd);
	if (ss->out && ss->out != stdout && fclose(ss->out)) {
		ml_err("cannot write output file '%s': %s", ss->o->output, strerror(errno));
		ok = false;
	}
	return ok ? 0 : 1;
}

int session__run(const struct ml_opts *o)
{
	struct session ss = {.o = o,
			     .layers = o->layers,
			     .tgt = {.pidfd = -1, .go_fd = -1, .status_fd = -1},
			     .root = {.pidfd = -1},
			     .learn_lock = PTHREAD_MUTEX_INITIALIZER,
			     .sfd = -1,
			     .tick_fd = -1,
			     .scan_fd = -1};
	int err;

	bool oom;
	int rc;

	/* Each step printed its failure's one line: nothing more to say here. */
	err = session_open(&ss);
	if (!err)
		err = session_start(&ss);
	if (!err)
		err = session__loop(&ss);
	oom = ss.tgt.spawned && ss.root.oom.killed;
	rc = session_close(&ss, err == 0);
	/* -c: a command the OOM killer ended makes the run exit as a shell reports it (128 + SIGKILL). */
	return rc == 0 && oom ? 128 + SIGKILL : rc;
}
