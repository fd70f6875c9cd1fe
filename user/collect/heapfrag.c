/*
 * Fragmentation of a glibc C heap from its chunk headers (see heapfrag.h). A chunk is [prev_size][size|flags]
 * then its user bytes; size & ~7 leads to the next chunk, whose PREV_INUSE bit (1) says whether this one is
 * in use. Everything read is the target's and may change while it is read: sizes are checked against the
 * heap's end before they are followed, every step moves forward, and the walk has a budget. What the walks
 * found is looked up by address and charged to stacks here too; heapscan.c finds a live process's heaps.
 */
#define _GNU_SOURCE
#include "collect/heapfrag.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "collect/census.h"
#include "collect/ledger.h"
#include "lib/grow.h"

#define PAGE 4096ULL
#define WIN_BIG 32768 /* bytes read at once where chunks are small */

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

	if (w->src->main_arena && top > HEAP_CHUNK_MIN + PAGE) {
		uint64_t extra = (top - HEAP_CHUNK_MIN - 1) & ~(PAGE - 1);

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

	if (sz <= at->end - at->addr || sz < HEAP_CHUNK_MIN || !w->src->end_now || at->regrown >= 4)
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
	if (user - w->base + 16 <= w->len && sz >= HEAP_CHUNK_HDR + 16)
		memcpy(&v[1], w->buf + (user - w->base + 8), 8);
	census__chunk(w->src->census, v[0], v[1], sz);
}

/* The chunk [at->addr, next), in use or free as the next one's PREV_INUSE bit says. 0 or -ENOMEM. */
static int count_chunk(struct walker *w, struct walk_pos *at, uint64_t next, uint64_t next_size)
{
	struct ml_heapfrag *f = w->f;
	uint64_t sz = next - at->addr, r;
	int err;

	if (next_size & HEAP_PREV_INUSE) {
		f->in_use_bytes += sz;
		if (w->src->census) {
			census__size(w->src->census, sz);
			census_chunk(w, at->addr + HEAP_CHUNK_HDR, sz);
		}
		if (at->run && (err = push_holder(f, at->addr + HEAP_CHUNK_HDR, sz, at->run)))
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
	if ((sz == HEAP_CHUNK_HDR || (sz == 0 && (at->size & HEAP_PREV_INUSE))) && at->end - at->addr < 64)
		return heap_done(w, at, 0);
	if (regrew(w, at, sz)) {
		f->chunks--; /* the same header, looked at again */
		w->b->chunks++;
		return 0;
	}
	/* Forward only, and never past the end: a bad size stops the walk instead of leading it anywhere. */
	if (sz < HEAP_CHUNK_MIN || sz % 16 || sz > at->end - at->addr)
		return -EBADMSG;
	next = at->addr + sz;
	if (next == at->end) /* the top chunk ends the heap (glibc merges any free chunk below it) */
		return heap_done(w, at, sz);
	if (at->end - next < HEAP_CHUNK_HDR)
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

	if (first % 16 || end <= first || end - first < HEAP_CHUNK_HDR)
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

bool heapfrag__may_read_more(const struct ml_heapfrag *f)
{
	bool changed = f->broken > f->corrupt + f->unreadable;

	return (f->capped && f->widened < HEAPFRAG_WIDEN_MAX) || (changed && f->broken_runs < HEAPFRAG_BROKEN_MAX);
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
	for (i = a; i < f->nholders && f->holders[i].addr <= hi + HEAP_CHUNK_HDR; i++)
		;
	*n = i - a;
	return *n ? &f->holders[a] : NULL;
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
