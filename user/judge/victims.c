/* Victims of fragmentation (see victims.h): fresh heap free again, and the rows whose chunks pin it. */
#include "judge/victims.h"
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "collect/heapfrag.h"
#include "collect/ledger.h"
#include "lib/frames.h"
#include "lib/grow.h"
#include "lib/log.h"

#define PINNERS 8 /* the rows pinning one victim's free space that are told apart; past them, left out */

struct acc {
	struct ml_victim v;
	struct {
		struct ml_agg_key key;
		uint64_t charged;
	} pin[PINNERS];
	unsigned int npin;
	uint64_t range;			 /* its records' bytes (unweighted: sampled rss pages count once) */
	uint64_t unknown;		 /* charged to chunks with no record */
	double own_pin, other_pin;	 /* free bytes its ranges' recorded holders pin, weighted: its own, others' */
	uint64_t own[ML_MAX_FRAMES + 1]; /* its native stack: a block allocated by a call on it is its own */
	size_t nown;
	bool growing; /* judged growing: a leak candidate unless it is a victim */
};

struct find {
	struct acc *a;
	size_t n;
	struct ledger *l;
	victims_frag_fn frag;
	void *ctx;
};

static int cmp_key(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct ml_agg_key));
}

/*
 * Whether a row may be fresh heap: the C heap's growth, or pages first touched (those in a heap the walk
 * covered are: a thread arena's heap is anonymous memory like any other until the walk finds it).
 */
static bool fresh_heap(const struct ml_row *r)
{
	if (r->key.layer == ML_LAYER_LIBC)
		return r->traits & (ML_ROW_BRK | ML_ROW_SPACE);
	return r->key.layer == ML_LAYER_RSS && r->bytes > r->cow_bytes;
}

/*
 * Whether a block allocated from caller is the row's own: allocated by a call on the row's stack (a growth
 * inside that allocation), or from next to one of its frames (a page touched by the code that allocated it,
 * a few instructions on in the same function).
 */
#define OWN_NEAR 512

static bool owns(const struct acc *a, uint64_t caller)
{
	for (size_t i = 0; i < a->nown; i++)
		if (a->own[i] - caller + OWN_NEAR < 2 * OWN_NEAR)
			return true;
	return false;
}

static void pin(struct acc *a, const struct ml_agg_key *k, uint64_t charged)
{
	for (unsigned int i = 0; i < a->npin; i++)
		if (!memcmp(&a->pin[i].key, k, sizeof(*k))) {
			a->pin[i].charged += charged;
			return;
		}
	if (a->npin == PINNERS)
		return; /* past PINNERS rows, a row's charges are not told apart */
	a->pin[a->npin].key = *k;
	a->pin[a->npin++].charged = charged;
}

/* One record of fresh heap: what of it the walk covered and found free, and who holds that free space. */
static void on_range(void *ctx, const struct ml_agg_key *k, uint64_t addr, uint64_t len)
{
	struct find *fd = ctx;
	struct acc *a = fd->n ? bsearch(k, fd->a, fd->n, sizeof(*fd->a), cmp_key) : NULL;
	const struct ml_heapfrag *f;
	const struct ml_heap_holder *h;
	uint64_t walked, free;
	size_t nh;

	if (!a || !(f = fd->frag(fd->ctx, (int)k->tgid)))
		return;
	heapfrag__free_in(f, addr, addr + len, &walked, &free);
	a->range += len;
	a->v.walked_bytes += walked;
	a->v.free_bytes += free;
	h = heapfrag__holders_in(f, addr, addr + len, &nh);
	for (size_t i = 0; i < nh; i++) {
		struct ml_agg_key hk;
		double w;

		if (ledger__find_weighted(fd->l, (int)k->tgid, h[i].addr, &hk, &w)) {
			a->unknown += h[i].charged;
			continue;
		}
		pin(a, &hk, h[i].charged);
		if (owns(a, hk.caller))
			a->own_pin += (double)h[i].charged * w;
		else
			a->other_pin += (double)h[i].charged * w;
	}
}

/* Each candidate's own native stack. */
static void own_stacks(struct find *fd)
{
	struct ml_rawstack *raw = malloc(sizeof(*raw));

	for (size_t i = 0; raw && i < fd->n; i++) {
		struct ml_row row = {.key = fd->a[i].v.key};

		if (ledger__stack(fd->l, &row, raw))
			continue;
		memcpy(fd->a[i].own, raw->ips, raw->nr * sizeof(raw->ips[0]));
		fd->a[i].nown = raw->nr;
	}
	free(raw);
}

/*
 * A victim: an eighth of what the walk covered of its ranges is free again, pinned more by other rows' blocks
 * than by its own (recorded holders, weighted; with none recorded, a quarter must be free). A leak whose growth
 * is the heap's keeps it in use, or pins its free space with its own blocks. Pages mostly in a heap the walk
 * covered are the heap's whatever they hold: its rows (blocks, growth) count what is in them. Where the walk
 * covered under half of its ranges (they grew since), the row stays what it was at the last report.
 */
static bool is_victim(const struct acc *a, const struct ml_victim *was)
{
	uint64_t w = a->v.walked_bytes, fr = a->v.free_bytes;

	if (w * 2 < a->range)
		return was != NULL;
	if (a->v.key.layer == ML_LAYER_RSS)
		return true;
	if (fr * 8 < w)
		return false;
	if (a->own_pin > 0 || a->other_pin > 0)
		return a->other_pin > a->own_pin;
	return fr * 4 >= w;
}

/*
 * The recorded row pinning the most of a victim's free space: recorded holders are a sample of all of them
 * when the C heap is sampled, so it speaks for the unrecorded ones too. Layer ML_LAYER_MAX when none is.
 */
static void name_pinner(struct acc *a)
{
	uint64_t best = 0;

	a->v.pinner = (struct ml_agg_key){.layer = ML_LAYER_MAX};
	for (unsigned int i = 0; i < a->npin; i++)
		if (a->pin[i].charged > best && !owns(a, a->pin[i].key.caller)) {
			best = a->pin[i].charged;
			a->v.pinner = a->pin[i].key;
		}
	a->v.pinned_bytes = best ? best : a->unknown;
}

int victims__find(const struct ml_snapshot *s, const struct ml_judgement *j, struct ledger *l, victims_frag_fn frag,
		  void *ctx, const struct ml_victim *prev, size_t nprev, struct ml_victim **out, size_t *n,
		  size_t *unsure)
{
	const struct ml_victim *was;
	struct find fd = {.l = l, .frag = frag, .ctx = ctx};
	struct ml_victim *v;
	size_t cap = 0, kept = 0;

	*out = NULL;
	*n = *unsure = 0;
	for (size_t i = 0; i < s->nrows; i++) {
		if (!fresh_heap(&s->rows[i]))
			continue;
		if (ml_grow(&fd.a, &cap, fd.n + 1, sizeof(*fd.a))) {
			free(fd.a);
			return -ENOMEM;
		}
		fd.a[fd.n++] = (struct acc){.v.key = s->rows[i].key, .growing = j[i].verdict == ML_V_GROWING};
	}
	if (!fd.n)
		return 0;
	qsort(fd.a, fd.n, sizeof(*fd.a), cmp_key);
	own_stacks(&fd);
	ledger__fresh_heap(l, on_range, &fd);
	v = malloc(fd.n * sizeof(*v));
	if (!v) {
		free(fd.a);
		return -ENOMEM;
	}
	for (size_t i = 0; i < fd.n; i++) {
		struct acc *a = &fd.a[i];

		ml_dbg("fresh heap of pid %u layer %u: %" PRIu64 " bytes, %" PRIu64 " walked, %" PRIu64
		       " free, pinned %.0f by its own blocks, %.0f by others', %" PRIu64 " by unrecorded ones",
		       a->v.key.tgid, a->v.key.layer, a->range, a->v.walked_bytes, a->v.free_bytes, a->own_pin,
		       a->other_pin, a->unknown);
		was = victims__of(prev, nprev, &a->v.key);
		*unsure += a->growing && a->v.walked_bytes * 2 < a->range && !was;
		if (!is_victim(a, was))
			continue;
		name_pinner(a);
		v[kept] = a->v; /* still by key */
		if (a->v.walked_bytes * 2 < a->range)
			v[kept] = *was; /* the last walk's figures */
		kept++;
	}
	free(fd.a);
	if (!kept) {
		free(v);
		return 0;
	}
	*out = v;
	*n = kept;
	return 0;
}

const struct ml_victim *victims__of(const struct ml_victim *v, size_t n, const struct ml_agg_key *key)
{
	return n ? bsearch(key, v, n, sizeof(*v), cmp_key) : NULL;
}
