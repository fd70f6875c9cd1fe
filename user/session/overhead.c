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
 * The calibration (calib.c) runs in a thread while the BPF object is loaded and the probes attached: nothing
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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "lib/bpfstats.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "memleak.h"
#include "report/costview.h"
#include "session/calib.h"
#include "session/shed.h"
#include "memleak.skel.h"

#define DECIDE_NS 150000000ULL /* the first decision (and each after a change) from this much of hits */
#define EARLY_NS 50000000ULL   /* ... or from this much, when the traps alone cost EARLY_FACTOR budgets */
#define EARLY_FACTOR 5.0
#define EARLY_HITS 2000		    /* and there were this many */
#define MIN_SAMPLE_NS 1000000000ULL /* later samples span at least a second */
#define MIN_CPU_NS 20000000ULL	    /* and 20 ms of the traced processes' CPU time to say anything */
#define EXTRA_PROGS 2		    /* torch_malloc, torch_free */

struct overhead {
	struct memleak_bpf *skel;
	struct ml_overhead info;
	int stats_fd; /* held: the kernel keeps BPF run-time statistics while it is open */
	int ncpu;
	uint64_t *pcpu;
	uint64_t start_ns; /* the probes were attached */
	uint64_t last_ns, last_cpu_ns, last_probe_ns, last_other_ns;
	uint64_t self_cpu_at, self_at; /* memleak-ai's own CPU time (all its threads), and when, at the last report */
	uint64_t last[ML_STAT_SLOTS];
	bool have_last;
	bool settled;			 /* a decision was taken since the last change: samples span a second again */
	double rss_pct;			 /* the rss layer's part of the last sample (its hook) */
	double sum_cost_ns, sum_base_ns; /* every sample's cost and T(with) since attach: pct_since_attach */
	bool tensor_sampling;		 /* the torch_cpu layer's allocation side can be paused (uprobe_multi links) */
	bool step_sampling;		 /* the step clock's links can be closed and attached again (the same) */
	double alloc_side_pct; /* the torch_cpu layer's part less its releases' traps (what sampling scales) */
	bool rss_on;	       /* the rss layer's faults are traced: they can be shed */
	void (*rss_shed)(void *ctx, bool off);
	void *rss_ctx;
	struct {
		int fd;
		bool probe;
	} extra[EXTRA_PROGS]; /* programs of other instances of the object (PyTorch's USDT) */
	size_t nextra;
	struct calib *calib; /* the probe-cost calibration (calib.c): a hit counts 1 us until it is in */
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
	if (calib__new(&o->calib)) {
		overhead__free(o);
		return -ENOMEM;
	}
	*out = o;
	return 0;
}

void overhead__free(struct overhead *o)
{
	if (!o)
		return;
	calib__free(o->calib); /* first: its thread may be timing the object's program */
	if (o->stats_fd >= 0)
		close(o->stats_fd);
	free(o->pcpu);
	free(o);
}

int overhead__calibrate_start(struct overhead *o, bool multi)
{
	return multi ? calib__start_multi(o->calib) : 0; /* else overhead__bind starts it, with the object's program */
}

int overhead__bind(struct overhead *o, struct memleak_bpf *skel)
{
	o->skel = skel;
	return calib__start(o->calib, skel->progs.calib);
}

/* The calibration's figures, once it is done (taken here, once). False while it runs. */
static bool calibration_in(struct overhead *o)
{
	struct calib_figures f;
	int n = calib__take(o->calib, &f);

	if (n == -EAGAIN)
		return false;
	if (n == 1 && f.err) {
		ml_info("cannot time a probe hit (%s): counting 1 us a hit", strerror(-f.err));
	} else if (n == 1 && f.hit_ns > 0) {
		o->info.hit_ns = f.hit_ns;
		o->info.ret_ns = f.ret_ns;
		o->info.calibrated = true;
		ml_info("one probe hit costs %.0f ns here (an empty program's trap), a return probe %.0f ns more "
			"(a malloc + free pair and the work after it take %.0f ns without probes)",
			f.hit_ns, f.ret_ns, f.base_ns);
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

/* A kernel tracepoint's program (tp_btf): its run time counts every process's events, its cost is tp_cost's. */
static bool is_tp_prog(const struct bpf_program *p)
{
	return bpf_program__type(p) == BPF_PROG_TYPE_TRACING;
}

/* BPF run time so far: of the allocator probes, and of every other uprobe (the calibration's excluded). */
static void bpf_run_ns(struct overhead *o, uint64_t *probe, uint64_t *other)
{
	struct bpf_program *prog;

	*probe = *other = 0;
	bpf_object__for_each_program(prog, o->skel->obj) if (prog != o->skel->progs.calib && !is_tp_prog(prog)) *
	    (is_probe_prog(prog) ? probe : other) += ml_prog_run_ns(bpf_program__fd(prog));
	for (size_t i = 0; i < o->nextra; i++)
		*(o->extra[i].probe ? probe : other) += ml_prog_run_ns(o->extra[i].fd);
}

int overhead__count_prog(struct overhead *o, const struct bpf_program *p)
{
	if (is_tp_prog(p))
		return 0; /* counted by tp_cost, in the shared counters */
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

static void baseline(struct overhead *o, uint64_t now, uint64_t cpu, const uint64_t *v)
{
	memcpy(o->last, v, sizeof(o->last));
	o->last_ns = now;
	o->last_cpu_ns = cpu;
	bpf_run_ns(o, &o->last_probe_ns, &o->last_other_ns);
	o->have_last = true;
}

void overhead__start(struct overhead *o, const int *pids, size_t npids)
{
	uint64_t v[ML_STAT_SLOTS];

	o->start_ns = ml_clock_ns(CLOCK_MONOTONIC);
	o->self_at = o->start_ns;
	o->self_cpu_at = ml_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
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
	/* The loader's traps, and the step clock's (one a step): entries without a layer. */
	other = (double)(d[ML_STAT_LOADER_HITS] + d[ML_STAT_STEP_HITS]) * in->hit_ns + (double)other_ns +
		(hits > 0 ? 0 : (double)probe_ns);
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
	in->step_pct = (double)d[ML_STAT_STEP_HITS] * in->hit_ns * scale / base * 100.0;
	o->rss_pct = (double)rss > other ? in->other_pct : (double)rss * scale / base * 100.0;
	in->pct = cost * scale / base * 100.0;
	o->sum_cost_ns += cost * scale;
	o->sum_base_ns += base;
	in->pct_since_attach = o->sum_cost_ns / o->sum_base_ns * 100.0;
	in->hits_per_s = (hits + (double)(d[ML_STAT_LOADER_HITS] + d[ML_STAT_STEP_HITS])) / secs;
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
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC), cpu, probe_ns, other_ns, v[ML_STAT_SLOTS], d[ML_STAT_SLOTS];
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
	secs = (double)(now - o->last_ns) / 1e9;
	if (base < (double)MIN_CPU_NS) {
		/* An idle job: nothing to relate the cost to, and nothing to save. */
		baseline(o, now, cpu, v);
		return OVERHEAD_OK;
	}
	in->cpu_per_s = base / 1e9 / secs;
	/*
	 * T(with): the CPU time the traced processes used, but never less than the time that passed: a job
	 * that mostly waits (for I/O, the GPU, a timer) is slowed by the time tracing adds to its work, not in
	 * proportion to the little CPU it uses. For a busy single thread both are the same; for busy threads in
	 * parallel, each pays for its own probes, and CPU time is the measure.
	 */
	if (base < secs * 1e9)
		base = secs * 1e9;
	account(o, d, delta(probe_ns, o->last_probe_ns), delta(other_ns, o->last_other_ns) + d[ML_STAT_TP_NS],
		o->rss_on ? d[ML_STAT_RSS_TP_NS] : 0, base, secs);
	baseline(o, now, cpu, v);
	if (!o->settled) {
		o->settled = true;
		if (!in->decided_after_s)
			in->decided_after_s = (double)(now - o->start_ns) / 1e9;
	}
	/* A budget of 100% keeps every probe on, whatever the estimate says. */
	in->over_unshed = false;
	if (in->budget_pct >= 100 || in->pct <= in->budget_pct)
		return OVERHEAD_OK;
	/* The C heap goes first; without it (--layers torch_cpu,...) the shed order starts at once. */
	if (!in->heap_mode && in->layer_pct[ML_LAYER_LIBC] > 0)
		return OVERHEAD_HEAP;
	if (overhead__next_shed(o) < ML_SHED_N)
		return OVERHEAD_SHED;
	in->over_unshed = true; /* the reports say what stays, and why */
	return OVERHEAD_OK;
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
				    .rss_cost = o->rss_on,
				    .rss_pct = o->rss_pct,
				    .tensor_sampling = o->tensor_sampling,
				    .alloc_side_pct = o->alloc_side_pct,
				    .step_sampling = o->step_sampling};
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

unsigned int overhead__step_halvings(const struct overhead *o)
{
	return halvings(o, o->info.step_pct, STEP_SHED_HALVINGS - o->info.step_halvings);
}

void overhead__shed(struct overhead *o, enum ml_shed step, uint64_t report)
{
	struct ml_overhead *in = &o->info;
	char parts[ML_COST_PARTS_LEN];

	if (step >= ML_SHED_N)
		return;
	ml_cost_parts(in, parts, sizeof(parts));
	ml_notice("tracing still costs %.1f%%%s, over the %g%% budget (%s): shedding %s (%.1f%%)", in->pct,
		  in->heap_mode ? " in heap-growth mode" : "", in->budget_pct, parts, ml_shed_name(step),
		  shed_part(o, step));
	in->shed_pct[step] = shed_part(o, step);
	if (!(in->shed & (1U << step)))
		in->shed_report[step] = report;
	in->shed |= 1U << step;
	if (step == ML_SHED_TORCH_CPU_SAMPLING) {
		in->tensor_halvings += overhead__tensor_halvings(o); /* the budget pauses and resumes the probes */
	} else if (step == ML_SHED_STEP_SAMPLING) {
		in->step_halvings += overhead__step_halvings(o); /* ... and the step clock's */
	} else if (step == ML_SHED_RSS_SAMPLING) {
		for (unsigned int k = halvings(o, o->rss_pct, RSS_SHED_DOUBLINGS - in->rss_doublings); k; k--) {
			in->rss_doublings++;
			if (o->rss_shed)
				o->rss_shed(o->rss_ctx, false);
		}
	} else if (step == ML_SHED_RSS_FAULTS && o->rss_shed) {
		o->rss_shed(o->rss_ctx, true);
		o->rss_on = false; /* nothing more to shed there */
	}
	changed(o);
}

void overhead__set_rss(struct overhead *o, void (*shed)(void *ctx, bool off), void *ctx)
{
	o->rss_on = shed != NULL;
	o->rss_shed = shed;
	o->rss_ctx = ctx;
	o->info.rss_fallback = shed != NULL;
}

void overhead__set_tensor_sampling(struct overhead *o, bool possible)
{
	o->tensor_sampling = possible;
}

/*
 * From snapshot to snapshot, not over the budget's samples: those come each second between reports and mostly miss
 * the reports' own work (heap walks, the table's scan), and read 0.8 % where /proc read 2.9 %.
 */
void overhead__self_tick(struct overhead *o)
{
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC), cpu = ml_clock_ns(CLOCK_PROCESS_CPUTIME_ID);

	if (o->self_at && now > o->self_at)
		o->info.self_cpu_pct = (double)delta(cpu, o->self_cpu_at) / (double)(now - o->self_at) * 100.0;
	o->self_cpu_at = cpu;
	o->self_at = now;
}

void overhead__set_step_sampling(struct overhead *o, bool possible)
{
	o->step_sampling = possible;
}

const struct ml_overhead *overhead__info(const struct overhead *o)
{
	return &o->info;
}
