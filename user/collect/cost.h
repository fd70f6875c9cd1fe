/*
 * The tool's cost as session/overhead.c measures it and what the --max-overhead budget shed: a record the
 * session fills and every report shows, kept below both so neither reaches into the other.
 */
#ifndef ML_COST_H
#define ML_COST_H

#include <stdbool.h>
#include <stdint.h>
#include "memleak.h"

/*
 * What --max-overhead sheds, in this order, while the cost stays over the budget once the C heap is in
 * heap-growth mode (docs/usage.md, "The budget's modes"). Each step is taken when its part costs something
 * and the budget is still exceeded at the next sample; the C heap's switch always comes first.
 */
enum ml_shed {
	ML_SHED_RSS_SAMPLING = 0,   /* the rss layer samples 1 page in N: N doubles, as often as needed (its hook) */
	ML_SHED_TORCH_CPU_SAMPLING, /* PyTorch's CPU tensor allocations traced 1/N of the time: N doubles, up to 16 */
	ML_SHED_TORCH_CPU,	    /* PyTorch's CPU tensor probes: that memory is then followed as heap growth */
	ML_SHED_TORCH_CUDA,	    /* the caching allocator's tensor probes: the cuda layer's segments stay */
	ML_SHED_RSS_FAULTS,	    /* the rss layer's fault tracing, after its sampling went to 1 page in 64 */
	ML_SHED_STEP_SAMPLING, /* the step clock's probe attached 1/N of the time, its counts scaled: N doubles to 32 */
	ML_SHED_N,	       /* nothing more is shed: the CUDA calls and heap growth are rare */
};

/* The smallest part of the cost worth naming, or shedding (session/shed.h): what saves less loses more. */
#define ML_COST_PART_MIN 0.05

const char *ml_shed_name(enum ml_shed step);

/* The tool's cost, as every report shows it (measured by session/overhead.c). */
struct ml_overhead {
	double pct;		 /* cost / T(with): the traced processes' CPU time, or elapsed time if more; <= 100 */
	double pct_since_attach; /* the same over every sample since attach (the start's full cost included) */
	double budget_pct;	 /* --max-overhead */
	double hits_per_s;	 /* probe hits (traps at entry and at return), every one */
	double hit_ns;		 /* one entry trap with an empty program: the floor (calibrated after attach) */
	double ret_ns;		 /* one return trap, the same way */
	double bpf_ns_per_s;	 /* time in the BPF programs (kernel statistics) */
	double cpu_per_s;	 /* CPU seconds the traced processes used per second */
	double self_cpu_pct;	 /* memleak-ai's own CPU time (reports, heap walks, /proc reads), in % of one CPU: not
				  * in pct, which is what the traced processes pay; it competes with them for CPUs */
	double layer_pct[ML_LAYER_MAX]; /* each layer's part of pct: its traps and its share of the probes' BPF time */
	double layer_cost_ns[ML_LAYER_MAX]; /* ... in ns of the traced processes' time, summed since attach */
	double other_pct;  /* the rest: heap growth's system-call tracepoint, the loader's probes, following */
	bool measured;	   /* a sample has been taken */
	bool calibrated;   /* hit_ns and ret_ns are this machine's, not the 1 us default */
	bool heap_mode;	   /* the C heap is followed through its system calls, its probes are off */
	bool rss_fallback; /* the rss layer is on: with heap growth, what the C heap falls back to (set by the layer) */
	double full_pct;   /* the cost measured when heap-growth mode was entered */
	uint64_t heap_since_report;	 /* the report the mode began before */
	double decided_after_s;		 /* how long after attach the C heap's mode was decided (heap-growth or not) */
	unsigned int shed;		 /* steps of enum ml_shed taken (a bit each) */
	uint64_t shed_report[ML_SHED_N]; /* the report each step came before */
	double shed_pct[ML_SHED_N];	 /* what its part cost then */
	unsigned int rss_doublings;	 /* ML_SHED_RSS_SAMPLING: how many times the rss layer's N doubled */
	unsigned int tensor_halvings;	 /* ML_SHED_TORCH_CPU_SAMPLING: the tensor probes' time on halved so often */
	unsigned int step_halvings;	 /* ML_SHED_STEP_SAMPLING: the step clock's time on halved so often */
	double step_pct;		 /* the step clock's traps: its part of other_pct */
	bool over_unshed;		 /* over the budget at the last sample with nothing left to shed */
	unsigned int heap_window_one_in; /* heap-growth mode: the C heap's probes on 1/N of the time (0: never) */
	uint64_t heap_windows;		 /* ... windows opened so far */
	double heap_window_weight;     /* ... what a record made in one stands for (2^n, corrected for the slowdown) */
	const char *heap_window_clock; /* ... measured by what ("tensor releases", "CPU time"; NULL: not yet) */
	uint64_t heap_swept, heap_freed; /* ... their records checked against glibc's headers, and found released */
	bool heap_window_unchecked;	 /* ... not glibc: releases are seen in windows only, no header to check */
};

#endif
