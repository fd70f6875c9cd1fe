/* Liveness of glibc blocks from their chunk headers (see heaplive.h), read through /proc/PID/mem. */
#define _GNU_SOURCE
#include "collect/heaplive.h"
#include <errno.h>
#include <unistd.h>
#include "lib/procmaps.h"

#define SIZE_SZ 8ULL
#define MINSIZE 32ULL
#define MALLOC_ALIGN 16ULL
#define PREV_INUSE 1ULL
#define IS_MMAPPED 2ULL
#define FLAG_BITS 7ULL
#define PAGE 4096ULL
#define MMAP_SLACK (3 * PAGE) /* an mmapped chunk: header, page rounding and an alignment offset */

void heaplive__close(struct heaplive *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

static int mem_of(struct heaplive *h, int pid)
{
	int fd;

	if (pid == h->pid && h->fd >= 0)
		return h->fd;
	heaplive__close(h);
	fd = ml_proc_open(pid, "mem");
	h->fd = fd >= 0 ? fd : -1;
	h->pid = pid;
	return fd;
}

/* len bytes at addr of pid. 0, -EFAULT when not mapped (any part), or the error (-ESRCH: it is gone). */
static int read_at(struct heaplive *h, int pid, uint64_t addr, void *buf, size_t len)
{
	int fd = mem_of(h, pid);
	ssize_t n;

	if (fd < 0)
		return fd;
	n = pread(fd, buf, len, (off_t)addr);
	if (n == (ssize_t)len)
		return 0;
	if (n == 0 || (n < 0 && errno == ESRCH)) { /* its memory went with it */
		heaplive__close(h);
		return -ESRCH;
	}
	return n > 0 || errno == EFAULT || errno == EIO ? -EFAULT : -errno;
}

uint64_t heaplive__chunk(uint64_t req)
{
	uint64_t nb = (req + SIZE_SZ + MALLOC_ALIGN - 1) & ~(MALLOC_ALIGN - 1);

	return nb < MINSIZE ? MINSIZE : nb;
}

/* Whether the block's first word is a safe-linked tcache or fastbin link: its list's end, or a chunk as big. */
static int is_list_link(struct heaplive *h, int pid, uint64_t addr, uint64_t fd, uint64_t cs)
{
	uint64_t next = fd ^ (addr >> 12), size;

	if (next == 0)
		return 1;
	if (next & (MALLOC_ALIGN - 1) || next < PAGE || next >= 0x800000000000ULL)
		return 0;
	if (read_at(h, pid, next - SIZE_SZ, &size, sizeof(size)))
		return 0;
	return (size & ~FLAG_BITS) == cs;
}

int heaplive__check(struct heaplive *h, int pid, uint64_t addr, uint64_t req)
{
	uint64_t w[4], cs, next_size; /* prev_size, size, then the block's first two words */
	int err;

	if (addr < PAGE || addr & (MALLOC_ALIGN - 1))
		return 0;
	err = read_at(h, pid, addr - 2 * SIZE_SZ, w, sizeof(w));
	if (err)
		return err == -EFAULT ? 0 : err;
	cs = w[1] & ~FLAG_BITS;
	if (w[1] & IS_MMAPPED)
		return cs % PAGE == 0 && cs >= req + 2 * SIZE_SZ && cs - req <= MMAP_SLACK;
	/* A fresh chunk, or one carved from a bigger free chunk whose rest was too small to split off (up to MINSIZE
	 * past the request for memalign). */
	if (cs < heaplive__chunk(req) || cs > heaplive__chunk(req) + MINSIZE)
		return 0;
	err = read_at(h, pid, addr - 2 * SIZE_SZ + cs + SIZE_SZ, &next_size, sizeof(next_size));
	if (err)
		return err == -EFAULT ? 0 : err;
	if (!(next_size & PREV_INUSE))
		return 0;
	return !is_list_link(h, pid, addr, w[2], cs);
}
