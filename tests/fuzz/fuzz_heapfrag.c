/*
 * libFuzzer target: a glibc heap's chunk headers are the target's bytes, so any image must be walked or refused
 * within its bounds. The input: 8 bytes of pages that are not resident (bit i: page i), 2 bytes of tail kept
 * past the heap's end (bytes a corrupt size could lead into), a flags byte (main arena; the heap grows to the
 * image's end while walked), then the heap image from its first chunk header.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "collect/heapfrag.h"
#include "collect/ledger.h"

#define BASE 0x10000ULL
#define PAGE 4096ULL
#define HDR 11

struct image {
	const uint8_t *p;
	size_t len;
	uint64_t absent, grown;
};

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct image *im = ctx;

	if (addr < BASE || addr - BASE > im->len || len > im->len - (addr - BASE))
		return -EIO;
	memcpy(buf, im->p + (addr - BASE), len);
	return 0;
}

static bool img_resident(void *ctx, uint64_t page)
{
	const struct image *im = ctx;
	uint64_t i = (page - BASE) / PAGE;

	return page >= BASE && page - BASE < im->len && !(i < 64 && im->absent >> i & 1);
}

static uint64_t img_end_now(void *ctx, uint64_t first, uint64_t end)
{
	return ((const struct image *)ctx)->grown;
}

/* What a walk reports lies inside what it walked; sums add up. */
static void check(const struct ml_heapfrag *f, uint64_t first, uint64_t end, int err)
{
	uint64_t runs = 0;

	if (f->free_resident_bytes > f->free_bytes || f->unwalked_bytes > end - first)
		abort();
	if (!err && (f->broken || f->in_use_bytes + f->free_bytes + f->top_bytes > end - first))
		abort();
	for (size_t i = 0; i < f->nruns; i++) {
		if (f->runs[i].addr < first || f->runs[i].addr + f->runs[i].len > end)
			abort();
		runs += f->runs[i].len;
	}
	for (size_t i = 0; i < f->nholders; i++)
		if (f->holders[i].addr < first || f->holders[i].addr + f->holders[i].size > end + 16 ||
		    f->holders[i].charged > f->free_resident_bytes)
			abort();
	if (!err && runs != f->free_bytes + f->top_bytes)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image im;
	struct heapfrag_src src = {.read = img_read, .resident = img_resident, .ctx = &im};
	struct heapfrag_budget b = {.read_bytes = 1 << 20, .chunks = 1 << 14};
	struct ml_heapfrag f = {};
	uint64_t tail, end;
	int err;

	if (size < HDR + 32)
		return 0;
	im = (struct image){.p = data + HDR, .len = size - HDR};
	memcpy(&im.absent, data, 8);
	tail = (uint64_t)(data[8] | data[9] << 8) % im.len;
	src.main_arena = data[10] & 1;
	im.grown = BASE + ((im.len - 0) & ~15ULL);
	if (data[10] & 2)
		src.end_now = img_end_now;
	end = BASE + ((im.len - tail) & ~15ULL);
	if (end - BASE < 32)
		return 0;
	err = heapfrag__walk_heap(&f, &src, BASE, end, &b, 0);
	if (err != -EBADMSG && err != -ENODATA && err != -E2BIG && err != -EIO && err != 0)
		abort();
	check(&f, BASE, src.end_now ? im.grown : end, err);
	heapfrag__clear(&f);
	return 0;
}

/* heapfrag__attribute's ledger is not linked: a seam, never reached from a walk. */
int ledger__find(struct ledger *l, int tgid, uint64_t addr, struct ml_agg_key *out)
{
	abort();
}
