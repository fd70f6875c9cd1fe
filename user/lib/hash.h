/* One 64-bit mixer for every hash table in user space. */
#ifndef ML_HASH_H
#define ML_HASH_H

#include <stdint.h>

/* splitmix64's finalizer: keys that share their low or high bits (addresses) spread over a table's slots. */
static inline uint64_t ml_hash64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

#endif
