/*
 * A report's aggregate: the rows (one per stack with outstanding allocations), totals per layer, process and
 * device, and the counters. The ledger makes it (collect/ledger.h); every later stage reads it.
 */
#ifndef ML_SNAPSHOT_H
#define ML_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/stackstore.h"
#include "lib/hash.h"
#include "memleak.h"

/* What a row's stack says about its allocations (from the canon function, see ledger__set_canon). */
#define ML_ROW_IMPORT 1 /* made while a module was being imported (an importlib frame on the Python stack) */
#define ML_ROW_BRK                                                                                                     \
	2 /* fresh C heap: the break grown beyond its peak (heap-growth mode), or heap pages' first touch (rss) */
#define ML_ROW_SPACE 4	    /* heap-growth mode: anonymous address space a stack added (mmap, mremap) */
#define ML_ROW_SAMPLED 8    /* records made in the C heap's sampling windows, each standing for many */
#define ML_ROW_COPY_SCAN 16 /* rss: a child's copies found in the page tables, at the parent's row there */
#define ML_ROW_WEIGHED 32   /* records each standing for more than themselves: windows', tensors' or rss pages' */

/* A row of the sampling windows' records only is judged once it holds this many: one record is no trend. */
#define ML_SAMPLED_MIN_RECORDS 4

struct ml_row {
	struct ml_agg_key key;
	uint64_t bytes, count;
	uint64_t records;   /* the records counted (count weighs sampled ones) */
	uint64_t raw_bytes; /* their own bytes (bytes weighs sampled ones) */
	/* Of those, the ones that stand for more (ML_ROW_WEIGHED); the rest weigh 1, as before sampling began. */
	uint64_t weighed_records, weighed_raw_bytes;
	uint64_t cow_bytes; /* rss layer: the part of bytes that are pages copied on write */
	uint64_t oldest_ts_ns;
	int64_t growth_bytes; /* since the previous report (all of bytes when the stack is new) */
	unsigned int traits;  /* ML_ROW_* */
	/* A C heap window's records: their windows' own weights summed, without their sizes' (judge/verdict.c); 0
	 * when the windows weigh all records alike */
	float window_weights;
	/* cutmerge: the largest cut row merged in (cut_count its count then, 0: none), whose history goes on here */
	struct ml_agg_key cut_key;
	uint64_t cut_count;
};

/* A row key's hash and equality, for every map keyed by row (the ledger's index, the findings, the copies). */
static inline uint64_t ml_key_hash(const struct ml_agg_key *k)
{
	return ml_hash_add(ml_hash_add(ml_hash_add(k->tgid, k->layer), k->stack_id), k->caller);
}

static inline bool ml_key_same(const struct ml_agg_key *a, const struct ml_agg_key *b)
{
	return a->tgid == b->tgid && a->layer == b->layer && a->stack_id == b->stack_id && a->caller == b->caller;
}

struct ml_layer_total {
	uint64_t bytes, count;
	uint64_t cow_bytes; /* rss: copies on write among bytes */
	int64_t growth_bytes;
	bool active;
};

#define ML_MAX_DEVICES 64

/* Per CUDA device: memory reserved from CUDA (cuda layer) against memory handed to tensors (torch_cuda). */
struct ml_device_total {
	uint64_t reserved, allocated;
	uint64_t pinned; /* reserved, unallocated, in segments that live blocks keep (collect/devsplit.h) */
	bool seen;
};

/* A torch_cuda row's live blocks keep this much unallocated memory of a device reserved. */
struct ml_pin {
	struct ml_agg_key key;
	int device; /* -1: not known */
	uint64_t bytes;
};

/* One traced process's share (with --follow, children are traced too). */
struct ml_proc_total {
	int tgid;
	struct ml_layer_total layers[ML_LAYER_MAX];
	uint64_t brk_bytes; /* of its libc bytes, the break grown beyond its peak (heap-growth mode) */
};

struct ml_snapshot {
	uint64_t now_ns;     /* CLOCK_MONOTONIC, the clock of the BPF timestamps */
	double elapsed_s;    /* since the previous snapshot (or since start) */
	struct ml_row *rows; /* every stack with outstanding allocations, largest first */
	size_t nrows;
	struct ml_layer_total layers[ML_LAYER_MAX];
	struct ml_proc_total *procs; /* per process with outstanding memory now or at the previous snapshot, by tgid */
	size_t nprocs;
	uint64_t stats[ML_STAT_SLOTS];	     /* cumulative since attach */
	uint64_t stats_delta[ML_STAT_SLOTS]; /* since the previous snapshot */
	struct stackstore_stats stacks;	     /* the stack dictionary after this pass */
	struct {
		uint32_t levels;       /* the allocation table's levels made so far */
		uint64_t slots, bytes; /* their slots, and the memory they take (mapped in memleak-ai) */
	} table;
	uint64_t stopped_merged; /* rows of walks that stopped early, merged into their complete stack */
	uint64_t forgotten;	 /* records dropped with their process's exit, exec or a mode switch, since attach */
	uint64_t rss_records;	 /* rss records counted in this pass (each weighs 2^rss_shift pages) */
	uint32_t rss_shift;
	/* [0] collects memory whose device is not known; [d + 1] is device d */
	struct ml_device_total devices[ML_MAX_DEVICES + 1];
	struct ml_pin *pins; /* the rows pinning unallocated memory, most first */
	size_t npins;
};

/* Whether a C heap row is heap-growth mode's address space (brk beyond its peak, mmap, mremap), not blocks. */
static inline bool ml_row_address_space(const struct ml_row *r)
{
	return r->key.layer == ML_LAYER_LIBC && (r->traits & (ML_ROW_BRK | ML_ROW_SPACE));
}

/* Whether a snapshot holds more than one process, or one other than root: rows then name their pid. */
static inline bool ml_snapshot_multi(const struct ml_snapshot *s, int root)
{
	return s->nprocs > 1 || (s->nprocs == 1 && s->procs[0].tgid != root);
}

#endif
