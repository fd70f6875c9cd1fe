// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of memleak-ai, process events: --follow's forks and execs (the proc_events ring), heap-growth
 * mode's system calls (--max-overhead), and -c's stops at the dynamic loader.
 */
#include "table.bpf.h"

/* --follow: the processes traced, by tgid (user space adds the first ones; forks of traced ones add theirs). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} traced SEC(".maps");

/* Processes whose C heap is followed through its system calls (heap-growth mode), by tgid. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ml_heap_proc);
} heap_procs SEC(".maps");

/*
 * -c only: the dynamic loader calls _dl_debug_state() before and after it maps a program's libraries, at
 * start and at every dlopen. Stopping the program there lets memleak-ai probe those libraries before any of
 * their code runs. ldso_stops counts the stops asked for, so user space tells its own from anyone else's.
 */
__u64 ldso_stops = 0;

#define ML_SIGSTOP 19

SEC("uprobe")
int ldso_stop(struct pt_regs *ctx)
{
	stat_inc(ML_STAT_LOADER_HITS);
	__sync_fetch_and_add(&ldso_stops, 1);
	bpf_send_signal(ML_SIGSTOP);
	return 0;
}

static __always_inline void proc_event(__u32 type, __u32 tgid, __u32 parent)
{
	struct ml_proc_event *e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);

	if (!e) {
		stat_inc(ML_STAT_DROP_PROC_EVENT);
		return;
	}
	e->type = type;
	e->tgid = tgid;
	e->parent = parent;
	e->pad = 0;
	e->ts_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
}

/*
 * Every traced process but a -c target (which stops there instead): the same _dl_debug_state() report of
 * the dynamic loader tells user space that a library came or went, so it reads the process's mappings
 * then, not every second.
 */
SEC("uprobe")
int ldso_notify(struct pt_regs *ctx)
{
	stat_inc(ML_STAT_LOADER_HITS);
	proc_event(ML_PROC_DLOPEN, bpf_get_current_pid_tgid() >> 32, 0);
	return 0;
}

/*
 * An interpreter begins its teardown, which frees what a live job would keep: user space takes the run's
 * findings now, while the process and its code objects can still be read. The -c target (py_exit_stop_tgid)
 * also stops until that is done (py_exit_stops counts the stops asked for), as it does at its loader.
 */
__u32 py_exit_stop_tgid = 0;
__u64 py_exit_stops = 0;

SEC("uprobe")
int py_exit(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (py_exit_stop_tgid && tgid == py_exit_stop_tgid) {
		__sync_fetch_and_add(&py_exit_stops, 1);
		bpf_send_signal(ML_SIGSTOP);
	}
	proc_event(ML_PROC_PY_EXIT, tgid, 0);
	return 0;
}

/*
 * --follow: a traced process that forks a new process (not a thread) makes it traced too, and user space
 * attaches to it at once; an exec replaces a traced process's image, whose libraries must be probed anew.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, one = 1;
	struct ml_rss_proc *rp;
	__u64 t0;

	if (child->pid != child->tgid || !bpf_map_lookup_elem(&traced, &ptgid))
		return 0;
	t0 = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&traced, &ctgid, &one, BPF_ANY)) {
		stat_inc(ML_STAT_DROP_PROC_EVENT);
		tp_cost(false, t0);
		return 0;
	}
	/* The rss layer from the child's first fault on: a forked worker's copies begin at once. */
	rp = bpf_map_lookup_elem(&rss_procs, &ptgid);
	if (rp) {
		struct ml_rss_proc crp = *rp;

		bpf_map_update_elem(&rss_procs, &ctgid, &crp, BPF_ANY);
	}
	proc_event(ML_PROC_FORK, ctgid, ptgid);
	tp_cost(false, t0);
	return 0;
}

/*
 * The OOM killer chose a traced process: tell user space before the kill lands, with the victim's last RSS
 * (its /proc entry is gone by the time user space could read it). Never tracefs: tp_btf.
 */
#define ML_PAGE_SIZE 4096

/* A per-CPU counter's approximate total can dip below zero: as the kernel reads it, never negative. */
static __always_inline __u64 rss_bytes(__s64 pages)
{
	return pages > 0 ? (__u64)pages * ML_PAGE_SIZE : 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(oom_victim, struct task_struct *task, uid_t uid)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	struct ml_oom_event *e;
	__u64 t0;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	t0 = bpf_ktime_get_ns();
	e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);
	if (!e) {
		stat_inc(ML_STAT_DROP_PROC_EVENT);
		tp_cost(false, t0);
		return 0;
	}
	e->hdr.type = ML_PROC_OOM;
	e->hdr.tgid = tgid;
	e->hdr.parent = 0;
	e->hdr.pad = 0;
	e->hdr.ts_ns = bpf_ktime_get_ns();
	e->anon_bytes = mm ? rss_bytes(BPF_CORE_READ(mm, rss_stat[MM_ANONPAGES].count)) : 0;
	e->file_bytes = mm ? rss_bytes(BPF_CORE_READ(mm, rss_stat[MM_FILEPAGES].count)) : 0;
	e->shmem_bytes = mm ? rss_bytes(BPF_CORE_READ(mm, rss_stat[MM_SHMEMPAGES].count)) : 0;
	bpf_ringbuf_submit(e, 0);
	tp_cost(false, t0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(follow_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct ml_heap_proc *hp;
	struct ml_rss_proc *rp;
	__u64 t0;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	t0 = bpf_ktime_get_ns();
	/* The task lives on in the new image: calls in flight in the old one never return. */
	bpf_task_storage_delete(&threads, p);
	/* Nor is the old image's program break the new one's: kept, the new image's first brk read as growth
	 * from the old break to it (449 GB at ld.so's start after a pyenv shim's exec). */
	rp = bpf_map_lookup_elem(&rss_procs, &tgid);
	if (rp)
		WRITE_ONCE(rp->brk, 0);
	hp = bpf_map_lookup_elem(&heap_procs, &tgid);
	if (hp)
		WRITE_ONCE(hp->max_brk, 0);
	proc_event(ML_PROC_EXEC, tgid, 0);
	tp_cost(false, t0);
	return 0;
}

#define ML_NR_MMAP 9
#define ML_NR_MPROTECT 10
#define ML_NR_MUNMAP 11
#define ML_NR_BRK 12
#define ML_NR_MREMAP 25
#define ML_MAP_ANONYMOUS 0x20

/* Heap-growth mode: a traced process's brk, mmap, munmap or mremap returned. */
static __always_inline void heap_exit_of(struct pt_regs *regs, long nr, long ret, __u32 tgid, struct ml_heap_proc *hp)
{
	struct ml_counters *c;
	struct ml_thread *th;
	struct ml_capture cap;
	__u64 addr = 0, size = 0;

	/* Memory taken inside a traced allocator call (posix_memalign for a PyTorch tensor, pinned memory)
	 * belongs to that call's layer. */
	th = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (th) {
		__u64 now = bpf_ktime_get_ns();

		for (__u32 g = 0; g < ML_GROUPS; g++)
			if (in_flight(&th->calls[g], now, g))
				return;
	}
	c = counters();
	if (nr == ML_NR_BRK) {
		if (!hp->max_brk || (__u64)ret <= hp->max_brk) {
			if (!hp->max_brk)
				hp->max_brk = ret;
			return;
		}
		addr = hp->max_brk;
		size = (__u64)ret - hp->max_brk;
		hp->max_brk = ret;
	} else if (nr == ML_NR_MMAP) {
		if (!(regs->r10 & ML_MAP_ANONYMOUS) || !regs->dx /* PROT_NONE: a reservation */)
			return;
		addr = ret;
		size = regs->si;
	} else if (nr == ML_NR_MUNMAP) {
		if (ret == 0)
			release(c, ML_LAYER_LIBC, regs->di);
		return;
	} else {
		/* mremap: the old range goes (when it was ours), the new one comes. */
		if (forget(c, tgid, ML_LAYER_LIBC, regs->di, 0)) {
			cnt_inc(c, ML_STAT_FREE_CALLS);
			cnt_inc(c, layer_frees(ML_LAYER_LIBC));
		}
		addr = ret;
		size = regs->dx;
	}
	cap = (struct ml_capture){.ip = PT_REGS_IP(regs), .sp = PT_REGS_SP(regs), .bp = PT_REGS_FP(regs)};
	capture_stack_ip(th, &cap);
	remember(c, tgid, ML_LAYER_LIBC, addr, size, cap.caller, cap.stack_id,
		 nr == ML_NR_BRK ? ML_SPEC_BRK : ML_SPEC_HEAP, -1);
}

/*
 * Every system call exit passes here while the mode is on anywhere, so the test for the calls of interest comes
 * first, then the process filter.
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(heap_exit, struct pt_regs *regs, long ret)
{
	long nr = regs->orig_ax;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ml_heap_proc *hp;
	__u64 t0;

	if (nr != ML_NR_BRK && nr != ML_NR_MMAP && nr != ML_NR_MUNMAP && nr != ML_NR_MREMAP)
		return 0;
	hp = bpf_map_lookup_elem(&heap_procs, &tgid);
	if (!hp || (ret < 0 && ret > -4096))
		return 0;
	t0 = bpf_ktime_get_ns();
	heap_exit_of(regs, nr, ret, tgid, hp);
	tp_cost(false, t0);
	return 0;
}
