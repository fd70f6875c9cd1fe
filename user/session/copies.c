/* The copy scan's records: children compared with their parents, copies charged to the parents' rows. */
#include "session/copies.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "collect/cowscan.h"
#include "collect/ledger.h"
#include "collect/rsspages.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/u64map.h"

#define COPIES_MAX_PAGES (1ULL << 18)	/* entries compared per child and report: 1 GiB, a few ms of reads */
#define COPIES_MAX_TRACKED (1ULL << 23) /* pages of a child kept track of: 32 GiB, 32 MiB of state */

/* A range of a parent's fresh heap with the row it counts under. */
struct owned {
	uint64_t lo, hi;
	struct ml_agg_key key;
};

struct copies {
	struct ledger *l;
	struct cowscan *scan;
	struct ml_agg_key *owners; /* owner id - 1 */
	size_t nowners, cap_owners;
	struct u64map by_key; /* a key's hash: id */
	struct owned *ranges; /* this pass's, by tgid and address */
	size_t nranges, cap_ranges;
	bool said;
};

int copies__new(struct ledger *l, struct copies **out)
{
	struct cowscan_opts o = {.max_pages = COPIES_MAX_PAGES, .max_tracked = COPIES_MAX_TRACKED};
	struct copies *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	c->l = l;
	err = cowscan__new(&o, &c->scan);
	if (err) {
		free(c);
		return err;
	}
	*out = c;
	return 0;
}

void copies__free(struct copies *c)
{
	if (!c)
		return;
	cowscan__free(c->scan);
	free(c->owners);
	free(c->by_key.slots);
	free(c->ranges);
	free(c);
}

void copies__gone(struct copies *c, int pid)
{
	if (c)
		cowscan__remove(c->scan, pid);
}

static void add_range(void *ctx, const struct ml_agg_key *k, uint64_t addr, uint64_t len)
{
	struct copies *c = ctx;

	if (!len || ml_grow(&c->ranges, &c->cap_ranges, c->nranges + 1, sizeof(*c->ranges)))
		return; /* out of memory: the pages there go to no stack */
	c->ranges[c->nranges++] = (struct owned){.lo = addr, .hi = addr + len, .key = *k};
}

static int cmp_owned(const void *a, const void *b)
{
	const struct owned *x = a, *y = b;

	if (x->key.tgid != y->key.tgid)
		return x->key.tgid < y->key.tgid ? -1 : 1;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* The id of a row key, made when new; 0 when out of memory. */
static uint32_t id_of(struct copies *c, const struct ml_agg_key *k)
{
	uint64_t h = ml_key_hash(k);
	uintptr_t v = (uintptr_t)u64map__get(&c->by_key, h);

	if (v && ml_key_same(&c->owners[v - 1], k))
		return (uint32_t)v;
	if (ml_grow(&c->owners, &c->cap_owners, c->nowners + 1, sizeof(*c->owners)))
		return 0;
	c->owners[c->nowners++] = *k;
	if (!v && u64map__put(&c->by_key, h, (void *)(uintptr_t)c->nowners))
		return 0;
	return (uint32_t)c->nowners;
}

/* The parent's range holding addr: the last one starting at or below it (a few back, where they overlap). */
static uint32_t owner_of(void *ctx, int parent, uint64_t addr)
{
	struct copies *c = ctx;
	size_t lo = 0, hi = c->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct owned *o = &c->ranges[mid];

		if (o->key.tgid < (uint32_t)parent || (o->key.tgid == (uint32_t)parent && o->lo <= addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, back = 0; i > 0 && back < 8; i--, back++) {
		const struct owned *o = &c->ranges[i - 1];

		if (o->key.tgid != (uint32_t)parent)
			break;
		if (addr < o->hi)
			return id_of(c, &o->key);
	}
	return 0;
}

struct put_ctx {
	struct copies *c;
	struct slots *slots;
	uint64_t lost;
};

/* A child's copies of one owner as one record, keyed above user addresses by the owner's id. */
static void put(void *ctx, int child, uint32_t owner, uint64_t bytes, uint64_t first_ns)
{
	struct put_ctx *p = ctx;
	const struct ml_agg_key *k = owner ? &p->c->owners[owner - 1] : NULL;
	struct ml_slot rec = {.addr = ML_USER_TOP + ((uint64_t)owner << ML_PAGE_SHIFT) + ML_RSS_COPY,
			      .ts_ns = first_ns,
			      .size = bytes,
			      .caller = k ? k->caller : 0,
			      .stack_id = k ? k->stack_id : ML_STACK_NONE,
			      .tgid = (uint32_t)child,
			      .spec = ML_SPEC_COPY_SCAN};

	p->lost += ml_rss_put(p->slots, &rec) != 0;
}

static int sync_children(struct copies *c, const int *children, const int *parents, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t truncated;
		int err;

		if (cowscan__has(c->scan, children[i]))
			continue;
		err = cowscan__add(c->scan, children[i], parents[i], &truncated);
		if (err == -ENOMEM)
			return err;
		if (err)
			continue; /* gone meanwhile */
		ml_info("pid %d: pages copied from pid %d found by comparing page tables from now on", children[i],
			parents[i]);
		if (truncated)
			ml_notice("pid %d: copies looked for in its first %llu MiB of inherited memory only, %llu MiB "
				  "left out",
				  children[i], (unsigned long long)(COPIES_MAX_TRACKED >> 8),
				  (unsigned long long)(truncated >> 8));
	}
	return 0;
}

void copies__fork(struct copies *c, int child, int parent)
{
	if (c && !sync_children(c, &child, &parent, 1))
		cowscan__pass_child(c->scan, child, owner_of, c); /* nothing counts at a first read: no owner asked */
}

int copies__pass(struct copies *c, const int *children, const int *parents, size_t n)
{
	struct put_ctx p = {.c = c};
	long done;
	int err = sync_children(c, children, parents, n);

	if (err)
		return err;
	c->nranges = 0;
	ledger__fresh_heap(c->l, add_range, c);
	if (c->nranges > 1)
		qsort(c->ranges, c->nranges, sizeof(*c->ranges), cmp_owned);
	done = cowscan__pass(c->scan, owner_of, c);
	if (done < 0) {
		if (!c->said)
			ml_notice("copies on write cannot be found from the page tables: %s%s", strerror((int)-done),
				  done == -EPERM ? " (frame numbers need CAP_SYS_ADMIN)" : "");
		c->said = true;
		return (int)done;
	}
	p.slots = ledger__slots(c->l);
	cowscan__totals(c->scan, put, &p);
	if (p.lost && !c->said) {
		ml_notice("the allocation table is full: %llu owners' copies are not counted",
			  (unsigned long long)p.lost);
		c->said = true;
	}
	return 0;
}
