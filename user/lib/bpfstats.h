/* Reading what the kernel counts for memleak-ai: the per-CPU counters (enum ml_stat) and a program's run time. */
#ifndef ML_BPFSTATS_H
#define ML_BPFSTATS_H

#include <stdint.h>
#include "memleak.h"

/*
 * The counters map's one element, summed over ncpu CPUs into out[ML_STAT_SLOTS]; pcpu holds ncpu * ML_STAT_SLOTS
 * values (the caller's buffer, reused). 0, or a negative errno with out untouched.
 */
int ml_stats_sum(int map_fd, int ncpu, uint64_t *pcpu, uint64_t *out);

/* The kernel's run time of a loaded program so far (while BPF statistics are on), in ns; 0 when unknown. */
uint64_t ml_prog_run_ns(int prog_fd);

#endif
