/*
 * Room for unwinding tables in the shared BPF arrays: the row array and the page index, each a set of chunks
 * made on first write (lib/bpfchunks.h), with ranges of them handed out first-fit and given back (unwind.c).
 */
#ifndef MEMLEAK_AI_UWSTORE_H
#define MEMLEAK_AI_UWSTORE_H

#include <stdint.h>
#include "memleak.h"

#define UW_IDX_STRIDE 8 /* array map elements are 8-byte aligned: a __u32 index entry takes 8 bytes */

struct uwstore;

/* Where one file's table lies: its rows, its index entries, and the pages (1 << shift bytes) they index. */
struct uw_place {
	uint32_t row_base, n_rows, idx_base, n_idx, shift;
};

/* The row and index arrays of the BPF object (their map-of-maps fds), at most rows_cap and index_cap long. */
int uwstore__new(int rows_fd, int index_fd, uint32_t rows_cap, uint32_t index_cap, struct uwstore **out);
void uwstore__free(struct uwstore *s); /* NULL-safe */

/*
 * Copy nrows rows and an index of npages + 1 entries (where the search for a pc in each page starts) into
 * ranges taken for them; *out says where. 0, or -ENOSPC when the ranges or a new chunk could not be had.
 */
int uwstore__place(struct uwstore *s, const struct ml_urow *conv, uint32_t nrows, uint32_t shift, uint32_t npages,
		   struct uw_place *out);
/* A placed table's ranges given back. */
void uwstore__release(struct uwstore *s, const struct uw_place *p);

/* The memory a table of rows rows and idx index entries takes in the maps. */
uint64_t uwstore__bytes(uint32_t rows, uint32_t idx);
/* Kernel memory the chunks created so far hold (mapped once in this process). */
uint64_t uwstore__memory(const struct uwstore *s);
/* Row i and index entry i as the BPF side reads them; NULL where no table was ever placed. */
const struct ml_urow *uwstore__row(const struct uwstore *s, uint32_t i);
const uint32_t *uwstore__index(const struct uwstore *s, uint32_t i);

#endif
