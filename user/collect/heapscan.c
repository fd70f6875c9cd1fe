/*
 * A live process's glibc heaps found and walked (heapscan.h): [heap] and the thread arenas' heaps, told by their
 * heap_info, read through /proc/PID/mem over the pages its pagemap says are resident; with a census, the chunks
 * glibc mapped on their own and Python's pools too. What is found is the target's and checked before use.
 */
#define _GNU_SOURCE
#include "collect/heapscan.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collect/census.h"
#include "lib/clock.h"
#include "lib/procmaps.h"

#define PAGE 4096ULL
#define IS_MMAPPED 2ULL		     /* a chunk mapped on its own */
#define ARENA_HEAP_MAX (64ULL << 20) /* glibc's HEAP_MAX_SIZE on 64-bit: arena heaps start on this boundary */

/* A live process: its memory file, and its pagemap read a block at a time as the walk moves up. */
#define PM_BLOCK 512 /* pagemap entries read at once: 2 MiB of address space */

struct live {
	int pid, mem, pagemap;
	uint64_t arena; /* the arena heap being walked (its heap_info), 0 for [heap] */
	struct {
		uint64_t base; /* first page's address; ~0 when empty */
		uint64_t bits[PM_BLOCK / 64];
	} blk[2];
	unsigned int next_evict;
};

static int live_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct live *lv = ctx;
	ssize_t n = pread(lv->mem, buf, len, (off_t)addr);

	if (n < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static bool live_resident(void *ctx, uint64_t page)
{
	struct live *lv = ctx;
	uint64_t base = page & ~(PM_BLOCK * PAGE - 1), idx = (page - base) / PAGE, ent[PM_BLOCK];
	unsigned int k;
	ssize_t n;

	for (k = 0; k < 2; k++)
		if (lv->blk[k].base == base)
			return lv->blk[k].bits[idx / 64] >> (idx % 64) & 1;
	k = lv->next_evict;
	lv->next_evict ^= 1;
	memset(lv->blk[k].bits, 0, sizeof(lv->blk[k].bits));
	lv->blk[k].base = base;
	n = pread(lv->pagemap, ent, sizeof(ent), (off_t)(base / PAGE * 8));
	for (ssize_t i = 0; n > 0 && i < n / 8; i++)
		if (ent[i] & ML_PM_PRESENT)
			lv->blk[k].bits[i / 64] |= 1ULL << (i % 64);
	return lv->blk[k].bits[idx / 64] >> (idx % 64) & 1;
}

/* glibc's heap_info at the start of an arena heap (2.35 added pagesize; older ones end before it). */
struct heap_info_raw {
	uint64_t ar_ptr, prev, size, mprotect_size;
};

/* [heap]: its mapping's end now; an arena heap: its heap_info's size now. */
static uint64_t live_end_now(void *ctx, uint64_t first, uint64_t end)
{
	struct live *lv = ctx;
	struct ml_maps maps = {};
	const struct ml_mapping *m;
	struct heap_info_raw hi;

	if (lv->arena)
		return !live_read(lv, lv->arena, &hi, sizeof(hi)) && hi.size <= ARENA_HEAP_MAX ? lv->arena + hi.size
											       : end;
	if (ml_maps__read(lv->pid, &maps))
		return end;
	m = ml_maps__find(&maps, first);
	end = m && m->path && !strcmp(m->path, "[heap]") && m->end > end ? m->end : end;
	ml_maps__clear(&maps);
	return end;
}

/*
 * The mmapped chunks that an anonymous mapping starts with, to the census by size: glibc maps a block over its
 * mmap threshold alone (prev_size 0, IS_MMAPPED, pages), and the kernel merges neighbouring ones into one
 * mapping, so they are followed header to header while they look like that. Only resident headers are read.
 */
static void mmapped_chunks(struct ml_heapfrag *f, struct live *lv, const struct heapfrag_src *src,
			   const struct ml_mapping *m, struct heapfrag_budget *b)
{
	uint64_t hdr[2], sz;

	for (uint64_t a = m->start; a < m->end && a % PAGE == 0; a += sz) {
		if (!b->chunks || b->read_bytes < sizeof(hdr)) {
			f->capped = true;
			return;
		}
		if (!src->resident(src->ctx, a) || live_read(lv, a, hdr, sizeof(hdr)))
			return;
		b->chunks--;
		b->read_bytes -= sizeof(hdr);
		sz = hdr[1] & ~7ULL;
		if (hdr[0] || (hdr[1] & 7) != IS_MMAPPED || !sz || sz % PAGE || sz > m->end - a)
			return;
		census__size(src->census, sz);
	}
}

/* A chunk header that could start a heap: in use before it (nothing is), a sane size within end. */
static bool first_chunk_ok(struct live *lv, const struct heapfrag_src *src, uint64_t c, uint64_t end)
{
	uint64_t size, sz;

	if (c % 16 || c + HEAP_CHUNK_HDR > end || !src->resident(src->ctx, c & ~(PAGE - 1)) ||
	    live_read(lv, c + 8, &size, sizeof(size)))
		return false;
	sz = size & ~7ULL;
	return (size & HEAP_PREV_INUSE) && sz >= HEAP_CHUNK_MIN && sz % 16 == 0 && sz <= end - c;
}

/*
 * An arena heap at start (a 64 MiB boundary) mapped read-write up to map_end: where its first chunk is, and
 * its end; false when what is there is no heap_info. The first heap of an arena holds the arena's
 * malloc_state after its heap_info (2200 bytes since glibc 2.27, 2192 before), later ones only the heap_info
 * (48 bytes since 2.35, 32 before); each candidate is checked and the walk then checks the rest.
 */
static bool arena_heap(struct live *lv, const struct heapfrag_src *src, uint64_t start, uint64_t map_end,
		       uint64_t *first, uint64_t *end, uint64_t *ar_ptr)
{
	static const uint64_t state_sizes[] = {2200, 2192}, info_sizes[] = {48, 32};
	struct heap_info_raw hi;

	if (!src->resident(src->ctx, start) || live_read(lv, start, &hi, sizeof(hi)))
		return false;
	if (hi.size < PAGE || hi.size % PAGE || hi.size > ARENA_HEAP_MAX || hi.size > map_end - start)
		return false;
	*end = start + hi.size;
	*ar_ptr = hi.ar_ptr;
	for (size_t i = 0; i < 2; i++) {
		uint64_t c;

		if (hi.prev == 0) { /* the first heap of its arena: the arena follows the heap_info */
			if (hi.ar_ptr != start + info_sizes[0] && hi.ar_ptr != start + info_sizes[1])
				return false;
			c = hi.ar_ptr + state_sizes[i];
			c += (16 - (c + HEAP_CHUNK_HDR) % 16) % 16;
		} else {
			if (hi.prev % ARENA_HEAP_MAX || hi.prev == start || hi.ar_ptr % 8 || hi.ar_ptr < PAGE)
				return false;
			c = start + info_sizes[i];
		}
		if (first_chunk_ok(lv, src, c, *end)) {
			*first = c;
			return true;
		}
	}
	return false;
}

static int cmp_run(const void *a, const void *b)
{
	uint64_t x = ((const struct ml_heap_run *)a)->addr, y = ((const struct ml_heap_run *)b)->addr;

	return x < y ? -1 : x > y;
}

static int cmp_holder(const void *a, const void *b)
{
	uint64_t x = ((const struct ml_heap_holder *)a)->addr, y = ((const struct ml_heap_holder *)b)->addr;

	return x < y ? -1 : x > y;
}

/* The heaps were walked in the maps' order, each by address: one order for the lookups. */
static void sort_by_addr(struct ml_heapfrag *f)
{
	if (f->nruns > 1) /* an empty array may be NULL, which qsort may not be given */
		qsort(f->runs, f->nruns, sizeof(*f->runs), cmp_run);
	if (f->nspans > 1)
		qsort(f->spans, f->nspans, sizeof(*f->spans), cmp_run);
	if (f->nholders > 1)
		qsort(f->holders, f->nholders, sizeof(*f->holders), cmp_holder);
}

int heapfrag__scan(struct ml_heapfrag *f, int pid, struct census *census, unsigned int widen)
{
	struct live lv = {.pid = pid, .mem = -1, .pagemap = -1};
	struct heapfrag_src src = {
	    .read = live_read, .resident = live_resident, .end_now = live_end_now, .ctx = &lv, .census = census};
	unsigned int w = widen < HEAPFRAG_WIDEN_MAX ? widen : HEAPFRAG_WIDEN_MAX;
	struct heapfrag_budget b = {.read_bytes = HEAPFRAG_READ_MAX << w, .chunks = HEAPFRAG_CHUNKS_MAX << w};
	struct ml_maps maps = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);
	unsigned int runs = f->broken ? f->broken_runs : 0;
	int err = 0;

	heapfrag__reset(f);
	f->widened = w;
	lv.blk[0].base = lv.blk[1].base = ~0ULL;
	lv.mem = ml_proc_open(pid, "mem");
	lv.pagemap = ml_proc_open(pid, "pagemap");
	if (lv.mem < 0 || lv.pagemap < 0) {
		err = lv.mem < 0 ? lv.mem : lv.pagemap;
		goto out;
	}
	err = ml_maps__read(pid, &maps);
	if (!err && census) {
		err = census__sync(census, &maps);
		t0 = ml_clock_ns(CLOCK_MONOTONIC); /* reading new objects' vtables is not the walk: it paces walks */
	}
	if (err)
		goto out;
	if (census)
		census__begin(census);
	for (size_t i = 0; i < maps.n && !f->capped; i++) {
		const struct ml_mapping *m = &maps.v[i];
		uint64_t first, end, ar_ptr = 0;
		int e;

		if (m->path && !strcmp(m->path, "[heap]")) {
			if (!first_chunk_ok(&lv, &src, m->start, m->end)) {
				f->broken++;
				continue;
			}
			first = m->start;
			end = m->end;
			lv.arena = 0;
		} else if (m->path || strcmp(m->perms, "rw-p")) {
			continue;
		} else if (m->start % ARENA_HEAP_MAX ||
			   !arena_heap(&lv, &src, m->start, m->end, &first, &end, &ar_ptr)) {
			if (census)
				mmapped_chunks(f, &lv, &src, m, &b);
			continue;
		} else {
			lv.arena = m->start;
		}
		src.main_arena = !lv.arena;
		e = heapfrag__walk_heap(f, &src, first, end, &b, ar_ptr);
		if (e == -ENOMEM || e == -ESRCH) {
			err = e;
			break;
		}
	}
	if (census && !err) /* Python's small objects: pymalloc's pools, not malloc's chunks */
		err = pyheap__walk(pid, lv.mem, lv.pagemap, &maps, census, &f->py);
	if (census && !err && f->broken && census__discard(census)) {
		f->census_left_out = true; /* this report has no census: the last whole walk's history stands */
		census = NULL;
	} else if (census && !err)
		err = census__end(census, t0);
	f->census = census && !err ? census : NULL;
	sort_by_addr(f);
out:
	f->broken_runs = f->broken ? runs + 1 : 0;
	f->walked_ns = t0;
	f->scan_ns = ml_clock_ns(CLOCK_MONOTONIC) - t0;
	ml_maps__clear(&maps);
	if (lv.mem >= 0)
		close(lv.mem);
	if (lv.pagemap >= 0)
		close(lv.pagemap);
	return err;
}
