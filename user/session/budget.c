/*
 * --max-overhead's actions. Over the budget, the C heap goes first: its probes off, it is followed through
 * the system calls that grow the address space (heap-growth mode). Still over the budget, the parts of
 * enum ml_shed go in their order, each when it costs something: the rss layer's sampling (its hook), then
 * PyTorch's CPU tensor probes, then the CUDA caching allocator's. What a layer's probes recorded goes with
 * them: their releases would not be seen.
 */
#include <errno.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "attach/probes.h"
#include "collect/ledger.h"
#include "lib/log.h"
#include "session/budget.h"
#include "session/follow.h"
#include "session/tracee.h"
#include "memleak.skel.h"

/* Follow the C heap through its system calls in every traced process; its records so far are dropped. */
static int heap_growth_mode(const struct budget_env *e, uint64_t next_report)
{
	const struct ml_overhead *ov = overhead__info(e->ov);
	int err;

	err = e->root_pid ? ml_heap_track(e->skel, e->root_pid) : 0;
	if (!err) {
		*e->heap_link = bpf_program__attach(e->skel->progs.heap_exit);
		if (!*e->heap_link)
			err = -errno;
	}
	if (err) {
		ml_notice("tracing costs %.1f%% of the traced processes' time, over the %g%% budget, and heap-growth "
			  "mode cannot start (%s): every probe stays", ov->pct, ov->budget_pct, strerror(-err));
		return err;
	}
	if (e->followers)
		followers__heap_mode(e->followers);
	if (e->root)
		probes__drop_libc(e->root);
	*e->layers &= ~(1U << ML_LAYER_LIBC);
	ledger__forget_layer(e->ledger, ML_LAYER_LIBC);
	overhead__heap_mode(e->ov, next_report);
	ml_notice("tracing cost %.1f%% of the traced processes' time (the C heap's probes %.1f%%), over the %g%% "
		  "budget (--max-overhead), decided %.2f s after attach: the C heap is now followed through its "
		  "system calls (heap-growth mode%s), CUDA and PyTorch as before",
		  ov->full_pct, ov->layer_pct[ML_LAYER_LIBC], ov->budget_pct, ov->decided_after_s,
		  ov->rss_fallback ? " and the rss layer's resident pages" : "");
	return 0;
}

void budget__act(const struct budget_env *e, enum overhead_action act, uint64_t next_report)
{
	enum ml_shed step;
	unsigned int layer;

	if (act == OVERHEAD_HEAP) {
		heap_growth_mode(e, next_report);
		return;
	}
	if (act != OVERHEAD_SHED)
		return;
	step = overhead__next_shed(e->ov);
	if (step == ML_SHED_TORCH_CPU || step == ML_SHED_TORCH_CUDA) {
		layer = step == ML_SHED_TORCH_CPU ? ML_LAYER_TORCH_CPU : ML_LAYER_TORCH_CUDA;
		if (e->root)
			probes__drop_layers(e->root, 1U << layer);
		if (e->followers)
			followers__drop_layers(e->followers, 1U << layer);
		*e->layers &= ~(1U << layer);
		ledger__forget_layer(e->ledger, layer);
	}
	overhead__shed(e->ov, step, next_report); /* ML_SHED_RSS_SAMPLING: the layer's own hook doubles N */
}
