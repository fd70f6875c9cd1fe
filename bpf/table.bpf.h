/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The allocation table's operations (see memleak.h): find, claim, forget and remember a slot, and a release.
 * Used by the allocator probes (probes.bpf.c) and heap-growth mode (proc.bpf.c); inlined into each program.
 */
#ifndef MEMLEAK_AI_TABLE_BPF_H
#define MEMLEAK_AI_TABLE_BPF_H

#include "common.bpf.h"

/* Where a slot is, as table.bpf.c's searches say it: (level << 32 | index), ML_TABLE_TAKEOVER, or -1. */
#define ML_TABLE_TAKEOVER (1LL << 62)
__s64 table_find(__u32 tgid, __u32 layer, __u64 addr);
__s64 table_find_in(__u32 k, __u32 tgid, __u32 layer, __u64 addr);
__s64 table_claim(__u32 tgid, __u32 layer, __u64 addr);
__s64 table_claim_in(__u32 k, __u32 tgid, __u32 layer, __u64 addr);

static __always_inline struct ml_slot *slot_at(__s64 where)
{
	__u32 k, i;
	void *t;

	if (where < 0)
		return NULL;
	k = (__u32)(where >> 32) & (ML_TABLE_LEVELS - 1);
	i = (__u32)where;
	t = bpf_map_lookup_elem(&table, &k);
	return t ? bpf_map_lookup_elem(t, &i) : NULL;
}

/* The slot holding (tgid, layer, addr), or NULL. */
static __always_inline struct ml_slot *slot_find(__u32 tgid, __u8 layer, __u64 addr)
{
	return slot_at(table_find(tgid, layer, addr));
}

/* The slot for a new allocation at addr (table_claim), or NULL when its chain is full. */
static __always_inline struct ml_slot *slot_claim(struct ml_counters *c, __u32 tgid, __u8 layer, __u64 addr)
{
	__s64 where = table_claim(tgid, layer, addr);

	if (where >= 0 && (where & ML_TABLE_TAKEOVER))
		cnt_inc(c, ML_STAT_TAKEOVER);
	return slot_at(where);
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
