/*
 * Fragmentation of a glibc C heap from its chunk headers (see heapfrag.h). A chunk is [prev_size][size|flags]
 * then its user bytes; size & ~7 leads to the next chunk, whose PREV_INUSE bit (1) says whether this one is
 * in use. Everything read is the target's and may change while it is read: sizes are checked against the
 * heap's end before they are followed, every step moves forward, and the walk has a budget.
 */
#define _GNU_SOURCE
#include "collect/heapfrag.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collect/census.h"
#include "collect/ledger.h"
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/procmaps.h"

#define PAGE 4096ULL
#define CHUNK_HDR 16ULL /* prev_size and size: also the size of an arena heap's fencepost */
#define CHUNK_MIN 32ULL
#define PREV_INUSE 1ULL
#define IS_MMAPPED 2ULL		     /* a chunk mapped on its own */
#define WIN_BIG 32768		     /* bytes read at once where chunks are small */
#define ARENA_HEAP_MAX (64ULL << 20) /* glibc's HEAP_MAX_SIZE on 64-bit: arena heaps start on this boundary */

/* A window of the target's memory, so that densely packed headers cost one read per window. */
struct walker {
	const struct heapfrag_src *src;
	struct heapfrag_budget *b;
	struct ml_heapfrag *f;
	uint64_t base;
	size_t len;
	unsigned char buf[WIN_BIG];
};

/* The 8-byte word at at (8-aligned), reading up to want bytes of resident pages from its page on. */
static int word_at(struct walker *w, uint64_t at, uint64_t *v, size_t want)
{
	uint64_t page = at & ~(PAGE - 1);
	size_t len = PAGE;
	int err;

	if (at >= w->base && at - w->base + 8 <= w->len) {
		memcpy(v, w->buf + (at - w->base), 8);
		return 0;
	}
	if (!w->src->resident(w->src->ctx, page))
		return -ENODATA;
	while (len < want && len < WIN_BIG && w->src->resident(w->src->ctx, page + len))
		len += PAGE;
	if (w->b->read_bytes < len) {
		w->f->capped = true;
		return -E2BIG;
	}
	w->len = 0;
	err = w->src->read(w->src->ctx, page, w->buf, len);
	if (err && len > PAGE) /* the rest of the window may have gone meanwhile: its first page will do */
		err = w->src->read(w->src->ctx, page, w->buf, len = PAGE);
	if (err)
		return err;
	w->b->read_bytes -= len;
	w->f->read_bytes += len;
	w->base = page;
	w->len = len;
	memcpy(v, w->buf + (at - page), 8);
	return 0;
}

/* Resident bytes of [lo, hi). */
static uint64_t resident_bytes(const struct heapfrag_src *src, uint64_t lo, uint64_t hi)
{
	uint64_t n = 0;

	for (uint64_t p = lo & ~(PAGE - 1); p < hi; p += PAGE) {
		uint64_t a = p > lo ? p : lo, e = p + PAGE < hi ? p + PAGE : hi;

		if (src->resident(src->ctx, p))
			n += e - a;
	}
	return n;
}

static int push_holder(struct ml_heapfrag *f, uint64_t addr, uint64_t size, uint64_t charged)
{
	if (ml_grow(&f->holders, &f->cap_holders, f->nholders + 1, sizeof(*f->holders)))
		return -ENOMEM;
	f->holders[f->nholders++] = (struct ml_heap_holder){.addr = addr, .size = size, .charged = charged};
	return 0;
}

/* A range onto a list kept by address, merged with the last one when they touch. 0 or -ENOMEM. */
static int push_run(struct ml_heap_run **v, size_t *n, size_t *cap, uint64_t addr, uint64_t len)
{
	if (*n && (*v)[*n - 1].addr + (*v)[*n - 1].len == addr) {
		(*v)[*n - 1].len += len;
		return 0;
	}
	if (ml_grow(v, cap, *n + 1, sizeof(**v)))
		return -ENOMEM;
	(*v)[(*n)++] = (struct ml_heap_run){.addr = addr, .len = len};
	return 0;
}

/*
 * Where a walk is: the heap [first, end), the chunk at addr with its size word, and run, the resident bytes of
 * the free chunks since the last in-use one.
 */
struct walk_pos {
	uint64_t first, end, addr, size, run;
	unsigned int regrown;
};

/*
 * The heap's end is reached (top, the top chunk's size, or 0 at a fencepost): what it held is counted. In the
 * main arena malloc_trim(0) also shrinks the break: all of the top but its last partial page and MINSIZE.
 */
static int heap_done(struct walker *w, const struct walk_pos *at, uint64_t top)
{
	struct ml_heapfrag *f = w->f;

	if (w->src->main_arena && top > CHUNK_MIN + PAGE) {
		uint64_t extra = (top - CHUNK_MIN - 1) & ~(PAGE - 1);

		f->trimmable_bytes += resident_bytes(w->src, at->end - extra, at->end);
	}
	f->top_bytes += top;
	f->unheld_bytes += at->run;
	f->heap_bytes += at->end - at->first;
	f->heaps++;
	if ((top && push_run(&f->runs, &f->nruns, &f->cap_runs, at->addr, top)) ||
	    push_run(&f->spans, &f->nspans, &f->cap_spans, at->first, at->end - at->first))
		return -ENOMEM;
	return 1;
}

/* The top chunk of a heap that grew since the walk began (sz runs past its end): its end is read again. */
static bool regrew(struct walker *w, struct walk_pos *at, uint64_t sz)
{
	uint64_t now;

	if (sz <= at->end - at->addr || sz < CHUNK_MIN || !w->src->end_now || at->regrown >= 4)
		return false;
	now = w->src->end_now(w->src->ctx, at->first, at->end);
	at->regrown++;
	if (now <= at->end)
		return false;
	at->end = now;
	return true;
}

/* An in-use chunk's first two words to the census, when the window read with its header holds them. */
static void census_chunk(struct walker *w, uint64_t user, uint64_t sz)
{
	uint64_t v[2] = {0, 0};

	if (user < w->base || user - w->base + 8 > w->len)
		return;
	memcpy(&v[0], w->buf + (user - w->base), 8);
	if (user - w->base + 16 <= w->len && sz >= CHUNK_HDR + 16)
		memcpy(&v[1], w->buf + (user - w->base + 8), 8);
	census__chunk(w->src->census, v[0], v[1], sz);
}

/* The chunk [at->addr, next), in use or free as the next one's PREV_INUSE bit says. 0 or -ENOMEM. */
static int count_chunk(struct walker *w, struct walk_pos *at, uint64_t next, uint64_t next_size)
{
	struct ml_heapfrag *f = w->f;
	uint64_t sz = next - at->addr, r;
	int err;

	if (next_size & PREV_INUSE) {
		f->in_use_bytes += sz;
		if (w->src->census) {
			census__size(w->src->census, sz);
			census_chunk(w, at->addr + CHUNK_HDR, sz);
		}
		if (at->run && (err = push_holder(f, at->addr + CHUNK_HDR, sz, at->run)))
			return err;
		at->run = 0;
		return 0;
	}
	r = resident_bytes(w->src, at->addr, next);
	{ /* mtrim: the pages from past the chunk's malloc_chunk fields (48 bytes) to its end's page boundary */
		uint64_t lo = (at->addr + 48 + PAGE - 1) & ~(PAGE - 1), hi = next & ~(PAGE - 1);

		if (lo < hi)
			f->trimmable_bytes += resident_bytes(w->src, lo, hi);
	}
	f->free_bytes += sz;
	f->free_resident_bytes += r;
	at->run += r;
	return push_run(&f->runs, &f->nruns, &f->cap_runs, at->addr, sz);
}

/*
 * One chunk of the walk: 0 to go on (at moved to the next chunk, or the same one read again), 1 at the heap's
 * end, or a negative errno.
 */
static int step(struct walker *w, struct walk_pos *at)
{
	struct ml_heapfrag *f = w->f;
	uint64_t sz = at->size & ~7ULL, next, next_size;
	int err;

	if (!w->b->chunks) {
		f->capped = true;
		return -E2BIG;
	}
	w->b->chunks--;
	f->chunks++;
	/*
	 * An older arena heap ends in a fencepost: a 16-byte chunk, then a header of size 0, within 64 bytes
	 * of its end (a too small old top leaves only the 0).
	 */
	if ((sz == CHUNK_HDR || (sz == 0 && (at->size & PREV_INUSE))) && at->end - at->addr < 64)
		return heap_done(w, at, 0);
	if (regrew(w, at, sz)) {
		f->chunks--; /* the same header, looked at again */
		w->b->chunks++;
		return 0;
	}
	/* Forward only, and never past the end: a bad size stops the walk instead of leading it anywhere. */
	if (sz < CHUNK_MIN || sz % 16 || sz > at->end - at->addr)
		return -EBADMSG;
	next = at->addr + sz;
	if (next == at->end) /* the top chunk ends the heap (glibc merges any free chunk below it) */
		return heap_done(w, at, sz);
	if (at->end - next < CHUNK_HDR)
		return -EBADMSG;
	err = word_at(w, next + 8, &next_size, sz >= WIN_BIG / 2 ? PAGE : WIN_BIG);
	if (!err)
		err = count_chunk(w, at, next, next_size);
	if (err)
		return err;
	at->addr = next;
	at->size = next_size;
	return 0;
}

int heapfrag__walk(struct ml_heapfrag *f, const struct heapfrag_src *src, uint64_t first, uint64_t end,
		   struct heapfrag_budget *b)
{
	struct walk_pos at = {.first = first, .end = end, .addr = first};
	struct walker *w;
	int err;

	if (first % 16 || end <= first || end - first < CHUNK_HDR)
		return -EBADMSG;
	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct walker){.src = src, .b = b, .f = f};
	err = word_at(w, first + 8, &at.size, WIN_BIG);
	while (!err)
		err = step(w, &at);
	free(w);
	if (err == -EBADMSG || err == -ENODATA)
		f->stop_addr = at.addr;
	return err < 0 ? err : 0;
}

void heapfrag__reset(struct ml_heapfrag *f)
{
	struct ml_heapfrag keep = *f;

	*f = (struct ml_heapfrag){.holders = keep.holders,
				  .cap_holders = keep.cap_holders,
				  .runs = keep.runs,
				  .cap_runs = keep.cap_runs,
				  .spans = keep.spans,
				  .cap_spans = keep.cap_spans,
				  .arenas = keep.arenas,
				  .cap_arenas = keep.cap_arenas,
				  .stacks = keep.stacks,
				  .cap_stacks = keep.cap_stacks};
}

void heapfrag__clear(struct ml_heapfrag *f)
{
	free(f->holders);
	free(f->runs);
	free(f->spans);
	free(f->stacks);
	free(f->arenas);
	*f = (struct ml_heapfrag){};
}

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

/* A heap walked to its end, into its arena's sums (what the walk added since pre). 0 or -ENOMEM. */
static int add_arena(struct ml_heapfrag *f, uint64_t arena, const struct ml_heapfrag *pre)
{
	struct ml_arena_frag *a = NULL;

	for (size_t i = 0; i < f->narenas && !a; i++)
		if (f->arenas[i].arena == arena)
			a = &f->arenas[i];
	if (!a) {
		if (ml_grow(&f->arenas, &f->cap_arenas, f->narenas + 1, sizeof(*f->arenas)))
			return -ENOMEM;
		a = &f->arenas[f->narenas++];
		*a = (struct ml_arena_frag){.arena = arena};
	}
	a->heaps += f->heaps - pre->heaps;
	a->heap_bytes += f->heap_bytes - pre->heap_bytes;
	a->free_resident_bytes += f->free_resident_bytes - pre->free_resident_bytes;
	a->trimmable_bytes += f->trimmable_bytes - pre->trimmable_bytes;
	return 0;
}

/* A walk's partial sums undone: f as it was before, but for the arrays (which may have moved) and the reads. */
static void undo_walk(struct ml_heapfrag *f, const struct ml_heapfrag *before)
{
	struct ml_heapfrag moved = *f;

	*f = *before;
	f->holders = moved.holders;
	f->cap_holders = moved.cap_holders;
	f->runs = moved.runs;
	f->cap_runs = moved.cap_runs;
	f->spans = moved.spans;
	f->cap_spans = moved.cap_spans;
	f->read_bytes = moved.read_bytes;
	f->chunks = moved.chunks;
	f->stop_addr = moved.stop_addr;
}

int heapfrag__walk_heap(struct ml_heapfrag *f, const struct heapfrag_src *src, uint64_t first, uint64_t end,
			struct heapfrag_budget *b, uint64_t arena)
{
	struct ml_heapfrag before = *f;
	uint64_t stop;
	int err, err1;

	if (src->census)
		census__mark(src->census);
	err1 = err = heapfrag__walk(f, src, first, end, b);
	if (err != -EBADMSG && err != -ENODATA)
		return err ? err : add_arena(f, arena, &before);
	if (src->census)
		census__undo(src->census);
	undo_walk(f, &before);
	stop = f->stop_addr;
	err = heapfrag__walk(f, src, first, end, b);
	if (err != -EBADMSG && err != -ENODATA)
		return err ? err : add_arena(f, arena, &before);
	f->broken++;
	f->unwalked_bytes += f->stop_addr < end ? end - f->stop_addr : 0; /* a heap grows while walked */
	if (f->stop_addr == stop && err == err1 && err == -EBADMSG)
		f->corrupt++;
	else if (f->stop_addr == stop && err == err1)
		f->unreadable++;
	return err;
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

	if (c % 16 || c + CHUNK_HDR > end || !src->resident(src->ctx, c & ~(PAGE - 1)) ||
	    live_read(lv, c + 8, &size, sizeof(size)))
		return false;
	sz = size & ~7ULL;
	return (size & PREV_INUSE) && sz >= CHUNK_MIN && sz % 16 == 0 && sz <= end - c;
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
			c += (16 - (c + CHUNK_HDR) % 16) % 16;
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

/* The first of v[n] (sorted, not overlapping) that ends after lo. */
static size_t first_after(const struct ml_heap_run *v, size_t n, uint64_t lo)
{
	size_t a = 0, b = n;

	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (v[mid].addr + v[mid].len <= lo)
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

/* Bytes of [lo, hi) that v[n] covers. */
static uint64_t overlap(const struct ml_heap_run *v, size_t n, uint64_t lo, uint64_t hi)
{
	uint64_t sum = 0;

	for (size_t i = first_after(v, n, lo); i < n && v[i].addr < hi; i++) {
		uint64_t a = v[i].addr > lo ? v[i].addr : lo, e = v[i].addr + v[i].len < hi ? v[i].addr + v[i].len : hi;

		sum += e - a;
	}
	return sum;
}

void heapfrag__free_in(const struct ml_heapfrag *f, uint64_t lo, uint64_t hi, uint64_t *walked, uint64_t *free)
{
	*walked = overlap(f->spans, f->nspans, lo, hi);
	*free = overlap(f->runs, f->nruns, lo, hi);
}

const struct ml_heap_holder *heapfrag__holders_in(const struct ml_heapfrag *f, uint64_t lo, uint64_t hi, size_t *n)
{
	size_t a = 0, b = f->nholders, i;

	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (f->holders[mid].addr <= lo)
			a = mid + 1;
		else
			b = mid;
	}
	for (i = a; i < f->nholders && f->holders[i].addr <= hi + CHUNK_HDR; i++)
		;
	*n = i - a;
	return *n ? &f->holders[a] : NULL;
}

int heapfrag__scan(struct ml_heapfrag *f, int pid, struct census *census)
{
	struct live lv = {.pid = pid, .mem = -1, .pagemap = -1};
	struct heapfrag_src src = {
	    .read = live_read, .resident = live_resident, .end_now = live_end_now, .ctx = &lv, .census = census};
	struct heapfrag_budget b = {.read_bytes = HEAPFRAG_READ_MAX, .chunks = HEAPFRAG_CHUNKS_MAX};
	struct ml_maps maps = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);
	int err = 0;

	heapfrag__reset(f);
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
	f->walked_ns = t0;
	f->scan_ns = ml_clock_ns(CLOCK_MONOTONIC) - t0;
	ml_maps__clear(&maps);
	if (lv.mem >= 0)
		close(lv.mem);
	if (lv.pagemap >= 0)
		close(lv.pagemap);
	return err;
}

static int cmp_stack_key(const void *a, const void *b)
{
	return memcmp(&((const struct ml_frag_stack *)a)->key, &((const struct ml_frag_stack *)b)->key,
		      sizeof(struct ml_agg_key));
}

static int cmp_stack_charged(const void *a, const void *b)
{
	const struct ml_frag_stack *x = a, *y = b;

	if (x->charged != y->charged)
		return x->charged < y->charged ? 1 : -1;
	return cmp_stack_key(a, b);
}

int heapfrag__attribute(struct ml_heapfrag *f, struct ledger *l, int tgid)
{
	size_t n = 0;

	f->nstacks = 0;
	f->unknown_charged = f->unknown_bytes = f->unknown_count = 0;
	for (size_t i = 0; i < f->nholders; i++) {
		const struct ml_heap_holder *h = &f->holders[i];
		struct ml_agg_key key;

		if (ledger__find(l, tgid, h->addr, &key)) {
			f->unknown_charged += h->charged;
			f->unknown_bytes += h->size;
			f->unknown_count++;
			continue;
		}
		if (ml_grow(&f->stacks, &f->cap_stacks, n + 1, sizeof(*f->stacks)))
			return -ENOMEM;
		f->stacks[n++] =
		    (struct ml_frag_stack){.key = key, .charged = h->charged, .bytes = h->size, .count = 1};
	}
	if (n > 1)
		qsort(f->stacks, n, sizeof(*f->stacks), cmp_stack_key);
	f->nstacks = 0;
	for (size_t i = 0; i < n; i++) {
		struct ml_frag_stack *last = f->nstacks ? &f->stacks[f->nstacks - 1] : NULL;

		if (last && !memcmp(&last->key, &f->stacks[i].key, sizeof(last->key))) {
			last->charged += f->stacks[i].charged;
			last->bytes += f->stacks[i].bytes;
			last->count++;
		} else {
			f->stacks[f->nstacks++] = f->stacks[i];
		}
	}
	if (f->nstacks > 1)
		qsort(f->stacks, f->nstacks, sizeof(*f->stacks), cmp_stack_charged);
	return 0;
}
