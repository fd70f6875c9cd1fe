/* --max-overhead's actions: the C heap's switch to heap-growth mode, then the shed order (enum ml_shed). */
#ifndef ML_BUDGET_H
#define ML_BUDGET_H

#include <stdbool.h>
#include <stdint.h>
#include "session/overhead.h"

struct memleak_bpf;
struct probes;
struct followers;
struct ledger;
struct bpf_link;

struct budget;

/*
 * Heap-growth mode's program (heap_exit, a third of the verifier's work) is not loaded with the others: with a
 * budget under 100 % it is verified in the background once the probes are attached, in a second instance of
 * the BPF object that shares every map of the first, and attached at the switch.
 */
int budget__new(struct memleak_bpf *skel, double budget_pct, struct budget **out);
void budget__free(struct budget *b); /* NULL-safe: heap-growth mode off, its program unloaded */
/* Heap-growth mode is on: the C heap's system calls are followed. */
bool budget__heap_on(const struct budget *b);

/* What the actions change: the session's parts. */
struct budget_env {
	struct memleak_bpf *skel;
	int root_pid;		     /* the first process (0: none, node-wide) */
	struct probes *root;	     /* its probes (NULL: none) */
	struct followers *followers; /* NULL: none */
	struct ledger *ledger;
	struct overhead *ov;
	unsigned int *layers; /* the layers traced: what is shed goes from it */
};

/*
 * Tensor sampling's timer (a timerfd, readable at each toggle of the tensor allocation probes), and what its
 * expiry does: the probes on or off in every traced process.
 */
/* When tensor sampling's records last changed (CLOCK_MONOTONIC ns): its last on phase's close, or before the
 * first, when sampling began; 0 when not sampling. */
uint64_t budget__tensor_phase_ns(const struct budget *b);
/* The same for the C heap's sampling windows: the last window's close, or when they began; 0: no windows. */
uint64_t budget__heap_window_ns(const struct budget *b);
int budget__timer_fd(const struct budget *b);
void budget__timer(struct budget *b, const struct budget_env *e);

/*
 * The C heap's sampling windows in heap-growth mode (see budget.c): their timer (-1 while there are none), its
 * expiry (the probes opened or closed), and whether the windows' records may be swept now (there are windows,
 * and none is open: no C heap probe writes the table); *since_ns gets when their records began.
 */
int budget__heap_timer_fd(const struct budget *b);
void budget__heap_timer(struct budget *b, const struct budget_env *e);
bool budget__heap_sweepable(const struct budget *b, uint64_t *since_ns);
/*
 * In heap windows with no tensor releases to clock them (a program without PyTorch): the windows' records
 * weigh by their size's growth in the heap walks (collect/sizeweights.h); since when the windows run.
 */
bool budget__heap_by_size(const struct budget *b, uint64_t *since_ns);

/*
 * The step clock's sampling (ML_SHED_STEP_SAMPLING): its timer (-1 while it is probed all the time), its expiry
 * (the clock's links closed or attached again in every traced process), and how long the clock has been probed
 * until now_ns (CLOCK_MONOTONIC), summed since the budget began: a read's steps over the share of its interval
 * on estimate all of them (collect/steps.h).
 */
int budget__step_timer_fd(const struct budget *b);
void budget__step_timer(struct budget *b, const struct budget_env *e);
uint64_t budget__step_on_ns(const struct budget *b, uint64_t now_ns);
/* Do what overhead__sample asked (nothing for OVERHEAD_OK), before report number next_report. */
void budget__act(struct budget *b, const struct budget_env *e, enum overhead_action act, uint64_t next_report);

#endif
