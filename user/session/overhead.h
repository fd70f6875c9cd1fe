/* The tool's own cost to the traced processes, measured as it runs, and the --max-overhead budget. */
#ifndef ML_OVERHEAD_H
#define ML_OVERHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/cost.h"

struct memleak_bpf;
struct overhead;
struct bpf_program;

int overhead__new(double budget_pct, struct overhead **out);
void overhead__free(struct overhead *o); /* NULL-safe; waits for a calibration under way */

/*
 * Time one probe hit on this machine, in the background: empty programs on the C library's malloc and free in
 * a child of memleak-ai, with and without them (the floor a trap costs whatever the program does), made the
 * way the traced processes' probes are. With uprobe_multi links (`multi`) it starts at once, with a program of
 * its own, while the BPF object is verified and the probes are attached; otherwise overhead__bind starts it.
 * Nothing waits for it but the budget's first decision. 0 or a negative errno (a hit then counts 1 µs).
 */
int overhead__calibrate_start(struct overhead *o, bool multi);

/* The BPF object is loaded: its counters and programs are the ones measured. 0 or a negative errno. */
int overhead__bind(struct overhead *o, struct memleak_bpf *skel);

/* The probes are attached: the first sample's baseline. */
void overhead__start(struct overhead *o, const int *pids, size_t npids);

/* What overhead__sample asks of the caller. */
enum overhead_action {
	OVERHEAD_OK = 0, /* within the budget, or nothing left to do about it */
	OVERHEAD_HEAP =
	    1, /* the C heap's probes push the cost over the budget: heap-growth mode (overhead__heap_mode) */
	OVERHEAD_SHED =
	    2, /* still over the budget in heap-growth mode, or without the C heap: shed overhead__next_shed()'s step */
};

/*
 * Take a sample over the time since the last one, for the traced processes pids[]. The first one, the
 * decision on the C heap, covers the first DECIDE_NS of hits after overhead__start (once the calibration is
 * in); later ones at least a second each.
 */
enum overhead_action overhead__sample(struct overhead *o, const int *pids, size_t npids);

/*
 * A uprobe program of another instance of the object (session/bgobj.c: PyTorch's USDT ones): its run time counts
 * too, as the probes' when it is an allocator probe; a tracepoint's counts itself (tp_cost). 0, or -E2BIG past
 * EXTRA_PROGS.
 */
int overhead__count_prog(struct overhead *o, const struct bpf_program *p);

/* Heap-growth mode begins now (before report number `report`). */
void overhead__heap_mode(struct overhead *o, uint64_t report);

/* One of the BPF side's counters (ML_STAT_*) summed over the CPUs now; 0 when it cannot be read. */
uint64_t overhead__counter(struct overhead *o, unsigned int idx);

/*
 * Heap-growth mode's windows: the C heap probed 1/one_in of the time (unchecked: an allocator with no chunk
 * headers to sweep by); windows opened and what a record made in one stands for; records swept.
 */
void overhead__heap_windows(struct overhead *o, unsigned int one_in, bool unchecked);
void overhead__heap_window_count(struct overhead *o, uint64_t windows, double weight, const char *clock);
void overhead__heap_swept(struct overhead *o, uint64_t swept, uint64_t freed);

/* The next step of enum ml_shed that costs something now, or ML_SHED_N. */
enum ml_shed overhead__next_shed(const struct overhead *o);
/* ML_SHED_TORCH_CPU_SAMPLING: how many halvings of the time on it takes now (enough to reach the budget). */
unsigned int overhead__tensor_halvings(const struct overhead *o);
/* ML_SHED_STEP_SAMPLING: how many halvings of the time the step clock is probed take now. */
unsigned int overhead__step_halvings(const struct overhead *o);
/* That step was taken (before report number `report`); its cost is named on stderr. */
void overhead__shed(struct overhead *o, enum ml_shed step, uint64_t report);

/*
 * The rss layer's hook, ML_SHED_RSS_SAMPLING, the first step of the shed order: its cost is its programs' time
 * on the traced processes' events (ML_STAT_RSS_TP_NS, counted among the other programs' too), and `shed`
 * doubles its sampling interval N (off false) or, at ML_SHED_RSS_FAULTS, the last step, stops tracing its
 * faults (off true). Setting it also names the rss layer in the report as what the C heap falls back to.
 * Without it the step is never taken.
 */
void overhead__set_rss(struct overhead *o, void (*shed)(void *ctx, bool off), void *ctx);

/*
 * ML_SHED_TORCH_CPU_SAMPLING is possible: the torch_cpu layer's allocation-side probes can be closed and
 * attached again (uprobe_multi links). The budget does it; each step halves the time they are on.
 */
void overhead__set_tensor_sampling(struct overhead *o, bool possible);
/* A snapshot is taken: memleak-ai's own CPU (ml_overhead.self_cpu_pct) is measured over the interval it ends. */
void overhead__self_tick(struct overhead *o);
/* ML_SHED_STEP_SAMPLING is possible: the step clock's links can be closed and attached again (uprobe_multi). */
void overhead__set_step_sampling(struct overhead *o, bool possible);
/* Its period: the probes on for 1/2^n of it. Samples span at least as much while it runs. */
#define OVERHEAD_TENSOR_PERIOD_S 1.0

const struct ml_overhead *overhead__info(const struct overhead *o);

#endif
