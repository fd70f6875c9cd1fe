/* The outstanding-allocation ledger: aggregates the kernel's tables by stack at report time and tracks growth. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "ledger.h"
#include "log.h"
#include "memleak.skel.h"

struct ledger {
	struct memleak_bpf *skel;
	struct ledger_opts o;
	struct bpf_link *iter;
	int ncpu;
	uint64_t gen;
	uint64_t start_ns, last_ns;
	struct ml_snapshot snap;
	struct ml_row *prev; /* previous rows, sorted by key */
	size_t nprev;
	uint64_t *prev_ids; /* stack ids referenced by the previous snapshot, sorted */
	size_t nprev_ids;
	uint64_t prev_stats[ML_STAT_SLOTS];
	struct ml_agg_key *keys; /* batch buffers */
	struct ml_agg *vals;
	uint64_t *pcpu;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

struct ledger *ledger__new(struct memleak_bpf *skel, const struct ledger_opts *o)
{
	union bpf_iter_link_info linfo = {};
	struct ledger *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return NULL;
	l->skel = skel;
	l->o = *o;
	l->ncpu = libbpf_num_possible_cpus();
	if (l->ncpu <= 0) {
		err = l->ncpu ? l->ncpu : -EINVAL;
		goto fail;
	}
	l->pcpu = calloc((size_t)l->ncpu * ML_STAT_SLOTS, sizeof(uint64_t));
	l->keys = calloc(o->max_stacks + ML_LAYER_MAX, sizeof(*l->keys));
	l->vals = calloc(o->max_stacks + ML_LAYER_MAX, sizeof(*l->vals));
	if (!l->pcpu || !l->keys || !l->vals) {
		err = -ENOMEM;
		goto fail;
	}
	linfo.map.map_fd = bpf_map__fd(skel->maps.allocs);
	LIBBPF_OPTS(bpf_iter_attach_opts, io, .link_info = &linfo, .link_info_len = sizeof(linfo));
	l->iter = bpf_program__attach_iter(skel->progs.aggregate, &io);
	if (!l->iter) {
		err = -errno;
		ml_err("cannot create the aggregation iterator: %s", strerror(-err));
		goto fail;
	}
	l->start_ns = l->last_ns = mono_ns();
	return l;
fail:
	ledger__free(l);
	errno = -err;
	return NULL;
}

void ledger__free(struct ledger *l)
{
	if (!l)
		return;
	bpf_link__destroy(l->iter);
	free(l->snap.rows);
	free(l->prev);
	free(l->prev_ids);
	free(l->keys);
	free(l->vals);
	free(l->pcpu);
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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Run the in-kernel aggregation over the whole allocation table. */
static int run_iter(struct ledger *l)
{
	char buf[4096];
	ssize_t n;
	int fd;

	fd = bpf_iter_create(bpf_link__fd(l->iter));
	if (fd < 0)
		return -errno;
	do {
		n = read(fd, buf, sizeof(buf));
	} while (n > 0 || (n < 0 && errno == EINTR));
	n = n < 0 ? -errno : 0;
	close(fd);
	return (int)n;
}

static void reserve_catch_all(struct ledger *l)
{
	int fd = bpf_map__fd(l->skel->maps.aggs);

	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		struct ml_agg_key k = { .tgid = (uint32_t)l->o.tgid, .stack_id = ML_STACK_LOST, .layer = (uint8_t)layer };
		struct ml_agg v = { .oldest_ts_ns = ~0ULL };

		bpf_map_update_elem(fd, &k, &v, BPF_NOEXIST);
	}
}

/* Read the whole aggregation table; rows of this generation are kept, stale ones deleted. */
static int read_aggs(struct ledger *l, size_t *nout)
{
	int fd = bpf_map__fd(l->skel->maps.aggs), err = 0;
	size_t cap = l->o.max_stacks + ML_LAYER_MAX, total = 0;
	struct ml_agg_key batch_in, batch_out;
	bool first = true;

	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	while (total < cap) {
		__u32 count = (__u32)(cap - total);

		err = bpf_map_lookup_batch(fd, first ? NULL : &batch_in, &batch_out, l->keys + total, l->vals + total,
					   &count, &bo);
		if (err)
			err = -errno;
		total += count;
		if (err == -ENOENT) {
			err = 0;
			break;
		}
		if (err)
			break;
		batch_in = batch_out;
		first = false;
	}
	*nout = total;
	return err;
}

static void read_stats(struct ledger *l)
{
	int fd = bpf_map__fd(l->skel->maps.stats);

	__u32 zero = 0;
	int ok;

	/* One element per CPU, each holding every counter. */
	ok = bpf_map_lookup_elem(fd, &zero, l->pcpu) == 0;
	for (__u32 i = 0; i < ML_STAT_SLOTS; i++) {
		uint64_t sum = 0;

		for (int c = 0; ok && c < l->ncpu; c++)
			sum += l->pcpu[(size_t)c * ML_STAT_SLOTS + i];
		l->snap.stats[i] = sum;
		l->snap.stats_delta[i] = sum - l->prev_stats[i];
		l->prev_stats[i] = sum;
	}
}

static bool id_referenced(const uint64_t *ids, size_t n, uint64_t id)
{
	return bsearch(&id, ids, n, sizeof(*ids), cmp_u64) != NULL;
}

/*
 * Stacks no allocation refers to any more would fill the stack table for good. Release those unreferenced
 * in this snapshot and the previous one, and only when the table is over half full: a stack captured at
 * entry but not yet in the allocation table (the call still running) is then very unlikely to be hit, and
 * if it is, the next allocation from that place stores it again.
 */
static uint64_t gc_stacks(struct ledger *l, const uint64_t *ids, size_t nids)
{
	int fd = bpf_map__fd(l->skel->maps.stacks);
	uint64_t key, next, *victims = NULL;
	size_t n = 0, nv = 0, capv = 0;
	bool has = false;
	uint64_t freed = 0;

	while (bpf_map_get_next_key(fd, has ? &key : NULL, &next) == 0) {
		key = next;
		has = true;
		n++;
		if (id_referenced(ids, nids, key) || id_referenced(l->prev_ids, l->nprev_ids, key))
			continue;
		if (nv == capv) {
			size_t cap = capv ? capv * 2 : 256;
			uint64_t *nvict = realloc(victims, cap * sizeof(*nvict));

			if (!nvict)
				break;
			victims = nvict;
			capv = cap;
		}
		victims[nv++] = key;
	}
	if (n > l->o.max_stacks / 2)
		for (size_t i = 0; i < nv; i++)
			if (bpf_map_delete_elem(fd, &victims[i]) == 0)
				freed++;
	free(victims);
	return freed;
}

int ledger__collect(struct ledger *l, const struct ml_snapshot **out)
{
	struct ml_snapshot *s = &l->snap;
	int aggfd = bpf_map__fd(l->skel->maps.aggs);
	size_t total = 0, nrows = 0, nids = 0;
	uint64_t *ids = NULL;
	uint64_t now;
	int err;

	now = mono_ns();
	l->gen++;
	l->skel->bss->iter_gen = l->gen;
	l->skel->data->iter_newest_ts = now > l->o.min_age_ns ? now - l->o.min_age_ns : 0;
	reserve_catch_all(l);
	err = run_iter(l);
	if (err) {
		ml_err("aggregation failed: %s", strerror(-err));
		return err;
	}
	err = read_aggs(l, &total);
	if (err) {
		ml_err("reading the aggregation table failed: %s", strerror(-err));
		return err;
	}

	free(s->rows);
	memset(s, 0, sizeof(*s));
	s->now_ns = now;
	s->elapsed_s = (double)(now - l->last_ns) / 1e9;
	l->last_ns = now;
	s->rows = calloc(total ? total : 1, sizeof(*s->rows));
	ids = calloc(total ? total : 1, sizeof(*ids));
	if (!s->rows || !ids) {
		free(ids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < total; i++) {
		const struct ml_agg_key *k = &l->keys[i];
		const struct ml_agg *v = &l->vals[i];
		struct ml_row *r;

		if (v->gen != l->gen) {
			if (k->stack_id != ML_STACK_LOST || k->caller != 0)
				bpf_map_delete_elem(aggfd, k);
			continue;
		}
		if (k->stack_id != ML_STACK_NONE && k->stack_id != ML_STACK_LOST)
			ids[nids++] = k->stack_id;
		if (!v->count)
			continue;
		r = &s->rows[nrows++];
		r->key = *k;
		r->bytes = v->bytes;
		r->count = v->count;
		r->oldest_ts_ns = v->oldest_ts_ns;
		if (k->layer < ML_LAYER_MAX) {
			s->layers[k->layer].bytes += v->bytes;
			s->layers[k->layer].count += v->count;
		}
	}
	s->nrows = nrows;

	/* Growth against the previous snapshot, matched by key (both sorted by key). */
	qsort(s->rows, nrows, sizeof(*s->rows), cmp_key);
	for (size_t i = 0, j = 0; i < nrows; i++) {
		struct ml_row *r = &s->rows[i];

		while (j < l->nprev && cmp_key(&l->prev[j], r) < 0)
			j++;
		r->growth_bytes = (int64_t)r->bytes;
		if (j < l->nprev && cmp_key(&l->prev[j], r) == 0)
			r->growth_bytes -= (int64_t)l->prev[j].bytes;
	}
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++)
		s->layers[layer].growth_bytes = (int64_t)s->layers[layer].bytes;
	for (size_t j = 0; j < l->nprev; j++)
		if (l->prev[j].key.layer < ML_LAYER_MAX)
			s->layers[l->prev[j].key.layer].growth_bytes -= (int64_t)l->prev[j].bytes;
	free(l->prev);
	l->prev = malloc((nrows ? nrows : 1) * sizeof(*l->prev));
	if (l->prev) {
		memcpy(l->prev, s->rows, nrows * sizeof(*s->rows));
		l->nprev = nrows;
	} else {
		l->nprev = 0;
	}
	qsort(s->rows, nrows, sizeof(*s->rows), cmp_bytes_desc);

	read_stats(l);
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++)
		s->layers[layer].active = s->layers[layer].count || s->stats[ML_STAT_LAYER_BASE + 2 * layer] ||
					  s->stats[ML_STAT_LAYER_BASE + 2 * layer + 1];

	qsort(ids, nids, sizeof(*ids), cmp_u64);
	s->stacks_gc = gc_stacks(l, ids, nids);
	free(l->prev_ids);
	l->prev_ids = ids;
	l->nprev_ids = nids;
	*out = s;
	return 0;
}

size_t ledger__frames(struct ledger *l, const struct ml_row *r, uint64_t *frames, size_t max)
{
	struct ml_stack st;
	size_t n = 0;

	if (!max)
		return 0;
	if (r->key.caller)
		frames[n++] = r->key.caller;
	if (r->key.stack_id == ML_STACK_NONE || r->key.stack_id == ML_STACK_LOST)
		return n;
	if (bpf_map_lookup_elem(bpf_map__fd(l->skel->maps.stacks), &r->key.stack_id, &st))
		return n;
	for (size_t i = 0; i < st.nr && i < ML_MAX_FRAMES && n < max; i++)
		frames[n++] = st.ips[i];
	return n;
}
