/* The outstanding-allocation ledger: aggregates the kernel's tables by stack at report time and tracks growth. */
#ifndef ML_LEDGER_H
#define ML_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/snapshot.h"
#include "collect/stackstore.h"
#include "collect/weights.h"
#include "lib/frames.h"
#include "memleak.h"

struct memleak_bpf;
struct ledger;
struct stackstore;

struct sizeweights;

struct ledger_opts {
	int tgid;
	uint64_t min_age_ns;
	struct stackstore *stacks;	 /* where the records' stack ids resolve (not owned) */
	const struct sizeweights *sizes; /* the sampled C heap's weights by chunk size (not owned), or NULL */
	struct slots *slots;		 /* the table's levels (not owned); NULL: made here, for max_allocs */
	uint32_t max_allocs;		 /* the table's size in all its levels (--max-allocs); 0: 1,048,576 */
};

/* Slots in the allocation table for --max-allocs: a power of two, at least twice as many, so probe chains stay short.
 */
uint32_t ledger_table_slots(uint32_t max_allocs);

int ledger__new(struct memleak_bpf *skel, const struct ledger_opts *o, struct ledger **out);
void ledger__free(struct ledger *l);
/* Aggregate now. The snapshot stays valid until the next collect or free. */
int ledger__collect(struct ledger *l, const struct ml_snapshot **out);
/*
 * Called by each collect at the moment its records are counted as of (the snapshot's now_ns), with the seconds
 * since the last: what is read beside the records (the step clock) is read then, not after the pass over them.
 */
typedef void (*ledger_now_fn)(void *ctx, uint64_t now_ns, double elapsed_s);
void ledger__on_collect(struct ledger *l, ledger_now_fn fn, void *ctx);
/*
 * How a captured stack reads once its native chain is cut where the report cuts it: a hash of what is shown,
 * or 0 on failure. Frame-pointer walks through code without frame pointers pick up garbage frames that the
 * report cuts away; stacks that read the same are one row, shown as the first of them still in use.
 * *traits gets the stack's ML_ROW_* traits.
 */
typedef uint64_t (*ledger_canon_fn)(void *ctx, uint32_t tgid, uint64_t stack_id, unsigned int *traits);
void ledger__set_canon(struct ledger *l, ledger_canon_fn fn, void *ctx);

/*
 * Release every recorded allocation of a process made before before_ns (UINT64_MAX: all of them): the
 * process exited, or replaced its image with exec, and its memory went with it. Returns how many.
 */
uint64_t ledger__forget(struct ledger *l, int tgid, uint64_t before_ns);

/* Release every recorded allocation of a layer, in every process (the layer changes how it is traced). */
uint64_t ledger__forget_layer(struct ledger *l, unsigned int layer);

/*
 * A time-sampled layer (the budget's tensor sampling): a record of it made from since_ns on weighs 2^shift in
 * bytes and count (weights.c holds this and the other weighting schemes). Epochs only follow one another (at most
 * LEDGER_EPOCHS). 0, -EINVAL or -ENOSPC.
 */
#define LEDGER_EPOCHS WEIGHTS_EPOCHS
int ledger__set_weight(struct ledger *l, unsigned int layer, uint64_t since_ns, uint32_t shift);
/*
 * The C heap's sampling windows, tensor sampling: a record of layer made by an allocator row from since_ns on
 * (until the layer's next epoch) stands for w, in bytes and count, over its shift. A layer's epochs only follow
 * one another; the same since_ns again sets that epoch's w anew. 0, -EINVAL or -ENOMEM.
 */
int ledger__add_scale(struct ledger *l, unsigned int layer, uint64_t since_ns, double w);
/* No epoch left in layer: its records count by their shift until the next ledger__add_scale. */
void ledger__clear_scale(struct ledger *l, unsigned int layer);
/* Its weight now, as a shift (0: every record counts once). */
uint32_t ledger__weight_shift(const struct ledger *l, unsigned int layer);

/* The rss layer's sampling shift from now on: records the test rejects are skipped, the others weigh 2^shift. */
void ledger__set_rss_shift(struct ledger *l, uint32_t shift);

/*
 * A sampled layer's records whose releases are not all seen (the C heap's sampling windows): those of layer
 * made from since_ns on by an allocator row (heap growth's records are not swept) are asked live(ctx, tgid,
 * addr, size): 1 keeps a record, 0 drops it (released meanwhile), a negative errno keeps it for the next
 * sweep. At most max are asked, from where the last sweep stopped; only call it while no probe of the layer
 * can write the table. Returns the records dropped; *asked gets how many were asked.
 */
typedef int (*ledger_live_fn)(void *ctx, uint32_t tgid, uint64_t addr, uint64_t size);
uint64_t ledger__sweep(struct ledger *l, unsigned int layer, uint64_t since_ns, size_t max, ledger_live_fn live,
		       void *ctx, uint64_t *asked);

/* The kernel's allocation table as mapped (len slots): for the rss layer's range operations (rsspages.c). */
struct slots *ledger__slots(struct ledger *l);

/*
 * The row key of the outstanding C heap block (libc or torch_cpu layer, not a heap-growth record) that
 * process tgid's allocator returned at addr, with its stack as the rows show it. 0, or -ENOENT when the
 * tool has no record of it (made before attach, or released).
 */
int ledger__find(struct ledger *l, int tgid, uint64_t addr, struct ml_agg_key *out);
/* The same, with what the record stands for (1, or more when its layer is sampled). */
int ledger__find_weighted(struct ledger *l, int tgid, uint64_t addr, struct ml_agg_key *out, double *w);

/*
 * Every record of fresh C heap, with the key of the row its bytes count under: a range heap-growth mode saw a
 * stack add (the break's growth, anonymous mmap), or a page the rss layer saw first touched (of the heap below
 * the break, or anonymous memory that may be an arena's heap).
 */
typedef void (*ledger_range_fn)(void *ctx, const struct ml_agg_key *k, uint64_t addr, uint64_t len);
void ledger__fresh_heap(struct ledger *l, ledger_range_fn fn, void *ctx);
/*
 * Every outstanding C heap block recorded (libc or torch_cpu, not heap growth) that want(ctx, tgid, addr) keeps,
 * with its row's key and what it stands for (the key is made only for those kept).
 */
typedef bool (*ledger_want_fn)(void *ctx, uint32_t tgid, uint64_t addr);
typedef void (*ledger_block_fn)(void *ctx, const struct ml_agg_key *k, uint64_t addr, uint64_t size, double w);
void ledger__blocks(struct ledger *l, ledger_want_fn want, ledger_block_fn fn, void *ctx);

/* The captured stack of a row. 0, or a negative errno when its stack-table entry cannot be read (the caller stays). */
int ledger__stack(struct ledger *l, const struct ml_row *r, struct ml_rawstack *out);

#endif
