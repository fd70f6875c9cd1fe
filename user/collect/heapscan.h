/*
 * Finding a live process's glibc heaps and walking each with heapfrag__walk_heap: the maps say where [heap] and
 * the thread arenas' heaps are, /proc/PID/mem and its pagemap are the walk's source (heapfrag.h).
 */
#ifndef ML_HEAPSCAN_H
#define ML_HEAPSCAN_H

#include "collect/heapfrag.h"

struct census;

/*
 * Walk a live process's [heap] and its thread arenas (anonymous mappings starting on a 64 MiB boundary with
 * a valid heap_info), into f (reset first). 0, -ESRCH when it is gone, -errno when its maps, pagemap or
 * memory cannot be read; walks that stopped are counted in f->broken (the walk goes on with the next heap),
 * and f->capped says the budget ran out. widen doubles the budget so many times (HEAPFRAG_WIDEN_MAX at most).
 * With a census, the in-use chunks are typed too (its vtables read first from the objects mapped since).
 */
int heapfrag__scan(struct ml_heapfrag *f, int pid, struct census *census, unsigned int widen);

#endif
