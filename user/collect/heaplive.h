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
int heaplive__check(int pid, uint64_t addr, uint64_t req);

#endif
