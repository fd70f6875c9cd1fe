/*
 * The sampled C heap's weights by chunk size. In heap windows a C program without PyTorch has no work clock
 * but CPU time, and a window that traps every malloc leaves too little of it to measure (estimates off six
 * times either way). The heap walk counts in-use chunks by size instead: a size whose count grew by g since
 * a walk at the windows' start, and whose window records still live number k, has each of those records stand
 * for g / k (at least 1). A leak makes its size grow by what it keeps, whatever the windows' share of the work.
 */
#ifndef ML_SIZEWEIGHTS_H
#define ML_SIZEWEIGHTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

/* Live window records of one size, at least, before its growth weighs them: fewer say too little. */
#define SIZEWEIGHT_MIN_RECORDS 4

struct sizeweights;

/*
 * How many more chunks of this size (glibc's chunk bytes) are in use than at the base walk; false: not known.
 * For a process weighed whole (chunk 0): how many bytes its anonymous memory grew by since the base.
 */
typedef bool (*sizeweights_growth_fn)(void *ctx, uint64_t chunk, int64_t *growth);

int sizeweights__new(struct sizeweights **out);
void sizeweights__free(struct sizeweights *w); /* NULL-safe */

/* glibc's chunk bytes for a request of size bytes (a mmapped block's are more: it is not counted by size). */
uint64_t sizeweights__chunk(uint64_t size);
/*
 * A process to weigh: its records made since since_ns, its sizes' growth as read at until_ns. whole: an
 * allocator without chunk headers to count (jemalloc, tcmalloc), so all its records weigh alike: its anonymous
 * memory's growth over their bytes. A leak grows that memory by what it keeps; churn it frees does not.
 * Records made after until_ns take the weight but do not set it: the growth read then does not hold them, and
 * a heap walked seconds ago would weigh every later record down (its leak read at the walk's count, not now).
 */
struct sizeweights_proc {
	int tgid;
	bool whole;
	uint64_t since_ns, until_ns;
	sizeweights_growth_fn growth;
	void *ctx;
};

/*
 * The weights of these processes again, from the live C heap records of the table's levels (one pass for all:
 * up to millions of slots at the default --max-allocs). 0 or -ENOMEM (their weights are dropped then).
 */
struct slots;
int sizeweights__weigh(struct sizeweights *w, const struct slots *t, const struct sizeweights_proc *procs, size_t n);
void sizeweights__drop(struct sizeweights *w, int tgid); /* its records weigh as the windows say again */
/* What a record stands for by its size (or its process's, weighed whole): its weight, or 0 when it has none
 * (another layer, older, a size not weighed). */
double sizeweights__of(const struct sizeweights *w, const volatile struct ml_slot *sl);

#endif
