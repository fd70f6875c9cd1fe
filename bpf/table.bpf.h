/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The allocation table's operations (see memleak.h): find, claim, forget and remember a slot, and a release.
 * Used by the allocator probes (probes.bpf.c) and heap-growth mode (proc.bpf.c); inlined into each program.
 */
#ifndef MEMLEAK_AI_TABLE_BPF_H
#define MEMLEAK_AI_TABLE_BPF_H

#include "common.bpf.h"

/* Walk a probe chain of the allocation table: the slot holding (tgid, layer, addr), or NULL. */
static __always_inline struct ml_slot *slot_find(__u32 tgid, __u8 layer, __u64 addr)
{
	__u32 start = (__u32)ml_slot_hash(tgid, layer, addr);

	for (__u32 p = 0; p < ML_MAX_PROBES; p++) {
		__u32 i = (start + p) & table_mask;
		struct ml_slot *s = bpf_map_lookup_elem(&table, &i);
		__u64 k;

		if (!s)
			return NULL;
		k = READ_ONCE(s->addr);
		if (k == ML_SLOT_EMPTY)
			return NULL;
		if (k == addr && s->tgid == tgid && s->layer == layer)
			return s;
	}
	return NULL;
}

/*
 * The slot for a new allocation at addr. The allocator just handed addr out, so a record already holding
 * the same key is dead (its release raced with this allocation, e.g. a realloc that moved on another
 * thread): it is taken over, never duplicated. Otherwise the first released or empty slot of the chain
 * is claimed with compare-and-swap; another thread claiming the same slot first sends this one along the
 * chain again (twice at most). NULL when the chain is full.
 */
static __always_inline struct ml_slot *slot_claim(struct ml_counters *c, __u32 tgid, __u8 layer, __u64 addr)
{
	__u32 start = (__u32)ml_slot_hash(tgid, layer, addr);

	for (int attempt = 0; attempt < 3; attempt++) {
		struct ml_slot *cand = NULL;
		__u64 cand_k = 0;

		for (__u32 p = 0; p < ML_MAX_PROBES; p++) {
			__u32 i = (start + p) & table_mask;
			struct ml_slot *s = bpf_map_lookup_elem(&table, &i);
			__u64 k;

			if (!s)
				break;
			k = READ_ONCE(s->addr);
			if (k == addr && s->tgid == tgid && s->layer == layer) {
				cnt_inc(c, ML_STAT_TAKEOVER);
				return s;
			}
			if ((k == ML_SLOT_EMPTY || k == ML_SLOT_TOMB) && !cand) {
				cand = s;
				cand_k = k;
			}
			if (k == ML_SLOT_EMPTY)
				break;
		}
		if (!cand)
			return NULL;
		if (__sync_val_compare_and_swap(&cand->addr, cand_k, addr) == cand_k)
			return cand;
	}
	return NULL;
}

/* Drop an allocation; with expect_ts, only if it is still the one seen when the call began. 1 if dropped. */
static __always_inline int forget(struct ml_counters *c, __u32 tgid, __u8 layer, __u64 addr, __u64 expect_ts)
{
	struct ml_slot *s = slot_find(tgid, layer, addr);

	if (!s) {
		if (!expect_ts)
			cnt_inc(c, ML_STAT_FREE_UNKNOWN);
		return 0;
	}
	/* Compare the identity before releasing: the slot can be claimed again the moment it is a tombstone. */
	if (expect_ts && READ_ONCE(s->ts_ns) != expect_ts) {
		cnt_inc(c, ML_STAT_REALLOC_RACE);
		return 0;
	}
	if (__sync_val_compare_and_swap(&s->addr, addr, ML_SLOT_TOMB) != addr)
		return 0; /* another thread released it first (a double free in the target) */
	cnt_inc(c, ML_STAT_FREE_MATCHED);
	return 1;
}

/*
 * Fill a claimed slot. ts_ns goes last: a reader skips a slot whose ts_ns is 0, i.e. one still being written.
 * The barriers keep the compiler from moving the field stores across the two timestamp stores.
 */
static __always_inline void slot_write(struct ml_slot *s, __u32 tgid, __u8 layer, __u64 size, __u64 caller,
				       __u64 stack_id, __u32 spec, __s16 device, __u64 ts)
{
	WRITE_ONCE(s->ts_ns, 0);
	barrier();
	s->size = size;
	s->caller = caller;
	s->stack_id = stack_id;
	s->tgid = tgid;
	s->layer = layer;
	s->spec = (__u8)spec;
	s->device = device;
	barrier();
	WRITE_ONCE(s->ts_ns, ts);
}

static __always_inline void remember(struct ml_counters *c, __u32 tgid, __u8 layer, __u64 addr, __u64 size,
				     __u64 caller, __u64 stack_id, __u32 spec, __s16 device)
{
	struct ml_slot *s;

	cnt_inc(c, ML_STAT_ALLOC_CALLS);
	cnt_inc(c, layer_allocs(layer));
	if (size < min_size || size > max_size) {
		cnt_inc(c, ML_STAT_FILTERED);
		return;
	}
	s = slot_claim(c, tgid, layer, addr);
	if (!s) {
		cnt_inc(c, ML_STAT_DROP_ALLOCS_FULL);
		return;
	}
	slot_write(s, tgid, layer, size, caller, stack_id, spec, device, bpf_ktime_get_ns());
}

static __always_inline int release(struct ml_counters *c, __u8 layer, __u64 ptr)
{
	if (!ptr) {
		cnt_inc(c, ML_STAT_FREE_NULL);
		return 0;
	}
	cnt_inc(c, ML_STAT_FREE_CALLS);
	cnt_inc(c, layer_frees(layer));
	forget(c, bpf_get_current_pid_tgid() >> 32, layer, ptr, 0);
	return 0;
}

#endif
