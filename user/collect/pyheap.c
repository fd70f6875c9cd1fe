/* Python objects in pymalloc's pools, counted by type from outside (see pyheap.h). */
#define _GNU_SOURCE
#include "collect/pyheap.h"
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collect/census.h"
#include "lib/procmaps.h"
#include "lib/u64map.h"

#define PAGE 4096ULL
#define POOL_SIZE 16384ULL /* 3.10 on, 64-bit (the radix tree's pools) */
#define POOL_OVERHEAD 48ULL
#define ARENA_SIZE (1ULL << 20) /* 3.10 on: an arena's own mmap */
#define NB_CLASSES 32		/* blocks of 16 to 512 bytes */
#define PM_CHUNK 4096		/* pagemap entries read at once */
#define HEADER_BATCH 512	/* candidate pools gathered before their headers are read */

/* PyTypeObject, 3.10-3.13 without Py_DEBUG: ob_type at 8, tp_name 24, tp_basicsize 32, tp_flags 168. */
#define TP_READ 176
#define TPFLAGS_HAVE_GC (1ULL << 14)
#define TPFLAGS_READY (1ULL << 12)
#define TPFLAGS_PREHEADER (3ULL << 3) /* managed weakref (3.12 on) and managed dict (3.11 on) */
#define NAME_MAX_LEN 96
#define TYPE_CACHE_MAX (1U << 18) /* words remembered as not a type, at most */
#define PYHEAP_CHECKS_MAX 8192	  /* words read as possible types per walk: the rest wait for the next */

/* A cache value's kind: what precedes an object of the type in its block. */
#define V_PLAIN 0 /* nothing: a non-GC object */
#define V_GC 1	  /* the GC head (two words) */
#define V_PRE 3	  /* the GC head after the managed dict and weakref words (3.11 on) */

struct pool_header {
	uint32_t count, pad;
	uint64_t freeblock, nextpool, prevpool;
	uint32_t arenaindex, szidx, nextoffset, maxnextoffset;
};

struct walk {
	int pid, mem, pagemap;
	const struct ml_maps *maps;
	struct census *c;
	struct u64map *types; /* a word: (census type index + 2) << 2 | its V_* below, or 1 when it is no type */
	struct u64map *pools; /* pool bases found: a word there is no type (type objects are over 512 bytes) */
	uint64_t *refused;    /* the census's count of words read as types and refused */
	unsigned int checks;  /* words checked as types this walk */
	struct pyheap_stats *st;
	uint8_t pool[POOL_SIZE];
	uint8_t used[POOL_SIZE / 16];
};

static int read_at(int fd, uint64_t addr, void *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len, (off_t)addr);

	if (n < 0)
		return errno == ESRCH ? -ESRCH : -EIO;
	return (size_t)n == len ? 0 : -EIO;
}

static bool resident(struct walk *w, uint64_t addr)
{
	uint64_t e;

	return pread(w->pagemap, &e, 8, (off_t)(addr / PAGE * 8)) == 8 && (e & ML_PM_PRESENT);
}

/* Readable without making memory resident: file-backed, or an anonymous page already in. */
static bool safe_to_read(struct walk *w, uint64_t addr)
{
	const struct ml_mapping *m = ml_maps__find(w->maps, addr);

	return m && m->perms[0] == 'r' && (m->path && m->path[0] == '/' ? true : resident(w, addr));
}

/* Its type's type, up to three steps, reaches a type that is its own type (PyType_Type). */
static bool type_chain_ok(struct walk *w, uint64_t t)
{
	uint64_t words[2];

	for (int i = 0; i < 3; i++) {
		if ((t & 7) || !safe_to_read(w, t) || read_at(w->mem, t, words, sizeof(words)))
			return false;
		if (words[1] == t)
			return true;
		t = words[1];
	}
	return false;
}

/*
 * tp_name at addr: printable up to its NUL, read at once up to its page's end (the next may not be in). A name
 * with no NUL in what was read is refused, not cut: the target chose its length.
 */
static bool read_name(struct walk *w, uint64_t addr, char *name, size_t at)
{
	size_t room = PAGE - (addr & (PAGE - 1)), n = room < NAME_MAX_LEN ? room : NAME_MAX_LEN, len = at;

	if (!safe_to_read(w, addr) || read_at(w->mem, addr, name + at, n))
		return false;
	name[at + n] = '\0';
	while (len < at + n && name[len] > ' ' && name[len] < 127)
		len++;
	return len > at && len < at + n && name[len] == '\0';
}

/* Check a word as a type object: its cache value ((index + 2) << 2 | V_*), 1 when none, or -ENOMEM. */
static long check_type(struct walk *w, uint64_t t)
{
	const struct ml_mapping *m = ml_maps__find(w->maps, t);
	uint64_t tp[TP_READ / 8];
	char name[NAME_MAX_LEN + 16] = "Python ";
	long idx, v = 1;
	bool read = m && m->perms[1] == 'w' && !u64map__get(w->pools, t & ~(POOL_SIZE - 1)) && safe_to_read(w, t) &&
		    !read_at(w->mem, t, tp, sizeof(tp));

	if (read && (tp[21] & TPFLAGS_READY) && tp[4] >= 16 && tp[4] < (1U << 20) && type_chain_ok(w, tp[1]) &&
	    read_name(w, tp[3], name, 7)) {
		idx = census__type_named(w->c, name);
		if (idx < 0)
			return idx;
		v = ((idx + 2) << 2) | (!(tp[21] & TPFLAGS_HAVE_GC)  ? V_PLAIN
					: tp[21] & TPFLAGS_PREHEADER ? V_PRE
								     : V_GC);
	}
	if (read && v == 1)
		(*w->refused)++;
	if ((v > 1 || w->types->n < TYPE_CACHE_MAX) && u64map__put(w->types, t, (void *)(uintptr_t)v))
		return -ENOMEM;
	return v;
}

/* The cache value of a word (see check_type), checked when new while this walk's checks last; 1: no type. */
static long type_of_word(struct walk *w, uint64_t t)
{
	uintptr_t v;

	if (!t || (t & 7) || t >= (1ULL << 47))
		return 1;
	v = (uintptr_t)u64map__get(w->types, t);
	if (v)
		return (long)v;
	if (w->checks >= PYHEAP_CHECKS_MAX)
		return 1;
	w->checks++;
	return check_type(w, t);
}

static bool is_type(long v, int kind)
{
	return v > 3 && (v & 3) == kind;
}

/* A block's object: plain at b (its type at b + 8), after a GC head at b + 16 (type at b + 24), or after the
 * pre-header too at b + 32 (type at b + 40). The known types first: most blocks need no read. */
static int count_block(struct walk *w, const uint8_t *b, uint64_t size)
{
	static const int kinds[3] = {V_PLAIN, V_GC, V_PRE};
	uint64_t words[3] = {0};
	long v[3] = {0};
	int n = 0, hit = -1;

	for (; hit < 0 && n < 3 && (uint64_t)(16 * n + 16) <= size; n++) {
		memcpy(&words[n], b + 8 + 16 * n, 8);
		v[n] = (long)(uintptr_t)u64map__get(w->types, words[n]);
		if (is_type(v[n], kinds[n]))
			hit = n; /* the first place that holds a known type of its kind: no need to look further */
	}
	for (int k = 0; hit < 0 && k < n; k++) {
		if (v[k] == 0 && (v[k] = type_of_word(w, words[k])) < 0)
			return (int)v[k];
		if (is_type(v[k], kinds[k]))
			hit = k;
	}
	if (hit < 0)
		return 0;
	census__count(w->c, (v[hit] >> 2) - 2, size);
	w->st->typed++;
	return 0;
}

/* A header that only a pool in use has: its size class, high-water mark and count agree. */
static bool header_ok(const struct pool_header *h, uint64_t base)
{
	uint64_t size = ((uint64_t)h->szidx + 1) << 4;

	return h->szidx < NB_CLASSES && h->maxnextoffset == POOL_SIZE - size && h->nextoffset >= POOL_OVERHEAD &&
	       h->nextoffset <= POOL_SIZE && (h->nextoffset - POOL_OVERHEAD) % size == 0 && h->count &&
	       h->count <= (h->nextoffset - POOL_OVERHEAD) / size &&
	       (!h->freeblock || (h->freeblock >= base + POOL_OVERHEAD && h->freeblock < base + POOL_SIZE));
}

enum pool_read { POOL_NONE, POOL_OK, POOL_MOVED };

/*
 * The pool at base read up to *len, its header taken from that same read (the one read before may be stale by
 * now), and its used blocks (below the high-water mark, off the free list) marked in w->used. POOL_MOVED, with
 * *len to read again, when blocks were taken or freed during the read.
 */
static enum pool_read read_pool(struct walk *w, uint64_t base, uint64_t *len, struct pool_header *h, uint64_t *nused)
{
	uint64_t size, nblocks, f;

	if (read_at(w->mem, base, w->pool, *len))
		return POOL_NONE; /* gone meanwhile */
	memcpy(h, w->pool, sizeof(*h));
	if (!header_ok(h, base))
		return POOL_NONE;
	size = ((uint64_t)h->szidx + 1) << 4;
	nblocks = (h->nextoffset - POOL_OVERHEAD) / size;
	*nused = nblocks;
	f = h->nextoffset > *len ? 0 : h->freeblock;
	memset(w->used, 1, nblocks);
	/* The free list: each free block's first word is the next (or 0); a loop or a stray link ends it. */
	for (uint64_t k = 0; f && k < nblocks; k++) {
		uint64_t off = f - base, i = (off - POOL_OVERHEAD) / size;

		if (f < base + POOL_OVERHEAD || off >= h->nextoffset || (off - POOL_OVERHEAD) % size || !w->used[i])
			break;
		w->used[i] = 0;
		(*nused)--;
		memcpy(&f, w->pool + off, 8);
	}
	if (!f && h->nextoffset <= *len && *nused == h->count)
		return POOL_OK;
	*len = h->nextoffset;
	return POOL_MOVED;
}

/* The pool at base: its used blocks counted. A running interpreter takes and frees blocks while a pool is read,
 * so one that reads inconsistent is read once more, and then waits for the next walk. */
static int walk_pool(struct walk *w, uint64_t base, const struct pool_header *seen)
{
	struct pool_header h;
	uint64_t len = seen->nextoffset, nused = 0, size;
	enum pool_read r = read_pool(w, base, &len, &h, &nused);
	int err;

	if (r == POOL_MOVED)
		r = read_pool(w, base, &len, &h, &nused);
	if (r != POOL_OK)
		return 0;
	if (u64map__put(w->pools, base, (void *)1))
		return -ENOMEM;
	size = ((uint64_t)h.szidx + 1) << 4;
	w->st->pools++;
	w->st->objects += nused;
	for (uint64_t i = 0; i < (h.nextoffset - POOL_OVERHEAD) / size; i++)
		if (w->used[i] && (err = count_block(w, w->pool + POOL_OVERHEAD + i * size, size)))
			return err;
	return 0;
}

/*
 * The headers of n candidate pools. Through /proc/PID/mem, never process_vm_readv: that pins the pages, and
 * pinning a page a fork still shares copies it into the process (a DataLoader worker's Private_Dirty grew by
 * 100 MiB from the walk alone). 0, or -1 when any failed.
 */
static int read_headers(struct walk *w, const uint64_t *bases, struct pool_header *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (read_at(w->mem, bases[i], &h[i], sizeof(h[i])))
			return -1;
	return 0;
}

/* A batch of candidates: each whose header reads as a pool in use is walked. */
static int walk_batch(struct walk *w, const uint64_t *bases, size_t n)
{
	struct pool_header h[HEADER_BATCH];

	if (!n || read_headers(w, bases, h, n))
		return 0; /* a mapping changed meanwhile: its pools wait for the next walk */
	for (size_t i = 0; i < n; i++) {
		int err;

		if (!header_ok(&h[i], bases[i]))
			continue;
		if (w->st->pools >= PYHEAP_POOLS_MAX) {
			w->st->left_out++;
			continue;
		}
		err = walk_pool(w, bases[i], &h[i]);
		if (err)
			return err;
	}
	return 0;
}

/* The candidate pools of [lo, hi): every resident POOL_SIZE-aligned page, their headers read in batches. */
static int walk_range(struct walk *w, uint64_t lo, uint64_t hi)
{
	uint64_t ent[PM_CHUNK], bases[HEADER_BATCH];
	size_t nb = 0;
	int err = 0;

	for (uint64_t a = (lo + POOL_SIZE - 1) & ~(POOL_SIZE - 1); !err && a + POOL_SIZE <= hi;) {
		uint64_t n = (hi - a) / PAGE < PM_CHUNK ? (hi - a) / PAGE : PM_CHUNK;
		ssize_t got = pread(w->pagemap, ent, n * 8, (off_t)(a / PAGE * 8));

		if (got <= 0)
			return got < 0 && errno == ESRCH ? -ESRCH : 0;
		for (uint64_t i = 0; !err && i < (uint64_t)got / 8; i += POOL_SIZE / PAGE) {
			if (!(ent[i] & ML_PM_PRESENT) || a + i * PAGE + POOL_SIZE > hi)
				continue;
			bases[nb++] = a + i * PAGE;
			if (nb == HEADER_BATCH) {
				err = walk_batch(w, bases, nb);
				nb = 0;
			}
		}
		a += (uint64_t)got / 8 * PAGE;
	}
	return err ? err : walk_batch(w, bases, nb);
}

/* The bytes from pos that a glibc mmapped chunk takes (its header at pos + prev_size), or 0 when none is there. */
static uint64_t glibc_chunk_at(struct walk *w, uint64_t pos, uint64_t end)
{
	uint64_t hdr[2], size;

	if (!resident(w, pos) || read_at(w->mem, pos, hdr, sizeof(hdr)) || hdr[0] % 16 || hdr[0] >= PAGE * 16)
		return 0;
	if (hdr[0] && read_at(w->mem, pos + hdr[0], hdr, sizeof(hdr)))
		return 0;
	size = hdr[1] & ~7ULL;
	if (!(hdr[1] & 2) || size < PAGE || (size + hdr[0]) % PAGE || pos + size + hdr[0] > end)
		return 0;
	return size + hdr[0];
}

/*
 * The pools of one anonymous mapping. Adjacent mmaps merge into one mapping, and most of a large one is
 * glibc's mmapped chunks (buffers over 128 KiB: tensors' storage): those are stepped over by their headers,
 * a read each; the rest is scanned an arena (1 MiB) at a time.
 */
static int walk_mapping(struct walk *w, const struct ml_mapping *m)
{
	for (uint64_t pos = m->start; pos < m->end;) {
		uint64_t skip = glibc_chunk_at(w, pos, m->end), hi;
		int err;

		if (skip) {
			pos += skip;
			continue;
		}
		hi = pos + ARENA_SIZE < m->end ? pos + ARENA_SIZE : m->end; /* an arena's pools end by its end */
		err = walk_range(w, pos, hi);
		if (err)
			return err;
		pos = hi;
	}
	return 0;
}

int pyheap__walk(int pid, int mem_fd, int pagemap_fd, const struct ml_maps *maps, struct census *c,
		 struct pyheap_stats *st)
{
	struct walk *w = calloc(1, sizeof(*w));
	int err = 0;

	*st = (struct pyheap_stats){0};
	if (!w)
		return -ENOMEM;
	*w = (struct walk){.pid = pid, .mem = mem_fd, .pagemap = pagemap_fd, .maps = maps, .c = c, .st = st};
	census__py_maps(c, &w->types, &w->pools, &w->refused);
	for (size_t i = 0; i < maps->n && !err; i++) {
		const struct ml_mapping *m = &maps->v[i];

		if (!m->path && !strcmp(m->perms, "rw-p") && m->end - m->start >= POOL_SIZE)
			err = walk_mapping(w, m);
	}
	free(w);
	return err;
}
