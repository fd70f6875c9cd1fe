/* The ledger's rows of cut walks, merged into their complete stacks (collect/cutmerge.h). */
#include "collect/cutmerge.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "lib/hash.h"
#include "lib/u64map.h"

/*
 * What a cut row must share with a complete one to be merged into it: process, layer, caller, the first
 * len native frames, and the Python frames (none for a caller-only row, len 0, whose capture had nothing).
 * The native frames are hashed first, so that the keys of every length of one stack come in one pass.
 */
static uint64_t prefix_seed(const struct ml_row *r)
{
	return ml_hash64(((uint64_t)r->key.tgid << 32 | (uint64_t)r->key.layer << 8) ^ r->key.caller);
}

static uint64_t py_hash(const struct ml_stack *st)
{
	uint64_t h = 0;

	for (size_t k = 0; k < 2 * (size_t)st->nr_py; k++)
		h = ml_hash64(h ^ st->ips[st->nr + k]);
	return h;
}

static uint64_t prefix_finish(uint64_t h, size_t len, uint64_t py)
{
	h = ml_hash64(h ^ ml_hash64(len ^ py));
	return h ? h : 1;
}

static uint64_t prefix_key(const struct ml_row *r, const struct ml_stack *st, size_t len, bool py)
{
	uint64_t h = prefix_seed(r);

	for (size_t k = 0; k < len; k++)
		h = ml_hash64(h ^ st->ips[k]);
	return prefix_finish(h, len, py ? py_hash(st) : 0);
}

/*
 * The stack of a row that may be a cut walk, in *st: one that stopped early, or a caller-only capture
 * (ML_STACK_NONE with a caller: no table covered the code yet, as in a new image's first instant).
 */
static bool cut_row(struct stackstore *stacks, const struct ml_row *r, struct ml_stack *st)
{
	int flags;

	if (!r->count || !r->key.caller)
		return false;
	if (r->key.stack_id == ML_STACK_NONE) {
		st->nr = st->nr_py = st->flags = 0;
		return true;
	}
	/* The flags first: most rows are complete, and their words need not be copied. */
	flags = stackstore__flags(stacks, r->key.stack_id);
	return flags > 0 && (flags & ML_STACK_UW_STOPPED) && !stackstore__get(stacks, r->key.stack_id, st) && st->nr;
}

#define PREFIX_AMBIGUOUS ((void *)~(uintptr_t)0)
#define PREFIX_WANTED ((void *)~(uintptr_t)1)

/* What the cut rows want of the complete ones: their keys, seeds and leaves, and the lengths they were cut at. */
struct cut_wants {
	struct u64map want, seeds, leaves;
	uint64_t lens[(ML_MAX_FRAMES + 64) / 64];
};

/*
 * The keys of the cut rows, each wanted once: the complete stacks are looked up against these alone, and only
 * those of a (process, layer, caller) seed a cut row has; of those, only the ones whose innermost frame a cut
 * row of that seed has too (leaves: the hash of the seed and that frame, a prefix's hash at length 1) are read.
 */
static int want_cut_prefixes(const struct ml_snapshot *s, struct stackstore *stacks, struct ml_stack *st,
			     struct cut_wants *w)
{
	int n = 0;

	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *r = &s->rows[i];

		if (!cut_row(stacks, r, st))
			continue;
		w->lens[st->nr / 64] |= 1ULL << (st->nr % 64);
		if (u64map__put(&w->want, prefix_key(r, st, st->nr, st->nr > 0), PREFIX_WANTED) ||
		    u64map__put(&w->seeds, prefix_seed(r), PREFIX_WANTED) ||
		    (st->nr && u64map__put(&w->leaves, ml_hash64(prefix_seed(r) ^ st->ips[0]), PREFIX_WANTED)))
			return -ENOMEM;
		n++;
	}
	return n;
}

/* Names the row i + 1 under key k if k is wanted: the one row a wanted key names, or ambiguous. */
static void name_row(struct u64map *want, uint64_t k, size_t i)
{
	void *v = u64map__get(want, k);

	if (v) /* replacing a value never allocates */
		u64map__put(want, k, v == PREFIX_WANTED ? (void *)(i + 1) : PREFIX_AMBIGUOUS);
}

/*
 * Each complete stack of a wanted seed, at every length a cut row has: the one row that a wanted key names, or
 * ambiguous. The seed is checked before anything is read, then the innermost frame before the stack is copied:
 * copying every row's stack was a third of the tool's CPU at full fidelity on a torch loop (two million records,
 * a report every 2 s), and those of the seeds' rows 15 % still.
 */
static void match_complete(const struct ml_snapshot *s, struct stackstore *stacks, struct ml_stack *st,
			   struct cut_wants *w)
{
	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *r = &s->rows[i];
		uint64_t h, py, leaf;
		int flags;

		if (!r->count || r->key.stack_id == ML_STACK_NONE)
			continue;
		h = prefix_seed(r);
		if (!u64map__get(&w->seeds, h))
			continue;
		flags = stackstore__leaf(stacks, r->key.stack_id, &leaf);
		if (flags < 0 || (flags & ML_STACK_UW_STOPPED))
			continue;
		if (w->lens[0] & 1) /* a caller-only cut row: no frame to read */
			name_row(&w->want, prefix_finish(h, 0, 0), i);
		if (!u64map__get(&w->leaves, ml_hash64(h ^ leaf)) || stackstore__get(stacks, r->key.stack_id, st))
			continue;
		py = py_hash(st);
		for (size_t len = 1; len <= st->nr; len++) {
			h = ml_hash64(h ^ st->ips[len - 1]);
			if (w->lens[len / 64] & (1ULL << (len % 64)))
				name_row(&w->want, prefix_finish(h, len, py), i);
		}
	}
}

/* A cut row whose prefix no complete stack has, or more than one has, stays a row of its own. */
int cutmerge__run(struct ml_snapshot *s, struct stackstore *stacks, struct ml_stack *st)
{
	struct cut_wants w = {};
	int merged = 0, n;

	n = want_cut_prefixes(s, stacks, st, &w);
	if (n <= 0) {
		merged = n;
		goto out;
	}
	match_complete(s, stacks, st, &w);
	for (size_t i = 0; i < s->nrows; i++) {
		struct ml_row *r = &s->rows[i], *into;
		void *v;

		if (!cut_row(stacks, r, st))
			continue;
		v = u64map__get(&w.want, prefix_key(r, st, st->nr, st->nr > 0));
		if (!v || v == PREFIX_AMBIGUOUS || v == PREFIX_WANTED)
			continue;
		into = &s->rows[(uintptr_t)v - 1];
		if (r->count > into->cut_count) {
			into->cut_key = r->key;
			into->cut_count = r->count;
		}
		into->bytes += r->bytes;
		into->cow_bytes += r->cow_bytes;
		into->count += r->count;
		into->records += r->records;
		into->raw_bytes += r->raw_bytes;
		into->weighed_records += r->weighed_records;
		into->weighed_raw_bytes += r->weighed_raw_bytes;
		into->window_weights += r->window_weights;
		into->traits |= r->traits & (ML_ROW_SAMPLED | ML_ROW_WEIGHED | ML_ROW_COPY_SCAN);
		if (r->oldest_ts_ns < into->oldest_ts_ns)
			into->oldest_ts_ns = r->oldest_ts_ns;
		r->bytes = r->count = r->cow_bytes = r->records = r->raw_bytes = 0;
		r->weighed_records = r->weighed_raw_bytes = 0;
		r->window_weights = 0;
		merged++;
	}
out:
	free(w.want.slots);
	free(w.seeds.slots);
	free(w.leaves.slots);
	return merged;
}
