/*
 * --max-overhead's actions. Over the budget, the C heap goes first: its probes off, it is followed through
 * the system calls that grow the address space (heap-growth mode). Still over the budget, the parts of
 * enum ml_shed go in their order, each when it costs something: the rss layer's sampling (its hook), then
 * PyTorch's CPU tensor allocations sampled in time, then PyTorch's CPU tensor probes, then the CUDA caching
 * allocator's. What a layer's probes recorded goes with them: their releases would not be seen.
 *
 * Tensor sampling: the allocation side of the torch_cpu layer (c10::alloc_cpu, the posix_memalign it makes and
 * that call's return) is attached for 1/2^n of every OVERHEAD_TENSOR_PERIOD_S and closed for the rest, in every traced
 * process at once; free_cpu stays on, so a recorded tensor is still released whenever it goes. The records made
 * from then on weigh 2^n (ledger__set_weight): bytes, counts and the verdicts' series estimate the whole.
 */
#include "session/budget.h"
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "attach/probes.h"
#include "collect/ledger.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "session/bgobj.h"
#include "session/follow.h"
#include "session/tracee.h"
#include "memleak.skel.h"

struct budget {
	struct memleak_bpf *skel;	   /* the session's object */
	struct bgobj *heap_obj;		   /* its second instance, heap_exit alone, loaded in the background */
	struct bpf_link *heap_link;	   /* heap_exit attached: heap-growth mode on */
	int ts_fd;			   /* tensor sampling's timer: the next toggle */
	unsigned int ts_shift;		   /* the allocation side is on 1/2^ts_shift of the time; 0: not sampling */
	bool ts_on;			   /* ... and on now */
	uint64_t ts_toggles, ts_toggle_ns; /* toggles made, and the time they took (closing a link waits) */
};

#define TENSOR_LAYERS (1U << ML_LAYER_TORCH_CPU)

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
	b->ts_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (b->ts_fd < 0) {
		err = -errno;
		ml_dbg("budget: timerfd_create: %s", strerror(-err));
		free(b);
		return err;
	}
	/* A budget of 100% never switches: its program need not be verified (a third of the verifier's work). */
	if (budget_pct < 100 && !(b->heap_obj = bgobj__start(skel, heap_prog))) {
		close(b->ts_fd);
		free(b);
		return -ENOMEM;
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
	close(b->ts_fd);
	if (b->ts_toggles)
		ml_info("tensor sampling: %" PRIu64 " toggles of the allocation probes, %.1f ms each on average",
			b->ts_toggles, (double)b->ts_toggle_ns / 1e6 / (double)b->ts_toggles);
	free(b);
}

bool budget__heap_on(const struct budget *b)
{
	return b && b->heap_link;
}

/* Follow the C heap through its system calls in every traced process; its records so far are dropped. */
static int heap_growth_mode(struct budget *b, const struct budget_env *e, uint64_t next_report)
{
	const struct ml_overhead *ov = overhead__info(e->ov);
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC), t1;
	struct memleak_bpf *hs = NULL;
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
	if (e->followers)
		followers__heap_mode(e->followers);
	if (e->root)
		probes__drop_libc(e->root);
	*e->layers &= ~(1U << ML_LAYER_LIBC);
	ledger__forget_layer(e->ledger, ML_LAYER_LIBC);
	overhead__count_prog(e->ov, hs->progs.heap_exit);
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

/* The tensor layers' allocation side on or off in every traced process; the timer set for the next toggle. */
static void tensor_toggle(struct budget *b, const struct budget_env *e, bool on)
{
	double period = OVERHEAD_TENSOR_PERIOD_S, on_s = period / (1U << b->ts_shift);
	struct itimerspec its = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);
	int err = 0;

	if (e->root)
		err = probes__pause(e->root, TENSOR_LAYERS, !on);
	if (e->followers)
		followers__pause(e->followers, TENSOR_LAYERS, !on);
	if (err && err != -ESRCH)
		ml_notice("tensor sampling: cannot attach the allocation probes again: %s", strerror(-err));
	b->ts_on = on;
	b->ts_toggles++;
	b->ts_toggle_ns += ml_clock_ns(CLOCK_MONOTONIC) - t0;
	ml_timespec(&its.it_value, on ? on_s : period - on_s);
	timerfd_settime(b->ts_fd, 0, &its, NULL);
}

int budget__timer_fd(const struct budget *b)
{
	return b ? b->ts_fd : -1;
}

void budget__timer(struct budget *b, const struct budget_env *e)
{
	uint64_t expirations;

	if (read(b->ts_fd, &expirations, sizeof(expirations)) < 0 || !b->ts_shift)
		return;
	tensor_toggle(b, e, !b->ts_on);
}

/* k more halvings of the time the tensor allocation probes are on: their records weigh 2^k times as much. */
static void tensor_sampling(struct budget *b, const struct budget_env *e, unsigned int k)
{
	unsigned int first = !b->ts_shift;
	int err;

	b->ts_shift += k;
	b->skel->bss->wrap_sampled = 1;
	err = ledger__set_weight(e->ledger, ML_LAYER_TORCH_CPU, ml_clock_ns(CLOCK_MONOTONIC), b->ts_shift);
	if (err)
		ml_notice("tensor sampling: cannot weigh the records: %s", strerror(-err));
	if (first)
		tensor_toggle(b, e,
			      false); /* the first period starts with the probes off; later ones keep their phase */
}

void budget__act(struct budget *b, const struct budget_env *e, enum overhead_action act, uint64_t next_report)
{
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
		tensor_sampling(b, e, overhead__tensor_halvings(e->ov)); /* before overhead__shed counts them */
	if (step == ML_SHED_TORCH_CPU || step == ML_SHED_TORCH_CUDA) {
		layer = step == ML_SHED_TORCH_CPU ? ML_LAYER_TORCH_CPU : ML_LAYER_TORCH_CUDA;
		if (e->root)
			probes__drop_layers(e->root, 1U << layer);
		if (e->followers)
			followers__drop_layers(e->followers, 1U << layer);
		*e->layers &= ~(1U << layer);
		ledger__forget_layer(e->ledger, layer);
		if (step == ML_SHED_TORCH_CPU && b->ts_shift) { /* nothing left to sample: the timer stops */
			b->ts_shift = 0;
			b->skel->bss->wrap_sampled = 0;
			timerfd_settime(b->ts_fd, 0, &(struct itimerspec){}, NULL);
		}
	}
	overhead__shed(e->ov, step, next_report); /* ML_SHED_RSS_SAMPLING: the layer's own hook doubles N */
}
