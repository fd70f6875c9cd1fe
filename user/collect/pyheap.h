/*
 * Python objects in CPython's small-object allocator (pymalloc, 3.10 on: 16 KiB pools in 1 MiB arenas), counted
 * by type from outside the process: the pools are found by their headers in its anonymous memory, their used
 * blocks by the pool's free list and high-water mark, and each object's type by its ob_type word, checked
 * through its own type's chain to a type that is its own type (PyType_Type). Objects over 512 bytes live in
 * malloc's chunks and are not counted here.
 *
 * Nothing is read from a page that is not resident (the pagemap says first): a read would make it resident.
 */
#ifndef ML_PYHEAP_H
#define ML_PYHEAP_H

#include <stdint.h>

struct census;
struct ml_maps;

#define PYHEAP_POOLS_MAX 8192 /* pools read per walk (128 MiB): the rest in address order is left out */

struct pyheap_stats {
	uint64_t pools, objects, typed; /* pools read, used blocks in them, and those typed */
	uint64_t left_out;		/* pools past PYHEAP_POOLS_MAX */
};

/*
 * One walk of pid's pools into census (between census__begin and census__end), through its open /proc/PID/mem
 * and /proc/PID/pagemap. 0, -ESRCH when it is gone, -ENOMEM.
 */
int pyheap__walk(int pid, int mem_fd, int pagemap_fd, const struct ml_maps *maps, struct census *c,
		 struct pyheap_stats *st);

#endif
