/*
 * collect/heaplive.c against this process's own glibc: blocks in use, in a tcache list, in a fastbin, in the
 * unsorted bin, mmapped and unmapped, read through process_vm_readv as the tool reads a target.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "collect/heaplive.h"

/* Reading a block after its release is the point: the pointer is only an address here, never dereferenced. */
#pragma GCC diagnostic ignored "-Wuse-after-free"

/* A block in use, written as objects are (a block fresh off a tcache list still holds its old link). */
static struct heaplive reader = HEAPLIVE_INIT;

static void *take(size_t req)
{
	void *p = malloc(req);

	memset(p, 0x5a, req);
	return p;
}

static int live(void *p, size_t req)
{
	return heaplive__check(&reader, getpid(), (uint64_t)(uintptr_t)p, req);
}

/* Seven blocks of req bytes freed, so the size's tcache list is full and the next release goes elsewhere. */
static void fill_tcache(size_t req)
{
	void *v[7];

	for (int i = 0; i < 7; i++)
		v[i] = malloc(req);
	for (int i = 0; i < 7; i++)
		free(v[i]);
}

static void tcache_and_fastbin(void)
{
	void *a = take(40), *b = take(40), *guard = take(40), *c, *d, *e;

	CHECK_EQ_INT(live(a, 40), 1, "a block in use is live");
	free(a);
	CHECK_EQ_INT(live(a, 40), 0, "the first block of a tcache list (its link is the list's end) is freed");
	free(b);
	CHECK_EQ_INT(live(b, 40), 0, "a tcache entry linking to another of its size is freed");
	CHECK_EQ_INT(live(guard, 40), 1, "its neighbour in use is live");
	fill_tcache(72);
	c = take(72), d = take(72), e = take(72);
	free(c);
	CHECK_EQ_INT(live(c, 72), 0, "a fastbin's last entry is freed");
	free(d);
	CHECK_EQ_INT(live(d, 72), 0, "a fastbin entry linking to another is freed");
	CHECK_EQ_INT(live(e, 72), 1, "a block in use past two fastbin entries is live");
	free(e);
	free(guard);
}

static void bins(void)
{
	void *v[3], *p = NULL;

	fill_tcache(600);
	for (int i = 0; i < 3; i++)
		v[i] = take(600);
	free(v[1]);
	CHECK_EQ_INT(live(v[1], 600), 0, "a block in the unsorted bin (next chunk's PREV_INUSE clear) is freed");
	CHECK_EQ_INT(live(v[0], 600), 1, "the block below it is live");
	CHECK_EQ_INT(live(v[2], 600), 1, "the block above it is live");
	CHECK_EQ_INT(live(v[0], 300), 0, "a block whose chunk is too big for the size recorded is not that block");
	CHECK_EQ_INT(posix_memalign(&p, 64, 1000), 0, "posix_memalign");
	memset(p, 0x5a, 1000);
	CHECK_EQ_INT(live(p, 1000), 1, "an aligned block in use is live");
	p = realloc(p, 3000);
	CHECK_EQ_INT(live(p, 3000), 1, "a block realloc returned is live");
	free(p);
	free(v[0]);
	free(v[2]);
	p = calloc(10, 100); /* zeroed: its first word is no link */
	CHECK_EQ_INT(live(p, 1000), 1, "a calloc block is live");
	free(p);
}

static void mmapped(void)
{
	void *p = take(64 << 20);

	CHECK_EQ_INT(live(p, 64 << 20), 1, "an mmapped block in use is live");
	CHECK_EQ_INT(live(p, 1 << 20), 0, "an mmapped block far bigger than the size recorded is not that block");
	free(p);
	CHECK_EQ_INT(live(p, 64 << 20), 0, "an mmapped block whose mapping is gone is freed");
}

static void bad_input(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	CHECK_EQ_INT(heaplive__check(&reader, pid, 0x10000010, 32), -ESRCH, "a process gone is not read");
	CHECK_EQ_INT(live((void *)0x18, 8), 0, "an address in the first page is no block");
	CHECK_EQ_INT(live((void *)0x100008, 8), 0, "a misaligned address is no block");
	CHECK_EQ_INT(live((void *)0x100010, 8), 0, "an unmapped address is no block");
}

int main(void)
{
	/* Fixed thresholds: glibc's dynamic mmap threshold would move with the frees above. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	tcache_and_fastbin();
	bins();
	mmapped();
	bad_input();
	heaplive__close(&reader);
	return SUMMARY("heaplive");
}
