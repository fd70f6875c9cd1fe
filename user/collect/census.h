/*
 * A heap census by type, with no probes: each in-use glibc chunk the heap walk passes is typed by its first
 * word when that word points into a C++ vtable (a `_ZTV…` symbol of a mapped object), and the live count of
 * each type is followed from walk to walk. It says what keeps piling up (autograd nodes, say) before any stack
 * is known, at no cost to the target. Blocks in glibc's tcache and fastbins count as in use in the walk; their
 * first word is a safe-linked pointer, which falls in a vtable only by chance.
 */
#ifndef ML_CENSUS_H
#define ML_CENSUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ml_maps;
struct census;

#define CENSUS_HIST 4 /* walks a type's count is kept for: growing means a new high in each interval */

/* One type as the last walk counted it. */
struct census_type {
	const char *name; /* demangled, "vtable for " taken off; a make_shared block gives its T */
	uint64_t count, bytes;
	double per_s; /* count change per second over the kept walks */
	bool growing; /* its count rose in every interval kept (at least two) */
};

int census__new(int pid, struct census **out);
void census__free(struct census *c); /* NULL-safe */

/* Read the vtable ranges of objects mapped since the last call. 0, or a negative errno (-ENOMEM). */
int census__sync(struct census *c, const struct ml_maps *maps);
/* A vtable range [lo, hi) of a type, by its symbol name (what census__sync adds, for tests). 0 or -ENOMEM. */
int census__add_range(struct census *c, uint64_t lo, uint64_t hi, const char *raw_name);

/*
 * A type by its name, for objects typed another way than by vtable (Python's, by their type object): its index
 * for census__count, made when new (counted from this walk on). An index, or -ENOMEM.
 */
long census__type_named(struct census *c, const char *name);
void census__count(struct census *c, long type, uint64_t size); /* one object of it in this walk */
/* What collect/pyheap.c keeps between walks: type objects' addresses to types, the pools it found, and how
 * many words it read as type objects and refused (each once: the answer is kept with the word). */
struct u64map;
void census__py_maps(struct census *c, struct u64map **types, struct u64map **pools, uint64_t **refused);
uint64_t census__py_refused(const struct census *c);

/* A walk: begin, every in-use chunk's first two words and size, end (at CLOCK_MONOTONIC now_ns). */
void census__begin(struct census *c);
void census__chunk(struct census *c, uint64_t w0, uint64_t w1, uint64_t size);
int census__end(struct census *c, uint64_t now_ns);
/*
 * Instead of census__end, for a walk that stopped part-way (the heap changed while read): its short counts are
 * kept out of the history, where one dip would hide a type's growth for CENSUS_HIST walks. True when it was
 * left out; after CENSUS_DISCARD_MAX in a row it is not (a heap that always stops is counted as it reads).
 */
#define CENSUS_DISCARD_MAX 2
bool census__discard(struct census *c);
/*
 * Every in-use chunk's size, counted by size up to CENSUS_SIZE_MAX (the sampled C heap's clock,
 * collect/sizeweights.h), and what the last walk counted of one size: false when it did not (larger, no walk).
 */
#define CENSUS_SIZE_MAX (128ULL << 10)
#define CENSUS_PAGE 4096ULL
/* An in-use chunk of the walk (a larger one, or an mmapped chunk, is kept by its exact size). */
void census__size(struct census *c, uint64_t size);
bool census__in_use(const struct census *c, uint64_t size, uint64_t *n);
/* Keep the last walk's counts by size as the base (-EAGAIN before a walk, or -ENOMEM), and how many more
 * chunks of a size are in use now than then (false: not known); over CENSUS_SIZE_MAX, with the mmapped
 * chunks a block of that chunk size takes when it is over glibc's mmap threshold. */
int census__size_base(struct census *c);
bool census__size_growth(const struct census *c, uint64_t size, int64_t *growth);
/* Within a walk: what was counted so far, and back to it (a heap walk that stopped on a changing header and is
 * walked again). */
void census__mark(struct census *c);
void census__undo(struct census *c);

/* Chunks the last walk passed, and how many of them were typed; the types in the report's order (growing ones
 * by rate, then the rest by count), up to max of them. */
size_t census__top(struct census *c, struct census_type *out, size_t max, uint64_t *chunks, uint64_t *typed);
/* Every mapped object's vtables read, and three walks counted since the last were: a type can be growing. */
bool census__settled(const struct census *c);
/* Walks counted so far, and types known (vtables of the mapped objects). */
unsigned int census__walks(const struct census *c);
size_t census__ntypes(const struct census *c);

#endif
