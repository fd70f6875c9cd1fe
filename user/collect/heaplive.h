/*
 * Whether a block glibc handed out is still in use, told from outside the process by its chunk's header: the
 * C heap's sampling windows record an allocation with its stack and see its release only while the window is
 * open, so later releases are found here instead. glibc (2.26 on, safe-linked lists 2.32 on) only: another
 * allocator's blocks have no such header.
 */
#ifndef ML_HEAPLIVE_H
#define ML_HEAPLIVE_H

#include <stdint.h>

/*
 * A sweep's reader: the last process's /proc/PID/mem, kept open, as a sweep asks thousands of blocks of one
 * process in a row. Memory is read there, never with process_vm_readv, which pins pages, and pinning a page a
 * fork still shares copies it into the process (a forked worker's Private_Dirty would grow from the sweep alone).
 */
struct heaplive {
	int pid, fd;
};

#define HEAPLIVE_INIT                                                                                                  \
	{                                                                                                              \
		.pid = 0, .fd = -1                                                                                     \
	}

/* Closes the reader's file; it can be used again. */
void heaplive__close(struct heaplive *h);

/*
 * 1 when the block malloc returned at addr for req bytes is in use: its chunk's size still fits req, the next
 * chunk's PREV_INUSE bit is set (a chunk in the unsorted, small or large bins clears it), and its first word
 * is not a safe-linked tcache or fastbin link ((addr >> 12) ^ next, next 0 or a chunk of the same size).
 * mmapped chunks live while their mapping does. 0 when it was freed (or its memory is gone), a negative errno
 * when pid's memory cannot be read at all (-ESRCH: it exited).
 *
 * Not told apart: the same address handed out again for the same size, and a chunk merged into the free
 * chunk below it and not yet reused (its header is left as it was), both counted live; a block whose first
 * word was not written since it came off a tcache list (it still holds its old link), counted freed.
 */
int heaplive__check(struct heaplive *h, int pid, uint64_t addr, uint64_t req);
/* glibc's request2size: the chunk bytes a request of req bytes takes from the heap. */
uint64_t heaplive__chunk(uint64_t req);

#endif
