/* Open-addressing hash table from a 64-bit key to a non-NULL pointer: the caches of the symbolizers. */
#ifndef ML_U64MAP_H
#define ML_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct u64slot {
	uint64_t key;
	void *val; /* NULL: slot free */
};

/* Zero-initialised is empty. */
struct u64map {
	struct u64slot *slots;
	size_t cap; /* power of two, or 0 */
	size_t n;
};

/* The value of key, or NULL. */
void *u64map__get(const struct u64map *m, uint64_t key);
/* Insert, or replace the value of an existing key (which never allocates). 0 or -ENOMEM. */
int u64map__put(struct u64map *m, uint64_t key, void *val);
/* Whether the entry stays; one that does not is the callback's to free. Called again for some kept entries. */
typedef bool (*u64map_keep_fn)(void *ctx, uint64_t key, void *val);
/* Drop every entry keep refuses, in place: no allocation, a pass over the slots. */
void u64map__sweep(struct u64map *m, u64map_keep_fn keep, void *ctx);
/* free() every value and the table itself; the map is empty again. */
void u64map__free_values(struct u64map *m);

#endif
