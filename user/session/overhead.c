/*
 * The tool's own cost, and the --max-overhead budget.
 *
 * The cost is what the traced processes pay: every probe hit is a trap into the kernel whatever its BPF
 * program does, so each trap (counted per layer by the programs themselves: every entry and every return,
 * nested calls, free(NULL), failed calls, wrapper entries and USDT probes included) costs the floor of an empty
 * program's trap, calibrated on this machine, and on top the time spent in the BPF programs (the kernel's own
 * statistics). The share is that cost over T(with), the time the traced work took with the tool: the traced
 * processes' CPU time (which includes the traps), or the time that passed if that is more (a job that mostly
 * waits is slowed by what tracing adds to its work, not in proportion to its little CPU). That is the figure
 * 1 - T(without)/T(with) measures, and it cannot exceed 100 %: a cost estimate above T(with) is capped there.
 *
 * The calibration runs in a thread after the BPF object is loaded, while the probes are attached: nothing
 * waits for it but the first decision on the C heap, taken from the first DECIDE_NS of hits after attach.
 * When the C heap's probes (by far the most frequent) push the share over the budget, the C heap is followed
 * through the system calls that grow the address space instead (heap-growth mode, bpf/proc.bpf.c:
 * heap_exit), which costs nothing per malloc. Still over the budget, the parts of enum ml_shed are shed in
 * their order, each named with what it cost.
 */
#define _GNU_SOURCE
#include "session/overhead.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "attach/uprobe_multi.h"
#include "lib/bpfstats.h"
#include "lib/clock.h"
#include "lib/elfsym.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "lib/thread.h"
#include "memleak.h"
#include "session/shed.h"
#include "memleak.skel.h"

#define CALIB_CALLS 2000       /* malloc + free pairs a timing (about 20 ms with probes) */
#define CALIB_REPS 3	       /* timings of each setup, the fastest kept: a preempted run only ever adds */
#define DECIDE_NS 150000000ULL /* the first decision (and each after a change) from this much of hits */
#define EARLY_NS 50000000ULL   /* ... or from this much, when the traps alone cost EARLY_FACTOR budgets */
#define EARLY_FACTOR 5.0
#define EARLY_HITS 2000		    /* and there were this many */
#define MIN_SAMPLE_NS 1000000000ULL /* later samples span at least a second */
#define MIN_CPU_NS 20000000ULL	    /* and 20 ms of the traced processes' CPU time to say anything */
#define EXTRA_PROGS 3		    /* heap_exit, torch_malloc, torch_free */

enum calib_state { CALIB_IDLE, CALIB_RUNNING, CALIB_DONE };

struct overhead {
	struct memleak_bpf *skel;
	struct ml_overhead info;
	int stats_fd; /* held: the kernel keeps BPF run-time statistics while it is open */
	int ncpu;
	uint64_t *pcpu;
	uint64_t start_ns; /* the probes were attached */
	uint64_t last_ns, last_cpu_ns, last_probe_ns, last_other_ns, last_rss_ns;
	uint64_t last_self_ns; /* memleak-ai's own CPU time (all its threads) */
	uint64_t last[ML_STAT_SLOTS];
	bool have_last;
	bool settled;			 /* a decision was taken since the last change: samples span a second again */
	double rss_pct;			 /* the rss layer's part of the last sample (its hook) */
	double sum_cost_ns, sum_base_ns; /* every sample's cost and T(with) since attach: pct_since_attach */
	bool tensor_sampling;		 /* the torch_cpu layer's allocation side can be paused (uprobe_multi links) */
	double alloc_side_pct; /* the torch_cpu layer's part less its releases' traps (what sampling scales) */
	overhead_rss_cost_fn rss_cost;
	void (*rss_shed)(void *ctx, bool off);
	void *rss_ctx;
	struct {
		int fd;
		bool probe;
	} extra[EXTRA_PROGS]; /* programs of other instances of the object (heap_exit, PyTorch's USDT) */
	size_t nextra;
	pthread_t calib;
	int calib_prog; /* uprobe_multi kernels: a do-nothing program of its own, loaded before the object */
	_Atomic int calib_state;
	int calib_err;
	double calib_hit, calib_ret, calib_base;
	pid_t calib_child; /* the calibration's child (calib_fork), and its two pipes */
	int calib_cmd, calib_res;
	int calib_stop;	  /* an eventfd: exit's word to stop waiting for the child (-1: none, it waits it out) */
	char *calib_path; /* where its malloc and free are */
	uint64_t calib_off[3];
};

int overhead__new(double budget_pct, struct overhead **out)
{
	struct overhead *o = calloc(1, sizeof(*o));

	*out = NULL;
	if (!o)
		return -ENOMEM;
	o->info.budget_pct = budget_pct;
	o->info.hit_ns = 1000;
	o->info.ret_ns = 1000;
	o->ncpu = libbpf_num_possible_cpus();
	o->pcpu = o->ncpu > 0 ? calloc((size_t)o->ncpu * ML_STAT_SLOTS, sizeof(uint64_t)) : NULL;
	if (!o->pcpu) {
		free(o);
		return -ENOMEM;
	}
	/* Without this the kernel keeps no run time for BPF programs; it stops when memleak-ai exits. */
	o->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	o->calib_prog = -1;
	o->calib_cmd = o->calib_res = -1;
	o->calib_stop = eventfd(0, EFD_CLOEXEC);
	*out = o;
	return 0;
}

void overhead__free(struct overhead *o)
{
	if (!o)
		return;
	if (atomic_load(&o->calib_state) != CALIB_IDLE) {
		if (o->calib_stop >= 0 && eventfd_write(o->calib_stop, 1))
			ml_dbg("cannot stop the probe-cost calibration: %s", strerror(errno));
		pthread_join(o->calib, NULL);
	}
	if (o->calib_stop >= 0)
		close(o->calib_stop);
	if (o->stats_fd >= 0)
		close(o->stats_fd);
	if (o->calib_prog >= 0)
		close(o->calib_prog);
	free(o->pcpu);
	free(o);
}

/*
 * Work between the pairs: a target does some between its allocator calls, which leaves the trap's code and
 * data colder than a tight loop of calls would (the floor a target paid in `make bench` rose by a sixth with
 * work between its pairs). Reading this much memory a line at a time evicts the first-level caches.
 */
#define CALIB_COOL_BYTES (256 * 1024)

/* CPU ns a malloc + free pair and the work after it (CPU time, not wall time: other load must not count). */
static double time_calls(const volatile unsigned char *cool)
{
	uint64_t t0 = ml_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	unsigned int sum = 0;

	for (int i = 0; i < CALIB_CALLS; i++) {
		void *p = malloc(64);

		asm volatile("" : : "r"(p) : "memory");
		free(p);
		for (size_t b = 0; cool && b < CALIB_COOL_BYTES; b += 64)
			sum += cool[b];
	}
	asm volatile("" : : "r"(sum));
	return (double)(ml_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / CALIB_CALLS;
}

/*
 * The calibration probes the C library's own malloc and free (the functions whose probes cost the most),
 * in a child of memleak-ai, as the probes run in the traced processes. How a hit is handled depends on
 * the probed instruction (one the kernel emulates, or one stepped out of line), so no stand-in would do.
 * The child answers each 'm' on cmd with the ns a malloc + free pair and the work after it take: the fastest
 * of CALIB_REPS timings after a warm-up (which also sets up the out-of-line area of a new probe). The same
 * work in every timing, the differences are the traps'.
 */
static void calib_child(int cmd, int res)
{
	unsigned char *cool = calloc(1, CALIB_COOL_BYTES); /* NULL: timed without the work, a tight loop */
	char c;

	while (read(cmd, &c, 1) == 1 && c == 'm') {
		double v, best;

		time_calls(cool);
		best = time_calls(cool);
		for (int i = 1; i < CALIB_REPS; i++)
			if ((v = time_calls(cool)) < best)
				best = v;
		if (write(res, &best, sizeof(best)) != sizeof(best))
			break;
	}
	_exit(0);
}

/*
 * One timing from the child, waited for CALIB_ANSWER_MS at most, or until exit says stop: a child forked while
 * another thread held the allocator's lock (curl's threads under AddressSanitizer, with --push) never answers,
 * and calibration then fails (1 us a hit) instead of holding memleak-ai's exit up.
 */
#define CALIB_ANSWER_MS 10000

static int ask(const struct overhead *o, double *out)
{
	struct pollfd p[2] = {{.fd = o->calib_res, .events = POLLIN}, {.fd = o->calib_stop, .events = POLLIN}};

	if (write(o->calib_cmd, "m", 1) != 1)
		return -EIO;
	if (poll(p, 2, CALIB_ANSWER_MS) < 1)
		return -ETIMEDOUT;
	if (p[1].revents)
		return -ECANCELED;
	return read(o->calib_res, out, sizeof(*out)) == sizeof(*out) ? 0 : -EIO;
}

/* Where malloc and free of this process live: file and offsets, for a probe. */
static int find_allocator(char **path, uint64_t *off_malloc, uint64_t *off_free)
{
	struct elf_syms *es = NULL;
	uint64_t vm, vf;
	Dl_info info;
	int fd, err;

	if (!dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info) || !info.dli_fname)
		return -ENOENT;
	fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = elf_syms__open(fd, &es);
	close(fd);
	if (err)
		return err;
	err = elf_syms__find(es, "malloc", &vm, NULL);
	if (!err)
		err = elf_syms__find(es, "free", &vf, NULL);
	if (!err)
		err = elf_syms__vaddr_to_offset(es, vm, off_malloc);
	if (!err)
		err = elf_syms__vaddr_to_offset(es, vf, off_free);
	elf_syms__free(es);
	if (err)
		return err;
	*path = strdup(info.dli_fname);
	return *path ? 0 : -ENOMEM;
}

/* Probe 0: malloc, 1: free, 2: malloc's return, in the child, as the traced processes' probes are made. */
static int calib_attach(struct overhead *o, int i, pid_t child, const char *path, uint64_t off, struct bpf_link **l,
			int *lfd)
{
	uint64_t cookie = 0;

	if (o->calib_prog >= 0) {
		*lfd = ml_uprobe_multi_attach(o->calib_prog, path, &off, &cookie, 1, i == 2, child);
		return *lfd < 0 ? *lfd : 0;
	}
	*l = bpf_program__attach_uprobe(o->skel->progs.calib, i == 2, child, path, off);
	return *l ? 0 : -errno;
}

/*
 * The calibration's child, forked by the thread that starts the calibration, before the thread that times it
 * exists: a child forked while another thread of memleak-ai held the allocator's lock (the BPF object being
 * loaded meanwhile) could block in its first malloc for good (seen with AddressSanitizer's allocator).
 */
static int calib_fork(struct overhead *o)
{
	int cmd[2], res[2], err;

	err = find_allocator(&o->calib_path, &o->calib_off[0], &o->calib_off[1]);
	if (err)
		return err;
	o->calib_off[2] = o->calib_off[0];
	if (pipe2(cmd, O_CLOEXEC))
		return -errno;
	if (pipe2(res, O_CLOEXEC)) {
		err = -errno;
		close(cmd[0]);
		close(cmd[1]);
		return err;
	}
	o->calib_child = fork();
	if (o->calib_child == 0) {
		close(cmd[1]);
		close(res[0]);
		calib_child(cmd[0], res[1]);
	}
	err = o->calib_child < 0 ? -errno : 0;
	close(cmd[0]);
	close(res[1]);
	o->calib_cmd = cmd[1];
	o->calib_res = res[0];
	return err;
}

/* ns a malloc + free pair in the child: without probes, with entry probes on both, and a return probe too. */
static int time_probes(struct overhead *o, double *base, double *entry, double *ret)
{
	struct bpf_link *l[3] = {};
	int lfd[3] = {-1, -1, -1};
	int err = ask(o, base);

	for (int i = 0; i < 3 && !err; i++) {
		err = calib_attach(o, i, o->calib_child, o->calib_path, o->calib_off[i], &l[i], &lfd[i]);
		if (!err && i >= 1)
			err = ask(o, i == 1 ? entry : ret);
	}
	for (int i = 0; i < 3; i++) {
		bpf_link__destroy(l[i]);
		if (lfd[i] >= 0)
			close(lfd[i]);
	}
	return err;
}

/* The child ends (its command pipe closed; killed too, in case it hangs where it was forked) and is reaped. */
static void calib_end(struct overhead *o)
{
	if (o->calib_cmd >= 0)
		close(o->calib_cmd);
	if (o->calib_res >= 0)
		close(o->calib_res);
	if (o->calib_child > 0) {
		kill(o->calib_child, SIGKILL); /* not reaped yet: the pid is still its */
		waitpid(o->calib_child, NULL, 0);
	}
	o->calib_cmd = o->calib_res = -1;
	o->calib_child = 0;
	free(o->calib_path);
	o->calib_path = NULL;
}

static void *calib_thread(void *arg)
{
	struct overhead *o = arg;
	double base = 0, entry = 0, ret = 0;

	o->calib_err = time_probes(o, &base, &entry, &ret);
	calib_end(o);
	if (!o->calib_err) {
		/* Two entry traps a pair; a return probe traps at entry too (the same breakpoint), its own
		 * trap is the difference. */
		o->calib_base = base;
		o->calib_hit = entry > base ? (entry - base) / 2 : 0;
		o->calib_ret = ret > entry ? ret - entry : 0;
	}
	atomic_store(&o->calib_state, CALIB_DONE);
	return NULL;
}

static int calibrate_start(struct overhead *o)
{
	int err;

	err = calib_fork(o);
	if (err) {
		calib_end(o);
		return err;
	}
	atomic_store(&o->calib_state, CALIB_RUNNING);
	err = ml_thread_start(&o->calib, calib_thread, o);
	if (err) {
		atomic_store(&o->calib_state, CALIB_IDLE);
		calib_end(o);
		return err;
	}
	return 0;
}

int overhead__calibrate_start(struct overhead *o, bool multi)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, lo, .expected_attach_type = ML_BPF_TRACE_UPROBE_MULTI);

	if (!multi)
		return 0; /* overhead__bind starts it, with the object's own do-nothing program */
	o->calib_prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ml_calib", "GPL", insns, 2, &lo);
	if (o->calib_prog < 0)
		return o->calib_prog;
	return calibrate_start(o);
}

int overhead__bind(struct overhead *o, struct memleak_bpf *skel)
{
	o->skel = skel;
	if (o->calib_prog >= 0 || atomic_load(&o->calib_state) != CALIB_IDLE)
		return 0;
	return calibrate_start(o);
}

/* The calibration's figures, once it is done (the thread joined here, once). False while it runs. */
static bool calibration_in(struct overhead *o)
{
	int st = atomic_load(&o->calib_state);

	if (st == CALIB_RUNNING)
		return false;
	if (st == CALIB_DONE) {
		pthread_join(o->calib, NULL);
		atomic_store(&o->calib_state, CALIB_IDLE);
		if (o->calib_err) {
			ml_info("cannot time a probe hit (%s): counting 1 us a hit", strerror(-o->calib_err));
		} else if (o->calib_hit > 0) {
			o->info.hit_ns = o->calib_hit;
			o->info.ret_ns = o->calib_ret;
			o->info.calibrated = true;
			ml_info(
			    "one probe hit costs %.0f ns here (an empty program's trap), a return probe %.0f ns more "
			    "(a malloc + free pair and the work after it take %.0f ns without probes)",
			    o->calib_hit, o->calib_ret, o->calib_base);
		}
	}
	return true;
}

static int read_counters(struct overhead *o, uint64_t *v)
{
	return ml_stats_sum(bpf_map__fd(o->skel->maps.stats), o->ncpu, o->pcpu, v);
}

uint64_t overhead__counter(struct overhead *o, unsigned int idx)
{
	uint64_t v[ML_STAT_SLOTS];

	if (idx >= ML_STAT_SLOTS || !o->skel || read_counters(o, v))
		return 0;
	return v[idx];
}

/* The allocator probes' programs, in any instance of the object: their run time is the layers', shared out by hits. */
static bool is_probe_prog(const struct bpf_program *p)
{
	static const char *const probes[] = {"alloc_enter", "alloc_exit",   "free_enter",
					     "free_exit",   "torch_malloc", "torch_free"};

	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (!strcmp(bpf_program__name(p), probes[i]))
			return true;
	return false;
}

/* BPF run time so far: of the allocator probes, and of every other program (the calibration's excluded). */
static void bpf_run_ns(struct overhead *o, uint64_t *probe, uint64_t *other)
{
	struct bpf_program *prog;

	*probe = *other = 0;
	bpf_object__for_each_program(prog, o->skel->obj) if (prog != o->skel->progs.calib) *
	    (is_probe_prog(prog) ? probe : other) += ml_prog_run_ns(bpf_program__fd(prog));
	for (size_t i = 0; i < o->nextra; i++)
		*(o->extra[i].probe ? probe : other) += ml_prog_run_ns(o->extra[i].fd);
}

int overhead__count_prog(struct overhead *o, const struct bpf_program *p)
{
	if (o->nextra == EXTRA_PROGS)
		return -E2BIG;
	o->extra[o->nextra].fd = bpf_program__fd(p);
	o->extra[o->nextra++].probe = is_probe_prog(p);
	return 0;
}

/* CPU time (user + system) of the processes, in ns; the gone ones count nothing. */
static uint64_t cpu_ns(const int *pids, size_t n)
{
	long tck = sysconf(_SC_CLK_TCK);
	uint64_t sum = 0;
	struct ml_proc_stat st;

	for (size_t i = 0; i < n; i++)
		if (!ml_proc_stat(pids[i], &st))
			sum += (st.utime + st.stime) * (1000000000ULL / (uint64_t)(tck > 0 ? tck : 100));
	return sum;
}

static uint64_t rss_ns(struct overhead *o)
{
	uint64_t ns = 0;

	if (o->rss_cost)
		o->rss_cost(o->rss_ctx, &ns);
	return ns;
}

static void baseline(struct overhead *o, uint64_t now, uint64_t cpu, const uint64_t *v)
{
	memcpy(o->last, v, sizeof(o->last));
	o->last_ns = now;
	o->last_cpu_ns = cpu;
	o->last_self_ns = ml_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	bpf_run_ns(o, &o->last_probe_ns, &o->last_other_ns);
	o->last_rss_ns = rss_ns(o);
	o->have_last = true;
}

void overhead__start(struct overhead *o, const int *pids, size_t npids)
{
	uint64_t v[ML_STAT_SLOTS];

	o->start_ns = ml_clock_ns(CLOCK_MONOTONIC);
	if (!read_counters(o, v))
		baseline(o, o->start_ns, cpu_ns(pids, npids), v);
}

static uint64_t delta(uint64_t now, uint64_t then)
{
	return now >= then ? now - then : 0;
}

/* The cost of the interval with counter deltas d[], its parts by layer in o->info, over `base` ns. */
static void account(struct overhead *o, const uint64_t *d, uint64_t probe_ns, uint64_t other_ns, uint64_t rss,
		    double base, double secs)
{
	struct ml_overhead *in = &o->info;
	double layer_ns[ML_LAYER_MAX], hits = 0, cost, other, scale = 1;

	for (int l = 0; l < ML_LAYER_MAX; l++)
		hits += (double)(d[ML_STAT_ENTRY_HITS(l)] + d[ML_STAT_RET_HITS(l)]);
	cost = 0;
	for (int l = 0; l < ML_LAYER_MAX; l++) {
		double e = (double)d[ML_STAT_ENTRY_HITS(l)], r = (double)d[ML_STAT_RET_HITS(l)];

		layer_ns[l] = e * in->hit_ns + r * in->ret_ns + (hits > 0 ? (double)probe_ns * (e + r) / hits : 0);
		cost += layer_ns[l];
	}
	other = (double)d[ML_STAT_LOADER_HITS] * in->hit_ns + (double)other_ns + (hits > 0 ? 0 : (double)probe_ns);
	cost += other;
	/* The traps and the programs ran in the traced processes' time: more than all of it is an estimate off. */
	if (cost > base)
		scale = base / cost;
	for (int l = 0; l < ML_LAYER_MAX; l++) {
		in->layer_pct[l] = layer_ns[l] * scale / base * 100.0;
		in->layer_cost_ns[l] += layer_ns[l] * scale;
	}
	/* A release is one entry trap (free_cpu has no return probe); the rest is the allocation side's. */
	{
		double e =
		    (double)(d[ML_STAT_ENTRY_HITS(ML_LAYER_TORCH_CPU)] + d[ML_STAT_RET_HITS(ML_LAYER_TORCH_CPU)]);
		double fr = (double)d[ML_STAT_LAYER_FREES(ML_LAYER_TORCH_CPU)];

		o->alloc_side_pct = e > 0 && fr < e ? in->layer_pct[ML_LAYER_TORCH_CPU] * (1 - fr / e) : 0;
	}
	in->other_pct = other * scale / base * 100.0;
	o->rss_pct = (double)rss > other ? in->other_pct : (double)rss * scale / base * 100.0;
	in->pct = cost * scale / base * 100.0;
	o->sum_cost_ns += cost * scale;
	o->sum_base_ns += base;
	in->pct_since_attach = o->sum_cost_ns / o->sum_base_ns * 100.0;
	in->hits_per_s = (hits + (double)d[ML_STAT_LOADER_HITS]) / secs;
	in->bpf_ns_per_s = (double)(probe_ns + other_ns) / secs;
	in->measured = true;
}

/*
 * Before DECIDE_NS of hits: whether the traps alone, at the calibrated cost, already took EARLY_FACTOR times
 * the budget of T(with) as a sample measures it (the time that passed, or the job's CPU time when larger): a
 * malloc-heavy job at full cost is ten times over and more. The programs' run time, left out, only adds; an
 * interval with less than MIN_CPU_NS of the job's CPU says nothing yet.
 */
static bool clearly_over(const struct overhead *o, const uint64_t *d, double elapsed_ns, double used_ns)
{
	double traps = 0, hits = 0;

	for (int l = 0; l < ML_LAYER_MAX; l++) {
		double e = (double)d[ML_STAT_ENTRY_HITS(l)], r = (double)d[ML_STAT_RET_HITS(l)];

		traps += e * o->info.hit_ns + r * o->info.ret_ns;
		hits += e + r;
	}
	return hits >= EARLY_HITS && used_ns >= (double)MIN_CPU_NS &&
	       traps >= EARLY_FACTOR * o->info.budget_pct / 100.0 * (used_ns > elapsed_ns ? used_ns : elapsed_ns);
}

enum overhead_action overhead__sample(struct overhead *o, const int *pids, size_t npids)
{
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC), cpu, probe_ns, other_ns, rss, v[ML_STAT_SLOTS], d[ML_STAT_SLOTS];
	struct ml_overhead *in = &o->info;
	/* With tensor sampling on, a sample spans a whole period at least: on and off in their proportion. */
	bool sampling = in->tensor_halvings && !(in->shed & (1U << ML_SHED_TORCH_CPU));
	double secs, base;

	if (!calibration_in(o) && !o->settled)
		return OVERHEAD_OK; /* the first decision waits for the figure; nothing else does */

	if (o->have_last && now - o->last_ns < (o->settled || sampling ? MIN_SAMPLE_NS : EARLY_NS))
		return OVERHEAD_OK;
	if (read_counters(o, v))
		return OVERHEAD_OK;
	cpu = cpu_ns(pids, npids);
	if (!o->have_last) {
		baseline(o, now, cpu, v);
		return OVERHEAD_OK;
	}
	for (int i = 0; i < ML_STAT_SLOTS; i++)
		d[i] = delta(v[i], o->last[i]);
	base = (double)delta(cpu, o->last_cpu_ns);
	if (!o->settled && !sampling && now - o->last_ns < DECIDE_NS &&
	    !clearly_over(o, d, (double)(now - o->last_ns), base))
		return OVERHEAD_OK;
	bpf_run_ns(o, &probe_ns, &other_ns);
	rss = rss_ns(o);
	secs = (double)(now - o->last_ns) / 1e9;
	if (base < (double)MIN_CPU_NS) {
		/* An idle job: nothing to relate the cost to, and nothing to save. */
		baseline(o, now, cpu, v);
		return OVERHEAD_OK;
	}
	in->cpu_per_s = base / 1e9 / secs;
	in->self_cpu_pct = (double)delta(ml_clock_ns(CLOCK_PROCESS_CPUTIME_ID), o->last_self_ns) / 1e9 / secs * 100.0;
	/*
	 * T(with): the CPU time the traced processes used, but never less than the time that passed: a job
	 * that mostly waits (for I/O, the GPU, a timer) is slowed by the time tracing adds to its work, not in
	 * proportion to the little CPU it uses. For a busy single thread both are the same; for busy threads in
	 * parallel, each pays for its own probes, and CPU time is the measure.
	 */
	if (base < secs * 1e9)
		base = secs * 1e9;
	account(o, d, delta(probe_ns, o->last_probe_ns), delta(other_ns, o->last_other_ns), delta(rss, o->last_rss_ns),
		base, secs);
	baseline(o, now, cpu, v);
	if (!o->settled) {
		o->settled = true;
		if (!in->decided_after_s)
			in->decided_after_s = (double)(now - o->start_ns) / 1e9;
	}
	/* A budget of 100% keeps every probe on, whatever the estimate says. */
	if (in->budget_pct >= 100 || in->pct <= in->budget_pct)
		return OVERHEAD_OK;
	if (!in->heap_mode)
		return in->layer_pct[ML_LAYER_LIBC] > 0 ? OVERHEAD_HEAP : OVERHEAD_OK;
	return overhead__next_shed(o) < ML_SHED_N ? OVERHEAD_SHED : OVERHEAD_OK;
}

/* A change of what is traced: the next decision comes from the hits after it, at the short window again. */
static void changed(struct overhead *o)
{
	o->have_last = false;
	o->settled = false;
}

void overhead__heap_mode(struct overhead *o, uint64_t report)
{
	o->info.full_pct = o->info.pct;
	o->info.heap_mode = true;
	o->info.heap_since_report = report;
	changed(o);
}

void overhead__heap_windows(struct overhead *o, unsigned int one_in, bool unchecked)
{
	o->info.heap_window_one_in = one_in;
	o->info.heap_window_unchecked = unchecked;
}

void overhead__heap_window_count(struct overhead *o, uint64_t windows, double weight, const char *clock)
{
	o->info.heap_windows = windows;
	o->info.heap_window_weight = weight;
	o->info.heap_window_clock = clock;
}

void overhead__heap_swept(struct overhead *o, uint64_t swept, uint64_t freed)
{
	o->info.heap_swept += swept;
	o->info.heap_freed += freed;
}

static struct shed_sample sample_of(const struct overhead *o)
{
	return (struct shed_sample){.info = &o->info,
				    .rss_cost = o->rss_cost != NULL,
				    .rss_pct = o->rss_pct,
				    .tensor_sampling = o->tensor_sampling,
				    .alloc_side_pct = o->alloc_side_pct};
}

enum ml_shed overhead__next_shed(const struct overhead *o)
{
	struct shed_sample s = sample_of(o);

	return shed__next(&s);
}

static double shed_part(const struct overhead *o, enum ml_shed step)
{
	struct shed_sample s = sample_of(o);

	return shed__part(&s, step);
}

static unsigned int halvings(const struct overhead *o, double part_pct, unsigned int left)
{
	struct shed_sample s = sample_of(o);

	return shed__halvings(&s, part_pct, left);
}

unsigned int overhead__tensor_halvings(const struct overhead *o)
{
	return halvings(o, o->alloc_side_pct, TENSOR_SHED_HALVINGS - o->info.tensor_halvings);
}

void overhead__shed(struct overhead *o, enum ml_shed step, uint64_t report)
{
	struct ml_overhead *in = &o->info;
	char parts[256];
	size_t n = 0;

	if (step >= ML_SHED_N)
		return;
	/* What is costing, largest parts first as the layers come: each over 0.05 % named. */
	parts[0] = '\0';
	for (unsigned int l = 0; l < ML_LAYER_MAX && n < sizeof(parts); l++)
		if (in->layer_pct[l] >= SHED_MIN_PCT)
			n += (size_t)snprintf(parts + n, sizeof(parts) - n, "%s%s %.1f%%", n ? ", " : "",
					      ml_layer_name(l), in->layer_pct[l]);
	if (n < sizeof(parts) && in->other_pct >= SHED_MIN_PCT)
		snprintf(parts + n, sizeof(parts) - n, "%sother %.1f%%", n ? ", " : "", in->other_pct);
	ml_notice("tracing still costs %.1f%% in heap-growth mode, over the %g%% budget (%s): shedding %s (%.1f%%)",
		  in->pct, in->budget_pct, parts, ml_shed_name(step), shed_part(o, step));
	in->shed_pct[step] = shed_part(o, step);
	if (!(in->shed & (1U << step)))
		in->shed_report[step] = report;
	in->shed |= 1U << step;
	if (step == ML_SHED_TORCH_CPU_SAMPLING) {
		in->tensor_halvings += overhead__tensor_halvings(o); /* the budget pauses and resumes the probes */
	} else if (step == ML_SHED_RSS_SAMPLING) {
		for (unsigned int k = halvings(o, o->rss_pct, RSS_SHED_DOUBLINGS - in->rss_doublings); k; k--) {
			in->rss_doublings++;
			if (o->rss_shed)
				o->rss_shed(o->rss_ctx, false);
		}
	} else if (step == ML_SHED_RSS_FAULTS && o->rss_shed) {
		o->rss_shed(o->rss_ctx, true);
		o->rss_cost = NULL; /* nothing more to shed there */
	}
	changed(o);
}

void overhead__set_rss(struct overhead *o, overhead_rss_cost_fn cost, void (*shed)(void *ctx, bool off), void *ctx)
{
	o->rss_cost = cost;
	o->rss_shed = shed;
	o->rss_ctx = ctx;
	o->info.rss_fallback = cost != NULL;
}

void overhead__set_tensor_sampling(struct overhead *o, bool possible)
{
	o->tensor_sampling = possible;
}

const struct ml_overhead *overhead__info(const struct overhead *o)
{
	return &o->info;
}
