/* memleak-ai: wires options, target, probes, ledger, symbolizer and reports into the tracing loop. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib/clock.h"
#include "attach/allocators.h"
#include "collect/ledger.h"
#include "lib/log.h"
#include "session/opts.h"
#include "attach/probes.h"
#include "lib/procmaps.h"
#include "session/follow.h"
#include "session/overhead.h"
#include "python/pyframes.h"
#include "collect/stackstore.h"
#include "report/stackview.h"
#include "report/report.h"
#include "symbolize/symbolizer.h"
#include "unwind/unwind.h"
#include "session/target.h"
#include "attach/uprobe_multi.h"
#include "judge/verdict.h"
#include "report/html.h"
#include "memleak.skel.h"


#define READ_ONCE_U64(x) ((uint64_t)__atomic_load_n(&(x), __ATOMIC_RELAXED))

#define FAST_SCAN_S 0.05
#define FAST_SCANS 40

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if ((level == LIBBPF_DEBUG && ml_log_level < 2) || (level == LIBBPF_INFO && ml_log_level < 2) ||
	    (level == LIBBPF_WARN && ml_log_level < 1))
		return 0;
	return vfprintf(stderr, fmt, args);
}

static FILE *open_output(const char *path)
{
	FILE *f;
	int fd;

	if (!path)
		return stdout;
	/* Reports can name a user's code paths: readable by the owner only; never follow a planted symlink. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		ml_err("cannot write output file '%s': %s", path, strerror(errno));
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		ml_err("cannot write output file '%s': %s", path, strerror(errno));
		close(fd);
	}
	return f;
}

static int load_bpf(const struct ml_opts *o, bool multi, struct memleak_bpf **out)
{
	struct memleak_bpf *skel;
	int err;

	skel = memleak_bpf__open();
	if (!skel) {
		err = -errno;
		ml_err("cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	for (unsigned int i = 0; i < ml_allocators_n; i++)
		memcpy((void *)&skel->rodata->specs[i], &ml_allocators[i].spec, sizeof(struct ml_spec));
	skel->rodata->min_size = o->min_size;
	skel->rodata->max_size = o->max_size;
	skel->rodata->table_mask = ledger_table_slots(o->max_allocs) - 1;
	bpf_map__set_max_entries(skel->maps.table, ledger_table_slots(o->max_allocs));
	bpf_map__set_max_entries(skel->maps.stacks_sent, o->max_stacks);
	skel->rodata->unwind_tables = o->unwind_tables;
	/* A budget of 100% never switches to heap-growth mode: its program need not be verified (seconds). */
	if (o->max_overhead >= 100)
		bpf_program__set_autoload(skel->progs.heap_exit, false);
	if (o->unwind_tables) {
		uint32_t rows, index;

		unwind_capacity(o->unwind_mem, &rows, &index);
		bpf_map__set_max_entries(skel->maps.urows, rows);
		bpf_map__set_max_entries(skel->maps.uindex, index);
	}
	if (multi) {
		bpf_program__set_expected_attach_type(skel->progs.alloc_enter, ML_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.alloc_exit, ML_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.free_enter, ML_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.free_exit, ML_BPF_TRACE_UPROBE_MULTI);
	}
	err = memleak_bpf__load(skel);
	if (err) {
		ml_err("cannot load the BPF programs: %s (run with -v for the verifier's log)", strerror(-err));
		memleak_bpf__destroy(skel);
		return err;
	}
	*out = skel;
	return 0;
}

/* Test hook: widen the window between attaching and checking that the target still lives. */
static void test_attach_delay(void)
{
	const char *s = getenv("MEMLEAK_AI_TEST_ATTACH_DELAY_MS");
	uint64_t ms;

	if (s && ml_parse_u64(s, 0, 60000, &ms) == 0 && ms)
		usleep((useconds_t)(ms * 1000));
}

/* What the ring buffer's and stack view's callbacks need of the main loop. */
struct session {
	struct memleak_bpf *skel;
	const struct ml_opts *o;
	int root;
	bool multi;
	struct probes **probes;
	struct pyframes **py;
	struct symbolizer **sym;
	struct unwinder *uw;
	struct followers *followers;
	struct ledger *ledger;
	bool root_exec; /* the first process ran exec (once or more) since the events were last read */
	unsigned int layers;   /* as --layers, less libc once in heap-growth mode */
	struct overhead *ov;
	struct bpf_link *heap_link; /* the system-call tracepoint of heap-growth mode, once on */
	struct bpf_link *fork_link, *exec_link; /* --follow's tracepoints */
	struct bpf_link *ld_stop; /* -c: stops the target at each report of its dynamic loader (dlopen) */
	uint64_t ld_stops_seen;   /* the BPF side's count of those stops when the last one was handled */
};

/*
 * -c: the target stopped at its dynamic loader's report of a dlopen (before the new library's code runs):
 * probe what it mapped, then let it go on. A stop that memleak-ai did not ask for is left alone.
 */
static void loader_stopped(struct session *ss)
{
	siginfo_t si = {};
	uint64_t asked;
	int n;

	if (waitid(P_PID, (id_t)ss->root, &si, WSTOPPED | WNOHANG) || si.si_pid != ss->root)
		return;
	asked = READ_ONCE_U64(ss->skel->bss->ldso_stops);
	if (asked == ss->ld_stops_seen)
		return;
	ss->ld_stops_seen = asked;
	n = ml_process_sync(ss->root, *ss->probes, *ss->py, ss->uw, *ss->sym);
	if (n < 0 && n != -ESRCH && n != -ENOENT)
		ml_notice("probing pid %d's new libraries failed: %s", ss->root, strerror(-n));
	kill(ss->root, SIGCONT);
}

static int resolver(void *ctx, int tgid, struct ml_resolver *out)
{
	struct session *ss = ctx;

	if (tgid == ss->root) {
		out->sym = *ss->sym;
		out->py = *ss->py;
		out->heap = probes__heap(*ss->probes);
		return 0;
	}
	return ss->followers ? followers__resolver(ss->followers, tgid, out) : -ENOENT;
}

/*
 * The first process ran exec: its new image gets new probes, its Python interpreter (if any) is looked for
 * anew and its program break starts over. The new links go on before the old ones come off: both run the
 * same programs on the same per-thread state, so a call in flight across the swap keeps its return. (Links
 * made for the old image do not reliably fire in the new one: after an exec by a thread other than the
 * leader the task they were made for is gone, and they were seen to stop after some other execs too.)
 */
static void root_exec(struct session *ss)
{
	struct probes_opts po = { .pid = ss->root, .layers = ss->layers, .torch_raw = ss->o->torch_raw,
				  .multi = ss->multi };
	int err;

	if (ss->heap_link)
		ml_heap_track(ss->skel, ss->root);
	err = ml_process_reprobe(ss->skel, &po, ss->o->python, ss->probes, ss->py, ss->uw, *ss->sym);
	if (err && err != -ESRCH && err != -ENOENT) {
		ml_notice("pid %d ran exec; probing its new image failed: %s", ss->root, strerror(-err));
		return;
	}
	if (!err) {
		probes__started(*ss->probes);
		ml_info("pid %d ran exec: its new image is probed", ss->root);
	}
}

static void follower_gone(void *ctx, int pid)
{
	struct session *ss = ctx;

	ledger__forget(ss->ledger, pid, UINT64_MAX);
}

static int on_proc_event(void *ctx, void *data, size_t len)
{
	struct session *ss = ctx;
	const struct ml_proc_event *e = data;

	if (len < sizeof(*e))
		return 0;
	if (e->type == ML_PROC_FORK) {
		followers__add(ss->followers, (int)e->tgid, (int)e->parent);
	} else if (e->type == ML_PROC_EXEC) {
		/* What the old image had allocated went away with it. */
		if (ss->ledger)
			ledger__forget(ss->ledger, (int)e->tgid, e->ts_ns);
		if ((int)e->tgid == ss->root) {
			ss->root_exec = true; /* a launcher script can exec several times in a row: probe the last image */
		} else {
			followers__exec(ss->followers, (int)e->tgid);
		}
	}
	return 0;
}

/* --follow: fork and exec of the traced processes, and the descendants the first one has already. */
static int start_following(struct session *ss, struct ring_buffer **rb)
{
	struct follow_opts fo = { .probes = { .layers = ss->o->layers, .torch_raw = ss->o->torch_raw,
					      .multi = ss->multi },
				  .python = ss->o->python,
				  .uw = ss->uw,
				  .debug_dir = ss->o->debug_dir,
				  .max = 1024 };
	__u32 key = (__u32)ss->root, one = 1;
	struct ml_child *kids = NULL;
	size_t nkids = 0;
	int err;

	ss->followers = followers__new(ss->skel, &fo);
	if (!ss->followers) {
		ml_err("cannot follow pid %d's children: %s", ss->root, strerror(ENOMEM));
		return -ENOMEM;
	}
	if (bpf_map_update_elem(bpf_map__fd(ss->skel->maps.traced), &key, &one, BPF_ANY)) {
		err = -errno;
		ml_err("cannot follow pid %d's children: %s (--no-follow goes without)", ss->root, strerror(-err));
		return err;
	}
	ss->fork_link = bpf_program__attach(ss->skel->progs.follow_fork);
	ss->exec_link = ss->fork_link ? bpf_program__attach(ss->skel->progs.follow_exec) : NULL;
	if (!ss->exec_link) {
		err = -errno;
		ml_err("cannot attach the fork and exec tracepoints for --follow: %s (--no-follow goes without)",
		       strerror(-err));
		return err;
	}
	*rb = ring_buffer__new(bpf_map__fd(ss->skel->maps.proc_events), on_proc_event, ss, NULL);
	if (!*rb) {
		err = -errno;
		ml_err("cannot follow pid %d's children: %s (--no-follow goes without)", ss->root, strerror(-err));
		return err;
	}
	if (ml_descendants(ss->root, &kids, &nkids) == 0)
		for (size_t i = 0; i < nkids; i++)
			followers__add(ss->followers, kids[i].pid, kids[i].parent);
	free(kids);
	return 0;
}

/*
 * --max-overhead: the C heap's probes cost more than the budget. Follow it through its system calls
 * instead, in every traced process; its records so far are dropped (their frees would not be seen).
 */
static int heap_growth_mode(struct session *ss, uint64_t next_report)
{
	const struct ml_overhead *ov = overhead__info(ss->ov);
	int err;

	err = ml_heap_track(ss->skel, ss->root);
	if (!err) {
		ss->heap_link = bpf_program__attach(ss->skel->progs.heap_exit);
		if (!ss->heap_link)
			err = -errno;
	}
	if (err) {
		ml_notice("tracing costs %.1f%% of pid %d's time, over the %g%% budget, and heap-growth mode "
			  "cannot start (%s): every probe stays", ov->pct, ss->root, ov->budget_pct, strerror(-err));
		return err;
	}
	if (ss->followers)
		followers__heap_mode(ss->followers);
	probes__drop_libc(*ss->probes);
	ss->layers &= ~(1U << ML_LAYER_LIBC);
	ledger__forget_layer(ss->ledger, ML_LAYER_LIBC);
	overhead__heap_mode(ss->ov, next_report);
	ml_notice("tracing cost %.1f%% of the traced processes' time, over the %g%% budget (--max-overhead): "
		  "the C heap is now followed through its system calls (heap-growth mode), CUDA and PyTorch as before",
		  ov->full_pct, ov->budget_pct);
	return 0;
}

static int arm_timer(int fd, double secs)
{
	struct itimerspec its = {};

	its.it_value.tv_sec = (time_t)secs;
	its.it_value.tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9);
	if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
		its.it_value.tv_nsec = 1;
	its.it_interval = its.it_value;
	return timerfd_settime(fd, 0, &its, NULL) ? -errno : 0;
}

int main(int argc, char **argv)
{
	struct memleak_bpf *skel = NULL;
	struct probes *probes = NULL;
	struct pyframes *py = NULL;
	struct stackview *sv = NULL;
	struct ring_buffer *rb = NULL;
	struct session ss = {};
	struct symbolizer *sym = NULL;
	struct unwinder *uw = NULL;
	struct ledger *ledger = NULL;
	struct stackstore *stacks = NULL;
	struct reporter *reps[3] = {}; /* the main output (-f, -o), then --json and --pprof */
	FILE *extra_out[2] = {};
	struct verdicts *verdicts = NULL;
	struct html_timeline *timeline = NULL;
	struct target tgt = { .pidfd = -1, .go_fd = -1, .status_fd = -1 };
	struct ml_opts o;
	FILE *out = NULL;
	int sfd = -1, tick_fd = -1, scan_fd = -1, err, n;
	uint64_t seq = 0, scans = 0, start_ns = 0;
	sigset_t mask;
	bool attached_ok = false, multi;

	err = ml_opts__parse(argc, argv, &o);
	if (err) {
		ml_opts__free(&o);
		return err > 0 ? 0 : 2;
	}
	ml_log_level = o.verbose;
	libbpf_set_print(libbpf_log);
	{
		/* One open file per probed link and per symbolized library: a large job needs more than 1024. */
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	signal(SIGPIPE, SIG_IGN);

	err = ml_check_system();
	if (err)
		goto cleanup;
	out = open_output(o.output);
	if (!out) {
		err = -EIO;
		goto cleanup;
	}

	err = o.pid ? target__open_pid(&tgt, o.pid) : target__spawn(&tgt, o.cmd_argv);
	if (err)
		goto cleanup;

	/* MEMLEAK_AI_NO_UPROBE_MULTI: the tests' way to run the single-probe path kernels before 6.6 take */
	multi = !getenv("MEMLEAK_AI_NO_UPROBE_MULTI") && ml_uprobe_multi_supported();
	ml_info("uprobe_multi links %s", multi ? "supported: one link per program and library" : "not supported");
	err = load_bpf(&o, multi, &skel);
	if (err)
		goto cleanup;
	if (o.unwind_tables) {
		uw = unwinder__new(skel, &(struct unwind_opts){ .debug_dir = o.debug_dir });
		if (!uw) {
			err = -errno;
			ml_err("cannot map the unwinding tables: %s", strerror(-err));
			goto cleanup;
		}
	}
	probes = probes__new(skel, &(struct probes_opts){ .pid = tgt.pid, .layers = o.layers, .torch_raw = o.torch_raw,
						       .multi = multi });
	if (!probes) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (o.python) {
		py = pyframes__new(skel, tgt.pid);
		if (!py) {
			err = -ENOMEM;
			goto cleanup;
		}
	}
	n = ml_process_sync(tgt.pid, probes, py, uw, NULL);
	if (n == -ESRCH || (n == -ENOENT && !target__alive(&tgt))) {
		ml_err("pid %d exited during attach", tgt.pid);
		err = -ESRCH;
		goto cleanup;
	}
	if (n < 0) {
		err = n;
		ml_err("cannot attach to pid %d: %s", tgt.pid, strerror(-err));
		goto cleanup;
	}
	if ((o.layers & (1U << ML_LAYER_LIBC)) && !(probes__active_layers(probes) & (1U << ML_LAYER_LIBC))) {
		/* Its files cannot be opened once it is gone: that is an exit, not a missing C library. */
		if (!target__alive(&tgt)) {
			ml_err("pid %d exited during attach", tgt.pid);
			err = -ESRCH;
		} else {
			ml_err("pid %d has no C library with malloc and free to probe (a static binary without "
			       "symbols?)", tgt.pid);
			err = -ENOENT;
		}
		goto cleanup;
	}
	sym = symbolizer__new(tgt.pid, o.debug_dir);
	if (!sym) {
		err = -errno ? -errno : -ENOMEM;
		ml_err("cannot start the symbolizer: %s", strerror(-err));
		goto cleanup;
	}
	symbolizer__refresh(sym);
	stacks = stackstore__new();
	if (!stacks || stackstore__attach(stacks, bpf_map__fd(skel->maps.stack_events))) {
		err = stacks ? -errno : -ENOMEM;
		ml_err("cannot read the stacks' ring buffer: %s", strerror(-err));
		goto cleanup;
	}
	ledger = ledger__new(skel, &(struct ledger_opts){ .tgid = tgt.pid,
							   .min_age_ns = (uint64_t)(o.min_age_s * 1e9),
							   .stacks = stacks });
	if (!ledger) {
		err = -errno ? -errno : -ENOMEM;
		goto cleanup;
	}
	verdicts = verdicts__new();
	timeline = o.html ? html_timeline__new() : NULL;
	if (!verdicts || (o.html && !timeline)) {
		err = -ENOMEM;
		goto cleanup;
	}
	ss = (struct session){ .skel = skel, .o = &o, .root = tgt.pid, .multi = multi, .probes = &probes, .py = &py,
			       .sym = &sym, .uw = uw, .ledger = ledger, .layers = o.layers };
	ss.ov = overhead__new(skel, o.max_overhead);
	if (!ss.ov) {
		err = -ENOMEM;
		goto cleanup;
	}
	/* Before the target runs (-c): an exec right at its start must find the follow tracepoints on. */
	n = overhead__calibrate(ss.ov);
	if (n)
		ml_info("cannot time a probe hit (%s): counting 1 us a hit", strerror(-n));
	sv = stackview__new(ledger, resolver, &ss);
	if (sv)
		ledger__set_canon(ledger, stackview__canon, sv);
	if (!sv) {
		err = -ENOMEM;
		goto cleanup;
	}
	{
		const char *paths[2] = { o.json, o.pprof };
		const enum ml_format fmts[2] = { ML_FMT_JSON, ML_FMT_PPROF };

		reps[0] = reporter__new(out, &(struct report_opts){ .format = o.format, .top = o.top, .pid = tgt.pid,
								     .native = o.native }, sv);
		if (!reps[0]) {
			err = -ENOMEM;
			goto cleanup;
		}
		for (int i = 0; i < 2; i++) {
			if (!paths[i])
				continue;
			extra_out[i] = open_output(paths[i]);
			if (!extra_out[i]) {
				err = -EIO;
				goto cleanup;
			}
			reps[i + 1] = reporter__new(extra_out[i], &(struct report_opts){ .format = fmts[i], .top = o.top,
											.pid = tgt.pid }, sv);
			if (!reps[i + 1]) {
				err = -ENOMEM;
				goto cleanup;
			}
		}
	}
	test_attach_delay();
	if (tgt.spawned) {
		err = target__release(&tgt, o.cmd_argv[0]);
		if (err)
			goto cleanup;
		/* After -c's own exec (that one is the start, not a new image to probe again), before it runs. */
		if (o.follow) {
			err = start_following(&ss, &rb);
			if (err)
				goto cleanup; /* said why */
		}
		/* Held at its first instruction: probe the new image (a static executable, another libc). */
		n = ml_process_sync(tgt.pid, probes, py, uw, sym);
		if (n >= 0) {
			struct ml_maps maps = {};
			struct bpf_link *hold = NULL;

			if (ml_maps__read(tgt.pid, &maps) == 0) {
				if ((o.layers & (1U << ML_LAYER_LIBC)) && probes__libc_missing(probes, &maps)) {
					ml_err("'%s' has no C library with malloc and free to probe (a static binary "
					       "without symbols?); not started", o.cmd_argv[0]);
					kill(tgt.pid, SIGKILL); /* held before its first instruction: it never ran */
					n = -ENOENT;
				} else {
					hold = probes__loader_stop(probes, &maps);
				}
			}
			ml_maps__clear(&maps);
			/*
			 * Dynamically linked: run it to the loader's two reports (before and after mapping its
			 * libraries) and probe what it mapped before any library code runs.
			 */
			for (int stops = 0; hold && n >= 0 && stops < 2; stops++) {
				if (target__run_until_stop(&tgt, 2000))
					break;
				n = ml_process_sync(tgt.pid, probes, py, uw, sym);
			}
			/* Kept: each later dlopen stops it the same way, handled by the event loop. */
			ss.ld_stop = hold;
			ss.ld_stops_seen = READ_ONCE_U64(skel->bss->ldso_stops);
			/* A library mapped from now on is probed (by a scan or at the stop) before its code runs. */
			probes__held(probes, hold != NULL);
		}
		if (n == -ENOENT) {
			err = n;
			goto cleanup;
		}
		target__resume(&tgt);
		if (n < 0) {
			err = n;
			ml_err("cannot attach to pid %d: %s", tgt.pid, strerror(-err));
			goto cleanup;
		}
	} else if (!target__alive(&tgt)) {
		ml_err("pid %d exited during attach", tgt.pid);
		err = -ESRCH;
		goto cleanup;
	} else if (o.follow) {
		err = start_following(&ss, &rb);
		if (err)
			goto cleanup; /* said why */
	}
	for (int i = 0; i < 3; i++)
		if (reps[i])
			reporter__set_overhead(reps[i], overhead__info(ss.ov));
	/* Taken from here on by the event loop: a signal right after the "attached" notice gets its final report. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	if (ss.ld_stop)
		sigaddset(&mask, SIGCHLD); /* the -c target stopped at a dlopen */
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	{
		unsigned int nf, nobj = probes__n_probed(probes, &nf);
		unsigned int missing = o.layers & ~probes__active_layers(probes) & ((1U << ML_LAYER_MAX) - 1) &
				       ~(1U << ML_LAYER_CUDA_MAP);

		ml_notice("attached to pid %d: %u probes in %u objects", tgt.pid, nf, nobj);
		probes__started(probes);
		for (unsigned int l = 0; l < ML_LAYER_MAX; l++)
			if (missing & (1U << l) && strcmp(ml_layer_name(l), "unknown"))
				ml_info("layer %s not active yet: will attach when its library is loaded", ml_layer_name(l));
	}

	start_ns = ml_clock_ns(CLOCK_MONOTONIC);
	tick_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	scan_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (sfd < 0 || tick_fd < 0 || scan_fd < 0 || arm_timer(tick_fd, o.interval_s) ||
	    arm_timer(scan_fd, FAST_SCAN_S)) {
		err = -errno;
		ml_err("cannot set up the event loop: %s", strerror(-err));
		goto cleanup;
	}

	for (;;) {
		struct pollfd all[5] = { { .fd = sfd, .events = POLLIN },
					 { .fd = tgt.pidfd, .events = POLLIN },
					 { .fd = tick_fd, .events = POLLIN },
					 { .fd = scan_fd, .events = POLLIN },
					 { .fd = rb ? ring_buffer__epoll_fd(rb) : -1, .events = POLLIN } };
		const struct ml_snapshot *snap;
		const struct ml_judgement *judged;
		const size_t *order;
		bool final = false;
		uint64_t expirations;

		if (poll(all, 5, -1) < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (all[0].revents) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != sizeof(si)) {
				final = true;
			} else if (si.ssi_signo == SIGCHLD) {
				loader_stopped(&ss);
			} else {
				ml_info("signal %u: final report", si.ssi_signo);
				final = true;
			}
		}
		if (all[1].revents) {
			ml_notice("pid %d exited", tgt.pid);
			final = true;
		}
		/* Forks and execs first: a new child is probed before its first scan tick. */
		if (all[4].revents && !final) {
			ring_buffer__consume(rb);
			if (ss.root_exec) {
				root_exec(&ss);
				ss.root_exec = false;
			}
		}
		if (all[3].revents) {
			if (read(scan_fd, &expirations, sizeof(expirations)) < 0)
				expirations = 0;
			/* Libraries come and go most right after start: rescan fast at first, then once a second. */
			if (++scans == FAST_SCANS)
				arm_timer(scan_fd, 1.0);
			if (!final && ss.followers)
				followers__sync(ss.followers, follower_gone, &ss);
			if (!final) {
				int pids[1025];
				size_t np = 1;

				pids[0] = tgt.pid;
				if (ss.followers)
					np += followers__pids(ss.followers, pids + 1, 1024);
				if (overhead__sample(ss.ov, pids, np) == 1)
					heap_growth_mode(&ss, seq + 1);
			}
			if (!final && target__alive(&tgt)) {
				n = ml_process_sync(tgt.pid, probes, py, uw, sym);
				if (n < 0 && n != -ESRCH && n != -ENOENT)
					ml_notice("rescanning pid %d's libraries failed: %s", tgt.pid, strerror(-n));
			}
		}
		if (!all[2].revents && !final)
			continue;
		if (all[2].revents && read(tick_fd, &expirations, sizeof(expirations)) < 0)
			expirations = 0;
		err = ledger__collect(ledger, &snap);
		if (err) {
			ml_err("cannot collect the report: %s", strerror(-err));
			break;
		}
		seq++;
		if (o.count && seq >= o.count)
			final = true;
		err = verdicts__update(verdicts, snap, o.sort_bytes, &judged, &order);
		if (err) {
			ml_err("cannot judge the report: %s", strerror(-err));
			break;
		}
		if (timeline && html_timeline__add(timeline, snap)) {
			err = -ENOMEM;
			break;
		}
		pyframes__trim(py);
		if (ss.followers)
			followers__trim(ss.followers);
		for (int i = 0; i < 3 && !err; i++) {
			if (!reps[i])
				continue;
			reporter__set_duration(reps[i], snap->now_ns - start_ns);
			err = reporter__emit(reps[i], snap, judged, order, seq, final);
			if (err)
				ml_err("cannot write the report%s%s: %s", i ? " to " : "",
				       i == 1 ? o.json : i == 2 ? o.pprof : "", strerror(-err));
		}
		if (err)
			break;
		if (final && o.html) {
			struct html_opts ho = { .pid = tgt.pid, .top = o.top, .reports = seq };

			err = ml_html_write(o.html, &ho, timeline, snap, judged, order, verdicts, sv);
			if (err) {
				ml_err("cannot write the HTML report '%s': %s", o.html, strerror(-err));
				break;
			}
		}
		if (final)
			break;
	}
	attached_ok = err == 0;

cleanup:
	if (err && tgt.spawned && tgt.stopped)
		kill(tgt.pid, SIGKILL); /* -c: held before its first instruction, it never ran */
	if (ss.ld_stop) {
		bpf_link__destroy(ss.ld_stop);
		/* A dlopen stop asked for and not handled yet: let it go on. */
		if (READ_ONCE_U64(skel->bss->ldso_stops) != ss.ld_stops_seen && target__alive(&tgt))
			kill(tgt.pid, SIGCONT);
	}
	for (int i = 0; i < 3; i++)
		reporter__free(reps[i]);
	for (int i = 0; i < 2; i++)
		if (extra_out[i] && fclose(extra_out[i])) {
			ml_err("cannot write output file '%s': %s", i ? o.pprof : o.json, strerror(errno));
			attached_ok = false;
		}
	stackview__free(sv);
	ring_buffer__free(rb);
	bpf_link__destroy(ss.heap_link);
	bpf_link__destroy(ss.fork_link);
	bpf_link__destroy(ss.exec_link);
	followers__free(ss.followers);
	overhead__free(ss.ov);
	verdicts__free(verdicts);
	html_timeline__free(timeline);
	ledger__free(ledger);
	stackstore__free(stacks);
	probes__free(probes);
	pyframes__free(py);
	unwinder__free(uw);
	memleak_bpf__destroy(skel);
	symbolizer__free(sym);
	target__close(&tgt);
	if (sfd >= 0)
		close(sfd);
	if (tick_fd >= 0)
		close(tick_fd);
	if (scan_fd >= 0)
		close(scan_fd);
	if (out && out != stdout && fclose(out)) {
		ml_err("cannot write output file '%s': %s", o.output, strerror(errno));
		attached_ok = false;
	}
	ml_opts__free(&o);
	return attached_ok ? 0 : 1;
}
