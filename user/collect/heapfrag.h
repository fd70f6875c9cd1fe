/*
 * Fragmentation of a glibc C heap, read from glibc's own chunk headers: how much of the heap is free but
 * still resident, and which in-use chunks keep it so. A free run below the top chunk cannot be trimmed
 * while the in-use chunk just above it lives: that chunk is its holder, charged with the run's resident
 * bytes. A walk reads one heap through a source: a live process's memory, only over resident pages
 * (heapscan.h finds its [heap] and thread arenas), or a memory image handed to it (the tests).
 */
#ifndef ML_HEAPFRAG_H
#define ML_HEAPFRAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/pyheap.h"
#include "memleak.h"

struct census;
struct ledger;

/* An in-use chunk with free resident memory right below it. */
struct ml_heap_holder {
	uint64_t addr;	  /* its user address (chunk + 16): what malloc returned */
	uint64_t size;	  /* its chunk's bytes */
	uint64_t charged; /* resident bytes of the free run just below it */
};

/* A range of a heap: free (a free chunk or the top, contiguous ones merged), or walked to the heap's end. */
struct ml_heap_run {
	uint64_t addr, len;
};

/* Holders of one allocation stack (heapfrag__attribute). */
struct ml_frag_stack {
	struct ml_agg_key key;
	uint64_t charged; /* free resident bytes its blocks hold */
	uint64_t bytes;	  /* the holding blocks' own chunk bytes */
	uint64_t count;	  /* holding blocks */
};

/* One glibc arena: the main one ([heap]) or a thread arena (its heaps at 64 MiB boundaries). */
struct ml_arena_frag {
	uint64_t arena; /* its malloc_state's address in the target; 0 for the main arena */
	unsigned int heaps;
	uint64_t heap_bytes, free_resident_bytes;
	uint64_t trimmable_bytes; /* what malloc_trim(0) would hand back to the kernel (resident pages) */
};

struct ml_heapfrag {
	uint64_t heap_bytes;	      /* the heaps walked, headers to end */
	uint64_t in_use_bytes;	      /* chunks glibc counts in use (tcache and fastbin entries included) */
	uint64_t free_bytes;	      /* free chunks below the top */
	uint64_t free_resident_bytes; /* ... of which resident */
	uint64_t unheld_bytes;	      /* free resident memory with no in-use chunk above (an older arena heap's end) */
	uint64_t top_bytes;	      /* the top chunks */
	/*
	 * Resident bytes malloc_trim(0) would release: the whole pages inside free chunks (past each one's first
	 * 48 bytes, as glibc's mtrim does) and, in the main arena, the top chunk's pages that systrim gives back.
	 */
	uint64_t trimmable_bytes;
	uint64_t chunks, read_bytes;  /* headers walked, bytes read from the process */
	uint64_t scan_ns;	      /* how long the walk took */
	uint64_t walked_ns;	      /* CLOCK_MONOTONIC when it began */
	unsigned int heaps;	      /* heaps walked to their end */
	unsigned int broken;	      /* heap walks that stopped twice (see heapfrag__walk_heap) */
	unsigned int broken_runs;     /* walks in a row, this one included, with a heap walk broken (heapfrag__scan) */
	unsigned int corrupt;	      /* ... at the same bad header both times: corrupt metadata, not a change */
	unsigned int unreadable;      /* ... at the same header on a page that is not resident */
	uint64_t unwalked_bytes;      /* the bytes of those heaps from where their walks stopped to their end */
	uint64_t stop_addr;	      /* where the last walk that failed stopped */
	bool capped;		      /* the read budget ran out: the figures cover part of the heap */
	unsigned int widened;	      /* its budget doubled so often (heapfrag__scan) */
	bool census_left_out;	      /* the walk stopped part-way: its census is not kept (census__discard) */
	struct census *census;	      /* the types of its in-use chunks (heapfrag__scan's), or NULL */
	struct pyheap_stats py;	      /* the census's Python objects (collect/pyheap.h) */
	struct ml_arena_frag *arenas; /* by arena, in the order first walked */
	size_t narenas, cap_arenas;
	struct ml_heap_holder *holders; /* by address once heapfrag__scan is done */
	size_t nholders, cap_holders;
	struct ml_heap_run *runs; /* free chunks and tops of the heaps walked to their end, by address */
	size_t nruns, cap_runs;
	struct ml_heap_run *spans; /* the heaps walked to their end, by address */
	size_t nspans, cap_spans;
	/* heapfrag__attribute: holders by stack, most charged first; those the tool has no record of, summed */
	struct ml_frag_stack *stacks;
	size_t nstacks, cap_stacks;
	uint64_t unknown_charged, unknown_bytes, unknown_count;
};

/* Where a walk reads: a live process, or an image in a test. */
struct heapfrag_src {
	/* Read len bytes at addr. 0 or a negative errno. */
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	/* Whether the page at addr (page-aligned) is resident. */
	bool (*resident)(void *ctx, uint64_t page);
	/* The heap's end now, when it may have grown since the walk began (NULL: it cannot). */
	uint64_t (*end_now)(void *ctx, uint64_t first, uint64_t end);
	void *ctx;
	/* Told each in-use chunk whose first two user words were read with its header (NULL: nobody asks). */
	struct census *census;
	bool main_arena; /* the heap walked is the main arena's ([heap]): its top is trimmable */
};

/* glibc's chunk layout on 64-bit, read by the walk (heapfrag.c) and by the search for heaps (heapscan.c). */
#define HEAP_CHUNK_HDR 16ULL /* prev_size and size: also the size of an arena heap's fencepost */
#define HEAP_CHUNK_MIN 32ULL
#define HEAP_PREV_INUSE 1ULL

/* What one report may spend on a process's heaps. */
struct heapfrag_budget {
	uint64_t read_bytes; /* left to read */
	uint64_t chunks;     /* headers left to walk */
};

#define HEAPFRAG_READ_MAX (256ULL << 20) /* per process and report */
#define HEAPFRAG_CHUNKS_MAX (4ULL << 20)
#define HEAPFRAG_WIDEN_MAX 2  /* a walk asked for again after a capped one: up to 4 times the budget */
#define HEAPFRAG_BROKEN_MAX 3 /* walks in a row that broke after which the next is not waited for (victims.c) */

/*
 * Walk one heap's chunks from the header at first up to end (where the top chunk, or an older arena heap's
 * fencepost, ends), adding to f. 0; -EBADMSG on an inconsistent header (zero or misaligned size, a size
 * running past end or wrapping; the walk stops there; a size running past end is first checked against
 * src->end_now, a few times at most: a live heap grows while it is walked); -E2BIG when the budget ran out; -ENODATA
 * when a header lies on a page that is not resident; -ENOMEM; the read's error.
 */
int heapfrag__walk(struct ml_heapfrag *f, const struct heapfrag_src *src, uint64_t first, uint64_t end,
		   struct heapfrag_budget *b);

/*
 * heapfrag__walk, tried once more from scratch when it stops on a bad or unreadable header (a live heap changes
 * while it is read); its sums are undone first. A second stop counts in f->broken, with the bytes left unwalked
 * and why: the same header twice is corrupt or unreadable, another one is a change. A complete walk adds to
 * its arena's sums (arena: its malloc_state's address, 0 for the main one). The walk's error otherwise.
 */
int heapfrag__walk_heap(struct ml_heapfrag *f, const struct heapfrag_src *src, uint64_t first, uint64_t end,
			struct heapfrag_budget *b, uint64_t arena);

/* Of [lo, hi): the bytes in heaps the last scan walked to their end, and of them those free. */
void heapfrag__free_in(const struct ml_heapfrag *f, uint64_t lo, uint64_t hi, uint64_t *walked, uint64_t *free);
/* The holders whose user address lies in (lo, hi + 16]: the first of them, and how many (sorted by address). */
const struct ml_heap_holder *heapfrag__holders_in(const struct ml_heapfrag *f, uint64_t lo, uint64_t hi, size_t *n);

/*
 * Whether the next scan may cover more than this one: it was capped and a wider budget is left, or a heap changed
 * under its walk (broken, neither corrupt nor unreadable) and fewer than HEAPFRAG_BROKEN_MAX walks in a row did.
 */
bool heapfrag__may_read_more(const struct ml_heapfrag *f);

/* Name the holders' stacks from the ledger's records of tgid, most charged first. 0 or -ENOMEM. */
int heapfrag__attribute(struct ml_heapfrag *f, struct ledger *l, int tgid);

/* Counts to zero, arrays kept. */
void heapfrag__reset(struct ml_heapfrag *f);
/* Arrays freed too. */
void heapfrag__clear(struct ml_heapfrag *f);

#endif
