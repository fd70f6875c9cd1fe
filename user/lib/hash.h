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

/* A running hash over several words: h, then v taken in. */
static inline uint64_t ml_hash_add(uint64_t h, uint64_t v)
{
	return ml_hash64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)));
}

/* A NUL-terminated string (NULL as empty), seeded. */
static inline uint64_t ml_hash_str(const char *s, uint64_t seed)
{
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;

	for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	return ml_hash64(h);
}

#endif
