/* The tool's own cost to the traced processes, measured as it runs, and the --max-overhead budget. */
#ifndef ML_OVERHEAD_H
#define ML_OVERHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "report/report.h"

struct memleak_bpf;
struct overhead;

struct overhead *overhead__new(struct memleak_bpf *skel, double budget_pct);
void overhead__free(struct overhead *o); /* NULL-safe */

/*
 * Time one probe hit on this machine: a do-nothing program on a function of memleak-ai itself, called with
 * and without it. 0 or a negative errno (the cost then counts as 1 µs a hit).
 */
int overhead__calibrate(struct overhead *o);

/*
 * Take a sample over the time since the last one, for the traced processes pids[]. Returns 1 when the C
 * heap's probes alone push the cost over the budget while the rest would fit: the caller then switches
 * to heap-growth mode (overhead__heap_mode). 0 otherwise. Samples closer than a second apart are skipped.
 */
int overhead__sample(struct overhead *o, const int *pids, size_t npids);

/* Heap-growth mode begins now (before report number `report`). */
void overhead__heap_mode(struct overhead *o, uint64_t report);

const struct ml_overhead *overhead__info(const struct overhead *o);


#endif
