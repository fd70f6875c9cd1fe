// SPDX-License-Identifier: GPL-2.0
/* BPF side of memleak-ai: generic allocator probes driven by the allocator table, and the report-time aggregator. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "memleak.h"

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
const volatile struct ml_spec specs[ML_MAX_SPECS] = {};
const volatile __u64 min_size = 0;
const volatile __u64 max_size = ~0ULL;

/* Report-time aggregation parameters, written by user space through the skeleton's bss. */
__u64 iter_gen = 0;
__u64 iter_newest_ts = ~0ULL; /* allocations younger than --min-age are left out */
__u64 iter_seen = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by --max-allocs */
	__type(key, struct ml_alloc_key);
	__type(value, struct ml_alloc);
} allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by --max-stacks */
	__type(key, __u64);
	__type(value, struct ml_stack);
} stacks SEC(".maps");

/* Where a stack is assembled before it is known whether the table already has it. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ml_stack);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* sized by --max-stacks */
	__type(key, struct ml_agg_key);
	__type(value, struct ml_agg);
} aggs SEC(".maps");

/* All counters in one per-CPU element: one lookup per event, not one per counter. */
struct ml_counters {
	__u64 v[ML_STAT_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ml_counters);
} stats SEC(".maps");

/* In-flight call of one thread. Task storage dies with the thread, so an exiting thread leaves nothing behind. */
struct ml_thread {
	__u64 sp;       /* stack pointer at entry of the outermost allocator call; 0 = none in flight */
	__u64 size;
	__u64 out_ptr;  /* address of the void ** out-parameter */
	__u64 free_ptr; /* pointer being released by a realloc */
	__u64 free_ts;  /* identity of that allocation when the call began */
	__u64 caller;
	__u64 stack_id;
	__u32 spec;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ml_thread);
} threads SEC(".maps");

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

/* The first six integer arguments, copied once: the verifier refuses a computed offset into the context. */
struct ml_args {
	__u64 v[6];
};

static __always_inline void load_args(struct pt_regs *ctx, struct ml_args *a)
{
	a->v[0] = PT_REGS_PARM1(ctx);
	a->v[1] = PT_REGS_PARM2(ctx);
	a->v[2] = PT_REGS_PARM3(ctx);
	a->v[3] = PT_REGS_PARM4(ctx);
	a->v[4] = PT_REGS_PARM5(ctx);
	a->v[5] = ctx->r9; /* libbpf 1.1 has no PT_REGS_PARM6 */
}

static __always_inline __u64 arg_n(const struct ml_args *a, __u32 n)
{
	__u32 i = n - 1;

	if (i > 5)
		return 0;
	return a->v[i];
}

/*
 * Stack capture, kept behind this one function so a full unwinder can replace it. At function entry the
 * caller's return address is at [rsp] whether or not anything keeps frame pointers; a frame-pointer walk
 * supplies the frames above it. The walk is our own rather than bpf_get_stackid(): that one reads on
 * until a read faults, and a fault costs more than everything else done per event. This one stops at a
 * NULL or non-increasing frame pointer, or one that leaves the stack window, so a well-formed chain ends
 * without a fault, and rbp holding anything but a frame pointer (code built without them) is mostly
 * rejected before the first read.
 */
static __always_inline void capture_stack(struct pt_regs *ctx, __u64 *caller, __u64 *stack_id)
{
	__u64 fp = PT_REGS_FP(ctx), sp = PT_REGS_SP(ctx), h = 0xcbf29ce484222325ULL, ret = 0;
	struct { __u64 next, ret; } fr;
	struct ml_stack *st;
	__u32 zero = 0, nr = 0;

	bpf_probe_read_user(&ret, sizeof(ret), (void *)sp);
	*caller = ret;
	*stack_id = ML_STACK_NONE;
	if (fp < sp || fp - sp > ML_FP_WINDOW)
		return;
	/* Check the first frame before anything else: most garbage fails here, at the cost of one read. */
	if (bpf_probe_read_user(&fr, sizeof(fr), (void *)fp) || fr.ret < 0x1000 || fr.ret >= ML_USER_TOP)
		return;
	st = bpf_map_lookup_elem(&scratch, &zero);
	if (!st)
		return;
	for (__u32 i = 0; i < ML_MAX_FRAMES; i++) {
		if (i && (bpf_probe_read_user(&fr, sizeof(fr), (void *)fp) || fr.ret < 0x1000 || fr.ret >= ML_USER_TOP))
			break;
		st->ips[i] = fr.ret;
		nr = i + 1;
		h = (h ^ fr.ret) * 0x100000001b3ULL;
		if (fr.next <= fp || fr.next - fp > ML_FP_WINDOW)
			break;
		fp = fr.next;
	}
	if (!nr)
		return;
	st->nr = nr;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	if (h == ML_STACK_NONE || h == ML_STACK_LOST)
		h = 1;
	if (!bpf_map_lookup_elem(&stacks, &h) && bpf_map_update_elem(&stacks, &h, st, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&stacks, &h)) {
		stat_inc(ML_STAT_DROP_STACK);
		return;
	}
	*stack_id = h;
}

/* Drop an allocation; with expect_ts, only if it is still the one seen when the call began. 1 if dropped. */
static __always_inline int forget(struct ml_counters *c, __u32 tgid, __u64 addr, __u64 expect_ts)
{
	struct ml_alloc_key key = { .tgid = tgid, .addr = addr };
	struct ml_alloc *a;

	if (expect_ts) {
		/* Copy what we compare before deleting: the entry can be reused the moment it is gone. */
		a = bpf_map_lookup_elem(&allocs, &key);
		if (!a)
			return 0;
		if (a->ts_ns != expect_ts) {
			cnt_inc(c, ML_STAT_REALLOC_RACE);
			return 0;
		}
	}
	if (bpf_map_delete_elem(&allocs, &key) == 0) {
		cnt_inc(c, ML_STAT_FREE_MATCHED);
		return 1;
	}
	if (!expect_ts)
		cnt_inc(c, ML_STAT_FREE_UNKNOWN);
	return 0;
}

static __always_inline void remember(__u32 tgid, __u64 addr, struct ml_thread *t, const volatile struct ml_spec *s)
{
	struct ml_alloc_key key = { .tgid = tgid, .addr = addr };
	struct ml_alloc val = {
		.size = t->size,
		.ts_ns = bpf_ktime_get_ns(),
		.caller = t->caller,
		.stack_id = t->stack_id,
		.layer = s->layer,
		.spec = t->spec,
	};

	if (bpf_map_update_elem(&allocs, &key, &val, BPF_ANY))
		stat_inc(ML_STAT_DROP_ALLOCS_FULL);
}

SEC("uprobe")
int BPF_KPROBE(alloc_enter)
{
	__u32 idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_thread *t;
	__u64 sp = PT_REGS_SP(ctx), size, count, key_ts = 0;
	struct ml_args args;

	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx];
	load_args(ctx, &args);
	t = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!t) {
		stat_inc(ML_STAT_DROP_THREAD);
		return 0;
	}
	if (t->sp) {
		/* A deeper stack pointer means glibc is calling itself, an equal one a tail call (reallocarray
		 * jumps to realloc): either way the outer call accounts for it. */
		if (sp <= t->sp) {
			stat_inc(ML_STAT_NESTED);
			return 0;
		}
		stat_inc(ML_STAT_DROP_LOST_RETURN);
	}
	size = s->size_arg ? arg_n(&args, s->size_arg) : 0;
	if (s->count_arg) {
		count = arg_n(&args, s->count_arg);
		size *= count;
	}
	t->sp = sp;
	t->size = size;
	t->spec = idx;
	t->out_ptr = s->out_arg ? arg_n(&args, s->out_arg) : 0;
	t->free_ptr = s->free_arg ? arg_n(&args, s->free_arg) : 0;
	t->free_ts = 0;
	if (t->free_ptr) {
		struct ml_alloc_key key = { .tgid = bpf_get_current_pid_tgid() >> 32, .addr = t->free_ptr };
		struct ml_alloc *a = bpf_map_lookup_elem(&allocs, &key);

		if (a)
			key_ts = a->ts_ns;
		t->free_ts = key_ts ? key_ts : 1; /* 1: not ours, nothing to delete */
	}
	if (size < min_size || size > max_size) {
		t->stack_id = ML_STACK_NONE;
		t->caller = 0;
	} else {
		capture_stack(ctx, &t->caller, &t->stack_id);
	}
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const volatile struct ml_spec *s;
	struct ml_counters *c;
	struct ml_thread *t;
	__u64 ret = PT_REGS_RC(ctx), addr = 0;
	__u32 idx, layer_slot;
	int ok;

	t = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	/* The return of a nested call arrives with a deeper stack than the outer call's entry + 8. */
	if (!t || !t->sp || PT_REGS_SP(ctx) != t->sp + 8)
		return 0;
	idx = t->spec;
	t->sp = 0;
	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx];
	c = counters();
	layer_slot = ML_STAT_LAYER_BASE + 2 * (s->layer & (ML_LAYER_MAX - 1));

	if (s->ret == ML_RET_ERR0) {
		ok = (__s32)ret == 0;
		if (ok && t->out_ptr)
			bpf_probe_read_user(&addr, sizeof(addr), (void *)t->out_ptr);
	} else {
		addr = ret;
		ok = addr != 0;
	}

	if (s->kind == ML_KIND_REALLOC) {
		/*
		 * realloc(p, 0) frees p and returns NULL; any other NULL is a failure that leaves p alone. glibc
		 * releases p of realloc(p, 0) through free(), whose probe has then already dropped it: the
		 * identity check makes the second drop a no-op, and counts a block reused meanwhile as a race.
		 */
		if (!t->free_ptr) {
			cnt_inc(c, ML_STAT_FREE_NULL);
		} else if (addr || t->size == 0) {
			if (t->free_ts > 1 && forget(c, tgid, t->free_ptr, t->free_ts)) {
				cnt_inc(c, ML_STAT_FREE_CALLS);
				cnt_inc(c, layer_slot + 1);
			} else if (t->free_ts <= 1 && addr) {
				cnt_inc(c, ML_STAT_FREE_UNKNOWN);
			}
		}
		if (!addr && t->size == 0)
			return 0;
	}
	if (!ok || !addr) {
		cnt_inc(c, ML_STAT_ALLOC_FAILED);
		return 0;
	}
	cnt_inc(c, ML_STAT_ALLOC_CALLS);
	cnt_inc(c, layer_slot);
	if (t->size < min_size || t->size > max_size)
		return 0;
	remember(tgid, addr, t, s);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(free_enter)
{
	__u32 idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_counters *c;
	struct ml_args args;
	__u64 ptr;

	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx];
	load_args(ctx, &args);
	ptr = arg_n(&args, s->free_arg);
	c = counters();
	if (!ptr) {
		cnt_inc(c, ML_STAT_FREE_NULL);
		return 0;
	}
	cnt_inc(c, ML_STAT_FREE_CALLS);
	cnt_inc(c, ML_STAT_LAYER_BASE + 2 * (s->layer & (ML_LAYER_MAX - 1)) + 1);
	forget(c, bpf_get_current_pid_tgid() >> 32, ptr, 0);
	return 0;
}

/*
 * Report-time aggregation: walks the outstanding-allocation table once, in the kernel, and sums it by
 * stack into `aggs`. Nothing is added to the per-allocation path.
 */
SEC("iter/bpf_map_elem")
int aggregate(struct bpf_iter__bpf_map_elem *ctx)
{
	struct ml_alloc_key *k = ctx->key;
	struct ml_alloc *a = ctx->value;
	struct ml_agg_key ak = {};
	struct ml_agg *g, init = {};
	__u64 tick;

	if (!k || !a)
		return 0;
	/* The kernel gives up on an iterator that emits nothing for a million elements: emit a byte now and then. */
	tick = ++iter_seen;
	if ((tick & 0xffff) == 0) {
		char b = '.';

		bpf_seq_write(ctx->meta->seq, &b, 1);
	}
	ak.tgid = k->tgid;
	ak.stack_id = a->stack_id;
	ak.caller = a->caller;
	ak.layer = a->layer;
	g = bpf_map_lookup_elem(&aggs, &ak);
	if (!g) {
		init.gen = iter_gen;
		init.oldest_ts_ns = ~0ULL;
		bpf_map_update_elem(&aggs, &ak, &init, BPF_NOEXIST);
		g = bpf_map_lookup_elem(&aggs, &ak);
		if (!g) {
			/* Full: fold into the per-layer catch-all user space reserved, so the bytes still count. */
			stat_inc(ML_STAT_DROP_AGG_FULL);
			ak.stack_id = ML_STACK_LOST;
			ak.caller = 0;
			g = bpf_map_lookup_elem(&aggs, &ak);
			if (!g)
				return 0;
		}
	}
	if (g->gen != iter_gen) {
		g->gen = iter_gen;
		g->bytes = 0;
		g->count = 0;
		g->oldest_ts_ns = ~0ULL;
	}
	/* Younger than --min-age: the stack stays referenced (entry exists) but nothing is counted. */
	if (a->ts_ns > iter_newest_ts)
		return 0;
	g->bytes += a->size;
	g->count += 1;
	if (a->ts_ns < g->oldest_ts_ns)
		g->oldest_ts_ns = a->ts_ns;
	return 0;
}
