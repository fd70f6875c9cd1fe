/*
 * The tool's own cost. A probe hit is a trap into the kernel whatever the BPF program does, so the cost is
 * counted as probe hits (from the BPF counters) times the cost of one hit, calibrated at start-up on this
 * machine, plus the time spent in the BPF programs (the kernel's own statistics). It is related to the CPU
 * time the traced processes used meanwhile, or the time that passed if that is more (a job that mostly waits
 * is not slowed in proportion to its little CPU): the trap's time is charged to them, so the share is what
 * tracing takes of the job's work.
 *
 * --max-overhead: when the C heap's probes (by far the most frequent) push the share over the budget, the
 * C heap is followed through the system calls that grow the address space instead (heap-growth mode,
 * bpf/proc.bpf.c: heap_exit), which costs nothing per malloc. The CUDA and PyTorch layers stay as they are.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib/clock.h"
#include "memleak.h"
#include "lib/elfsym.h"
#include "lib/log.h"
#include "session/overhead.h"
#include "lib/procmaps.h"
#include "memleak.skel.h"

#define CALIB_CALLS 20000
#define MIN_SAMPLE_NS 1000000000ULL /* a sample spans at least a second */
#define MIN_CPU_NS 20000000ULL      /* and 20 ms of the traced processes' CPU time to say anything */

struct overhead {
	struct memleak_bpf *skel;
	struct ml_overhead info;
	int stats_fd; /* held: the kernel keeps BPF run-time statistics while it is open */
	int ncpu;
	uint64_t *pcpu;
	uint64_t last_ns, last_cpu_ns, last_bpf_ns;
	uint64_t last[ML_STAT_SLOTS];
	bool have_last;
};

/* The cost of one sample in % of base, times in ns. */
static double overhead_pct(double entry_hits, double ret_hits, double hit_ns, double ret_ns, double bpf_ns,
			   double cpu_ns)
{
	if (cpu_ns <= 0)
		return 0;
	return (entry_hits * hit_ns + ret_hits * ret_ns + bpf_ns) / cpu_ns * 100.0;
}

struct overhead *overhead__new(struct memleak_bpf *skel, double budget_pct)
{
	struct overhead *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->skel = skel;
	o->info.budget_pct = budget_pct;
	o->info.hit_ns = 1000;
	o->info.ret_ns = 1000;
	o->ncpu = libbpf_num_possible_cpus();
	o->pcpu = o->ncpu > 0 ? calloc((size_t)o->ncpu * ML_STAT_SLOTS, sizeof(uint64_t)) : NULL;
	if (!o->pcpu) {
		free(o);
		return NULL;
	}
	/* Without this the kernel keeps no run time for BPF programs; it stops when memleak-ai exits. */
	o->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	return o;
}

void overhead__free(struct overhead *o)
{
	if (!o)
		return;
	if (o->stats_fd >= 0)
		close(o->stats_fd);
	free(o->pcpu);
	free(o);
}

/* CPU ns a malloc + free pair (CPU time, not wall time: other load on the machine must not count). */
static double time_calls(void)
{
	uint64_t t0 = ml_clock_ns(CLOCK_THREAD_CPUTIME_ID);

	for (int i = 0; i < CALIB_CALLS; i++) {
		void *p = malloc(64);

		asm volatile("" : : "r"(p) : "memory");
		free(p);
	}
	return (double)(ml_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / CALIB_CALLS;
}

/*
 * The calibration probes the C library's own malloc and free (the functions whose probes cost the most),
 * in a child of memleak-ai, as the probes run in the traced processes. How a hit is handled depends on
 * the probed instruction (one the kernel emulates, or one stepped out of line), so no stand-in would do.
 * The child answers each 'm' on cmd with the ns a malloc + free pair takes.
 */
static void calib_child(int cmd, int res)
{
	char c;

	while (read(cmd, &c, 1) == 1 && c == 'm') {
		double v;

		time_calls(); /* warm up (and set up the out-of-line area of a new probe) */
		v = time_calls();
		if (write(res, &v, sizeof(v)) != sizeof(v))
			break;
	}
	_exit(0);
}

static int ask(int cmd, int res, double *out)
{
	if (write(cmd, "m", 1) != 1 || read(res, out, sizeof(*out)) != sizeof(*out))
		return -EIO;
	return 0;
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

/* ns a malloc + free pair in a child: without probes, with entry probes on both, and a return probe too. */
static int time_probes(struct overhead *o, double *base, double *entry, double *ret)
{
	struct bpf_link *l[3] = {};
	uint64_t offs[3];
	int cmd[2], res[2], err;
	char *path = NULL;
	pid_t child;

	err = find_allocator(&path, &offs[0], &offs[1]);
	if (err)
		return err;
	offs[2] = offs[0];
	if (pipe2(cmd, O_CLOEXEC)) {
		free(path);
		return -errno;
	}
	if (pipe2(res, O_CLOEXEC)) {
		err = -errno;
		close(cmd[0]);
		close(cmd[1]);
		free(path);
		return err;
	}
	child = fork();
	if (child == 0) {
		close(cmd[1]);
		close(res[0]);
		calib_child(cmd[0], res[1]);
	}
	close(cmd[0]);
	close(res[1]);
	if (child < 0) {
		err = -errno;
		goto out;
	}
	err = ask(cmd[1], res[0], base);
	for (int i = 0; i < 3 && !err; i++) {
		l[i] = bpf_program__attach_uprobe(o->skel->progs.calib, i == 2, child, path, offs[i]);
		if (!l[i])
			err = -errno;
		else if (i >= 1)
			err = ask(cmd[1], res[0], i == 1 ? entry : ret);
	}
	ml_dbg("calibration on %s: %.1f ns a malloc + free, %.1f with entry probes, %.1f with malloc's return probe",
	       path, *base, *entry, *ret);
out:
	for (int i = 0; i < 3; i++)
		bpf_link__destroy(l[i]);
	close(cmd[1]);
	close(res[0]);
	if (child > 0)
		waitpid(child, NULL, 0);
	free(path);
	return err;
}

int overhead__calibrate(struct overhead *o)
{
	double base = 0, entry = 0, ret = 0;
	int err = time_probes(o, &base, &entry, &ret);

	if (err)
		return err;
	/* Two entry hits a pair; a return probe also traps at entry, so its own cost is the difference. */
	if (entry > base)
		o->info.hit_ns = (entry - base) / 2;
	o->info.ret_ns = ret > entry ? ret - entry : 0;
	ml_info("one probe hit costs %.0f ns here, a return probe %.0f ns more", o->info.hit_ns, o->info.ret_ns);
	return 0;
}

static int read_counters(struct overhead *o, uint64_t *v)
{
	__u32 zero = 0;

	if (bpf_map_lookup_elem(bpf_map__fd(o->skel->maps.stats), &zero, o->pcpu))
		return -errno;
	memset(v, 0, ML_STAT_SLOTS * sizeof(*v));
	for (int c = 0; c < o->ncpu; c++)
		for (int i = 0; i < ML_STAT_SLOTS; i++)
			v[i] += o->pcpu[(size_t)c * ML_STAT_SLOTS + i];
	return 0;
}

static uint64_t bpf_run_ns(struct overhead *o)
{
	struct bpf_program *prog;
	uint64_t sum = 0;

	bpf_object__for_each_program(prog, o->skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			sum += info.run_time_ns;
	}
	return sum;
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

int overhead__sample(struct overhead *o, const int *pids, size_t npids)
{
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC), cpu = cpu_ns(pids, npids), bpf = bpf_run_ns(o), v[ML_STAT_SLOTS], d[ML_STAT_SLOTS];
	double entry, ret, libc_entry, libc_ret, pct, libc_pct, secs, base;
	const uint32_t libc = ML_STAT_LAYER_ALLOCS(ML_LAYER_LIBC);

	if (o->have_last && now - o->last_ns < MIN_SAMPLE_NS)
		return 0;
	if (read_counters(o, v))
		return 0;
	if (!o->have_last) {
		memcpy(o->last, v, sizeof(v));
		o->last_ns = now;
		o->last_cpu_ns = cpu;
		o->last_bpf_ns = bpf;
		o->have_last = true;
		return 0;
	}
	for (int i = 0; i < ML_STAT_SLOTS; i++)
		d[i] = v[i] >= o->last[i] ? v[i] - o->last[i] : 0;
	secs = (double)(now - o->last_ns) / 1e9;
	/* Every call traps at entry; allocating calls (nested ones too) trap again at their return. */
	entry = (double)(d[ML_STAT_ALLOC_CALLS] + d[ML_STAT_ALLOC_FAILED] + d[ML_STAT_FREE_CALLS] +
			 d[ML_STAT_FREE_NULL] + d[ML_STAT_NESTED]);
	ret = (double)(d[ML_STAT_ALLOC_CALLS] + d[ML_STAT_ALLOC_FAILED] + d[ML_STAT_NESTED]);
	/* The C heap's part: its calls, free(NULL) and the allocator's calls to itself are its own. */
	libc_entry = o->info.heap_mode ? 0 : (double)(d[libc] + d[libc + 1] + d[ML_STAT_FREE_NULL] + d[ML_STAT_NESTED]);
	libc_ret = o->info.heap_mode ? 0 : (double)(d[libc] + d[ML_STAT_NESTED]);
	if (o->info.heap_mode) {
		/* Heap-growth records come from a tracepoint, not a trap. */
		entry -= (double)(d[libc] + d[libc + 1]);
		ret -= (double)d[libc];
		if (entry < 0)
			entry = 0;
		if (ret < 0)
			ret = 0;
	}
	memcpy(o->last, v, sizeof(v));
	o->last_ns = now;
	if (cpu - o->last_cpu_ns < MIN_CPU_NS) {
		/* An idle job: nothing to relate the cost to, and nothing to save. */
		o->last_cpu_ns = cpu;
		o->last_bpf_ns = bpf;
		return 0;
	}
	/*
	 * Related to the CPU time the traced processes used, but never to less than the time that passed: a job
	 * that mostly waits (for I/O, the GPU, a timer) is slowed by the time tracing adds to its work, not in
	 * proportion to the little CPU it uses. For a busy single thread both are the same; for busy threads in
	 * parallel, each pays for its own probes, and CPU time is the measure.
	 */
	base = (double)(cpu - o->last_cpu_ns);
	if (base < secs * 1e9)
		base = secs * 1e9;
	pct = overhead_pct(entry, ret, o->info.hit_ns, o->info.ret_ns, (double)(bpf - o->last_bpf_ns), base);
	libc_pct = overhead_pct(libc_entry, libc_ret, o->info.hit_ns, o->info.ret_ns, 0, base);
	o->info.pct = pct;
	o->info.hits_per_s = (entry + ret) / secs;
	o->info.bpf_ns_per_s = (double)(bpf - o->last_bpf_ns) / secs;
	o->info.cpu_per_s = (double)(cpu - o->last_cpu_ns) / 1e9 / secs;
	o->info.measured = true;
	o->last_cpu_ns = cpu;
	o->last_bpf_ns = bpf;
	/* A budget of 100% keeps every probe on, whatever the estimate says. */
	return !o->info.heap_mode && o->info.budget_pct < 100 && pct > o->info.budget_pct && libc_pct > 0;
}

void overhead__heap_mode(struct overhead *o, uint64_t report)
{
	o->info.full_pct = o->info.pct;
	o->info.heap_mode = true;
	o->info.heap_since_report = report;
}

const struct ml_overhead *overhead__info(const struct overhead *o)
{
	return &o->info;
}
