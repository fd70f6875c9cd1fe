/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers the BPF units share (static, inlined into each), and the global functions one unit defines and
 * another calls. A global function is verified once per program, on its own: with unknown arguments, pointers
 * among them possibly NULL, so each checks them.
 */
#ifndef MEMLEAK_AI_COMMON_BPF_H
#define MEMLEAK_AI_COMMON_BPF_H

#include "maps.bpf.h"

#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))
#define barrier() asm volatile("" ::: "memory")
/* The second word of a returned two-word struct (x86-64: rdx), as PT_REGS_RC is the first. */
#define PT_REGS_RC2(x) (__PT_REGS_CAST(x)->dx)

#define ML_PY_RETRY_NS 10000000ULL

/*
 * An allocator call still "in flight" after this long lost its return probe (its links were replaced when
 * its process ran exec, say, or its thread longjmp'd out): it no longer hides the calls after it as nested
 * ones. The C heap's calls take microseconds; CUDA's may wait on the device for much longer.
 */
#define ML_CALL_STALE_NS 1000000000ULL
#define ML_HEAP_CALL_STALE_NS 50000000ULL

static __always_inline bool in_flight(const struct ml_call *t, __u64 now, __u8 group)
{
	return t->sp && now - t->entry_ns < (group == ML_GROUP_HEAP ? ML_HEAP_CALL_STALE_NS : ML_CALL_STALE_NS);
}

static __always_inline struct ml_counters *counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline void cnt_inc(struct ml_counters *c, __u32 idx)
{
	if (c && idx < ML_STAT_SLOTS)
		c->v[idx] += 1;
}

static __always_inline void stat_inc(__u32 idx)
{
	cnt_inc(counters(), idx);
}

/*
 * A kernel tracepoint's program runs for every process on the machine, memleak-ai's own faults and system calls
 * included (300,000 runs a second while it attaches): only the time it spends on a traced process's event, from
 * the filter that found one (t0) to its end, slows the traced job. The budget counts that (ML_STAT_TP_NS, and
 * the rss layer's part in ML_STAT_RSS_TP_NS too), not the programs' run time.
 */
static __always_inline void tp_cost(bool rss, __u64 t0)
{
	struct ml_counters *c = counters();
	__u64 ns = bpf_ktime_get_ns() - t0;

	if (!c)
		return;
	c->v[ML_STAT_TP_NS] += ns;
	if (rss)
		c->v[ML_STAT_RSS_TP_NS] += ns;
}

/* Why a walk ended: reason why (below n) of the counters from base (ML_STAT_UW_END_BASE, ML_STAT_PY_END_BASE). */
static __always_inline void end_inc(struct ml_counters *c, __u32 base, __u32 why, __u32 n)
{
	if (why < n)
		cnt_inc(c, base + why);
}

/* The per-layer counter slots (the contract's macros), the layer bounded for the verifier. */
static __always_inline __u32 layer_allocs(__u8 layer)
{
	return ML_STAT_LAYER_ALLOCS(layer & (ML_LAYER_MAX - 1));
}

static __always_inline __u32 layer_frees(__u8 layer)
{
	return ML_STAT_LAYER_FREES(layer & (ML_LAYER_MAX - 1));
}

/* A trap of a probe of this layer: at entry, or at the return. */
static __always_inline void hit(__u8 layer, bool ret)
{
	cnt_inc(counters(), ML_STAT_HIT_BASE + 2 * (layer & (ML_LAYER_MAX - 1)) + (ret ? 1 : 0));
}

static __always_inline __u64 read_u64(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/*
 * Python frames are read a page at a time: CPython pushes the frames of a thread onto its own stack of
 * memory chunks, each callee right above its caller, so one read of the memory below a frame brings the
 * callers in the same page too, and a read costs about as much whatever its size up to a page.
 */
#define ML_PY_WINDOW 4096

/*
 * Where a walk that a replay confirmed in part resumes: after check resume - 1, the last frame's. In map
 * memory, where the verifier does not follow the values.
 */
struct ml_uwreplay {
	__u64 pc, sp, bp, h;
	__u32 n_fp, resume;
	__u32 bp_at, bp_prev, lost_at; /* the last two saved-rbp checks and rbp-lost frame passed, index + 1 */
	__u8 bp_ok, bp_reg, pad[2];
};

/* Where a stack is assembled before it is known whether the table already has it (the scratch map, per CPU). */
struct ml_scratch {
	struct ml_uwreplay rp;
	struct ml_stack st;
	__u8 win[2 * ML_PY_WINDOW + 128]; /* the window [win_lo, win_lo + ML_PY_WINDOW); indexes mask with 8191 */
};

/* From a function's entry (cap->sp, cap->bp): the caller is the return address at [sp]. Returns 0. */
int capture_stack(struct ml_thread *th, struct ml_capture *cap);
/*
 * From a system call (cap->ip, sp, bp): the walk starts at the interrupted ip; its first frame is the caller.
 * From a page fault (cap->fault): the caller is ip itself, and every frame above it is in the stack.
 */
int capture_stack_ip(struct ml_thread *th, struct ml_capture *cap);

/* A row's rule as one word: cfa_off in bits 0-15, rbp_off8 in 16-23, the kind in 24-31. */
#define ML_UW_RULE(cfa_off, rbp_off8, kind)                                                                            \
	((__u32)(__u16)(cfa_off) | (__u32)(__u8)(rbp_off8) << 16 | (__u32)(kind) << 24)

/*
 * The rule for pc in the tables of the process whose executable mappings um lists (uwtables.bpf.c); for a pc
 * its mapping's table has no row for, ML_UW_RULE(0, 0, ML_UW_NONE_FDE); in no mapping with a table, or um NULL,
 * ML_UW_RULE(1, 0, ML_UW_NONE_FDE).
 */
__u32 uw_lookup(const struct ml_umaps *um, __u64 pc);

/*
 * Python (python.bpf.c): where tgid runs a CPython interpreter user space told of, append the calling thread's
 * Python frames to the stack in sc->st, innermost first, hashing them into *h. Returns 0.
 */
int py_frames(struct ml_scratch *sc, struct ml_thread *th, __u32 tgid, __u64 *h);

#endif
