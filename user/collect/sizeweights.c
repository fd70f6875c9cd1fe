/* The sampled C heap's weights by chunk size (sizeweights.h). */
#include "collect/sizeweights.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attach/allocators.h"
#include "collect/heaplive.h"
#include "collect/slots.h"
#include "lib/grow.h"
#include "lib/log.h"

struct size_weight {
	uint64_t key; /* tgid << 32 | chunk bytes / 16; chunk 0: the process weighed whole */
	uint64_t since_ns;
	double w;
};

struct sizeweights {
	struct size_weight *v; /* sorted by key */
	size_t n, cap;
	uint64_t *sizes; /* scratch: the chunk sizes of one process's records */
	size_t nsizes, cap_sizes;
};

int sizeweights__new(struct sizeweights **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void sizeweights__free(struct sizeweights *w)
{
	if (!w)
		return;
	free(w->v);
	free(w->sizes);
	free(w);
}

uint64_t sizeweights__chunk(uint64_t size)
{
	return size > UINT64_MAX - 32 ? 0 : heaplive__chunk(size); /* no chunk: a size no malloc returns */
}

static uint64_t key_of(uint32_t tgid, uint64_t chunk)
{
	return (uint64_t)tgid << 32 | (chunk / 16 & 0xffffffffULL);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_weight(const void *a, const void *b)
{
	return cmp_u64(&((const struct size_weight *)a)->key, &((const struct size_weight *)b)->key);
}

/* A C heap record made by an allocator row (not a heap-growth range), of any process. */
static bool weighable(const struct ml_slot *s)
{
	return s->addr != ML_SLOT_EMPTY && s->addr != ML_SLOT_TOMB && s->ts_ns && s->layer == ML_LAYER_LIBC &&
	       s->spec < ml_allocators_n;
}

void sizeweights__drop(struct sizeweights *w, int tgid)
{
	size_t j = 0;

	for (size_t i = 0; w && i < w->n; i++)
		if (w->v[i].key >> 32 != (uint32_t)tgid)
			w->v[j++] = w->v[i];
	if (w)
		w->n = j;
}

static const struct sizeweights_proc *proc_of(const struct sizeweights_proc *procs, size_t n, uint32_t tgid)
{
	for (size_t i = 0; i < n; i++)
		if ((uint32_t)procs[i].tgid == tgid)
			return &procs[i];
	return NULL;
}

/* The weight growth / live of chunk size (0: the whole process) appended: 1 at least. 0 or -ENOMEM. */
static int push_weight(struct sizeweights *w, const struct sizeweights_proc *p, uint64_t chunk, int64_t growth,
		       uint64_t live)
{
	if (ml_grow(&w->v, &w->cap, w->n + 1, sizeof(*w->v)))
		return -ENOMEM;
	w->v[w->n++] = (struct size_weight){.key = key_of((uint32_t)p->tgid, chunk),
					    .since_ns = p->since_ns,
					    .w = growth > (int64_t)live ? (double)growth / (double)live : 1};
	return 0;
}

/* One size's weight, when enough of its records live and its growth is known. 0 or -ENOMEM. */
static int add_weight(struct sizeweights *w, const struct sizeweights_proc *p, uint64_t chunk, size_t k)
{
	int64_t g;

	if (k < SIZEWEIGHT_MIN_RECORDS || !p->growth(p->ctx, chunk, &g))
		return 0;
	if (push_weight(w, p, chunk, g, k))
		return -ENOMEM;
	ml_dbg("pid %d: %" PRIu64 "-byte chunks: %zu live records, %" PRId64
	       " more in use than at the base: weight %.1f",
	       p->tgid, chunk, k, g, w->v[w->n - 1].w);
	return 0;
}

/* The keys (process, chunk size) of the live records of the processes weighed, sorted. 0 or -ENOMEM. */
static int gather(struct sizeweights *w, const struct ml_slot *table, size_t len, const struct sizeweights_proc *procs,
		  size_t n)
{
	for (size_t i = 0; i < len; i++) {
		struct ml_slot s = table[i]; /* the kernel writes the table meanwhile: one copy, then its fields */
		const struct sizeweights_proc *p = weighable(&s) ? proc_of(procs, n, s.tgid) : NULL;
		uint64_t c = sizeweights__chunk(s.size);

		if (!p || p->whole || s.ts_ns < p->since_ns || s.ts_ns > p->until_ns || !c)
			continue;
		if (ml_grow(&w->sizes, &w->cap_sizes, w->nsizes + 1, sizeof(*w->sizes)))
			return -ENOMEM;
		w->sizes[w->nsizes++] = key_of(s.tgid, c);
	}
	return 0;
}

/* A process weighed whole: its anonymous memory's growth over its live records' bytes, as chunk size 0. */
static int add_whole(struct sizeweights *w, const struct slots *t, const struct sizeweights_proc *p)
{
	uint64_t bytes = 0;
	size_t k = 0;
	int64_t g;

	for (unsigned int lv = 0; lv < t->n; lv++)
		for (size_t i = 0; i < t->lv[lv].len; i++) {
			struct ml_slot s = t->lv[lv].v[i];

			if (weighable(&s) && s.tgid == (uint32_t)p->tgid && s.ts_ns >= p->since_ns &&
			    s.ts_ns <= p->until_ns) {
				bytes += s.size;
				k++;
			}
		}
	if (k < SIZEWEIGHT_MIN_RECORDS || !bytes || !p->growth(p->ctx, 0, &g))
		return 0;
	if (push_weight(w, p, 0, g, bytes))
		return -ENOMEM;
	ml_dbg("pid %d: %zu live records of %" PRIu64 " bytes, anonymous memory %" PRId64
	       " bytes more than at the base: weight %.1f",
	       p->tgid, k, bytes, g, w->v[w->n - 1].w);
	return 0;
}

int sizeweights__weigh(struct sizeweights *w, const struct slots *t, const struct sizeweights_proc *procs, size_t n)
{
	int err = 0;

	for (size_t i = 0; i < n; i++)
		sizeweights__drop(w, procs[i].tgid);
	w->nsizes = 0;
	for (unsigned int lv = 0; lv < t->n && !err; lv++)
		err = gather(w, t->lv[lv].v, t->lv[lv].len, procs, n);
	if (w->nsizes) /* qsort's array may not be NULL, even empty */
		qsort(w->sizes, w->nsizes, sizeof(*w->sizes), cmp_u64);
	for (size_t i = 0, j; i < w->nsizes && !err; i = j) {
		for (j = i; j < w->nsizes && w->sizes[j] == w->sizes[i];)
			j++;
		err = add_weight(w, proc_of(procs, n, (uint32_t)(w->sizes[i] >> 32)),
				 (w->sizes[i] & 0xffffffffULL) * 16, j - i);
	}
	for (size_t i = 0; i < n && !err; i++)
		if (procs[i].whole)
			err = add_whole(w, t, &procs[i]);
	for (size_t i = 0; err && i < n; i++)
		sizeweights__drop(w, procs[i].tgid);
	if (w->n)
		qsort(w->v, w->n, sizeof(*w->v), cmp_weight);
	return err;
}

/* The weight of key made at ts; 0 when none. */
static double weight_of(const struct sizeweights *w, uint64_t key, uint64_t ts)
{
	size_t lo = 0, hi = w->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->v[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < w->n && w->v[lo].key == key && ts >= w->v[lo].since_ns ? w->v[lo].w : 0;
}

double sizeweights__of(const struct sizeweights *w, const volatile struct ml_slot *sl)
{
	struct ml_slot s = *sl;
	uint64_t c;

	if (!w || !w->n || !weighable(&s) || !(c = sizeweights__chunk(s.size)))
		return 0;
	return fmax(weight_of(w, key_of(s.tgid, c), s.ts_ns), weight_of(w, key_of(s.tgid, 0), s.ts_ns));
}
