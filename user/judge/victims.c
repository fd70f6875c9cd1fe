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

#define PINNERS 8    /* the rows pinning one victim's free space that are told apart; past them, left out */
#define FILLERS 32   /* the rows filling one row's fresh heap told apart; past them, counted as others' */
#define OWN_DEPTH 12 /* a block is the row's own when its first native frames are all on the row's stack */

struct acc {
	struct ml_victim v;	   /* its key; the rest filled in once it is judged a victim */
	struct ml_victim_sample s; /* what it is judged on */
	struct {
		struct ml_agg_key key;
		uint64_t charged;
		bool own; /* the row's own blocks (own_blocks) */
	} pin[PINNERS];
	unsigned int npin;
	uint64_t unknown; /* charged to chunks with no record */
	struct {
		struct ml_agg_key key;
		double bytes;
	} fill[FILLERS]; /* the rows whose blocks fill its ranges */
	unsigned int nfill;
	double fill_rest;		 /* ... past FILLERS rows */
	uint64_t own[ML_MAX_FRAMES + 1]; /* its native stack: a block allocated by a call on it is its own */
	size_t nown;
};

/* A record of fresh heap, by process and address, and the row it counts under: where blocks may fill it. */
struct span {
	uint32_t tgid;
	uint64_t addr, len;
	struct acc *a;
};

struct find {
	struct acc *a;
	size_t n;
	struct span *sp;
	size_t nsp, capsp;
	bool nomem;
	struct ml_rawstack *raw; /* a stack read from the ledger (NULL: none could be had, none is read) */
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
	return ml_row_address_space(r) || (r->key.layer == ML_LAYER_RSS && r->bytes > r->cow_bytes);
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

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The span holding tgid's addr, or NULL (spans sorted; a process's spans never overlap). */
static struct span *span_of(const struct find *fd, uint32_t tgid, uint64_t addr)
{
	size_t lo = 0, hi = fd->nsp;

	while (lo < hi) { /* the first span past (tgid, addr) */
		size_t mid = lo + (hi - lo) / 2;

		if (fd->sp[mid].tgid < tgid || (fd->sp[mid].tgid == tgid && fd->sp[mid].addr <= addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || fd->sp[lo - 1].tgid != tgid || addr - fd->sp[lo - 1].addr >= fd->sp[lo - 1].len)
		return NULL;
	return &fd->sp[lo - 1];
}

static bool in_span(void *ctx, uint32_t tgid, uint64_t addr)
{
	return span_of(ctx, tgid, addr) != NULL;
}

static void fill(struct acc *a, const struct ml_agg_key *k, double bytes)
{
	for (unsigned int i = 0; i < a->nfill; i++)
		if (!memcmp(&a->fill[i].key, k, sizeof(*k))) {
			a->fill[i].bytes += bytes;
			return;
		}
	if (a->nfill == FILLERS) {
		a->fill_rest += bytes;
		return;
	}
	a->fill[a->nfill].key = *k;
	a->fill[a->nfill++].bytes = bytes;
}

/* A recorded block inside a span of fresh heap: it fills that row's range. */
static void on_block(void *ctx, const struct ml_agg_key *k, uint64_t addr, uint64_t size, double w)
{
	struct span *sp = span_of(ctx, k->tgid, addr);

	if (sp)
		fill(sp->a, k, (double)size * w);
}

/*
 * Whether the blocks of row k are the fresh-heap row's own: their first OWN_DEPTH native frames all on its
 * stack (a leak whose growth is the heap's). One call site in common is not enough: every PyTorch CPU tensor
 * comes from the same call in c10::alloc_cpu, the batch that reached new heap as much as the cache that fills it.
 */
static bool own_blocks(struct find *fd, const struct acc *a, const struct ml_agg_key *k)
{
	struct ml_rawstack *raw = fd->raw;
	struct ml_row row = {.key = *k};

	if (!owns(a, k->caller) || ledger__stack(fd->l, &row, raw))
		return false;
	for (size_t i = 1; i < raw->nr && i < OWN_DEPTH; i++) {
		size_t j = 0;

		while (j < a->nown && a->own[j] != raw->ips[i])
			j++;
		if (j == a->nown)
			return false;
	}
	return true;
}

/*
 * Charges free space to the row k pinning it; whether k's blocks are the row's own. Heap growth's are told by
 * the stack, as fills are (a cache's tensors and a batch's come from one call), once per pinning row: a row
 * pins with many chunks. Past PINNERS rows a row's charges are not told apart.
 */
static bool pin(struct find *fd, struct acc *a, const struct ml_agg_key *k, uint64_t charged)
{
	unsigned int i = 0;
	bool own;

	while (i < a->npin && memcmp(&a->pin[i].key, k, sizeof(*k)))
		i++;
	if (i < a->npin) {
		a->pin[i].charged += charged;
		return a->pin[i].own;
	}
	own = fd->raw && a->v.key.layer == ML_LAYER_LIBC ? own_blocks(fd, a, k) : owns(a, k->caller);
	if (a->npin < PINNERS) {
		a->pin[a->npin].key = *k;
		a->pin[a->npin].own = own;
		a->pin[a->npin++].charged = charged;
	}
	return own;
}

/* Its fill, its own blocks' and other rows'. */
static void fill_split(struct find *fd, struct acc *a)
{
	a->s.other_fill = a->fill_rest;
	for (unsigned int i = 0; i < a->nfill; i++) {
		if (fd->raw && own_blocks(fd, a, &a->fill[i].key)) {
			a->s.own_fill += a->fill[i].bytes;
			a->fill[i].bytes = 0; /* never named as another row */
		} else {
			a->s.other_fill += a->fill[i].bytes;
		}
	}
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
	if (k->layer != ML_LAYER_LIBC) /* pages touched first lie inside the heap's growth: only growth is a span */
		;
	else if (ml_grow(&fd->sp, &fd->capsp, fd->nsp + 1, sizeof(*fd->sp)))
		fd->nomem = true;
	else
		fd->sp[fd->nsp++] = (struct span){.tgid = k->tgid, .addr = addr, .len = len, .a = a};
	a->s.range += len;
	/* A heap changing under its walk (more often on a busy machine) may be read whole next time. */
	a->s.wider |= heapfrag__may_read_more(f);
	a->s.walked += walked;
	a->s.free += free;
	h = heapfrag__holders_in(f, addr, addr + len, &nh);
	for (size_t i = 0; i < nh; i++) {
		struct ml_agg_key hk;
		double w;

		if (ledger__find_weighted(fd->l, (int)k->tgid, h[i].addr, &hk, &w)) {
			a->unknown += h[i].charged;
			continue;
		}
		if (pin(fd, a, &hk, h[i].charged))
			a->s.own_pin += (double)h[i].charged * w;
		else
			a->s.other_pin += (double)h[i].charged * w;
	}
}

/* Each candidate's own native stack. */
static void own_stacks(struct find *fd)
{
	for (size_t i = 0; fd->raw && i < fd->n; i++) {
		struct ml_row row = {.key = fd->a[i].v.key};

		if (ledger__stack(fd->l, &row, fd->raw))
			continue;
		memcpy(fd->a[i].own, fd->raw->ips, fd->raw->nr * sizeof(fd->raw->ips[0]));
		fd->a[i].nown = fd->raw->nr;
	}
}

/*
 * A victim: an eighth of what the walk covered of its ranges is free again, pinned more by other rows' blocks
 * than by its own (recorded holders, weighted; with none recorded, a quarter must be free). A leak whose growth
 * is the heap's keeps it in use, or pins its free space with its own blocks. Pages mostly in a heap the walk
 * covered are the heap's whatever they hold: its rows (blocks, growth) count what is in them. Where the walk
 * covered under half of its ranges (they grew since), or none of them, the row stays what it was at the last
 * report. Mostly in use, it is a victim when other rows' recorded blocks (weighted) fill half of that and more
 * than its own do; a victim at the last report stays one while they fill more than its own: sampled fills vary
 * by report.
 */
enum ml_victim_call victims__judge(const struct ml_victim_sample *s, bool was, bool was_held)
{
	uint64_t w = s->walked, fr = s->free;
	bool filled = fr * 8 < w;

	/* Held once when the walk came and could not cover it, again while a capped or broken walk may read more. */
	if (w * 2 < s->range)
		return was ? ML_VICTIM_KEPT : s->growing && (!was_held || s->wider) ? ML_VICTIM_HELD : ML_VICTIM_NOT;
	if (!w) /* no walk of its process (none yet, or it failed): nothing says it is free or filled */
		return was ? ML_VICTIM_KEPT : ML_VICTIM_NOT;
	if (s->rss)
		return filled ? ML_VICTIM_FILLED : ML_VICTIM_FREED;
	if (filled) {
		bool half = was || s->other_fill * 2 >= (double)(w - fr); /* others fill half of what is in use */

		return half && s->other_fill > s->own_fill ? ML_VICTIM_FILLED : ML_VICTIM_NOT;
	}
	if (s->own_pin > 0 || s->other_pin > 0)
		return s->other_pin > s->own_pin ? ML_VICTIM_FREED : ML_VICTIM_NOT;
	return fr * 4 >= w ? ML_VICTIM_FREED : ML_VICTIM_NOT;
}

/*
 * The recorded row pinning the most of a victim's free space: recorded holders are a sample of all of them
 * when the C heap is sampled, so it speaks for the unrecorded ones too. Layer ML_LAYER_MAX when none is.
 */
static void name_pinner(struct acc *a, bool filled)
{
	uint64_t best = 0;
	double most = 0;

	a->v.walked_bytes = a->s.walked;
	a->v.free_bytes = a->s.free;
	if (filled) { /* the row whose blocks fill the most */
		a->v.pinner = (struct ml_agg_key){.layer = ML_LAYER_MAX};
		for (unsigned int i = 0; i < a->nfill; i++)
			if (a->fill[i].bytes > most) {
				most = a->fill[i].bytes;
				a->v.pinner = a->fill[i].key;
			}
		a->v.filled_bytes = (uint64_t)(a->s.other_fill + 0.5);
		return;
	}

	a->v.pinner = (struct ml_agg_key){.layer = ML_LAYER_MAX};
	for (unsigned int i = 0; i < a->npin; i++)
		if (a->pin[i].charged > best && !a->pin[i].own) {
			best = a->pin[i].charged;
			a->v.pinner = a->pin[i].key;
		}
	a->v.pinned_bytes = best ? best : a->unknown;
}

/* Whether a growing row's fresh heap is covered by the walk and mostly in use: only then do fills matter. */
static bool needs_fill(const struct acc *a)
{
	return a->s.growing && !a->s.rss && a->s.walked * 2 >= a->s.range && a->s.free * 8 < a->s.walked;
}

/* The recorded blocks in the fresh heap of rows that need them: a pass over the table when one does. */
static void fill_blocks(struct find *fd)
{
	size_t i = 0;

	while (i < fd->n && !needs_fill(&fd->a[i]))
		i++;
	if (i == fd->n || fd->nomem)
		return; /* no fill figures: only freed space makes victims */
	qsort(fd->sp, fd->nsp, sizeof(*fd->sp), cmp_span);
	ledger__blocks(fd->l, in_span, on_block, fd);
}

static void log_sample(const struct acc *a)
{
	ml_dbg("fresh heap of pid %u layer %u: %" PRIu64 " bytes, %" PRIu64 " walked, %" PRIu64
	       " free, pinned %.0f by its own blocks, %.0f by others', %" PRIu64
	       " by unrecorded ones; filled %.0f by its own, %.0f by others'",
	       a->v.key.tgid, a->v.key.layer, a->s.range, a->s.walked, a->s.free, a->s.own_pin, a->s.other_pin,
	       a->unknown, a->s.own_fill, a->s.other_fill);
}

int victims__find(const struct ml_snapshot *s, const struct ml_judgement *j, struct ledger *l, victims_frag_fn frag,
		  void *ctx, const struct ml_victims *prev, struct ml_victims *out)
{
	const struct ml_victim *was;
	struct find fd = {.l = l, .frag = frag, .ctx = ctx};
	struct ml_victim *v;
	struct ml_agg_key *h;
	size_t cap = 0, kept = 0, nh = 0;

	*out = (struct ml_victims){0};
	for (size_t i = 0; i < s->nrows; i++) {
		if (!fresh_heap(&s->rows[i]))
			continue;
		if (ml_grow(&fd.a, &cap, fd.n + 1, sizeof(*fd.a))) {
			free(fd.a);
			return -ENOMEM;
		}
		fd.a[fd.n++] = (struct acc){.v.key = s->rows[i].key,
					    .s.rss = s->rows[i].key.layer == ML_LAYER_RSS,
					    .s.growing = j[i].verdict == ML_V_GROWING};
	}
	if (!fd.n)
		return 0;
	qsort(fd.a, fd.n, sizeof(*fd.a), cmp_key);
	fd.raw = malloc(sizeof(*fd.raw));
	own_stacks(&fd);
	ledger__fresh_heap(l, on_range, &fd);
	fill_blocks(&fd);
	free(fd.sp);
	for (size_t i = 0; i < fd.n; i++)
		fill_split(&fd, &fd.a[i]);
	free(fd.raw);
	v = malloc(fd.n * sizeof(*v));
	h = malloc(fd.n * sizeof(*h));
	if (!v || !h) {
		free(fd.a);
		free(v);
		free(h);
		return -ENOMEM;
	}
	for (size_t i = 0; i < fd.n; i++) {
		struct acc *a = &fd.a[i];
		enum ml_victim_call call;

		log_sample(a);
		was = victims__of(prev->v, prev->n, &a->v.key);
		call = victims__judge(&a->s, was, victims__held(prev->held, prev->nheld, &a->v.key));
		if (call == ML_VICTIM_HELD)
			h[nh++] = a->v.key; /* in key order, as fd.a */
		if (call == ML_VICTIM_KEPT)
			v[kept++] = *was; /* the last walk's figures */
		if (call < ML_VICTIM_FREED)
			continue;
		name_pinner(a, call == ML_VICTIM_FILLED);
		v[kept++] = a->v; /* still by key */
	}
	free(fd.a);
	if (nh)
		out->held = h, out->nheld = nh;
	else
		free(h);
	if (kept)
		out->v = v, out->n = kept;
	else
		free(v);
	return 0;
}

void victims__clear(struct ml_victims *v)
{
	free(v->v);
	free(v->held);
	*v = (struct ml_victims){0};
}

const struct ml_victim *victims__of(const struct ml_victim *v, size_t n, const struct ml_agg_key *key)
{
	return n ? bsearch(key, v, n, sizeof(*v), cmp_key) : NULL;
}

bool victims__held(const struct ml_agg_key *held, size_t n, const struct ml_agg_key *key)
{
	return n && bsearch(key, held, n, sizeof(*held), cmp_key);
}
