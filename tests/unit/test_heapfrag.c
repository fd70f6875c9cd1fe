/* The chunk walker of collect/heapfrag.c on synthetic heap images: exact sums and charges, and malformed headers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "collect/heapfrag.h"
#include "collect/heapscan.h"

#define BASE 0x100000ULL
#define IMG (256 * 1024)

static unsigned char img[IMG];
static bool absent[IMG / 4096]; /* pages that are not resident */

static int img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	if (addr < BASE || addr - BASE > IMG || len > IMG - (addr - BASE))
		return -EIO;
	memcpy(buf, img + (addr - BASE), len);
	return 0;
}

static bool img_resident(void *ctx, uint64_t page)
{
	return page >= BASE && page - BASE < IMG && !absent[(page - BASE) / 4096];
}

static const struct heapfrag_src src = {.read = img_read, .resident = img_resident};

static uint64_t grown_to;

/* A heap that changes between two walks: the first read of the bad header at 0x290 repairs it, and with move
 * set puts a bad one at 0x12d0. The walker already holds what it read: the change shows in the second walk. */
static bool changed, move;

static int changing_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	int err = img_read(ctx, addr, buf, len);

	if (!changed && addr <= BASE + 0x298 && BASE + 0x2a0 <= addr + len) {
		changed = true;
		memcpy(img + 0x298, &(uint64_t){0x1000 | 1}, 8);
		if (move)
			memcpy(img + 0x12d8, &(uint64_t){0}, 8);
	}
	return err;
}

static uint64_t img_end_now(void *ctx, uint64_t first, uint64_t end)
{
	return grown_to;
}

static void put_size(uint64_t off, uint64_t v)
{
	memcpy(img + off + 8, &v, 8);
}

/* Chunks of the given sizes from offset 0, in use or free; the last one is the top, ending the image at *end. */
static uint64_t build(const uint64_t *sizes, const bool *inuse, size_t n, uint64_t *end)
{
	uint64_t off = 0;

	memset(img, 0, sizeof(img));
	memset(absent, 0, sizeof(absent));
	for (size_t i = 0; i < n; i++) {
		put_size(off, sizes[i] | (i == 0 || inuse[i - 1] ? 1 : 0));
		off += sizes[i];
	}
	*end = BASE + off;
	return BASE;
}

static int walk(struct ml_heapfrag *f, uint64_t first, uint64_t end, uint64_t chunks)
{
	struct heapfrag_budget b = {.read_bytes = 1 << 20, .chunks = chunks};

	heapfrag__reset(f);
	return heapfrag__walk(f, &src, first, end, &b);
}

/*
 * A live heap past the chunk budget (this process's own, HEAPFRAG_CHUNKS_MAX + 65,536 blocks of 24 bytes): the
 * walk is capped; one budget wider covers it; widen is bounded by HEAPFRAG_WIDEN_MAX.
 */
static void widened_walks(void)
{
	size_t n = HEAPFRAG_CHUNKS_MAX + 65536;
	void **v = malloc(n * sizeof(*v));
	struct ml_heapfrag f = {};
	size_t i = 0;
	int err;

	for (; v && i < n && (v[i] = malloc(24)); i++)
		;
	CHECK(v && i == n, "4.3 million blocks allocated");
	err = heapfrag__scan(&f, getpid(), NULL, 0);
	CHECK(err == 0 && f.capped && f.widened == 0, "the default budget is capped short of them");
	err = heapfrag__scan(&f, getpid(), NULL, 1);
	CHECK(err == 0 && !f.capped && f.widened == 1 && f.chunks > HEAPFRAG_CHUNKS_MAX && f.heaps >= 1,
	      "twice the budget walks the heap to its end");
	err = heapfrag__scan(&f, getpid(), NULL, 9);
	CHECK_EQ_INT(f.widened, HEAPFRAG_WIDEN_MAX, "widened no further than HEAPFRAG_WIDEN_MAX");
	heapfrag__clear(&f);
	while (v && i)
		free(v[--i]);
	free(v);
}

/* The next scan may cover more after a capped one (until the widest budget) or one a heap changed under. */
static void test_may_read_more(void)
{
	struct ml_heapfrag f = {.capped = true, .widened = HEAPFRAG_WIDEN_MAX - 1};

	CHECK(heapfrag__may_read_more(&f), "capped, a wider budget left");
	f.widened = HEAPFRAG_WIDEN_MAX;
	CHECK(!heapfrag__may_read_more(&f), "capped at the widest budget");
	f = (struct ml_heapfrag){.broken = 2, .corrupt = 1, .broken_runs = HEAPFRAG_BROKEN_MAX - 1};
	CHECK(heapfrag__may_read_more(&f), "a heap changed under its walk, the second walk in a row");
	f.broken_runs = HEAPFRAG_BROKEN_MAX;
	CHECK(!heapfrag__may_read_more(&f), "not after HEAPFRAG_BROKEN_MAX such walks in a row");
	f = (struct ml_heapfrag){.broken = 2, .corrupt = 1, .unreadable = 1, .broken_runs = 1};
	CHECK(!heapfrag__may_read_more(&f), "walks stopped at a corrupt or unreadable header stop there again");
	f = (struct ml_heapfrag){.broken_runs = 1};
	CHECK(!heapfrag__may_read_more(&f), "a whole walk");
}

int main(void)
{
	/* tcache block, free 4 KiB, holder 64, free 8 KiB + free 2 KiB (a run), holder 80, in use, top */
	static const uint64_t sz[] = {0x290, 0x1000, 0x40, 0x2000, 0x800, 0x50, 0x30, 0x8000};
	static const bool use[] = {true, false, true, false, false, true, true, false};
	struct ml_heapfrag f = {};
	uint64_t end, first = build(sz, use, 8, &end);
	uint64_t c_holder1 = BASE + 0x290 + 0x1000, c_holder2 = c_holder1 + 0x40 + 0x2000 + 0x800;
	int err;

	test_may_read_more();
	err = walk(&f, first, end, 100);
	CHECK_EQ_INT(err, 0, "a well-formed heap walks to its top");
	CHECK(f.heaps == 1 && f.top_bytes == 0x8000, "the top chunk ends it and is counted apart");
	CHECK_EQ_U64(f.in_use_bytes, 0x290 + 0x40 + 0x50 + 0x30, "in-use bytes are the in-use chunks' sizes");
	CHECK(f.free_bytes == 0x3800 && f.free_resident_bytes == 0x3800, "free bytes below the top, all resident");
	CHECK_EQ_INT(f.nholders, 2, "two in-use chunks hold free runs");
	/* malloc_trim(0): of the 8 KiB free chunk at 0x12d0, the page [0x2000, 0x3000); the others hold no whole
	 * page past their first 48 bytes; a thread arena's top stays. */
	CHECK_EQ_U64(f.trimmable_bytes, 0x1000, "trimmable: the whole pages inside free chunks");
	{
		struct heapfrag_src main_src = src;
		struct heapfrag_budget b = {.read_bytes = 1 << 20, .chunks = 100};

		main_src.main_arena = true;
		heapfrag__reset(&f);
		CHECK(heapfrag__walk(&f, &main_src, first, end, &b) == 0 && f.trimmable_bytes == 0x1000 + 0x7000,
		      "the main arena's top too: all of its 32 KiB but MINSIZE and a partial page");
		absent[(0xbb50 - 0x1000) / 4096] = true;
		heapfrag__reset(&f);
		b = (struct heapfrag_budget){.read_bytes = 1 << 20, .chunks = 100};
		CHECK(heapfrag__walk(&f, &main_src, first, end, &b) == 0 && f.trimmable_bytes == 0x1000 + 0x6000,
		      "a page that is not resident returns nothing");
		absent[(0xbb50 - 0x1000) / 4096] = false;
	}
	CHECK(f.nholders == 2 && f.holders[0].addr == c_holder1 + 16 && f.holders[0].size == 0x40 &&
		  f.holders[0].charged == 0x1000,
	      "the run below the 64-byte chunk is charged to it (user address)");
	CHECK(f.nholders == 2 && f.holders[1].addr == c_holder2 + 16 && f.holders[1].size == 0x50 &&
		  f.holders[1].charged == 0x2800,
	      "a run of two free chunks is charged to the chunk just above it");
	CHECK(f.unheld_bytes == 0 && f.heap_bytes == end - first, "nothing unheld; the heap's bytes");
	/* The free runs and the span walked, by address: for fresh heap free again (judge/victims.c). */
	CHECK(f.nruns == 3 && f.runs[0].addr == BASE + 0x290 && f.runs[0].len == 0x1000 &&
		  f.runs[1].addr == BASE + 0x12d0 && f.runs[1].len == 0x2800 && f.runs[2].addr == BASE + 0x3b50 &&
		  f.runs[2].len == 0x8000,
	      "free runs: each free chunk, touching ones merged, and the top");
	CHECK(f.nspans == 1 && f.spans[0].addr == BASE && f.spans[0].len == end - first, "the heap walked, one span");
	{
		uint64_t walked, freeb;
		size_t nh;
		const struct ml_heap_holder *h;

		heapfrag__free_in(&f, BASE + 0x1000, BASE + 0x1300, &walked, &freeb);
		CHECK(walked == 0x300 && freeb == 0x290 + 0x30, "free_in: the range walked, and its free bytes");
		heapfrag__free_in(&f, end, end + 0x1000, &walked, &freeb);
		CHECK(walked == 0 && freeb == 0, "free_in: past the heap nothing is walked");
		h = heapfrag__holders_in(&f, BASE + 0x1000, BASE + 0x1300, &nh);
		CHECK(nh == 1 && h && h->addr == c_holder1 + 16, "holders_in: the chunk above the range's free run");
		h = heapfrag__holders_in(&f, BASE + 0x3b50, end, &nh);
		CHECK(nh == 0 && !h, "holders_in: none above the top");
	}

	/* A page in the middle of the 8 KiB free chunk is not resident: its bytes are not charged. */
	absent[(0x290 + 0x1000 + 0x40 + 0x1000) / 4096] = true;
	err = walk(&f, first, end, 100);
	CHECK(err == 0 && f.free_bytes == 0x3800 && f.free_resident_bytes == 0x3800 - 4096 && f.nholders == 2 &&
		  f.holders[1].charged == 0x2800 - 4096,
	      "pages that are not resident are free but not charged");

	/* A header on a page that is not resident stops the walk: reading it would fault it in. */
	build(sz, use, 8, &end);
	absent[(0x290 + 0x1000 + 0x40 + 0x2000 + 0x800) / 4096] = true;
	err = walk(&f, first, end, 100);
	CHECK_EQ_INT(err, -ENODATA, "a header on a page that is not resident stops the walk");

	/* Malformed headers. */
	build(sz, use, 8, &end);
	put_size(0x290 + 0x1000, 0);
	err = walk(&f, first, end, 100);
	CHECK_EQ_INT(err, -EBADMSG, "a zero size stops the walk");
	CHECK_EQ_INT(f.nholders, 0, "... before anything is charged past it");

	build(sz, use, 8, &end);
	put_size(0x290, 0x100000 | 1);
	err = walk(&f, first, end, 100);
	CHECK_EQ_INT(err, -EBADMSG, "a size running past the heap's end stops the walk");

	build(sz, use, 8, &end);
	put_size(0x290, (uint64_t)-0x290 & ~7ULL);
	err = walk(&f, first, end, 100);
	CHECK_EQ_INT(err, -EBADMSG, "a size that wraps back to the start (a loop) stops the walk");

	build(sz, use, 8, &end);
	put_size(0x290, 0x1008 | 1);
	err = walk(&f, first, end, 100);
	CHECK_EQ_INT(err, -EBADMSG, "a misaligned size stops the walk");

	build(sz, use, 8, &end);
	err = walk(&f, first, end, 3);
	CHECK(err == -E2BIG && f.capped && f.chunks == 3, "the chunk budget caps the walk, and says so");

	/* A live heap grows while it is walked: the top runs past the end first read, and the end is read again. */
	{
		struct heapfrag_src grows = src;
		struct heapfrag_budget b = {1 << 20, 100};

		build(sz, use, 8, &end);
		grows.end_now = img_end_now;
		grown_to = end;
		heapfrag__reset(&f);
		err = heapfrag__walk(&f, &grows, first, end - 0x4000, &b);
		CHECK(err == 0 && f.top_bytes == 0x8000 && f.heap_bytes == end - first && f.chunks == 8,
		      "a top chunk past the end first read ends the heap once the end is read again");
		grown_to = end - 0x4000;
		b = (struct heapfrag_budget){1 << 20, 100};
		heapfrag__reset(&f);
		err = heapfrag__walk(&f, &grows, first, end - 0x4000, &b);
		CHECK_EQ_INT(err, -EBADMSG, "... and stops the walk when the heap did not grow");
	}

	err = heapfrag__walk(&f, &src, first + 8, end, &(struct heapfrag_budget){1 << 20, 100});
	CHECK_EQ_INT(err, -EBADMSG, "a first chunk off the 16-byte grid is refused");

	/* heapfrag__walk_heap tries once more; a second stop is counted with the bytes left and why. */
	{
		struct heapfrag_src moving = src;
		struct heapfrag_budget b = {1 << 20, 100};

		build(sz, use, 8, &end);
		put_size(0x290 + 0x1000, 0);
		heapfrag__reset(&f);
		err = heapfrag__walk_heap(&f, &src, first, end, &b, 0);
		CHECK(err == -EBADMSG && f.broken == 1 && f.corrupt == 1 && f.unreadable == 0 && f.heaps == 0,
		      "a corrupt header stops both walks at the same chunk: corrupt");
		CHECK_EQ_U64(f.unwalked_bytes, end - (BASE + 0x1290), "... and the bytes from it to the heap's end");
		CHECK(f.chunks == 6 && f.nholders == 0, "... both walks' headers counted as work, nothing charged");

		build(sz, use, 8, &end);
		absent[(0x290 + 0x1000 + 0x40 + 0x2000 + 0x800) / 4096] = true;
		heapfrag__reset(&f);
		b = (struct heapfrag_budget){1 << 20, 100};
		err = heapfrag__walk_heap(&f, &src, first, end, &b, 0);
		CHECK(err == -ENODATA && f.broken == 1 && f.unreadable == 1 && f.corrupt == 0 &&
			  f.unwalked_bytes == end - (BASE + 0x12d0),
		      "a header on a page not resident, twice: unreadable, from the chunk before it on");

		moving.read = changing_read;
		for (int m = 1; m >= 0; m--) {
			build(sz, use, 8, &end);
			put_size(0x290, 0);
			changed = false;
			move = m;
			heapfrag__reset(&f);
			b = (struct heapfrag_budget){1 << 20, 100};
			err = heapfrag__walk_heap(&f, &moving, first, end, &b, 0);
			if (move)
				CHECK(err == -EBADMSG && changed && f.broken == 1 && f.corrupt == 0 &&
					  f.unreadable == 0 && f.unwalked_bytes == end - (BASE + 0x12d0),
				      "a bad header that moved between the walks: a change, from where the second "
				      "stopped");
			else
				CHECK(err == 0 && changed && f.broken == 0 && f.heaps == 1 && f.narenas == 1 &&
					  f.unwalked_bytes == 0 && f.free_bytes == 0x3800,
				      "a heap whole again at the second walk is walked and counted in its arena");
		}
	}

	/* An older arena heap: a free old top, then the fencepost (16 bytes, then a 0 header) at its end. */
	{
		static const uint64_t asz[] = {0x40, 0x3000, 0x10};
		static const bool ause[] = {true, false, true};

		first = build(asz, ause, 3, &end);
		put_size(0x40 + 0x3000 + 0x10, 0 | 1);
		end += 0x20;
		err = walk(&f, first, end, 100);
		CHECK(err == 0 && f.heaps == 1 && f.top_bytes == 0, "an arena heap's fencepost ends its walk");
		CHECK(f.free_resident_bytes == 0x3000 && f.unheld_bytes == 0x3000 && f.nholders == 0,
		      "a free run before the fencepost is free but held by no chunk");
	}
	heapfrag__clear(&f);
	widened_walks();
	return SUMMARY("heapfrag");
}
