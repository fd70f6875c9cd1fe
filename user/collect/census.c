/*
 * The heap census by type (see census.h). Vtable ranges of every mapped object, sorted by address, type each
 * in-use chunk by its first word: a C++ object's vptr points into its class's vtable (past its offset-to-top
 * and RTTI words, or at a secondary vptr further in, which is still inside the `_ZTV…` symbol).
 */
#define _GNU_SOURCE
#include "collect/census.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/demangle.h"
#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "lib/u64map.h"

#define ARRAY_COUNT_MAX (1ULL << 24)	 /* a first word this small may be new T[]'s element count: look past it */
#define CENSUS_SYNC_NS (30ULL * 1000000) /* vtables read per walk at most this long (a whole object at least) */
/* The first walk's: its counts are the base of growth, and a type read a walk late is called growing a report late. */
#define CENSUS_FIRST_SYNC_NS (300ULL * 1000000)

struct ctype {
	char *raw;  /* the vtable's symbol name */
	char *name; /* demangled when first reported */
	uint64_t count, bytes;
	uint64_t mark_count, mark_bytes; /* at census__mark */
	uint64_t hist[CENSUS_HIST];	 /* its counts at the kept walks, oldest first */
	unsigned int since; /* the first walk with all its vtables known: counts before are not comparable */
};

struct crange {
	uint64_t lo, hi;
	uint32_t type;
};

struct census {
	int pid;
	struct crange *r;
	size_t nr, capr;
	bool sorted;
	struct ctype *t;
	size_t nt, capt;
	struct u64map by_name; /* hash of the raw name: type index + 1 */
	struct u64map objs;    /* objects read: (inode, start) hashed, to 1 */
	uint64_t chunks, typed, mark_chunks, mark_typed;
	uint64_t times[CENSUS_HIST];
	unsigned int walks;
	unsigned int discarded; /* walks left out in a row (census__discard) */
	size_t *order;		/* the last walk's types in report order (rank) */
	size_t nordered, cap_order;
	struct u64map py_types, py_pools; /* Python's: see census__py_maps */
	uint64_t py_refused;		  /* words read as type objects and refused, since the start */
	unsigned int last_add;		  /* the walk from which the last vtables read count */
	bool sync_left;			  /* the last sync left objects to read */
	uint64_t *sizes;		  /* in-use chunks of each size (by 16 bytes) up to CENSUS_SIZE_MAX */
	uint64_t *mark_sizes;		  /* ... at census__mark */
	bool sizes_ok;			  /* ... counted by a walk begun */
	uint64_t *base;			  /* ... as census__size_base kept them, or NULL */
	struct big_size {		  /* larger chunks, and mmapped ones, by their exact size */
		uint64_t size, count, mark, base;
	} * big;
	size_t nbig, capbig;
	bool big_full; /* a size was not kept: sizes not found are not known to be 0 */
};

#define BIG_SIZES_MAX 4096 /* larger chunk sizes kept: far more than a program's distinct large blocks */

#define SIZE_CLASSES (CENSUS_SIZE_MAX / 16 + 1)

int census__new(int pid, struct census **out)
{
	*out = calloc(1, sizeof(struct census));
	if (!*out)
		return -ENOMEM;
	(*out)->sizes = calloc(SIZE_CLASSES, sizeof(*(*out)->sizes));
	(*out)->mark_sizes = calloc(SIZE_CLASSES, sizeof(*(*out)->sizes));
	if (!(*out)->sizes || !(*out)->mark_sizes) {
		free((*out)->sizes);
		free((*out)->mark_sizes);
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	(*out)->pid = pid;
	return 0;
}

void census__free(struct census *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nt; i++) {
		free(c->t[i].raw);
		free(c->t[i].name);
	}
	free(c->t);
	free(c->r);
	free(c->by_name.slots);
	free(c->objs.slots);
	free(c->order);
	free(c->py_types.slots);
	free(c->py_pools.slots);
	free(c->sizes);
	free(c->mark_sizes);
	free(c->base);
	free(c->big);
	free(c);
}

/* The type of a raw vtable name, made when new (with no count at the walks before). Index, or -ENOMEM. */
static long type_of(struct census *c, const char *raw)
{
	uint64_t h = ml_hash_str(raw, 0);
	uintptr_t v = (uintptr_t)u64map__get(&c->by_name, h);

	if (v && !strcmp(c->t[v - 1].raw, raw))
		return (long)v - 1;
	if (ml_grow(&c->t, &c->capt, c->nt + 1, sizeof(*c->t)))
		return -ENOMEM;
	c->t[c->nt] = (struct ctype){.raw = strdup(raw)};
	if (!c->t[c->nt].raw)
		return -ENOMEM;
	/* A hash collision with another name leaves this one out of the index: it is still counted. */
	if (!v && u64map__put(&c->by_name, h, (void *)(uintptr_t)(c->nt + 1)))
		return -ENOMEM;
	return (long)c->nt++;
}

long census__type_named(struct census *c, const char *name)
{
	size_t before = c->nt;
	long t = type_of(c, name);

	if (t >= 0 && c->nt > before)
		c->t[t].since = c->walks; /* counted from the walk that found it */
	return t;
}

void census__count(struct census *c, long type, uint64_t size)
{
	if (type < 0 || (size_t)type >= c->nt)
		return;
	c->t[type].count++;
	c->t[type].bytes += size;
}

void census__py_maps(struct census *c, struct u64map **types, struct u64map **pools, uint64_t **refused)
{
	*types = &c->py_types;
	*pools = &c->py_pools;
	*refused = &c->py_refused;
}

uint64_t census__py_refused(const struct census *c)
{
	return c->py_refused;
}

int census__add_range(struct census *c, uint64_t lo, uint64_t hi, const char *raw_name)
{
	long t;

	if (hi <= lo)
		return 0;
	t = type_of(c, raw_name);
	if (t < 0)
		return (int)t;
	if (ml_grow(&c->r, &c->capr, c->nr + 1, sizeof(*c->r)))
		return -ENOMEM;
	c->r[c->nr++] = (struct crange){.lo = lo, .hi = hi, .type = (uint32_t)t};
	c->t[t].since = c->walks;
	c->last_add = c->walks;
	c->sorted = false;
	return 0;
}

struct add_ctx {
	struct census *c;
	uint64_t bias;
	int err;
};

static int add_vtable(const char *name, uint64_t vaddr, uint64_t size, void *ctx)
{
	struct add_ctx *a = ctx;

	a->err = census__add_range(a->c, a->bias + vaddr, a->bias + vaddr + size, name);
	return a->err;
}

/* The vtables of the object mapped at m (its first mapping, offset 0). 0, or a negative errno. */
static int read_object(struct census *c, const struct ml_mapping *m)
{
	struct add_ctx a = {.c = c};
	struct elf_syms *s = NULL;
	char path[64];
	uint64_t va;
	int fd, err;

	/* Through map_files: the very file mapped there, whatever the process's mount namespace. */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%lx-%lx", c->pid, (unsigned long)m->start,
		 (unsigned long)m->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	err = elf_syms__open_as(fd, ELF_SYMS_DATA, &s);
	close(fd);
	if (err)
		return err == -ENOMEM ? err : 0; /* not an ELF object: nothing to type by */
	if (elf_syms__offset_to_vaddr(s, m->offset, &va) == 0) {
		a.bias = m->start - va;
		elf_syms__for_each_object(s, "_ZTV", true, add_vtable, &a);
	}
	elf_syms__free(s);
	return a.err;
}

int census__sync(struct census *c, const struct ml_maps *maps)
{
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC), now = t0;
	uint64_t limit = c->walks ? CENSUS_SYNC_NS : CENSUS_FIRST_SYNC_NS;
	size_t nr = c->nr, nobj = c->objs.n, left = 0;

	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *m = &maps->v[i];
		uint64_t key = ml_hash_add(ml_hash64(m->inode), m->start);
		int err;

		if (!m->path || m->path[0] != '/' || m->offset || m->perms[0] != 'r' || u64map__get(&c->objs, key))
			continue;
		/* The event loop waits meanwhile (a burst of new stacks fills their ring): the rest next walk. */
		if (now - t0 > limit) {
			left++;
			continue;
		}
		err = read_object(c, m);
		if (err == -ENOMEM || u64map__put(&c->objs, key, (void *)1))
			return -ENOMEM;
		now = ml_clock_ns(CLOCK_MONOTONIC);
	}
	c->sync_left = left > 0;
	if (c->objs.n > nobj)
		ml_info("pid %d: heap census: %zu vtables in %zu new objects, read in %.1f ms%s", c->pid, c->nr - nr,
			c->objs.n - nobj, (double)(now - t0) / 1e6, left ? " (more at the next walks)" : "");
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct crange *x = a, *y = b;

	return (x->lo > y->lo) - (x->lo < y->lo);
}

void census__begin(struct census *c)
{
	if (!c->sorted && c->nr > 1)
		qsort(c->r, c->nr, sizeof(*c->r), cmp_range);
	c->sorted = true;
	c->chunks = c->typed = 0;
	for (size_t i = 0; i < c->nt; i++)
		c->t[i].count = c->t[i].bytes = 0;
	memset(c->sizes, 0, SIZE_CLASSES * sizeof(*c->sizes));
	for (size_t i = 0; i < c->nbig; i++)
		c->big[i].count = 0;
	c->sizes_ok = true;
}

void census__mark(struct census *c)
{
	c->mark_chunks = c->chunks;
	c->mark_typed = c->typed;
	memcpy(c->mark_sizes, c->sizes, SIZE_CLASSES * sizeof(*c->sizes));
	for (size_t i = 0; i < c->nbig; i++)
		c->big[i].mark = c->big[i].count;
	for (size_t i = 0; i < c->nt; i++)
		c->t[i].mark_count = c->t[i].count, c->t[i].mark_bytes = c->t[i].bytes;
}

void census__undo(struct census *c)
{
	c->chunks = c->mark_chunks;
	c->typed = c->mark_typed;
	memcpy(c->sizes, c->mark_sizes, SIZE_CLASSES * sizeof(*c->sizes));
	for (size_t i = 0; i < c->nbig; i++)
		c->big[i].count = c->big[i].mark;
	for (size_t i = 0; i < c->nt; i++)
		c->t[i].count = c->t[i].mark_count, c->t[i].bytes = c->t[i].mark_bytes;
}

/* The type whose vtable holds w, or NULL. */
static struct ctype *find(struct census *c, uint64_t w)
{
	size_t lo = 0, hi = c->nr;

	while (lo < hi) { /* the first range starting above w */
		size_t mid = lo + (hi - lo) / 2;

		if (c->r[mid].lo <= w)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && w < c->r[lo - 1].hi ? &c->t[c->r[lo - 1].type] : NULL;
}

void census__chunk(struct census *c, uint64_t w0, uint64_t w1, uint64_t size)
{
	struct ctype *t = find(c, w0);

	if (!t && w0 && w0 < ARRAY_COUNT_MAX)
		t = find(c, w1);
	c->chunks++;
	if (!t)
		return;
	c->typed++;
	t->count++;
	t->bytes += size;
}

static struct big_size *big_of(const struct census *c, uint64_t size)
{
	for (size_t i = 0; i < c->nbig; i++)
		if (c->big[i].size == size)
			return &c->big[i];
	return NULL;
}

void census__size(struct census *c, uint64_t size)
{
	struct big_size *b;

	if (size <= CENSUS_SIZE_MAX) {
		c->sizes[size / 16]++;
		return;
	}
	b = big_of(c, size);
	if (!b && (c->nbig >= BIG_SIZES_MAX || ml_grow(&c->big, &c->capbig, c->nbig + 1, sizeof(*c->big)))) {
		c->big_full = true;
		return;
	}
	if (!b) {
		b = &c->big[c->nbig++];
		*b = (struct big_size){.size = size};
	}
	b->count++;
}

bool census__in_use(const struct census *c, uint64_t size, uint64_t *n)
{
	const struct big_size *b;

	if (!c->sizes_ok || size % 16)
		return false;
	if (size <= CENSUS_SIZE_MAX) {
		*n = c->sizes[size / 16];
		return true;
	}
	b = big_of(c, size);
	*n = b ? b->count : 0;
	return b || !c->big_full;
}

int census__size_base(struct census *c)
{
	if (!c->sizes_ok)
		return -EAGAIN;
	if (!c->base && !(c->base = malloc(SIZE_CLASSES * sizeof(*c->base))))
		return -ENOMEM;
	memcpy(c->base, c->sizes, SIZE_CLASSES * sizeof(*c->base));
	for (size_t i = 0; i < c->nbig; i++)
		c->big[i].base = c->big[i].count;
	return 0;
}

/* How many more chunks of exactly this size are in use than at the base. */
static bool grown(const struct census *c, uint64_t size, int64_t *growth)
{
	const struct big_size *b = size > CENSUS_SIZE_MAX ? big_of(c, size) : NULL;
	uint64_t n, base = size <= CENSUS_SIZE_MAX ? c->base[size / 16] : b ? b->base : 0;

	if (!census__in_use(c, size, &n))
		return false;
	*growth = (int64_t)n - (int64_t)base;
	return true;
}

bool census__size_growth(const struct census *c, uint64_t size, int64_t *growth)
{
	/* A block over the mmap threshold is its own mapping: its chunk is the request's rounded to pages. */
	uint64_t mm = (size + 8 + CENSUS_PAGE - 1) & ~(CENSUS_PAGE - 1);
	int64_t g2 = 0;

	if (!c->base || !grown(c, size, growth))
		return false;
	if (size > CENSUS_SIZE_MAX && mm != size && !grown(c, mm, &g2))
		return false;
	*growth += g2;
	return true;
}

/* The kept walks that counted t with all its vtables known: the last ones of hist. A slow first sync
 * reads a library's vtables a walk or two late, and its types must not seem to grow from zero then. */
static unsigned int known_walks(const struct census *c, const struct ctype *t)
{
	unsigned int n = c->walks < CENSUS_HIST ? c->walks : CENSUS_HIST;

	return c->walks - t->since < n ? c->walks - t->since : n;
}

/* Its count at the kept walks rose at each: a new high every interval, two intervals at least. */
static bool growing(const struct census *c, const struct ctype *t)
{
	unsigned int n = c->walks < CENSUS_HIST ? c->walks : CENSUS_HIST, k = known_walks(c, t);

	if (k < 3)
		return false;
	for (unsigned int i = n - k + 1; i < n; i++)
		if (t->hist[i] <= t->hist[i - 1])
			return false;
	return true;
}

static double per_s(const struct census *c, const struct ctype *t)
{
	unsigned int n = c->walks < CENSUS_HIST ? c->walks : CENSUS_HIST, k = known_walks(c, t);

	if (k < 2 || c->times[n - 1] <= c->times[n - k])
		return 0;
	return ((double)t->hist[n - 1] - (double)t->hist[n - k]) / ((double)(c->times[n - 1] - c->times[n - k]) / 1e9);
}

static const struct census *cmp_ctx;

static int cmp_type(const void *a, const void *b)
{
	const struct ctype *x = &cmp_ctx->t[*(const size_t *)a], *y = &cmp_ctx->t[*(const size_t *)b];
	bool gx = growing(cmp_ctx, x), gy = growing(cmp_ctx, y);
	double rx = per_s(cmp_ctx, x), ry = per_s(cmp_ctx, y);

	if (gx != gy)
		return gx ? -1 : 1;
	if (gx && rx != ry)
		return rx > ry ? -1 : 1;
	return (x->count < y->count) - (x->count > y->count);
}

/* The types the walk found, in report order, once per walk: the reports then only copy the first of them. */
static int rank(struct census *c)
{
	if (ml_grow(&c->order, &c->cap_order, c->nt ? c->nt : 1, sizeof(*c->order)))
		return -ENOMEM;
	c->nordered = 0;
	for (size_t i = 0; i < c->nt; i++)
		if (c->t[i].count)
			c->order[c->nordered++] = i;
	cmp_ctx = c;
	qsort(c->order, c->nordered, sizeof(*c->order), cmp_type);
	cmp_ctx = NULL;
	return 0;
}

int census__end(struct census *c, uint64_t now_ns)
{
	unsigned int k = c->walks < CENSUS_HIST ? c->walks : CENSUS_HIST - 1;

	if (c->walks >= CENSUS_HIST)
		memmove(c->times, c->times + 1, (CENSUS_HIST - 1) * sizeof(*c->times));
	c->times[k] = now_ns;
	for (size_t i = 0; i < c->nt; i++) {
		struct ctype *t = &c->t[i];

		if (c->walks >= CENSUS_HIST)
			memmove(t->hist, t->hist + 1, (CENSUS_HIST - 1) * sizeof(*t->hist));
		t->hist[k] = t->count;
	}
	c->walks++;
	c->discarded = 0;
	return rank(c);
}

bool census__discard(struct census *c)
{
	if (c->discarded >= CENSUS_DISCARD_MAX)
		return false;
	c->discarded++;
	return true;
}

/* Cut s at the end of its first template argument (it starts just past the '<'). */
static void first_arg(char *s)
{
	int depth = 0;

	for (char *p = s; *p; p++) {
		depth += *p == '<' ? 1 : *p == '>' ? -1 : 0;
		if (depth < 0 || (depth == 0 && *p == ',')) {
			*p = '\0';
			return;
		}
	}
}

/*
 * What a person calls the type: "vtable for X" is X; a make_shared block, std::_Sp_counted_ptr_inplace<T, …>,
 * is T (its first template argument); the control block of a shared_ptr<T> made from a T* is "shared_ptr
 * control block of T". The raw name when it does not demangle.
 */
static const char *type_name(struct ctype *t)
{
	static const char *const blocks[] = {"std::_Sp_counted_deleter<", "std::_Sp_counted_ptr<"};
	static const char inplace[] = "std::_Sp_counted_ptr_inplace<";
	char *d, *s;
	size_t n;

	if (t->name)
		return t->name;
	d = ml_demangle(t->raw);
	if (!d)
		return t->raw;
	s = d + (strncmp(d, "vtable for ", 11) ? 0 : 11);
	if (!strncmp(s, inplace, sizeof(inplace) - 1)) {
		first_arg(s += sizeof(inplace) - 1);
		t->name = strdup(s);
	}
	for (size_t i = 0; s && !t->name && i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		if (strncmp(s, blocks[i], strlen(blocks[i])))
			continue;
		first_arg(s += strlen(blocks[i]));
		n = strlen(s);
		if (n && s[n - 1] == '*')
			s[n - 1] = '\0';
		if (asprintf(&t->name, "shared_ptr control block of %s", s) < 0)
			t->name = NULL;
		s = NULL;
		break;
	}
	if (!t->name && s)
		t->name = strdup(s);
	free(d);
	return t->name ? t->name : t->raw;
}

size_t census__top(struct census *c, struct census_type *out, size_t max, uint64_t *chunks, uint64_t *typed)
{
	size_t n = c->nordered < max ? c->nordered : max;

	*chunks = c->chunks;
	*typed = c->typed;
	for (size_t i = 0; i < n; i++) {
		struct ctype *t = &c->t[c->order[i]];

		out[i] = (struct census_type){.name = type_name(t),
					      .count = t->count,
					      .bytes = t->bytes,
					      .per_s = per_s(c, t),
					      .growing = growing(c, t)};
	}
	return n;
}

bool census__settled(const struct census *c)
{
	return !c->sync_left && c->walks >= c->last_add + 3;
}

unsigned int census__walks(const struct census *c)
{
	return c->walks;
}

size_t census__ntypes(const struct census *c)
{
	return c->nt;
}
