// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of memleak-ai, the allocation table's searches over its levels (see memleak.h), as global functions:
 * each verified once, not at each call of the probes that use them (table.bpf.h), nor once per level. They
 * return where a slot is, (level << 32 | index), not a pointer, which a global function cannot; slot_at() turns
 * it into one.
 */
#include "table.bpf.h"

/* The slot of (tgid, layer, addr) in level k, or -1. */
__noinline __s64 table_find_in(__u32 k, __u32 tgid, __u32 layer, __u64 addr)
{
	__u32 start = (__u32)ml_slot_hash(tgid, (__u8)layer, addr), mask;
	void *t;

	k &= ML_TABLE_LEVELS - 1;
	mask = table_masks[k];
	t = bpf_map_lookup_elem(&table, &k);
	if (!t)
		return -1;
	for (__u32 p = 0, i = start & mask; p < ML_MAX_PROBES; i = ml_slot_next(i, p, mask), p++) {
		struct ml_slot *s = bpf_map_lookup_elem(t, &i);
		__u64 key;

		if (!s)
			return -1;
		key = READ_ONCE(s->addr);
		if (key == ML_SLOT_EMPTY)
			return -1;
		if (key == addr && s->tgid == tgid && s->layer == layer)
			return (__s64)k << 32 | i;
	}
	return -1;
}

/* The slot of (tgid, layer, addr) in the newest level that has it, or -1. */
__noinline __s64 table_find(__u32 tgid, __u32 layer, __u64 addr)
{
	__u32 top = table_top;

	for (__u32 d = 0; d < ML_TABLE_LEVELS && d <= top; d++) {
		__s64 where = table_find_in(top - d, tgid, layer, addr);

		if (where >= 0)
			return where;
	}
	return -1;
}

/*
 * A slot for a new allocation at addr in level k. The allocator just handed addr out, so a record met on the
 * chain holding the same key is dead (its release raced with this allocation, e.g. a realloc that moved on
 * another thread): it is taken over, never duplicated, and ML_TABLE_TAKEOVER says so. Otherwise the first
 * released or empty slot of the chain is claimed with compare-and-swap; another thread claiming the same slot
 * first sends this one along the chain again (twice at most). -1 when the chain is full.
 */
__noinline __s64 table_claim_in(__u32 k, __u32 tgid, __u32 layer, __u64 addr)
{
	__u32 start = (__u32)ml_slot_hash(tgid, (__u8)layer, addr), mask;
	void *t;

	k &= ML_TABLE_LEVELS - 1;
	mask = table_masks[k];
	t = bpf_map_lookup_elem(&table, &k);
	if (!t)
		return -1;
	for (int attempt = 0; attempt < 3; attempt++) {
		struct ml_slot *cand = NULL;
		__u64 cand_k = 0;
		__u32 cand_i = 0;

		for (__u32 p = 0, i = start & mask; p < ML_MAX_PROBES; i = ml_slot_next(i, p, mask), p++) {
			struct ml_slot *s = bpf_map_lookup_elem(t, &i);
			__u64 key;

			if (!s)
				break;
			key = READ_ONCE(s->addr);
			if (key == addr && s->tgid == tgid && s->layer == layer)
				return (__s64)k << 32 | i | ML_TABLE_TAKEOVER;
			if ((key == ML_SLOT_EMPTY || key == ML_SLOT_TOMB) && !cand) {
				cand = s;
				cand_k = key;
				cand_i = i;
			}
			if (key == ML_SLOT_EMPTY)
				break;
		}
		if (!cand)
			return -1;
		if (__sync_val_compare_and_swap(&cand->addr, cand_k, addr) == cand_k)
			return (__s64)k << 32 | cand_i;
	}
	return -1;
}

/* A slot for a new allocation in the newest level whose chain has room: the newest, but for the few chains a
 * filling level has full. -1 when every level's chain is full. */
__noinline __s64 table_claim(__u32 tgid, __u32 layer, __u64 addr)
{
	__u32 top = table_top;

	for (__u32 d = 0; d < ML_TABLE_LEVELS && d <= top; d++) {
		__s64 where = table_claim_in(top - d, tgid, layer, addr);

		if (where >= 0)
			return where;
	}
	return -1;
}
