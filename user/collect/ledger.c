/* The outstanding-allocation ledger: reads the kernel's allocation table, sums it by stack and tracks growth. */
#include "collect/ledger.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "attach/allocators.h"
#include "collect/canon.h"
#include "collect/cutmerge.h"
#include "collect/devsplit.h"
#include "collect/slots.h"
#include "collect/stackstore.h"
#include "collect/weights.h"
#include "lib/bpfstats.h"
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "memleak.skel.h"

/* Rows indexed by key through an open-addressing table of row numbers (+1; 0 = empty). */
struct row_index {
	uint32_t *slot;
	size_t cap; /* power of two */
};

static bool is_handle(uint8_t spec)
{
	return spec < ml_allocators_n && ml_allocators[spec].spec.handle;
}

struct ledger {
	struct memleak_bpf *skel;
	struct ledger_opts o;
	struct slots *slots; /* the kernel's table, mapped (user space writes tombstones, by compare-and-swap) */
	size_t sweep_at;     /* where ledger__sweep goes on, across the levels */
	int ncpu;
	uint64_t last_ns;
	struct ml_snapshot snap;
	size_t rows_cap, procs_cap;
	struct row_index idx;
	struct ml_row *prev; /* previous rows, sorted by key */
	size_t nprev, cap_prev;
	uint64_t prev_stats[ML_STAT_SLOTS];
	uint64_t *pcpu;
	struct devsplit *gpu;	   /* this pass's cuda and torch_cuda allocations, per device */
	struct ml_stack stack_buf; /* one stack-table value, read by ledger__stack */
	struct canon *canon;	   /* the stack ids rows are keyed by */
	struct weights *w;	   /* what a sampled record stands for */
	ledger_now_fn on_now;	   /* ledger__on_collect's */
	void *on_now_ctx;
};

uint32_t ledger_table_slots(uint32_t max_allocs)
{
	uint32_t n = 1024;

	while (n < max_allocs * 2ULL && n < (1U << 30))
		n <<= 1;
	return n;
}

int ledger__new(struct memleak_bpf *skel, const struct ledger_opts *o, struct ledger **out)
{
	struct ledger *l = calloc(1, sizeof(*l));
	int err;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	l->skel = skel;
	l->o = *o;
	l->ncpu = libbpf_num_possible_cpus();
	if (l->ncpu <= 0) {
		err = l->ncpu ? l->ncpu : -EINVAL;
		goto fail;
	}
	l->pcpu = calloc((size_t)l->ncpu * ML_STAT_SLOTS, sizeof(uint64_t));
	if (!l->pcpu || devsplit__new(&l->gpu) || weights__new(o->sizes, &l->w) || canon__new(&l->canon)) {
		err = -ENOMEM;
		goto fail;
	}
	l->slots = o->slots;
	err = l->slots ? 0 : slots__new(skel, ledger_table_slots(o->max_allocs ? o->max_allocs : 1048576), &l->slots);
	if (err) {
		ml_dbg("the allocation table's first level: %s", strerror(-err));
		goto fail;
	}
	l->last_ns = ml_clock_ns(CLOCK_MONOTONIC);
	*out = l;
	return 0;
fail:
	ledger__free(l);
	return err;
}

void ledger__free(struct ledger *l)
{
	if (!l)
		return;
	if (l->slots != l->o.slots)
		slots__free(l->slots);
	free(l->snap.rows);
	free(l->snap.procs);
	canon__free(l->canon);
	free(l->idx.slot);
	free(l->prev);
	free(l->pcpu);
	devsplit__free(l->gpu);
	weights__free(l->w);
	free(l);
}

static int cmp_key(const void *a, const void *b)
{
	return memcmp(&((const struct ml_row *)a)->key, &((const struct ml_row *)b)->key, sizeof(struct ml_agg_key));
}

static int cmp_bytes_desc(const void *a, const void *b)
{
	const struct ml_row *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return cmp_key(a, b);
}

static int index_reset(struct row_index *ix, size_t want)
{
	size_t cap = 1024;

	while (cap < want * 2)
		cap <<= 1;
	if (cap != ix->cap) {
		uint32_t *n = calloc(cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		free(ix->slot);
		ix->slot = n;
		ix->cap = cap;
	} else {
		memset(ix->slot, 0, cap * sizeof(*ix->slot));
	}
	return 0;
}

/* The row for a key, created zeroed when new; NULL on allocation failure. */
static struct ml_row *row_for(struct ledger *l, const struct ml_agg_key *k)
{
	struct ml_snapshot *s = &l->snap;
	size_t i;

	if (s->nrows * 2 >= l->idx.cap) { /* grow the index and rebuild it from the rows */
		if (index_reset(&l->idx, s->nrows * 2 + 1))
			return NULL;
		for (size_t r = 0; r < s->nrows; r++) {
			i = ml_key_hash(&s->rows[r].key) & (l->idx.cap - 1);
			while (l->idx.slot[i])
				i = (i + 1) & (l->idx.cap - 1);
			l->idx.slot[i] = (uint32_t)r + 1;
		}
	}
	i = ml_key_hash(k) & (l->idx.cap - 1);
	while (l->idx.slot[i]) {
		struct ml_row *r = &s->rows[l->idx.slot[i] - 1];

		if (ml_key_same(&r->key, k))
			return r;
		i = (i + 1) & (l->idx.cap - 1);
	}
	if (ml_grow(&s->rows, &l->rows_cap, s->nrows + 1, sizeof(*s->rows)))
		return NULL;
	l->idx.slot[i] = (uint32_t)s->nrows + 1;
	memset(&s->rows[s->nrows], 0, sizeof(s->rows[0]));
	s->rows[s->nrows].key = *k;
	s->rows[s->nrows].oldest_ts_ns = ~0ULL;
	return &s->rows[s->nrows++];
}

static void read_stats(struct ledger *l)
{
	uint64_t sum[ML_STAT_SLOTS];

	/* A failed read keeps the last sums. */
	if (ml_stats_sum(bpf_map__fd(l->skel->maps.stats), l->ncpu, l->pcpu, sum)) {
		memcpy(l->snap.stats, l->prev_stats, sizeof(l->prev_stats));
		memset(l->snap.stats_delta, 0, sizeof(l->snap.stats_delta));
		return;
	}
	for (__u32 i = 0; i < ML_STAT_SLOTS; i++) {
		l->snap.stats[i] = sum[i];
		l->snap.stats_delta[i] = sum[i] - l->prev_stats[i];
		l->prev_stats[i] = sum[i];
	}
}

void ledger__on_collect(struct ledger *l, ledger_now_fn fn, void *ctx)
{
	l->on_now = fn;
	l->on_now_ctx = ctx;
}

void ledger__set_canon(struct ledger *l, ledger_canon_fn fn, void *ctx)
{
	canon__set(l->canon, fn, ctx);
}

static struct ml_proc_total *proc_slot(struct ledger *l, int tgid)
{
	struct ml_snapshot *s = &l->snap;

	if (s->nprocs && s->procs[s->nprocs - 1].tgid == tgid)
		return &s->procs[s->nprocs - 1];
	if (ml_grow(&s->procs, &l->procs_cap, s->nprocs + 1, sizeof(*s->procs)))
		return NULL;
	memset(&s->procs[s->nprocs], 0, sizeof(s->procs[0]));
	s->procs[s->nprocs].tgid = tgid;
	return &s->procs[s->nprocs++];
}

static int cmp_proc(const void *a, const void *b)
{
	const struct ml_proc_total *x = a, *y = b;

	return (x->tgid > y->tgid) - (x->tgid < y->tgid);
}

/* Per-process totals from this snapshot's rows and the previous ones, both sorted by key (tgid first). */
static int proc_totals(struct ledger *l, const struct ml_row *rows, size_t nrows, const struct ml_row *prev,
		       size_t nprev)
{
	size_t i = 0, j = 0;

	l->snap.nprocs = 0;
	/* Both are sorted by cmp_key, a memcmp: compare tgids the same way. */
	while (i < nrows || j < nprev) {
		bool cur = i < nrows &&
			   (j >= nprev || memcmp(&rows[i].key.tgid, &prev[j].key.tgid, sizeof(rows[i].key.tgid)) <= 0);
		const struct ml_row *r = cur ? &rows[i++] : &prev[j++];
		struct ml_proc_total *p = proc_slot(l, (int)r->key.tgid);
		struct ml_layer_total *t;

		if (!p)
			return -ENOMEM;
		if (r->key.layer >= ML_LAYER_MAX)
			continue;
		t = &p->layers[r->key.layer];
		if (cur) {
			p->brk_bytes += r->traits & ML_ROW_BRK && r->key.layer != ML_LAYER_RSS
					    ? r->bytes
					    : 0; /* heap-growth's own */
			t->bytes += r->bytes;
			t->cow_bytes += r->cow_bytes;
			t->count += r->count;
			t->growth_bytes += (int64_t)r->bytes;
			t->active = true;
		} else {
			t->growth_bytes -= (int64_t)r->bytes;
		}
	}
	if (l->snap.nprocs > 1)
		qsort(l->snap.procs, l->snap.nprocs, sizeof(*l->snap.procs), cmp_proc);
	return 0;
}

/* Slot i of the levels taken one after another. */
static struct ml_slot *slot_nth(const struct slots *t, size_t i)
{
	unsigned int k = 0;

	while (k + 1 < t->n && i >= t->lv[k].len)
		i -= t->lv[k++].len;
	return &t->lv[k].v[i];
}

/* Tombstones for the records of tgid (-1: any) in layer (ML_LAYER_MAX: any) made before before_ns. */
static uint64_t forget_where(struct ledger *l, int tgid, unsigned int layer, uint64_t before_ns)
{
	const struct slots *t = l->slots;
	uint64_t n = 0;

	for (unsigned int k = 0; k < t->n; k++)
		for (size_t i = 0; i < t->lv[k].len; i++) {
			struct ml_slot v = t->lv[k].v[i];

			if (v.addr == ML_SLOT_EMPTY || v.addr == ML_SLOT_TOMB || !v.ts_ns || v.ts_ns >= before_ns ||
			    (tgid >= 0 && v.tgid != (uint32_t)tgid) || (layer < ML_LAYER_MAX && v.layer != layer))
				continue;
			n += __atomic_compare_exchange_n(&t->lv[k].v[i].addr, &v.addr, ML_SLOT_TOMB, false,
							 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		}
	return n;
}

uint64_t ledger__forget(struct ledger *l, int tgid, uint64_t before_ns)
{
	uint64_t n = forget_where(l, tgid, ML_LAYER_MAX, before_ns);

	l->snap.forgotten += n;
	return n;
}

uint64_t ledger__forget_layer(struct ledger *l, unsigned int layer)
{
	uint64_t n = forget_where(l, -1, layer, UINT64_MAX);

	l->snap.forgotten += n;
	return n;
}

uint64_t ledger__sweep(struct ledger *l, unsigned int layer, uint64_t since_ns, size_t max, ledger_live_fn live,
		       void *ctx, uint64_t *asked)
{
	uint64_t dropped = 0, cap = slots__capacity(l->slots);
	size_t i = l->sweep_at % cap;

	*asked = 0;
	for (size_t n = 0; n < cap && *asked < max; n++, i = (i + 1) % cap) {
		struct ml_slot *s = slot_nth(l->slots, i), v = *s;

		/* A record of the layer made by an allocator row, not by heap growth or the rss layer. */
		if (v.addr == ML_SLOT_EMPTY || v.addr == ML_SLOT_TOMB || !v.ts_ns || v.ts_ns < since_ns ||
		    v.layer != layer || v.spec >= ml_allocators_n)
			continue;
		++*asked;
		if (live(ctx, v.tgid, v.addr, v.size) == 0 &&
		    __atomic_compare_exchange_n(&s->addr, &v.addr, ML_SLOT_TOMB, false, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			dropped++;
	}
	l->sweep_at = i;
	return dropped;
}

/* A pass begins: the stacks taken, the snapshot's sums cleared, *now read. 0 or a negative errno. */
static int collect_begin(struct ledger *l, uint64_t *now)
{
	struct ml_snapshot *s = &l->snap;
	int err;

	/* Every stack the table's records can name was sent before its record was written: take them first. */
	err = stackstore__drain(l->o.stacks);
	if (err)
		return err;
	*now = ml_clock_ns(CLOCK_MONOTONIC);
	if (l->on_now)
		l->on_now(l->on_now_ctx, *now, (double)(*now - l->last_ns) / 1e9);
	canon__begin(l->canon);
	s->nrows = 0;
	s->rss_records = 0;
	s->rss_shift = weights__rss_shift(l->w);
	memset(s->layers, 0, sizeof(s->layers));
	devsplit__reset(l->gpu);
	if (index_reset(&l->idx, l->nprev + 16))
		return -ENOMEM;
	return 0;
}

/* A slot as read: its fields, its row's key, and where that key sits in the index (a hint for the prefetch). */
struct read_slot {
	struct ml_slot v;
	struct ml_agg_key k;
	uint64_t cow;
	unsigned int traits, shift;
	size_t at; /* k's place in the index, where the search starts (a hint: the index may grow before it) */
};

/*
 * A slot's fields and its row's key; false for an empty slot, one being written (ts_ns 0), or an rss record the
 * sampling test now rejects (on its way out: see rsspages.c).
 */
static bool read_slot(struct ledger *l, const volatile struct ml_slot *sl, struct read_slot *rs)
{
	struct ml_slot *v = &rs->v;
	uint64_t addr = sl->addr, ts = sl->ts_ns;

	if (addr == ML_SLOT_EMPTY || addr == ML_SLOT_TOMB || !ts)
		return false;
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* the rest read after ts_ns, which count_slot checks again */
	*v = *(const struct ml_slot *)sl;
	v->addr = addr;
	v->ts_ns = ts;
	rs->cow = 0;
	rs->shift = weights__record_shift(l->w, v->layer, v->ts_ns);
	if (v->layer == ML_LAYER_RSS && v->spec == ML_SPEC_COPY_SCAN) {
		rs->cow = v->size;	       /* the copy scan's: exact, many pages */
	} else if (v->layer == ML_LAYER_RSS) { /* the others weigh 2^shift */
		rs->shift = weights__rss_shift(l->w);
		if (!ml_rss_sampled(v->addr & ~ML_RSS_COPY, rs->shift))
			return false;
		rs->cow = v->addr & ML_RSS_COPY ? v->size << rs->shift : 0;
		l->snap.rss_records++;
	}
	rs->k = (struct ml_agg_key){.tgid = v->tgid, .layer = v->layer, .caller = v->caller};
	rs->k.stack_id = canon__of(l->canon, v->tgid, v->stack_id, &rs->traits);
	rs->at = ml_key_hash(&rs->k) & (l->idx.cap - 1);
	return true;
}

/* A slot read into its row, unless reused since it was read. 0 or -ENOMEM. */
static int count_slot(struct ledger *l, const volatile struct ml_slot *sl, const struct read_slot *rs, uint64_t newest)
{
	const struct ml_slot *v = &rs->v;
	struct ml_row *r;
	double w, ww;

	if (sl->addr != v->addr || sl->ts_ns != v->ts_ns)
		return 0; /* reused while we read it */
	r = row_for(l, &rs->k);
	if (!r)
		return -ENOMEM;
	r->traits |= rs->traits | (v->spec == ML_SPEC_BRK || v->spec == ML_SPEC_RSS_HEAP ? ML_ROW_BRK : 0) |
		     (v->spec == ML_SPEC_HEAP ? ML_ROW_SPACE : 0) |
		     (v->spec == ML_SPEC_COPY_SCAN ? ML_ROW_COPY_SCAN : 0);
	/* Younger than --min-age: the stack stays referenced (row exists) but nothing is counted. */
	if (v->ts_ns > newest)
		return 0;
	/* A sampled record (an rss page, a tensor of a time-sampled layer) stands for 2^shift. */
	w = weights__scaled(l->w, v, v->layer, v->spec, v->ts_ns, &ww);
	r->records++;
	r->raw_bytes += v->size;
	if (w > 0 || rs->shift) {
		r->traits |= ML_ROW_WEIGHED;
		r->weighed_records++;
		r->weighed_raw_bytes += v->size;
	}
	if (w > 0) {
		if (v->layer == ML_LAYER_LIBC) /* see struct ml_row */
			r->window_weights += (float)ww;
		r->traits |= ML_ROW_SAMPLED;
		r->bytes += (uint64_t)((double)v->size * w + 0.5);
		r->count += (uint64_t)(w + 0.5);
	} else {
		r->bytes += v->size << rs->shift;
		r->count += v->spec == ML_SPEC_COPY_SCAN ? v->size >> ML_PAGE_SHIFT : 1ULL << rs->shift;
	}
	r->cow_bytes += rs->cow;
	if (v->ts_ns < r->oldest_ts_ns)
		r->oldest_ts_ns = v->ts_ns;
	if ((v->layer == ML_LAYER_CUDA || v->layer == ML_LAYER_TORCH_CUDA || v->layer == ML_LAYER_CUDA_MAP) &&
	    devsplit__add(l->gpu, &rs->k, v->addr, v->size, v->device, is_handle(v->spec)))
		return -ENOMEM;
	return 0;
}

/*
 * One level of the table into its rows, COUNT_BATCH slots at a time: read and keyed, their index entries
 * fetched, their rows fetched, then counted, so that the cache misses of a batch overlap (each slot's index
 * entry and row are a random place in memory: 59 % of a million-record report waited on them one by one).
 */
#define COUNT_BATCH 16

static int count_level(struct ledger *l, const volatile struct ml_slot *v, size_t len, uint64_t newest)
{
	struct read_slot rs[COUNT_BATCH];
	size_t idx[COUNT_BATCH];
	int err = 0;

	for (size_t i = 0; !err && i < len; i += COUNT_BATCH) {
		size_t n = 0;

		for (size_t j = i; j < len && j < i + COUNT_BATCH; j++)
			if (read_slot(l, &v[j], &rs[n])) {
				__builtin_prefetch(&l->idx.slot[rs[n].at]);
				idx[n++] = j;
			}
		for (size_t j = 0; j < n; j++) {
			uint32_t row = l->idx.slot[rs[j].at];

			if (row && row <= l->snap.nrows) {
				__builtin_prefetch(&l->snap.rows[row - 1]);
				__builtin_prefetch((const char *)&l->snap.rows[row - 1] + 64);
			}
		}
		for (size_t j = 0; !err && j < n; j++)
			err = count_slot(l, &v[idx[j]], &rs[j], newest);
	}
	return err;
}

/* Rows with nothing counted (all younger than --min-age) leave the snapshot; the others add to their layer. */
static void keep_counted(struct ml_snapshot *s)
{
	size_t nrows = 0;

	for (size_t i = 0; i < s->nrows; i++) {
		struct ml_row *r = &s->rows[i];

		if (!r->count)
			continue;
		if (r->key.layer < ML_LAYER_MAX) {
			s->layers[r->key.layer].bytes += r->bytes;
			s->layers[r->key.layer].cow_bytes += r->cow_bytes;
			s->layers[r->key.layer].count += r->count;
		}
		s->rows[nrows++] = *r;
	}
	s->nrows = nrows;
}

/*
 * Growth against the previous snapshot, matched by key (both sorted by key), for rows, processes and layers;
 * then these rows are kept as the previous ones. 0 or -ENOMEM.
 */
static int add_growth(struct ledger *l)
{
	struct ml_snapshot *s = &l->snap;
	struct ml_row *prev_rows = l->prev;
	size_t nrows = s->nrows;

	if (nrows)
		qsort(s->rows, nrows, sizeof(*s->rows), cmp_key);
	for (size_t i = 0, j = 0; i < nrows; i++) {
		struct ml_row *r = &s->rows[i];

		while (j < l->nprev && cmp_key(&prev_rows[j], r) < 0)
			j++;
		r->growth_bytes = (int64_t)r->bytes;
		if (j < l->nprev && cmp_key(&prev_rows[j], r) == 0)
			r->growth_bytes -= (int64_t)prev_rows[j].bytes;
	}
	if (proc_totals(l, s->rows, nrows, prev_rows, l->nprev))
		return -ENOMEM;
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++)
		s->layers[layer].growth_bytes = (int64_t)s->layers[layer].bytes;
	for (size_t j = 0; j < l->nprev; j++)
		if (prev_rows[j].key.layer < ML_LAYER_MAX)
			s->layers[prev_rows[j].key.layer].growth_bytes -= (int64_t)prev_rows[j].bytes;
	/* In place, as big as the largest report yet: a new buffer each report faulted in 72 MB at 480,000 rows. */
	if (ml_grow(&l->prev, &l->cap_prev, nrows ? nrows : 1, sizeof(*l->prev))) {
		l->nprev = 0;
		return 0;
	}
	if (nrows) /* s->rows is NULL while no row was ever made: memcpy's source must not be */
		memcpy(l->prev, s->rows, nrows * sizeof(*s->rows));
	l->nprev = nrows;
	ml_fit(&l->prev, &l->cap_prev, nrows, sizeof(*l->prev));
	return 0;
}

int ledger__collect(struct ledger *l, const struct ml_snapshot **out)
{
	struct ml_snapshot *s = &l->snap;
	uint64_t now = 0, newest;
	int err;

	err = collect_begin(l, &now);
	newest = now > l->o.min_age_ns ? now - l->o.min_age_ns : 0;
	for (unsigned int k = 0; !err && k < l->slots->n; k++) /* one pass over the table */
		err = count_level(l, l->slots->lv[k].v, l->slots->lv[k].len, newest);
	if (err)
		return err;
	devsplit__run(l->gpu, s);
	err = cutmerge__run(&l->snap, l->o.stacks, &l->stack_buf);
	if (err < 0)
		return err;
	s->stopped_merged = (uint64_t)err;
	s->now_ns = now;
	s->elapsed_s = (double)(now - l->last_ns) / 1e9;
	l->last_ns = now;
	keep_counted(s);
	if (add_growth(l))
		return -ENOMEM;
	if (s->nrows)
		qsort(s->rows, s->nrows, sizeof(*s->rows), cmp_bytes_desc);
	read_stats(l);
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++)
		s->layers[layer].active = s->layers[layer].count || s->stats[ML_STAT_LAYER_ALLOCS(layer)] ||
					  s->stats[ML_STAT_LAYER_FREES(layer)];
	canon__sweep(l->canon);
	stackstore__stats(l->o.stacks, &s->stacks);
	s->table.levels = l->slots->n;
	s->table.slots = slots__capacity(l->slots);
	s->table.bytes = slots__bytes(l->slots);
	*out = s;
	return 0;
}

int ledger__set_weight(struct ledger *l, unsigned int layer, uint64_t since_ns, uint32_t shift)
{
	return weights__set_epoch(l->w, layer, since_ns, shift);
}

uint32_t ledger__weight_shift(const struct ledger *l, unsigned int layer)
{
	return weights__shift(l->w, layer);
}

int ledger__add_scale(struct ledger *l, unsigned int layer, uint64_t since_ns, double w)
{
	return weights__add_scale(l->w, layer, since_ns, w);
}

void ledger__clear_scale(struct ledger *l, unsigned int layer)
{
	weights__clear_scale(l->w, layer);
}

void ledger__set_rss_shift(struct ledger *l, uint32_t shift)
{
	weights__set_rss_shift(l->w, shift);
}

struct slots *ledger__slots(struct ledger *l)
{
	return l->slots;
}

int ledger__find_weighted(struct ledger *l, int tgid, uint64_t addr, struct ml_agg_key *out, double *w)
{
	static const uint8_t layers[] = {ML_LAYER_LIBC, ML_LAYER_TORCH_CPU};

	/* The probe chains the BPF side claims slots along (table.bpf.c), read from the mapped levels. */
	for (size_t li = 0; li < sizeof(layers); li++) {
		const volatile struct ml_slot *sl = slots__find(l->slots, (uint32_t)tgid, layers[li], addr);
		uint64_t ts, stack_id, caller;
		uint8_t spec;
		unsigned int traits;

		if (!sl)
			continue;
		ts = sl->ts_ns;
		stack_id = sl->stack_id;
		caller = sl->caller;
		spec = sl->spec;
		if (!ts || spec == ML_SPEC_HEAP || spec == ML_SPEC_BRK || sl->addr != addr || sl->ts_ns != ts)
			continue; /* being written, released meanwhile, or a heap-growth range */
		*out = (struct ml_agg_key){.tgid = (uint32_t)tgid, .layer = layers[li], .caller = caller};
		out->stack_id = canon__of(l->canon, (uint32_t)tgid, stack_id, &traits);
		*w = weights__of(l->w, (const struct ml_slot *)sl, layers[li], spec, ts);
		return 0;
	}
	return -ENOENT;
}

int ledger__find(struct ledger *l, int tgid, uint64_t addr, struct ml_agg_key *out)
{
	double w;

	return ledger__find_weighted(l, tgid, addr, out, &w);
}

void ledger__fresh_heap(struct ledger *l, ledger_range_fn fn, void *ctx)
{
	for (size_t i = 0, cap = slots__capacity(l->slots); i < cap; i++) {
		struct ml_slot v = *slot_nth(l->slots, i);
		struct ml_agg_key k = {.tgid = v.tgid, .layer = v.layer, .caller = v.caller};
		unsigned int traits;

		if (v.addr == ML_SLOT_EMPTY || v.addr == ML_SLOT_TOMB || !v.ts_ns)
			continue;
		if (!(v.layer == ML_LAYER_LIBC && (v.spec == ML_SPEC_BRK || v.spec == ML_SPEC_HEAP)) &&
		    !(v.layer == ML_LAYER_RSS && (v.spec == ML_SPEC_RSS_HEAP || v.spec == ML_SPEC_RSS) &&
		      ml_rss_sampled(v.addr, weights__rss_shift(l->w))))
			continue;
		k.stack_id = canon__of(l->canon, v.tgid, v.stack_id, &traits);
		fn(ctx, &k, v.addr, v.size);
	}
}

void ledger__blocks(struct ledger *l, ledger_want_fn want, ledger_block_fn fn, void *ctx)
{
	for (size_t i = 0, cap = slots__capacity(l->slots); i < cap; i++) {
		struct ml_slot v = *slot_nth(l->slots, i);
		struct ml_agg_key k = {.tgid = v.tgid, .layer = v.layer, .caller = v.caller};
		unsigned int traits;

		if (v.addr == ML_SLOT_EMPTY || v.addr == ML_SLOT_TOMB || !v.ts_ns ||
		    (v.layer != ML_LAYER_LIBC && v.layer != ML_LAYER_TORCH_CPU) || v.spec == ML_SPEC_BRK ||
		    v.spec == ML_SPEC_HEAP || !want(ctx, v.tgid, v.addr))
			continue;
		k.stack_id = canon__of(l->canon, v.tgid, v.stack_id, &traits);
		fn(ctx, &k, v.addr, v.size, weights__of(l->w, &v, v.layer, v.spec, v.ts_ns));
	}
}

int ledger__stack(struct ledger *l, const struct ml_row *r, struct ml_rawstack *out)
{
	struct ml_stack *st = &l->stack_buf;

	out->nr = out->nr_py = 0;
	out->flags = 0;
	if (r->key.caller)
		out->ips[out->nr++] = r->key.caller;
	if (r->key.stack_id == ML_STACK_NONE)
		return 0;
	if (stackstore__get(l->o.stacks, r->key.stack_id, st))
		return -ENOENT;
	out->flags = st->flags;
	/* The counts come from the kernel map, which the target cannot write; bound them all the same. */
	for (size_t i = 0; i < st->nr && i < ML_MAX_FRAMES; i++)
		out->ips[out->nr++] = st->ips[i];
	out->nr_py = ml_stack_pyframes(st, out->py);
	return 0;
}
