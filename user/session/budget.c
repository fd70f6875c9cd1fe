/*
 * --max-overhead's actions. Over the budget, the C heap goes first: its probes off, it is followed through
 * the system calls that grow the address space (heap-growth mode). Still over the budget, the parts of
 * enum ml_shed go in shed.c's order, each when it costs something: the rss layer's sampling (its hook), then
 * PyTorch's CPU tensor allocations sampled in time, then PyTorch's CPU tensor probes, then the CUDA caching
 * allocator's, then the step clock sampled in time. What a layer's probes recorded goes with them: their
 * releases would not be seen. Without the C heap traced, the shed order starts at the first decision.
 *
 * Tensor sampling: session/tsample.h.
 *
 * Heap windows: in heap-growth mode, a process's C heap probes (releases too) are attached for 1/2^n of
 * every HEAP_WINDOW_PERIOD_S, 2^n the smallest power of two that brings their measured full cost under the
 * budget (then raised while a window's measured slowdown times its share of the time is over what the budget
 * leaves the windows once the other layers have their part, and the period doubled while their measured cost,
 * toggles included, is over that and the whole over the budget). A block allocated in a window is recorded with its
 * stack and weighs 2^n; its release is seen only while a window is open, so between windows every report first asks
 * glibc's chunk headers which recorded blocks are still in use (collect/heaplive.c) and drops the others: the survivors
 * estimate what stays. Another allocator has no such headers: its records go only when a window sees their release,
 * or sees the allocator hand their address out again (a takeover), which bounds what a short-lived stack leaves.
 *
 * Step clock sampling: its links (one trap a step, and nothing else) are attached for 1/2^n of every STEP_PERIOD_S
 * in every traced process; a read's steps then stand for those of its whole interval (budget__step_on_ns).
 */
#include "session/budget.h"
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "attach/probes.h"
#include "collect/ledger.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/procmem.h"
#include "session/bgobj.h"
#include "session/follow.h"
#include "session/tracee.h"
#include "session/tsample.h"
#include "memleak.skel.h"

struct budget {
	struct memleak_bpf *skel;	   /* the session's object */
	struct bgobj *heap_obj;		   /* its second instance, heap_exit alone, loaded in the background */
	struct bpf_link *heap_link;	   /* heap_exit attached: heap-growth mode on */
	struct tsample *ts;		   /* tensor sampling */
	int hw_fd;			   /* the C heap's sampling windows: the next toggle */
	unsigned int hw_shift;		   /* a window lasts HEAP_WINDOW_PERIOD_S / 2^hw_shift; 0: no windows */
	bool hw_unchecked;		   /* not glibc: records go by the releases windows see, never swept */
	double hw_period;		   /* one window every hw_period seconds */
	uint64_t hw_adapted_ns;		   /* when the last change to either was made */
	bool hw_on;			   /* ... and on now */
	uint64_t hw_since_ns;		   /* records made from then on are the windows' */
	uint64_t hw_windows, hw_toggle_ns; /* windows opened, and the time toggles took */
	double hw_trap_share;		   /* the part of a window's CPU time its traps take */
	double hw_cost_at;		   /* the C heap probes' cost (ns) summed until the windows began */
	uint64_t hw_cpu_at;		   /* the traced processes' CPU time at the last toggle, ns */
	uint64_t hw_cpu_on, hw_cpu_off;	   /* ... in windows and between them since they began */
	uint64_t hw_tick_at;		   /* PyTorch's CPU tensor releases counted at the last toggle */
	uint64_t hw_tick_on, hw_tick_off;  /* ... in windows and between them */
	uint64_t hw_mark_ns;		   /* CLOCK_MONOTONIC at the last mark */
	uint64_t hw_opened_ns;		   /* when the last window opened */
	uint64_t hw_closed_ns;		   /* ... and when the last one closed */
	uint64_t hw_last_on_ns;		   /* how long it lasted */
	uint64_t hw_wall_on, hw_wall_off;  /* time in windows and between them */
	double hw_target;		   /* what the windows may cost, as a fraction: the budget the rest leaves */
	int st_fd;			   /* the step clock's sampling: the next toggle */
	unsigned int st_shift;		   /* the clock is probed 1/2^st_shift of the time; 0: all of it */
	bool st_off;			   /* ... and closed now, since st_off_ns */
	uint64_t st_off_ns, st_off_sum;	   /* ... the time it was closed before */
};

/* The traps' share of a window's CPU time, capped: near 1 the CPU clock's weight, 1 / (1 - share), follows the
 * estimate's error instead of the work. */
#define HEAP_TRAP_SHARE_MAX 0.9

#define LIBC_LAYER (1U << ML_LAYER_LIBC)
#define HEAP_WINDOW_PERIOD_S 2.0     /* one window a report at -i 2; each toggle has a cost of its own */
#define HEAP_WINDOW_PERIOD_MAX_S 8.0 /* a window every 8 s at least: a verdict needs windows */
#define HEAP_WINDOW_MAX_SHIFT 10     /* 1/1024 of the time at least */

#define STEP_PERIOD_S 1.0 /* the step clock, sampled, is probed for 1/2^n of each second */

static bool heap_prog(const struct memleak_bpf *s, const struct bpf_program *p)
{
	return p == s->progs.heap_exit;
}

int budget__new(struct memleak_bpf *skel, double budget_pct, struct budget **out)
{
	struct budget *b = calloc(1, sizeof(*b));
	int err;

	*out = NULL;
	if (!b)
		return -ENOMEM;
	b->skel = skel;
	b->hw_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	b->st_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	err = b->hw_fd < 0 || b->st_fd < 0 ? -errno : tsample__new(skel, &b->ts);
	if (err)
		ml_dbg("budget: timerfd_create: %s", strerror(-err));
	/* A budget of 100% never switches: its program need not be verified (a third of the verifier's work). */
	else if (budget_pct < 100 && !(b->heap_obj = bgobj__start(skel, heap_prog)))
		err = -ENOMEM;
	if (err) {
		tsample__free(b->ts);
		close(b->hw_fd);
		close(b->st_fd);
		free(b);
		return err;
	}
	*out = b;
	return 0;
}

void budget__free(struct budget *b)
{
	if (!b)
		return;
	bpf_link__destroy(b->heap_link);
	bgobj__free(b->heap_obj);
	tsample__free(b->ts);
	close(b->hw_fd);
	close(b->st_fd);
	if (b->hw_windows)
		ml_info("heap windows: %" PRIu64 " opened, %.1f ms per toggle on average", b->hw_windows,
			(double)b->hw_toggle_ns / 1e6 / (double)(2 * b->hw_windows));
	free(b);
}

bool budget__heap_on(const struct budget *b)
{
	return b && b->heap_link;
}

/*
 * The heap windows' 1/2^n (0: none): the C heap's probes can be closed and reopened (uprobe_multi links). With
 * an allocator other than glibc, whose chunk headers say which blocks live, the windows' records are unchecked.
 */
static unsigned int window_shift(struct budget *b, const struct budget_env *e, const struct ml_overhead *ov)
{
	const char *heap = e->root ? probes__heap(e->root) : NULL;
	double ratio = ov->layer_pct[ML_LAYER_LIBC] / ov->budget_pct;
	unsigned int shift = 1;

	if (b->hw_fd < 0 || !heap || !probes__pausable(e->root, LIBC_LAYER)) {
		ml_info("heap windows: not possible here (%s)", !heap ? "no C heap probed" : "no uprobe_multi links");
		return 0;
	}
	b->hw_unchecked = strcmp(heap, "glibc") != 0;
	while ((double)(1U << shift) < ratio && shift < HEAP_WINDOW_MAX_SHIFT)
		shift++;
	return shift;
}

/* CPU time of the traced processes now, ns (those gone count nothing). */
static uint64_t traced_cpu_ns(const struct budget_env *e)
{
	int pids[256];
	size_t n = e->followers ? followers__pids(e->followers, pids, 255) : 0;
	uint64_t sum = 0, ns;

	if (e->root_pid)
		pids[n++] = e->root_pid;
	for (size_t i = 0; i < n; i++)
		if (!ml_proc_cpu_ns(pids[i], &ns))
			sum += ns;
	return sum;
}

/*
 * What a record stands for. PyTorch's CPU tensor releases, counted in and out of windows (their probe stays
 * on: one trap each, no stack), are a clock of the work: every record stands for all the work since the
 * windows began over the work done in them, (ticks in + out) / ticks in, a ratio that holds whatever each
 * window's length, and is set again for all records at each window (*all true). Without them the clock is
 * the processes' CPU time less the windows' traps (hw_trap_share), which spinning threads and a slowdown of
 * many times blur: each window's records then weigh its cycle over its length times the work rate out of
 * windows over the rate in them, set once, so that an unsteady estimate does not move a row down. 2^shift
 * until a window has been measured; *clock names the clock.
 */
static double window_weight(const struct budget *b, const char **clock, bool *all)
{
	double on = (double)b->hw_cpu_on * (1 - b->hw_trap_share), off = (double)b->hw_cpu_off;
	double last = (double)b->hw_last_on_ns, cycle;

	*all = false;
	if (b->hw_tick_on >= SAMPLE_MIN_TICKS && b->hw_tick_off) {
		*clock = "tensor releases";
		*all = true;
		return (double)(b->hw_tick_on + b->hw_tick_off) / (double)b->hw_tick_on;
	}
	*clock = "CPU time";
	if (on <= 0 || off <= 0 || !b->hw_wall_on || !b->hw_wall_off || last <= 0) {
		*clock = NULL;
		return (double)(1U << b->hw_shift);
	}
	cycle = last + (b->hw_period - HEAP_WINDOW_PERIOD_S / (1U << b->hw_shift)) * 1e9;
	return cycle / last * (off / (double)b->hw_wall_off) / (on / (double)b->hw_wall_on);
}

/* The first window opens half a period from now; records made from now on weigh 2^shift for a start. */
static void heap_windows_start(struct budget *b, const struct budget_env *e, unsigned int shift,
			       const struct ml_overhead *ov)
{
	struct itimerspec its = {};
	double cpu = ov->cpu_per_s > 0 ? ov->cpu_per_s : 1;

	b->hw_shift = shift;
	b->hw_period = HEAP_WINDOW_PERIOD_S;
	b->hw_since_ns = ml_clock_ns(CLOCK_MONOTONIC);
	b->hw_adapted_ns = b->hw_since_ns;
	/* layer_pct is over the processes' CPU time or the wall time if more: over CPU time here. */
	b->hw_trap_share = fmin(HEAP_TRAP_SHARE_MAX, ov->layer_pct[ML_LAYER_LIBC] / 100 * (cpu < 1 ? 1 / cpu : 1));
	b->hw_cost_at = ov->layer_cost_ns[ML_LAYER_LIBC];
	b->hw_cpu_at = traced_cpu_ns(e);
	b->hw_tick_at = overhead__counter(e->ov, ML_STAT_LAYER_FREES(ML_LAYER_TORCH_CPU));
	b->hw_mark_ns = b->hw_since_ns;
	b->hw_target = ov->budget_pct / 100 * 3 / 4;
	overhead__heap_windows(e->ov, 1U << shift, b->hw_unchecked);
	ml_timespec(&its.it_value, HEAP_WINDOW_PERIOD_S / 2);
	timerfd_settime(b->hw_fd, 0, &its, NULL);
}

/* Follow the C heap through its system calls in every traced process; its records so far are dropped. */
static int heap_growth_mode(struct budget *b, const struct budget_env *e, uint64_t next_report)
{
	const struct ml_overhead *ov = overhead__info(e->ov);
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC), t1;
	struct memleak_bpf *hs = NULL;
	unsigned int shift;
	int err = -ENOENT;

	if (b->heap_obj) /* verified in the background since the object was loaded; rarely under way still */
		hs = bgobj__get(b->heap_obj, &err);
	t1 = ml_clock_ns(CLOCK_MONOTONIC);
	if (!err && e->root_pid)
		err = ml_heap_track(e->skel, e->root_pid);
	if (!err) {
		b->heap_link = bpf_program__attach(hs->progs.heap_exit);
		if (!b->heap_link)
			err = -errno;
	}
	if (err) {
		ml_notice("tracing costs %.1f%% of the traced processes' time, over the %g%% budget, and heap-growth "
			  "mode cannot start (%s): every probe stays",
			  ov->pct, ov->budget_pct, strerror(-err));
		return err;
	}
	shift = window_shift(b, e, ov);
	if (e->followers)
		followers__heap_mode(e->followers, shift > 0);
	if (e->root && shift)
		probes__window(e->root, LIBC_LAYER, false);
	else if (e->root)
		probes__drop_layers(e->root, 1U << ML_LAYER_LIBC);
	*e->layers &= ~(1U << ML_LAYER_LIBC);
	ledger__forget_layer(e->ledger, ML_LAYER_LIBC);
	if (shift)
		heap_windows_start(b, e, shift, ov);
	overhead__heap_mode(e->ov, next_report);
	ml_info("heap-growth mode: the switch took %.1f ms (%.1f ms of it waiting for its program's verification)",
		(double)(ml_clock_ns(CLOCK_MONOTONIC) - t0) / 1e6, (double)(t1 - t0) / 1e6);
	ml_notice("tracing cost %.1f%% of the traced processes' time (the C heap's probes %.1f%%), over the %g%% "
		  "budget (--max-overhead), decided %.2f s after attach: the C heap is now followed through its "
		  "system calls (heap-growth mode%s), CUDA and PyTorch as before",
		  ov->full_pct, ov->layer_pct[ML_LAYER_LIBC], ov->budget_pct, ov->decided_after_s,
		  ov->rss_fallback ? " and the rss layer's resident pages" : "");
	return 0;
}

/*
 * The traced processes' CPU time since the last mark goes to the windows' or the gaps' share. A window counts
 * from when its allocation entries are on (attached last) to when they go (closed first).
 */
static void heap_cpu_mark(struct budget *b, const struct budget_env *e, bool in_window)
{
	uint64_t cpu = traced_cpu_ns(e), ticks = overhead__counter(e->ov, ML_STAT_LAYER_FREES(ML_LAYER_TORCH_CPU));
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC);

	*(in_window ? &b->hw_wall_on : &b->hw_wall_off) += now - b->hw_mark_ns;
	b->hw_mark_ns = now;
	if (cpu > b->hw_cpu_at)
		*(in_window ? &b->hw_cpu_on : &b->hw_cpu_off) += cpu - b->hw_cpu_at;
	if (ticks > b->hw_tick_at)
		*(in_window ? &b->hw_tick_on : &b->hw_tick_off) += ticks - b->hw_tick_at;
	b->hw_cpu_at = cpu;
	b->hw_tick_at = ticks;
}

/*
 * A window's traps' part of its CPU time, from the C heap probes' cost the budget's samples measured since the
 * windows began (they run in windows only), once 100 ms of it is in.
 */
static void trap_share(struct budget *b, const struct ml_overhead *ov)
{
	double cost = ov->layer_cost_ns[ML_LAYER_LIBC] - b->hw_cost_at;

	if (b->hw_cpu_on < 100000000ULL || cost <= 0)
		return;
	b->hw_trap_share = fmin(HEAP_TRAP_SHARE_MAX, cost / (double)b->hw_cpu_on);
}

/*
 * The windows' cost as measured: how much slower the work goes in a window (tensor releases per second in and
 * out of windows, else the traps' share of the CPU time) times the time in windows. Over hw_target, the time
 * in windows halves until it is under (the next window is shorter).
 */
static void heap_adapt(struct budget *b, const struct budget_env *e)
{
	const struct ml_overhead *ov = overhead__info(e->ov);
	double slow = b->hw_trap_share, cost, period = b->hw_period;
	unsigned int was = b->hw_shift;
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC);

	if (b->hw_windows < 3 || !b->hw_wall_on || !b->hw_wall_off)
		return;
	/* What the budget leaves the windows once the other layers have their part, half of it at least. */
	if (ov->measured)
		b->hw_target =
		    fmax(ov->budget_pct / 2, ov->budget_pct - (ov->pct - ov->layer_pct[ML_LAYER_LIBC])) / 100;
	if (b->hw_tick_on >= SAMPLE_MIN_TICKS && b->hw_tick_off)
		slow = 1 - ((double)b->hw_tick_on / (double)b->hw_wall_on) /
			       ((double)b->hw_tick_off / (double)b->hw_wall_off);
	cost = slow / (double)(1U << b->hw_shift) / b->hw_period * HEAP_WINDOW_PERIOD_S;
	while (cost > b->hw_target && b->hw_shift < HEAP_WINDOW_MAX_SHIFT) {
		b->hw_shift++;
		cost /= 2;
	}
	/*
	 * The windows' whole cost, as the budget's last sample measured it, toggles included (the releases'
	 * probes stay on 20 ms past a window): over their part of the budget, windows come half as often.
	 */
	if (b->hw_shift == was && ov->layer_pct[ML_LAYER_LIBC] > b->hw_target * 100 && ov->pct > ov->budget_pct &&
	    now - b->hw_adapted_ns > 3 * (uint64_t)(b->hw_period * 1e9) && b->hw_period < HEAP_WINDOW_PERIOD_MAX_S)
		b->hw_period *= 2;
	if (b->hw_shift == was && b->hw_period == period)
		return;
	b->hw_adapted_ns = now;
	overhead__heap_windows(e->ov, (unsigned int)(b->hw_period / HEAP_WINDOW_PERIOD_S * (1U << b->hw_shift)),
			       b->hw_unchecked);
	ml_info("heap windows: a window slows the work by %.0f%%, the C heap's probes cost %.1f%%: now %.1f ms "
		"every %.0f s",
		slow * 100, ov->layer_pct[ML_LAYER_LIBC], HEAP_WINDOW_PERIOD_S / (1U << b->hw_shift) * 1000,
		b->hw_period);
}

/* The C heap's probes opened or closed in every traced process. 0 or the first process's error. */
static int window_side(const struct budget_env *e, bool open)
{
	int err = e->root ? probes__window(e->root, LIBC_LAYER, open) : 0;

	if (e->followers)
		followers__window(e->followers, LIBC_LAYER, open);
	return err;
}

/*
 * The C heap's probes open or closed in every traced process (probes__window: closing a link waits tens of
 * ms, its traps gone at the start). The window is the time the allocations are on; the timer set for the
 * next toggle.
 */
static void heap_toggle(struct budget *b, const struct budget_env *e, bool on)
{
	double period = b->hw_period, on_s;
	struct itimerspec its = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);
	const char *clock;
	double w;
	int err = 0;

	if (!on) {
		heap_cpu_mark(b, e, true);
		b->hw_last_on_ns = b->hw_mark_ns - b->hw_opened_ns;
		b->hw_closed_ns = b->hw_mark_ns;
		trap_share(b, overhead__info(e->ov));
		bool all;
		double ww = window_weight(b, &clock, &all);
		int serr;

		if (all)
			ledger__clear_scale(e->ledger, ML_LAYER_LIBC);
		serr = ledger__add_scale(e->ledger, ML_LAYER_LIBC, all ? b->hw_since_ns : b->hw_opened_ns, ww);

		if (serr)
			ml_notice("heap windows: cannot weigh the records: %s", strerror(-serr));
		heap_adapt(b, e);
		err = window_side(e, false);
	} else {
		err = window_side(e, true);
		heap_cpu_mark(b, e, false);
		b->hw_opened_ns = b->hw_mark_ns;
	}
	if (err && err != -ESRCH)
		ml_notice("heap windows: cannot attach the C heap's probes again: %s", strerror(-err));
	w = window_weight(b, &clock, &(bool){false});
	ml_dbg("heap window %s: CPU time %.1f ms in windows, %.1f ms out (trap share %.2f); tensor releases %" PRIu64
	       " in, %" PRIu64 " out; weight %.1f by %s",
	       on ? "opens" : "closes", (double)b->hw_cpu_on / 1e6, (double)b->hw_cpu_off / 1e6, b->hw_trap_share,
	       b->hw_tick_on, b->hw_tick_off, w, clock ? clock : "nothing yet");
	b->hw_on = on;
	b->hw_windows += on;
	b->hw_toggle_ns += ml_clock_ns(CLOCK_MONOTONIC) - t0;
	overhead__heap_window_count(e->ov, b->hw_windows, w, clock);
	on_s = HEAP_WINDOW_PERIOD_S / (1U << b->hw_shift);
	ml_timespec(&its.it_value, on ? on_s : period - on_s);
	timerfd_settime(b->hw_fd, 0, &its, NULL);
}

int budget__heap_timer_fd(const struct budget *b)
{
	return b && b->hw_shift ? b->hw_fd : -1;
}

void budget__heap_timer(struct budget *b, const struct budget_env *e)
{
	uint64_t expirations;

	if (read(b->hw_fd, &expirations, sizeof(expirations)) < 0 || !b->hw_shift)
		return;
	heap_toggle(b, e, !b->hw_on);
}

bool budget__heap_sweepable(const struct budget *b, uint64_t *since_ns)
{
	if (!b || !b->hw_shift || b->hw_on || b->hw_unchecked)
		return false;
	*since_ns = b->hw_since_ns;
	return true;
}

bool budget__heap_by_size(const struct budget *b, uint64_t *since_ns)
{
	if (!b || !b->hw_shift || (b->hw_tick_on >= SAMPLE_MIN_TICKS && b->hw_tick_off))
		return false;
	*since_ns = b->hw_since_ns;
	return true;
}

uint64_t budget__tensor_phase_ns(const struct budget *b)
{
	return b ? tsample__phase_ns(b->ts) : 0;
}

uint64_t budget__heap_window_ns(const struct budget *b)
{
	if (!b || !b->hw_shift)
		return 0;
	return b->hw_closed_ns > b->hw_since_ns ? b->hw_closed_ns : b->hw_since_ns;
}

int budget__timer_fd(const struct budget *b)
{
	return b ? tsample__timer_fd(b->ts) : -1;
}

/* What tensor sampling acts on, from the budget's own. */
static struct tsample_env ts_env(const struct budget_env *e)
{
	return (struct tsample_env){.root = e->root, .followers = e->followers, .ledger = e->ledger};
}

void budget__timer(struct budget *b, const struct budget_env *e)
{
	struct tsample_env te = ts_env(e);

	tsample__timer(b->ts, &te);
}

int budget__step_timer_fd(const struct budget *b)
{
	return b && b->st_shift ? b->st_fd : -1;
}

/* The step clock's links closed or attached again in every traced process; the timer set for the next toggle. */
static void step_toggle(struct budget *b, const struct budget_env *e, bool on)
{
	double on_s = STEP_PERIOD_S / (1U << b->st_shift);
	struct itimerspec its = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);
	int err = 0;

	if (e->root)
		err = probes__step(e->root, on);
	if (e->followers)
		followers__step(e->followers, on);
	if (err && err != -ESRCH)
		ml_notice("step clock sampling: cannot attach its probe again: %s", strerror(-err));
	/* On once attached; off as the close begins: its breakpoints go first, then it waits tens of ms for RCU. */
	if (on && b->st_off)
		b->st_off_sum += ml_clock_ns(CLOCK_MONOTONIC) - b->st_off_ns;
	else if (!on && !b->st_off)
		b->st_off_ns = t0;
	b->st_off = !on;
	ml_timespec(&its.it_value, on ? on_s : STEP_PERIOD_S - on_s);
	timerfd_settime(b->st_fd, 0, &its, NULL);
}

void budget__step_timer(struct budget *b, const struct budget_env *e)
{
	uint64_t expirations;

	if (read(b->st_fd, &expirations, sizeof(expirations)) < 0 || !b->st_shift)
		return;
	step_toggle(b, e, b->st_off);
}

uint64_t budget__step_on_ns(const struct budget *b, uint64_t now_ns)
{
	uint64_t off = b ? b->st_off_sum : 0;

	if (b && b->st_off && now_ns > b->st_off_ns)
		off += now_ns - b->st_off_ns;
	return now_ns > off ? now_ns - off : 0;
}

/* k more halvings of the time the step clock is probed; the first period starts with it on. */
static void step_sampling(struct budget *b, const struct budget_env *e, unsigned int k)
{
	bool first = !b->st_shift;

	b->st_shift += k;
	/* Steps the clock does not see cannot gate tensor sampling: it goes back to time alone. */
	__atomic_store_n(&b->skel->bss->ts_steps_sampled, 1, __ATOMIC_SEQ_CST);
	if (first)
		step_toggle(b, e, true);
}

void budget__act(struct budget *b, const struct budget_env *e, enum overhead_action act, uint64_t next_report)
{
	struct tsample_env te = ts_env(e);
	enum ml_shed step;
	unsigned int layer;

	if (act == OVERHEAD_HEAP) {
		heap_growth_mode(b, e, next_report);
		return;
	}
	if (act != OVERHEAD_SHED)
		return;
	step = overhead__next_shed(e->ov);
	if (step == ML_SHED_TORCH_CPU_SAMPLING)
		tsample__more(b->ts, &te, overhead__tensor_halvings(e->ov)); /* before overhead__shed counts them */
	if (step == ML_SHED_STEP_SAMPLING)
		step_sampling(b, e, overhead__step_halvings(e->ov));
	if (step == ML_SHED_TORCH_CPU || step == ML_SHED_TORCH_CUDA) {
		layer = step == ML_SHED_TORCH_CPU ? ML_LAYER_TORCH_CPU : ML_LAYER_TORCH_CUDA;
		if (e->root)
			probes__drop_layers(e->root, 1U << layer);
		if (e->followers)
			followers__drop_layers(e->followers, 1U << layer);
		*e->layers &= ~(1U << layer);
		ledger__forget_layer(e->ledger, layer);
		ledger__clear_scale(e->ledger, layer);
		if (step == ML_SHED_TORCH_CPU)
			tsample__stop(b->ts);
	}
	overhead__shed(e->ov, step, next_report); /* ML_SHED_RSS_SAMPLING: the layer's own hook doubles N */
}
