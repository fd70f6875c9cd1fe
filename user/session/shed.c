/* The budget's shed decisions, pure over one sample (shed.h). */
#include "session/shed.h"
#include <stddef.h>

static double tensor_part(const struct shed_sample *s, unsigned int layer)
{
	double p = s->info->layer_pct[layer];

	return p > TENSOR_SHED_FACTOR * s->info->budget_pct ? p : 0;
}

static double step_part(const struct shed_sample *s, enum ml_shed step)
{
	const struct ml_overhead *in = s->info;

	switch (step) {
	case ML_SHED_RSS_SAMPLING: return s->rss_cost ? s->rss_pct : 0;
	/* Tensor allocations sampled in time: what it saves is half the allocation side's traps, a step. */
	case ML_SHED_TORCH_CPU_SAMPLING:
		return s->tensor_sampling && in->tensor_halvings < TENSOR_SHED_HALVINGS &&
			       !(in->shed & (1U << ML_SHED_TORCH_CPU))
			   ? s->alloc_side_pct
			   : 0;
	/*
	 * The tensor layers' probes are what names a leak in Python code (heap growth cannot: it names who
	 * reached new memory, not who keeps it): they go only when they alone cost TENSOR_SHED_FACTOR times the
	 * budget, a job allocating tensors at a rate where tracing each one is no longer affordable.
	 */
	case ML_SHED_TORCH_CPU: return tensor_part(s, ML_LAYER_TORCH_CPU);
	case ML_SHED_TORCH_CUDA: return tensor_part(s, ML_LAYER_TORCH_CUDA);
	case ML_SHED_RSS_FAULTS: return s->rss_cost ? s->rss_pct : 0;
	/* The step clock sampled in time: a trap a step adds up in a loop of short steps (1.4 % at 1,400 a second). */
	case ML_SHED_STEP_SAMPLING:
		return s->step_sampling && in->step_halvings < STEP_SHED_HALVINGS &&
			       in->step_pct * STEP_SHED_SHARE >= in->budget_pct
			   ? in->step_pct
			   : 0;
	default: return 0;
	}
}

double shed__part(const struct shed_sample *s, enum ml_shed step)
{
	double p = step_part(s, step);

	return p >= SHED_MIN_PCT ? p : 0;
}

/* The C heap's sampling windows are no step: they shorten themselves while they cost too much (budget.c). */
static double windows_part(const struct shed_sample *s)
{
	return s->info->heap_window_one_in ? s->info->layer_pct[ML_LAYER_LIBC] : 0;
}

/* What stays whatever is shed: the windows, and tensor probes below their threshold. */
static double kept(const struct shed_sample *s)
{
	static const unsigned int tensor_layers[] = {ML_LAYER_TORCH_CPU, ML_LAYER_TORCH_CUDA};
	double k = windows_part(s);

	for (size_t i = 0; i < sizeof(tensor_layers) / sizeof(tensor_layers[0]); i++)
		if (!tensor_part(s, tensor_layers[i]))
			k += s->info->layer_pct[tensor_layers[i]];
	return k;
}

/*
 * The order steps are taken in: the step clock's sampling loses only the precision of its counts, so it comes
 * before the rss layer's faults, which are what the C heap falls back to.
 */
static const enum ml_shed shed_order[] = {ML_SHED_RSS_SAMPLING, ML_SHED_TORCH_CPU_SAMPLING, ML_SHED_TORCH_CPU,
					  ML_SHED_TORCH_CUDA,	ML_SHED_STEP_SAMPLING,	    ML_SHED_RSS_FAULTS};
#define SHED_ORDER_N (sizeof(shed_order) / sizeof(shed_order[0]))

/* A step taken more than once: by halvings (sampling) while shed__part says it can still save. */
static bool repeats(enum ml_shed st)
{
	return st == ML_SHED_TORCH_CPU_SAMPLING || st == ML_SHED_STEP_SAMPLING;
}

enum ml_shed shed__next(const struct shed_sample *s)
{
	const struct ml_overhead *in = s->info;
	double later = 0;

	/*
	 * Shedding the rest must be what brings the cost under the budget, or it only loses information. Tensor
	 * sampling keeps every stack (as estimates) and lowers what stays: it goes whenever the cost is over.
	 */
	for (size_t i = 1; i + 1 < SHED_ORDER_N; i++)
		if ((repeats(shed_order[i]) || !(in->shed & (1U << shed_order[i]))) &&
		    shed__part(s, shed_order[i]) > later)
			later = shed__part(s, shed_order[i]);
	if (shed__part(s, ML_SHED_TORCH_CPU_SAMPLING) > 0)
		return ML_SHED_TORCH_CPU_SAMPLING;
	if (in->pct - kept(s) <= in->budget_pct)
		return ML_SHED_N;
	for (size_t i = 0; i < SHED_ORDER_N; i++) {
		enum ml_shed st = shed_order[i];

		/*
		 * The rss layer's sampling may double again and again, as long as it costs at least as much as the
		 * probe steps after it, up to one page in 64: beyond that what it costs is its faults, whatever the
		 * interval, and the last step turns them off. Sampling halves the time on while it can (shed__part
		 * is 0 after the last halving). The others go once.
		 */
		if (st == ML_SHED_RSS_SAMPLING) {
			if (shed__part(s, st) > 0 && shed__part(s, st) >= later &&
			    in->rss_doublings < RSS_SHED_DOUBLINGS)
				return ML_SHED_RSS_SAMPLING;
			continue;
		}
		if (st == ML_SHED_TORCH_CPU_SAMPLING || (!repeats(st) && (in->shed & (1U << st))))
			continue;
		if (shed__part(s, st) > 0)
			return st;
	}
	return ML_SHED_N;
}

/*
 * After k halvings, 1 - 2^-k of the part is saved. The cost to cover is what is over the budget less the C heap
 * windows' part, which no halving changes: counted in, a sample with libc at 7.8 % of 10.1 % doubled the rss
 * layer's sampling six times at once, to a 16-MiB page a record, and DataLoader workers' growing copies read
 * stable. One a sample took five seconds to bring a page-faulting loop's rss sampling from 11.7 % to the budget.
 */
unsigned int shed__halvings(const struct shed_sample *s, double part_pct, unsigned int left)
{
	double over = s->info->pct - windows_part(s) - s->info->budget_pct;
	unsigned int k = 1;

	while (k < left && part_pct * (1 - 1.0 / (1U << k)) < over)
		k++;
	return k;
}
