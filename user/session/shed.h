/*
 * The budget's shed decisions as pure functions over one sample of its figures (overhead.c takes the samples
 * and acts on the answers): which step goes next, what it would save, and how many halvings at once.
 */
#ifndef MEMLEAK_AI_SHED_H
#define MEMLEAK_AI_SHED_H

#include <stdbool.h>
#include "collect/cost.h"

#define TENSOR_SHED_FACTOR 5.0	      /* a tensor layer's probes are shed when they alone cost 5 times the budget */
#define RSS_SHED_DOUBLINGS 6	      /* the rss layer's sampling is shed down to one page in 64, then its faults */
#define TENSOR_SHED_HALVINGS 4	      /* tensor allocations are traced down to 1/16 of the time */
#define SHED_MIN_PCT ML_COST_PART_MIN /* a step that saves less is not worth what it loses */
#define STEP_SHED_HALVINGS 5	      /* the step clock is probed down to 1/32 of the time */
#define STEP_SHED_SHARE 8.0	      /* ... and only once it costs an eighth of the budget: else its steps all count */

/* One sample of what the decisions read. */
struct shed_sample {
	const struct ml_overhead *info; /* pct, budget_pct, layer_pct, shed, rss_doublings, tensor_halvings, windows */
	bool rss_cost;			/* the rss layer's cost is measured: it can be shed */
	double rss_pct;			/* ... and its part of pct */
	bool tensor_sampling;		/* the torch_cpu layer's allocation side can be paused */
	double alloc_side_pct;		/* ... and what it costs */
	bool step_sampling;		/* the step clock's links can be closed and attached again */
};

/* The next step to shed, or ML_SHED_N: none is needed, or none would bring the cost under the budget. */
enum ml_shed shed__next(const struct shed_sample *s);
/* What shedding step would save (0 below SHED_MIN_PCT). */
double shed__part(const struct shed_sample *s, enum ml_shed step);
/* How many halvings at once of a part costing part_pct (at most left) bring what shedding can change under the
 * budget. */
unsigned int shed__halvings(const struct shed_sample *s, double part_pct, unsigned int left);

#endif
