/*
 * Room for unwinding tables in the shared BPF arrays (uwstore.h). A table's rows are copied into a range of the
 * row array (mmap'ed: one copy, no syscall per row) and its page index into a range of the index array; free
 * ranges are kept sorted and merged, taken first-fit, so a file evicted leaves room for the next.
 */
#include "unwind/uwstore.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/bpfchunks.h"
#include "lib/grow.h"

/* Free ranges of one array, sorted by start. */
struct extents {
	struct ext {
		uint32_t start, len;
	} * v;
	size_t n, cap;
};

struct uwstore {
	struct bpfchunks *rows, *index; /* created as the ranges in use reach them */
	struct extents free_rows, free_index;
};

static int ext_put(struct extents *e, uint32_t start, uint32_t len)
{
	size_t i = 0;

	while (i < e->n && e->v[i].start < start)
		i++;
	/* merge with the range before and after */
	if (i > 0 && e->v[i - 1].start + e->v[i - 1].len == start) {
		e->v[i - 1].len += len;
		if (i < e->n && start + len == e->v[i].start) {
			e->v[i - 1].len += e->v[i].len;
			memmove(&e->v[i], &e->v[i + 1], (e->n - i - 1) * sizeof(*e->v));
			e->n--;
		}
		return 0;
	}
	if (i < e->n && start + len == e->v[i].start) {
		e->v[i].start = start;
		e->v[i].len += len;
		return 0;
	}
	if (ml_grow(&e->v, &e->cap, e->n + 1, sizeof(*e->v)))
		return -ENOMEM;
	memmove(&e->v[i + 1], &e->v[i], (e->n - i) * sizeof(*e->v));
	e->v[i].start = start;
	e->v[i].len = len;
	e->n++;
	return 0;
}

/* First fit; -ENOSPC when no free range is long enough. */
static int ext_take(struct extents *e, uint32_t len, uint32_t *start)
{
	for (size_t i = 0; i < e->n; i++) {
		if (e->v[i].len < len)
			continue;
		*start = e->v[i].start;
		e->v[i].start += len;
		e->v[i].len -= len;
		if (!e->v[i].len) {
			memmove(&e->v[i], &e->v[i + 1], (e->n - i - 1) * sizeof(*e->v));
			e->n--;
		}
		return 0;
	}
	return -ENOSPC;
}

int uwstore__new(int rows_fd, int index_fd, uint32_t rows_cap, uint32_t index_cap, struct uwstore **out)
{
	struct uwstore *s = calloc(1, sizeof(*s));
	struct bpfchunks_opts ro = {rows_fd, sizeof(struct ml_urow), ML_UW_ROW_CHUNK_BITS, ML_UW_CHUNKS};
	struct bpfchunks_opts io = {index_fd, sizeof(uint32_t), ML_UW_IDX_CHUNK_BITS, ML_UW_CHUNKS};

	*out = NULL;
	if (!s || bpfchunks__new(&ro, &s->rows) || bpfchunks__new(&io, &s->index) ||
	    ext_put(&s->free_rows, 0, rows_cap) || ext_put(&s->free_index, 0, index_cap)) {
		uwstore__free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void uwstore__free(struct uwstore *s)
{
	if (!s)
		return;
	bpfchunks__free(s->rows);
	bpfchunks__free(s->index);
	free(s->free_rows.v);
	free(s->free_index.v);
	free(s);
}

static int put_index(struct uwstore *s, uint32_t at, uint32_t v)
{
	return bpfchunks__write(s->index, at, &v, 1);
}

int uwstore__place(struct uwstore *s, const struct ml_urow *conv, uint32_t nrows, uint32_t shift, uint32_t npages,
		   struct uw_place *out)
{
	int err = 0;

	if (ext_take(&s->free_rows, nrows, &out->row_base))
		return -ENOSPC;
	if (ext_take(&s->free_index, npages + 1, &out->idx_base)) {
		ext_put(&s->free_rows, out->row_base, nrows);
		return -ENOSPC;
	}
	err = bpfchunks__write(s->rows, out->row_base, conv, nrows);
	/* index[p]: the last row at or before the start of slot p (0 when none is) */
	for (uint32_t p = 0, r = 0; !err && p <= npages; p++) {
		uint64_t at = (uint64_t)p << shift;

		while (r + 1 < nrows && conv[r + 1].pc <= at)
			r++;
		err = put_index(s, out->idx_base + p, p == npages ? nrows - 1 : r);
	}
	if (err) {
		ext_put(&s->free_rows, out->row_base, nrows);
		ext_put(&s->free_index, out->idx_base, npages + 1);
		return -ENOSPC;
	}
	out->n_rows = nrows;
	out->n_idx = npages + 1;
	out->shift = shift;
	return 0;
}

void uwstore__release(struct uwstore *s, const struct uw_place *p)
{
	ext_put(&s->free_rows, p->row_base, p->n_rows);
	ext_put(&s->free_index, p->idx_base, p->n_idx);
}

uint64_t uwstore__bytes(uint32_t rows, uint32_t idx)
{
	return (uint64_t)rows * sizeof(struct ml_urow) + (uint64_t)idx * UW_IDX_STRIDE;
}

uint64_t uwstore__memory(const struct uwstore *s)
{
	return bpfchunks__bytes(s->rows) + bpfchunks__bytes(s->index);
}

const struct ml_urow *uwstore__row(const struct uwstore *s, uint32_t i)
{
	return bpfchunks__at(s->rows, i);
}

const uint32_t *uwstore__index(const struct uwstore *s, uint32_t i)
{
	return bpfchunks__at(s->index, i);
}
