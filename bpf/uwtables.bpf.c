// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of memleak-ai, the native unwinding tables' search (see memleak.h): the rule for a pc, from the
 * rows and page index user space writes through mmap (user/unwind/unwind.c). Called by the table walk in stack.bpf.c.
 */
#include "common.bpf.h"

/*
 * The rows and the page index, each an array of chunks (equal array maps) that user space creates as the
 * range in use reaches them and writes through mmap (user/lib/bpfchunks.c): the memory grows with the tables.
 */
struct urow_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1U << ML_UW_ROW_CHUNK_BITS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct ml_urow)); /* by size: BTF may hold the struct only as a declaration */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, ML_UW_CHUNKS);
	__type(key, __u32);
	__array(values, struct urow_chunk);
} urows SEC(".maps");

struct uindex_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1U << ML_UW_IDX_CHUNK_BITS);
	__type(key, __u32);
	__type(value, __u32);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, ML_UW_CHUNKS);
	__type(key, __u32);
	__array(values, struct uindex_chunk);
} uindex SEC(".maps");

/* Element i of a chunked array whose chunks hold 1 << bits elements; NULL where no chunk is. */
static __always_inline void *chunk_elem(void *outer, __u32 bits, __u32 i)
{
	__u32 k = i >> bits, j = i & ((1U << bits) - 1);
	void *chunk = bpf_map_lookup_elem(outer, &k);

	return chunk ? bpf_map_lookup_elem(chunk, &j) : NULL;
}

/*
 * The binary searches below are branch-free (the comparison becomes a mask), so the verifier walks one path
 * through them instead of one per outcome. x <= y for values below 2^63: the sign of y - x.
 */
#define ML_LE_MASK(x, y) ((((__u64)(y) - (__u64)(x)) >> 63) - 1)

/* The mapping with a table holding pc: a binary search of the process's sorted list. */
static __always_inline const struct ml_umap *uw_map(const struct ml_umaps *um, __u64 pc)
{
	__u32 base = 0, len = um->n, i;

	if (!len || len > ML_UW_MAPS)
		return NULL;
	for (int k = 0; k < 10; k++) {
		__u32 half = len / 2;

		base += half & (__u32)ML_LE_MASK(um->m[(base + half) & (ML_UW_MAPS - 1)].start, pc);
		len -= half;
	}
	i = base & (ML_UW_MAPS - 1);
	if (pc < um->m[i].start || pc >= um->m[i].end)
		return NULL;
	return &um->m[i];
}

/* The row covering pc in a mapping's table, or NULL where the table has none. */
static __always_inline const struct ml_urow *uw_row(const struct ml_umap *m, __u64 pc)
{
	const struct ml_urow *row;
	__u32 key, base, len, *ip;
	__u64 off = pc - m->adj;

	if (off >> 32 || (off >> (m->shift & 31)) >= m->n_slots)
		return NULL;
	key = m->idx_base + (__u32)(off >> (m->shift & 31));
	ip = chunk_elem(&uindex, ML_UW_IDX_CHUNK_BITS, key);
	if (!ip)
		return NULL;
	base = *ip;
	ip = chunk_elem(&uindex, ML_UW_IDX_CHUNK_BITS, key + 1);
	if (!ip || *ip < base || *ip >= m->n_rows)
		return NULL;
	/* The last row with pc <= off lies in [base, *ip]: a slot is at most 4 KiB, so 13 halvings do. */
	len = *ip - base + 1;
	for (int k = 0; k < 13; k++) { /* always 13: an exit on len == 1 would double the paths per halving */
		__u32 half = len / 2;

		row = chunk_elem(&urows, ML_UW_ROW_CHUNK_BITS, m->row_base + base + half);
		if (!row)
			return NULL;
		base += half & (__u32)ML_LE_MASK(row->pc, off);
		len -= half;
	}
	row = chunk_elem(&urows, ML_UW_ROW_CHUNK_BITS, m->row_base + base);
	if (!row || row->pc > (__u32)off)
		return NULL;
	return row;
}

/*
 * The rule for pc in the process's tables. A global function: the verifier checks it once, on its own, not
 * once per path of the frame step that calls it.
 */
__noinline __u32 uw_lookup(const struct ml_umaps *um, __u64 pc)
{
	const struct ml_urow *row = NULL;
	const struct ml_umap *m;

	if (!um)
		return ML_UW_RULE(1, 0, ML_UW_NONE_FDE);
	m = uw_map(um, pc);
	if (!m)
		return ML_UW_RULE(1, 0, ML_UW_NONE_FDE);
	row = uw_row(m, pc);
	return row ? ML_UW_RULE(row->cfa_off, row->rbp_off8, row->kind) : ML_UW_RULE(0, 0, ML_UW_NONE_FDE);
}
