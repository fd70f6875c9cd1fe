/*
 * One file's unwinding table, parsed from its .eh_frame and .debug_frame and turned into the 8-byte wire rows
 * (struct ml_urow) with the index granularity: pure, so the unwinder runs it outside its lock (unwind.c).
 */
#ifndef MEMLEAK_AI_UWPARSE_H
#define MEMLEAK_AI_UWPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

#define UW_MAX_SEGS 8

/* An executable PT_LOAD segment: how a mapping's file offset becomes an ELF address. */
struct uw_seg {
	uint64_t offset, vaddr, filesz;
};

/* A file's table as parsed, before it is placed. */
struct uw_parsed {
	struct ml_urow *conv; /* NULL: no table */
	uint32_t nrows, npages, shift;
	size_t n_src; /* rows before merging repeats */
	uint64_t lo, build_ns;
	struct uw_seg segs[UW_MAX_SEGS];
	size_t nsegs;
	bool debug_file;
};

/*
 * Parse the file open on fd (its separate debug file looked for as pid sees it) into *p; p->conv is the caller's
 * to free. A file without a usable table leaves p->conv NULL: -ENOMEM only is an error, and -ECANCELED once a
 * stop that is not NULL reads true (ml_unwind_from_elf).
 */
int uw_parse(const char *debug_dir, int pid, int fd, const char *path, const bool *stop, struct uw_parsed *p);

#endif
