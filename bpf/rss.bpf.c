// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of memleak-ai, the rss layer: anonymous pages a traced process makes resident, charged to the
 * stack whose fault made them, and pages it copies on write (see memleak.h). A fault on an anonymous private
 * mapping is remembered on its thread; when the page allocator then hands that thread a user page for it,
 * the page is recorded. A fault that allocates nothing (a read mapping the shared zero page, a write to a
 * page no other process shares) records nothing, so the records follow what the kernel really allocated.
 * The releases come from the system calls that drop or move pages.
 */
#include "table.bpf.h"

/* The sampling shift (see ml_rss_sampled): user space raises it, never lowers it. */
__u32 rss_shift = 0;

#define ML_EBUSY 16
#define ML_PF_PROT 1 /* the page was present: a protection fault (a write to a write-protected page) */
#define ML_PF_WRITE 2
#define ML_PF_INSTR 16
#define ML_PF_KERNEL (1ULL << 62) /* ours, in the remembered error code: the fault came from a system call */
#define ML_GFP_MOVABLE (1U << 3)  /* ___GFP_MOVABLE_BIT: user pages, never page tables */
#define ML_GFP_ZERO (1U << 8)	  /* ___GFP_ZERO_BIT: a page that starts zeroed (first touch, the zero page's copy) */
#define ML_HUGE_BYTES (1ULL << 21)
#define ML_FAULT_WINDOW_NS 100000000ULL
#define ML_SAME_RUN_NS                                                                                                 \
	50000ULL /* faults of one run (one loop over new pages) follow each other closer than this */ /* a fault the   \
													 page          \
													 allocator has \
													 not answered  \
													 in this long  \
													 allocated     \
													 nothing */

/*
 * The thread with a fault pending on this CPU (its task pointer), or 0: the page allocator's program, which
 * runs for every user page any process gets, looks here before it looks at the thread's storage. A thread
 * moved to another CPU between its fault and the allocation is missed, which the fault's short path makes rare.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} rss_pending SEC(".maps");

struct vma_seen {
	__u64 lo, hi;
	int anon;
};

/* Anonymous memory (no vm_ops: not a file, not shared memory, not a device). */
static long anon_vma(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	struct vma_seen *v = ctx;

	v->anon = vma->vm_ops == NULL;
	v->lo = vma->vm_start;
	v->hi = vma->vm_end;
	return 0;
}

/*
 * A fault of a traced process at addr that may allocate a page: a page not present, or a write to a present
 * one (a copy). ip and sp are its user registers (the interrupted code, or the system call's entry).
 */
static __always_inline void rss_fault_of(struct ml_rss_proc *rp, __u64 addr, __u64 err, __u64 ip, __u64 sp)
{
	__u32 shift = READ_ONCE(rss_shift);
	__u64 page = addr & ~(ML_PAGE_BYTES - 1);
	struct vma_seen v = {};
	struct task_struct *task;
	struct ml_counters *c;
	struct ml_thread *th;
	__u64 gen, *pending;
	__u32 zero = 0;
	long e;

	c = counters();
	cnt_inc(c, ML_STAT_RSS_FAULTS);
	/* The test is on the page a record would be kept at: the page, or the huge page around it. */
	if (!ml_rss_sampled(page, shift) && !ml_rss_sampled(addr & ~(ML_HUGE_BYTES - 1), shift)) {
		cnt_inc(c, ML_STAT_RSS_SAMPLED_OUT);
		return;
	}
	task = bpf_get_current_task_btf();
	gen = READ_ONCE(rp->gen);
	th = bpf_task_storage_get(&threads, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!th) {
		cnt_inc(c, ML_STAT_DROP_THREAD);
		return;
	}
	/* Faults come in runs over one mapping: it is looked up once, until the process unmaps or moves something. */
	if (th->rss.vgen != gen + 1 || page < th->rss.vlo || page >= th->rss.vhi) {
		e = bpf_find_vma(task, page, anon_vma, &v, 0);
		if (e == -ML_EBUSY)
			cnt_inc(c, ML_STAT_RSS_VMA_BUSY);
		if (e || !v.anon)
			return;
		th->rss.vlo = v.lo;
		th->rss.vhi = v.hi;
		th->rss.vgen = gen + 1; /* 0 in a new thread's storage: never a match */
	}
	th->rss.page = page;
	th->rss.err = err;
	th->rss.ip = ip;
	th->rss.sp = sp;
	th->rss.ts_ns = bpf_ktime_get_ns();
	pending = bpf_map_lookup_elem(&rss_pending, &zero);
	if (pending)
		*pending = (__u64)task;
}

static __always_inline void rss_fault(__u64 addr, __u64 err, __u64 ip, __u64 sp)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ml_rss_proc *rp;
	__u64 t0;

	if (addr >= ML_USER_TOP || (err & ML_PF_INSTR) || ((err & ML_PF_PROT) && !(err & ML_PF_WRITE)))
		return;
	rp = bpf_map_lookup_elem(&rss_procs, &tgid);
	if (!rp)
		return;
	t0 = bpf_ktime_get_ns();
	rss_fault_of(rp, addr, err, ip, sp);
	tp_cost(true, t0);
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(rss_fault_user, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	rss_fault(address, error_code, regs->ip, regs->sp);
	return 0;
}

/*
 * A fault in the kernel on a user address: a system call writing into the process's memory (read() into a
 * fresh buffer). Only writes: a read of never-written memory maps the zero page, and the system call's
 * own allocations (the page cache) must not pass for its page. Faults with page faults disabled are the
 * kernel's (or a BPF program's) careful reads, which never allocate.
 */
SEC("tp_btf/page_fault_kernel")
int BPF_PROG(rss_fault_kernel, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *u;

	if (!(error_code & ML_PF_WRITE) || task->pagefault_disabled)
		return 0;
	u = (struct pt_regs *)bpf_task_pt_regs(task);
	if (u)
		rss_fault(address, error_code | ML_PF_KERNEL, u->ip, u->sp);
	return 0;
}

/* Whether addr lies in the C heap's break area (fresh heap: its first touch is told apart). */
static __always_inline int in_heap(struct task_struct *task, __u64 addr)
{
	struct mm_struct *mm = task->mm;

	return mm && addr >= mm->start_brk && addr < mm->brk;
}

/*
 * The page allocator handed out a user page: the one the thread's pending fault asked for when the thread
 * is still in that fault (its user registers the same) and asked for it lately.
 */
static __always_inline void page_alloc_of(struct task_struct *task, unsigned int order, gfp_t gfp)
{
	struct ml_capture cap;
	struct ml_counters *c;
	struct ml_thread *th;
	struct pt_regs *u;
	struct ml_slot *s;
	__u64 bytes, key, now;
	__u32 tgid;
	int copy;

	th = bpf_task_storage_get(&threads, task, 0, 0);
	if (!th || !th->rss.ts_ns)
		return;
	u = (struct pt_regs *)bpf_task_pt_regs(task);
	now = bpf_ktime_get_ns();
	if (!u || now - th->rss.ts_ns > ML_FAULT_WINDOW_NS || u->ip != th->rss.ip || u->sp != th->rss.sp) {
		th->rss.ts_ns = 0;
		return;
	}
	th->rss.ts_ns = 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	/* A copy starts from the old page's bytes; the copy of the zero page starts zeroed: a first touch. */
	copy = (th->rss.err & ML_PF_PROT) && !(gfp & ML_GFP_ZERO);
	bytes = ML_PAGE_BYTES << (order & 15);
	key = th->rss.page & ~(bytes - 1);
	c = counters();
	if (!ml_rss_sampled(key, READ_ONCE(rss_shift))) {
		cnt_inc(c, ML_STAT_RSS_SAMPLED_OUT);
		return;
	}
	/*
	 * A loop writing page after page (memset into a new buffer) faults at one instruction with one stack
	 * pointer, microseconds apart: the same stack, captured once for the run.
	 */
	if (th->rss.cap_ip == u->ip && th->rss.cap_sp == u->sp && now - th->rss.cap_ns < ML_SAME_RUN_NS) {
		cap.caller = th->rss.cap_caller;
		cap.stack_id = th->rss.cap_stack;
	} else {
		__u64 miss = th->py_miss_ns;

		cap =
		    (struct ml_capture){.ip = u->ip, .sp = u->sp, .bp = u->bp, .fault = !(th->rss.err & ML_PF_KERNEL)};
		capture_stack_ip(th, &cap);
		/*
		 * A new thread faults its stack before its Python thread state exists: that miss must not hold
		 * back the search (ML_PY_RETRY_NS) at the thread's first allocations, a moment later.
		 */
		th->py_miss_ns = miss;
		th->rss.cap_ip = u->ip;
		th->rss.cap_sp = u->sp;
		th->rss.cap_caller = cap.caller;
		th->rss.cap_stack = cap.stack_id;
	}
	th->rss.cap_ns = now;
	/* A record already at key lost its release (or the page was swapped out): it is taken over. */
	s = slot_claim(NULL, tgid, ML_LAYER_RSS, key + (copy ? ML_RSS_COPY : 0));
	if (!s) {
		cnt_inc(c, ML_STAT_RSS_LOST);
		return;
	}
	slot_write(s, tgid, ML_LAYER_RSS, bytes, cap.caller, cap.stack_id,
		   copy			? ML_SPEC_COPY
		   : in_heap(task, key) ? ML_SPEC_RSS_HEAP
					: ML_SPEC_RSS,
		   -1, now);
	if (c) {
		c->v[copy ? ML_STAT_RSS_COPIES : ML_STAT_RSS_PAGES] += bytes >> ML_PAGE_SHIFT;
		c->v[ML_STAT_LAYER_ALLOCS(ML_LAYER_RSS)] += 1;
	}
}

SEC("tp_btf/mm_page_alloc")
int BPF_PROG(rss_page_alloc, struct page *pg, unsigned int order, gfp_t gfp, int migratetype)
{
	struct task_struct *task;
	__u64 t0, *pending;
	__u32 zero = 0;

	if (!(gfp & ML_GFP_MOVABLE))
		return 0;
	task = bpf_get_current_task_btf();
	pending = bpf_map_lookup_elem(&rss_pending, &zero);
	if (!pending || *pending != (__u64)task)
		return 0;
	*pending = 0;
	t0 = bpf_ktime_get_ns();
	page_alloc_of(task, order, gfp);
	tp_cost(true, t0);
	return 0;
}

/* Drop the record at key, if there is one. */
static __always_inline int rss_forget(__u32 tgid, __u64 key)
{
	struct ml_slot *s = slot_find(tgid, ML_LAYER_RSS, key);

	return s && __sync_val_compare_and_swap(&s->addr, key, ML_SLOT_TOMB) == key;
}

struct rss_range {
	__u64 lo, to;
	__u32 tgid, shift;
	__u64 freed, lost;
};

static long rss_drop_one(__u32 i, void *arg)
{
	struct rss_range *r = arg;
	__u64 p = r->lo + ((__u64)i << ML_PAGE_SHIFT);

	if (ml_rss_sampled(p, r->shift))
		r->freed += rss_forget(r->tgid, p) + rss_forget(r->tgid, p + ML_RSS_COPY);
	return 0;
}

/*
 * One record moved from key to key - lo + to (mremap), when there is one. A global function (verified once,
 * not at each of its two calls: the table's probe loops are most of rss_exit's verification).
 */
__noinline int ml_rss_move_key(struct rss_range *r, __u64 key, __u64 off)
{
	struct ml_slot *s, *d;
	__u64 nkey, size, caller, stack_id, ts;
	__u8 spec;

	if (!r)
		return 0;
	nkey = r->to + off + (key & ML_RSS_COPY);
	s = slot_find(r->tgid, ML_LAYER_RSS, key);
	if (!s)
		return 0;
	size = s->size;
	caller = s->caller;
	stack_id = s->stack_id;
	spec = s->spec;
	ts = s->ts_ns;
	if (__sync_val_compare_and_swap(&s->addr, key, ML_SLOT_TOMB) != key)
		return 0;
	if (!ml_rss_sampled(nkey & ~ML_RSS_COPY, r->shift) || !(d = slot_claim(NULL, r->tgid, ML_LAYER_RSS, nkey))) {
		r->lost++;
		return 0;
	}
	slot_write(d, r->tgid, ML_LAYER_RSS, size, caller, stack_id, spec, -1, ts ? ts : 1);
	r->freed++;
	return 0;
}

static long rss_move_one(__u32 i, void *arg)
{
	struct rss_range *r = arg;
	__u64 off = (__u64)i << ML_PAGE_SHIFT, p = r->lo + off;

	if (ml_rss_sampled(p, r->shift)) {
		ml_rss_move_key(r, p, off);
		ml_rss_move_key(r, p + ML_RSS_COPY, off);
	}
	return 0;
}

/*
 * Records in [lo, hi) go (to == 0) or move to `to`: here when the range is small, else by user space. A global
 * function, verified once whatever calls it: inlined at each call site, the page loops were verified again
 * at each (rss_exit, with a site for each system call, was 216,000 instructions of the verifier's work).
 */
__noinline int ml_rss_range(__u32 tgid, __u64 lo, __u64 hi, __u64 to)
{
	struct rss_range r = {.lo = lo, .to = to, .tgid = tgid, .shift = READ_ONCE(rss_shift)};
	__u64 n = (hi - lo) >> ML_PAGE_SHIFT;
	struct ml_counters *c;

	if (hi <= lo)
		return 0;
	c = counters();
	if (n > ML_RSS_INLINE_PAGES) {
		struct ml_rss_event *e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);

		if (!e) {
			cnt_inc(c, ML_STAT_DROP_PROC_EVENT);
			return 0;
		}
		e->hdr.type = to ? ML_PROC_RSS_MOVE : ML_PROC_RSS_RELEASE;
		e->hdr.tgid = tgid;
		e->hdr.parent = 0;
		e->hdr.pad = 0;
		e->hdr.ts_ns = bpf_ktime_get_ns();
		e->lo = lo;
		e->hi = hi;
		e->to = to;
		bpf_ringbuf_submit(e, 0);
		return 0;
	}
	if (to)
		bpf_loop((__u32)n, rss_move_one, &r, 0);
	else
		bpf_loop((__u32)n, rss_drop_one, &r, 0);
	if (c) {
		if (!to)
			c->v[ML_STAT_LAYER_FREES(ML_LAYER_RSS)] += r.freed;
		c->v[ML_STAT_RSS_MOVE_LOST] += r.lost;
		c->v[ML_STAT_LAYER_FREES(ML_LAYER_RSS)] += r.lost;
	}
	return 0;
}

#define ML_NR_MMAP 9
#define ML_NR_MUNMAP 11
#define ML_NR_BRK 12
#define ML_NR_MREMAP 25
#define ML_NR_MADVISE 28
#define ML_MAP_FIXED 0x10
#define ML_MADV_DONTNEED 4
#define ML_MADV_FREE 8
#define ML_MADV_REMOVE 9
#define ML_MADV_DONTNEED_LOCKED 24

static __always_inline __u64 page_up(__u64 v)
{
	return (v + ML_PAGE_BYTES - 1) & ~(ML_PAGE_BYTES - 1);
}

/* The system calls that drop or move a traced process's pages. */
static __always_inline void rss_exit_of(struct pt_regs *regs, long nr, long ret, __u32 tgid, struct ml_rss_proc *rp)
{
	__u64 a, len, nlen, lo = 0, hi = 0, to = 0, lo2 = 0, hi2 = 0;

	a = regs->di;
	len = page_up(regs->si);
	if (nr != ML_NR_MADVISE && !(nr == ML_NR_MMAP && !(regs->r10 & ML_MAP_FIXED)))
		__sync_fetch_and_add(&rp->gen, 1); /* mappings went or moved: what threads remember may be stale */
	/* At most two ranges: what goes or moves, and (mremap shrinking) what goes. */
	if (nr == ML_NR_MUNMAP) {
		lo = a;
		hi = a + len;
	} else if (nr == ML_NR_MADVISE) {
		__u64 adv = regs->dx;

		if (adv == ML_MADV_DONTNEED || adv == ML_MADV_FREE || adv == ML_MADV_REMOVE ||
		    adv == ML_MADV_DONTNEED_LOCKED) {
			lo = a;
			hi = a + len;
		}
	} else if (nr == ML_NR_MMAP) {
		/* MAP_FIXED replaces whatever was mapped there. */
		if (regs->r10 & ML_MAP_FIXED) {
			lo = (__u64)ret;
			hi = (__u64)ret + len;
		}
	} else if (nr == ML_NR_BRK) {
		__u64 old = READ_ONCE(rp->brk);

		if (old && (__u64)ret < old) {
			lo = page_up(ret);
			hi = page_up(old);
		}
		WRITE_ONCE(rp->brk, (__u64)ret);
	} else {
		nlen = page_up(regs->dx);
		if ((__u64)ret != a) {
			lo = a;
			hi = a + (nlen < len ? nlen : len);
			to = (__u64)ret;
		}
		if (nlen < len) {
			lo2 = a + nlen;
			hi2 = a + len;
		}
	}
	ml_rss_range(tgid, lo, hi, to);
	ml_rss_range(tgid, lo2, hi2, 0);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(rss_exit, struct pt_regs *regs, long ret)
{
	long nr = regs->orig_ax;
	struct ml_rss_proc *rp;
	__u32 tgid;
	__u64 t0;

	if (nr != ML_NR_MUNMAP && nr != ML_NR_MADVISE && nr != ML_NR_BRK && nr != ML_NR_MREMAP && nr != ML_NR_MMAP)
		return 0;
	if (ret < 0 && ret > -4096)
		return 0;
	tgid = bpf_get_current_pid_tgid() >> 32;
	rp = bpf_map_lookup_elem(&rss_procs, &tgid);
	if (!rp)
		return 0;
	t0 = bpf_ktime_get_ns();
	rss_exit_of(regs, nr, ret, tgid, rp);
	tp_cost(true, t0);
	return 0;
}
