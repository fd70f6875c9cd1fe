/*
 * CUDA memory per device, from one pass over the allocation table: reserved (the cuda layer's segments and
 * cuMemCreate'd memory) against allocated (torch_cuda's tensor blocks), and the reserved but unallocated
 * memory that live blocks pin: a segment (or, with expandable segments, a cuMemMap'd range) holding any live
 * block cannot be given back, so its free bytes are charged to the rows of the blocks in it, in proportion to
 * their bytes.
 */
#ifndef ML_DEVSPLIT_H
#define ML_DEVSPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/snapshot.h"

struct devsplit;

int devsplit__new(struct devsplit **out);
void devsplit__free(struct devsplit *d);  /* NULL-safe */
void devsplit__reset(struct devsplit *d); /* a new pass */

/* One record of the cuda, cuda_map or torch_cuda layer (k its row), handle: cuMemCreate'd memory. */
int devsplit__add(struct devsplit *d, const struct ml_agg_key *k, uint64_t addr, uint64_t size, int16_t device,
		  bool handle);

/* The pass's totals into s->devices, and the pinning rows into s->pins (valid until the next pass). */
int devsplit__run(struct devsplit *d, struct ml_snapshot *s);

/* The caching allocator's block for a request: 512-byte multiples (c10's kMinBlockSize rounding). */
static inline uint64_t ml_cuda_block_size(uint64_t req)
{
	return req < 512 ? 512 : (req + 511) & ~511ULL;
}

#endif
