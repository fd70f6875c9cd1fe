// SPDX-License-Identifier: GPL-2.0
/* BPF side of memleak-ai: generic allocator probes driven by the allocator table, plus PyTorch's USDT probes. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "memleak.h"

#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))
#define barrier() asm volatile("" ::: "memory")

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
const volatile struct ml_spec specs[ML_MAX_SPECS] = {};
const volatile __u64 min_size = 0;
const volatile __u64 max_size = ~0ULL;
const volatile __u32 table_mask = 0; /* slots - 1; slots is a power of two */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* sized from --max-allocs */
	__type(key, __u32);
	__type(value, struct ml_slot);
} table SEC(".maps");

/*
 * Stacks live in user space (user/stackstore.c), keyed by their hash. A stack not handed over yet goes out
 * once through stack_events; stacks_sent remembers which were, as a bounded cache (--max-stacks): a stack
 * it evicted is simply sent again, so the number of distinct stacks a job can have is not limited here.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1); /* sized by --max-stacks */
	__type(key, __u64);
	__type(value, __u8);
} stacks_sent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, ML_STACK_RING_BYTES);
} stack_events SEC(".maps");

/* Where a stack is assembled before it is known whether the table already has it. */
/*
 * Python frames are read a page at a time: CPython pushes the frames of a thread onto its own stack of
 * memory chunks, each callee right above its caller, so one read of the memory below a frame brings the
 * callers in the same page too, and a read costs about as much whatever its size up to a page.
 */
#define ML_PY_WINDOW 4096

/* Stack hashes are built as the words are written (FNV-1a over the words): no second pass over them. */
#define ML_FNV_PRIME 0x100000001b3ULL
#define ML_PY_CHECKED 1 /* innermost frames whose code object's line table is read as the check */

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

struct ml_scratch {
	struct ml_uwreplay rp;
	struct ml_stack st;
	__u8 win[2 * ML_PY_WINDOW + 128]; /* the window [win_lo, win_lo + ML_PY_WINDOW); indexes mask with 8191 */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ml_scratch);
} scratch SEC(".maps");

/* Native unwinding tables (see memleak.h): rows and page index written by user space through mmap. */
const volatile __u8 unwind_tables = 0; /* 1: unwind with the tables where a process has them */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* sized from --unwind-mem */
	__type(key, __u32);
	__type(value, struct ml_urow);
} urows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* sized from --unwind-mem */
	__type(key, __u32);
	__type(value, __u32);
} uindex SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, ML_UW_PROCS);
	__type(key, __u32);
	__type(value, struct ml_umaps);
} umaps SEC(".maps");

/*
 * The rules of the pcs unwound lately, per CPU: a frame whose pc is here costs one probe instead of the
 * mapping and row searches. Direct-mapped by a hash of the pc; an entry is (pc | check << 48, rule | gen << 32)
 * where check hashes the pc with the second word, so an entry torn by a preempting program is a miss.
 */
#define ML_UWC_BITS 11 /* 32 KiB: the most a per-CPU value can be */
#define ML_UWC_MUL 0x9e3779b97f4a7c15ULL

struct ml_uwc {
	struct {
		__u64 key, val;
	} e[1 << ML_UWC_BITS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ml_uwc);
} uwcache SEC(".maps");

/*
 * Walks remembered, per CPU. A walk is a function of the caller's pc, the process's tables (gen) and the
 * stack words it read: return addresses compared as they are, saved frame pointers (and rbp at entry, where
 * a rule used it) compared as offsets from the stack pointer at entry. When all the words a remembered walk
 * read are the same again, its frames are the walk's result, taken at the cost of a compare a word.
 * Direct-mapped by the caller's pc and the stack pointer's low bits: within a thread, different chains into
 * one caller mostly arrive at different depths, and each keeps an entry. One more entry is the scratch of
 * walks that are not remembered.
 */
#define ML_UWM_CHECKS 256 /* words a remembered walk may have read */
#define ML_UWM_BITS 7
#define ML_UWM_SETS (1 << ML_UWM_BITS)
/* A check's off is the word's distance from the entry's stack pointer in words, << 4, | these flags. */
#define ML_UWM_REL 1   /* a saved rbp, compared as an offset from the entry's stack pointer */
#define ML_UWM_FRAME 2 /* a return address, appended to the stack: a frame ends here */
#define ML_UWM_LOST 4  /* ... whose rule lost rbp */
#define ML_UWM_FP 8    /* ... found by frame pointer */

struct ml_uwmemo {
	__u64 pc0, seq, h; /* pc0 0: empty, or being written */
	__u64 bp0;         /* rbp at entry - the stack pointer, compared where bp_used */
	__u32 gen, n;      /* n checks */
	__u32 nr, n_fp;    /* native frames, frames by frame pointer */
	__u8 truncated, bp_used;
	/* While the walk is done: rbp is still rbp at entry; nothing seen that forbids remembering it. Kept in
	 * map memory with the counters, where the verifier does not follow each value as it does on the stack. */
	__u8 bp_reg, keep, pad[4];
	__s32 off[ML_UWM_CHECKS]; /* see ML_UWM_REL */
	__u64 val[ML_UWM_CHECKS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ML_UWM_SETS + 1);
	__type(key, __u32);
	__type(value, struct ml_uwmemo);
} uwmemo SEC(".maps");

/* Traced processes running a CPython interpreter whose layout is known, by tgid. Written by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct ml_pyproc);
} pyprocs SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} proc_events SEC(".maps");

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

/*
 * In-flight allocator calls of one thread, one per nesting group. Task storage dies with the thread, so an
 * exiting thread leaves nothing behind.
 */
struct ml_call {
	__u64 sp;           /* stack pointer at entry of the outermost call of the group; 0 = none in flight */
	__u64 entry_ns;     /* when it began: a call in flight for longer lost its return (see ML_CALL_STALE_NS) */
	__u64 size;         /* bytes, or the multiplier of a size read at return */
	__u64 out_ptr;      /* address of the out-parameter */
	__u64 size_out_ptr; /* address of the size read at return */
	__u64 addr;         /* address given as an input argument */
	__u64 free_ptr;     /* pointer being released by a realloc */
	__u64 free_ts;      /* identity of that allocation when the call began */
	__u64 caller;
	__u64 stack_id;
	__u32 spec;
	__s32 device;
};

/* The caller of the innermost ML_KIND_WRAP function entered (c10::alloc_cpu), for the allocation it makes. */
struct ml_wrap {
	__u64 sp, caller, stack_id, entry_ns;
};

struct ml_thread {
	struct ml_call calls[ML_GROUPS];
	struct ml_wrap wrap;
	__u64 py_tstate;  /* this thread's PyThreadState, once found (checked again at every use) */
	__u64 py_miss_ns; /* when a search last found none: not searched again for ML_PY_RETRY_NS */
};

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

static __always_inline __u32 layer_slot(__u8 layer)
{
	return ML_STAT_LAYER_BASE + 2 * (layer & (ML_LAYER_MAX - 1));
}

/* The first six integer arguments and three stack words, copied once: the verifier refuses a computed offset into the context. */
struct ml_args {
	__u64 v[9];
};

static __always_inline void load_args(struct pt_regs *ctx, struct ml_args *a, bool stack)
{
	a->v[0] = PT_REGS_PARM1(ctx);
	a->v[1] = PT_REGS_PARM2(ctx);
	a->v[2] = PT_REGS_PARM3(ctx);
	a->v[3] = PT_REGS_PARM4(ctx);
	a->v[4] = PT_REGS_PARM5(ctx);
	a->v[5] = ctx->r9; /* libbpf 1.1 has no PT_REGS_PARM6 */
	a->v[6] = a->v[7] = a->v[8] = 0;
	/* Structs over 16 bytes are passed in memory: cudaMalloc3D's cudaExtent sits above the return address. */
	if (stack)
		bpf_probe_read_user(&a->v[6], 3 * sizeof(__u64), (void *)(PT_REGS_SP(ctx) + 8));
}

static __always_inline __u64 mul_sat(__u64 a, __u64 b)
{
	__u64 lim = ~0ULL;

	/* Opaque to the optimizer, which would otherwise turn the check into a 128-bit multiply BPF lacks. */
	asm volatile("" : "+r"(lim));
	if (b && a > lim / b)
		return ~0ULL;
	return a * b;
}

static __always_inline __u64 arg_n(const struct ml_args *a, __u32 n)
{
	__u32 i = n - 1;

	if (i > 8)
		return 0;
	return a->v[i];
}

static __always_inline __u64 read_u64(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)addr))
		return 0;
	return v;
}

/* A field at window offset off; the masks keep the verifier's bounds. */
static __always_inline __u64 win_u64(const struct ml_scratch *sc, __u64 off)
{
	return *(const __u64 *)&sc->win[off & (2 * ML_PY_WINDOW - 1)];
}

static __always_inline __u8 win_u8(const struct ml_scratch *sc, __u64 off)
{
	return sc->win[off & (2 * ML_PY_WINDOW - 1)];
}

/*
 * The loops below run under bpf_loop(): a callback is verified once, where an unrolled or bounded loop is
 * verified once per iteration and per path into it, which the three allocator programs cannot afford.
 */
struct py_thread_walk {
	const struct ml_pyproc *pp;
	__u64 self, ts;
	int found;
};

static long py_thread_step(__u32 i, void *arg)
{
	struct py_thread_walk *c = arg;

	if (!c->ts)
		return 1;
	if (read_u64(c->ts + c->pp->tstate_thread_id) == c->self) {
		c->found = 1;
		return 1;
	}
	c->ts = read_u64(c->ts + c->pp->tstate_next);
	return 0;
}

/*
 * The calling thread's PyThreadState: the one whose thread_id (pthread_self(), the fs base on x86_64) is
 * this thread's. Remembered per thread and checked again at every use; a thread without one is searched
 * for again only after ML_PY_RETRY_NS, so threads that never run Python cost one timestamp per event.
 */
static __always_inline __u64 py_tstate(const struct ml_pyproc *pp, struct ml_thread *th, __u64 self)
{
	struct py_thread_walk c = { .pp = pp, .self = self };
	__u64 interp, now;

	if (th && th->py_tstate) {
		if (read_u64(th->py_tstate + pp->tstate_thread_id) == self)
			return th->py_tstate;
		th->py_tstate = 0;
	}
	now = bpf_ktime_get_ns();
	if (th && th->py_miss_ns && now - th->py_miss_ns < ML_PY_RETRY_NS)
		return 0;
	interp = read_u64(pp->runtime + pp->runtime_interp_head);
	for (__u32 n = 0; n < ML_PY_MAX_INTERPS && interp; n++) {
		c.ts = read_u64(interp + pp->interp_threads_head);
		bpf_loop(ML_PY_MAX_THREADS, py_thread_step, &c, 0);
		if (c.found) {
			if (th) {
				th->py_tstate = c.ts;
				th->py_miss_ns = 0;
			}
			return c.ts;
		}
		interp = read_u64(interp + pp->interp_next);
	}
	if (th)
		th->py_miss_ns = now;
	return 0;
}

struct py_frame_walk {
	struct ml_scratch *sc;
	const struct ml_pyproc *pp;
	__u64 frame, prev_w, h;
	__u64 win_lo, win_hi; /* the target's memory now in sc->win; win_hi == 0: none */
	__u32 w, nr_py, size;
};

/*
 * Bring the frame at address frame into the window; its offset there, or -1 when it cannot be read. The
 * window starts at the frame's page: that page is mapped (the frame is in it), while what lies below it
 * may not be (the start of a chunk), and a read that faults costs more than many reads that do not.
 */
static __always_inline long frame_in_window(struct py_frame_walk *c, __u64 frame)
{
	struct ml_scratch *sc = c->sc;
	__u64 lo = frame & ~(__u64)(ML_PY_WINDOW - 1), len = frame + c->size - lo;

	if (frame >= c->win_lo && frame + c->size <= c->win_hi)
		return frame - c->win_lo;
	if (len > ML_PY_WINDOW + 128 || bpf_probe_read_user(sc->win, len & (2 * ML_PY_WINDOW - 1), (void *)lo)) {
		c->win_hi = 0;
		return -1;
	}
	c->win_lo = lo;
	c->win_hi = lo + len;
	return frame - lo;
}

/*
 * One _PyInterpreterFrame. Frames owned by the C stack (the eval loop's entry marker, 3.12+) are not
 * frames of the program: they mark the frame before them as the outermost of its eval-loop call, as
 * is_entry does in 3.11.
 */
static __always_inline long py_frame_one(struct py_frame_walk *c)
{
	struct ml_scratch *sc = c->sc;
	const struct ml_pyproc *pp = c->pp;
	__u64 code, instr, idx = ML_PY_INSTR_UNKNOWN, start, frame = c->frame;
	long off;
	__u8 owner;
	int entry = 0;

	if (!frame)
		return 1;
	off = frame < ML_USER_TOP ? frame_in_window(c, frame) : -1;
	if (off < 0 || off >= ML_PY_WINDOW + 128) {
		sc->st.flags |= ML_STACK_PY_BROKEN;
		return 1;
	}
	owner = win_u8(sc, off + (pp->frame_owner & 127));
	c->frame = win_u64(sc, off + (pp->frame_previous & 127));
	if (pp->owner_cstack != 0xff && owner == pp->owner_cstack) {
		if (c->nr_py && c->w >= 2) {
			sc->st.ips[(c->w - 2) & 511] = c->prev_w | ML_PY_ENTRY;
			c->h = (c->h ^ ML_PY_ENTRY ^ c->nr_py) * ML_FNV_PRIME;
		}
		return 0;
	}
	if (c->nr_py >= ML_MAX_PYFRAMES || c->w + 1 >= ML_STACK_WORDS) {
		sc->st.flags |= ML_STACK_PY_TRUNCATED;
		return 1;
	}
	code = win_u64(sc, off + (pp->frame_code & 127));
	instr = win_u64(sc, off + (pp->frame_instr & 127));
	start = code + pp->code_adaptive;
	if (code && instr >= start) {
		idx = (instr - start) / 2;
		if (pp->instr_is_next && idx)
			idx--;
		if (idx >= ML_PY_INSTR_UNKNOWN)
			idx = ML_PY_INSTR_UNKNOWN;
	}
	if (pp->frame_is_entry != ML_PY_NONE)
		entry = win_u8(sc, off + (pp->frame_is_entry & 127)) & 1;
	c->prev_w = ml_py_word0(code, idx, entry);
	sc->st.ips[c->w & 511] = c->prev_w;
	/*
	 * The check costs a read of its own: taken for the innermost frames, where short-lived code (closures,
	 * code compiled at run time) runs; the outer ones are long-lived, and user space checks their type.
	 */
	sc->st.ips[(c->w + 1) & 511] = code && c->nr_py < ML_PY_CHECKED ? read_u64(code + pp->code_check) : 0;
	c->h = (c->h ^ c->prev_w) * ML_FNV_PRIME;
	c->h = (c->h ^ sc->st.ips[(c->w + 1) & 511]) * ML_FNV_PRIME;
	c->w += 2;
	c->nr_py++;
	return 0;
}

/* Two frames a callback: the callback's own cost is a good part of a frame's. */
static long py_frame_step(__u32 i, void *arg)
{
	struct py_frame_walk *c = arg;

	return py_frame_one(c) || py_frame_one(c);
}

/* Append the Python frames of the calling thread to the stack being built, innermost first; *h goes on. */
static __always_inline void py_frames(struct ml_scratch *sc, const struct ml_pyproc *pp, struct ml_thread *th,
				      __u64 *h)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct py_frame_walk c = { .sc = sc, .pp = pp, .w = sc->st.nr, .size = pp->frame_size, .h = *h };
	__u64 self = task->thread.fsbase, ts = th ? th->py_tstate : 0, fptr = 0;
	__u16 fptr_off = pp->tstate_current_frame != ML_PY_NONE ? pp->tstate_current_frame : pp->tstate_cframe;

	/* The usual case, one read: this thread's known thread state, still its own, and its frame pointer. */
	if (ts && pp->tstate_block_len &&
	    !bpf_probe_read_user(sc->win, pp->tstate_block_len & 127, (void *)(ts + pp->tstate_block_off)) &&
	    win_u64(sc, (pp->tstate_thread_id - pp->tstate_block_off) & 127) == self) {
		fptr = win_u64(sc, (fptr_off - pp->tstate_block_off) & 127);
	} else {
		ts = py_tstate(pp, th, self);
		if (!ts) {
			stat_inc(ML_STAT_PY_NO_THREAD);
			return;
		}
		fptr = read_u64(ts + fptr_off);
	}
	c.frame = pp->tstate_current_frame != ML_PY_NONE ? fptr : read_u64(fptr + pp->cframe_current_frame);
	if (c.size > ML_PY_FRAME_MAX)
		c.size = ML_PY_FRAME_MAX;
	bpf_loop(ML_MAX_PYFRAMES / 2 + 8, py_frame_step, &c, 0);
	*h = c.h;
	if (c.frame && !(sc->st.flags & ML_STACK_PY_BROKEN))
		sc->st.flags |= ML_STACK_PY_TRUNCATED;
	sc->st.nr_py = c.nr_py;
	stat_inc(c.nr_py ? ML_STAT_PY_FRAMES : ML_STAT_PY_NO_THREAD);
	if (sc->st.flags & ML_STACK_PY_TRUNCATED)
		stat_inc(ML_STAT_PY_TRUNCATED);
	if (sc->st.flags & ML_STACK_PY_BROKEN)
		stat_inc(ML_STAT_PY_BROKEN);
}

struct fp_walk {
	struct ml_stack *st;
	__u64 fp, h;
	__u32 nr;
};

/* One frame of the frame-pointer chain. */
static long fp_step(__u32 i, void *arg)
{
	struct fp_walk *c = arg;
	struct { __u64 next, ret; } fr;

	if (bpf_probe_read_user(&fr, sizeof(fr), (void *)c->fp) || fr.ret < 0x1000 || fr.ret >= ML_USER_TOP)
		return 1;
	c->st->ips[i & 127] = fr.ret;
	c->h = (c->h ^ fr.ret) * ML_FNV_PRIME;
	c->nr = i + 1;
	if (fr.next <= c->fp || fr.next - c->fp > ML_FP_WINDOW)
		return 1;
	c->fp = fr.next;
	return 0;
}

/*
 * The table unwinder. Stack words are read a chunk at a time into the scratch window (a chunk-aligned read
 * stays inside one page, so it does not fault where the word itself is readable); the window is free here,
 * the Python walk runs after.
 */
#define ML_UW_CHUNK 1024

struct uw_walk {
	struct ml_scratch *sc;
	const struct ml_umaps *um;
	struct ml_uwc *cache;
	struct ml_uwmemo *memo; /* the walk's checks are written here (or read, replaying) */
	__u64 pc, sp, bp, h, win_lo, first, sp0;
	__u32 gen;
	__u8 bp_ok, exact, bad, want_first;
};

/*
 * The word at window offset d (below ML_UW_CHUNK, word-aligned). Word-aligned on purpose: through the byte
 * array's type clang would load the word a byte at a time.
 */
static __always_inline __u64 uw_win(const struct uw_walk *c, __u64 d)
{
	return ((const __u64 *)__builtin_assume_aligned(c->sc->win, 8))[(d & (ML_UW_CHUNK - 8)) / 8];
}

static __always_inline int uw_word(struct uw_walk *c, __u64 addr, __u64 *out)
{
	if (addr & 7 || addr >= ML_USER_TOP)
		return -1;
	if (addr - c->win_lo >= ML_UW_CHUNK) {
		__u64 lo = addr & ~(__u64)(ML_UW_CHUNK - 1);

		if (bpf_probe_read_user(c->sc->win, ML_UW_CHUNK, (void *)lo)) {
			c->win_lo = ~0ULL;
			return -1;
		}
		c->win_lo = lo;
	}
	*out = uw_win(c, addr - c->win_lo);
	return 0;
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
	ip = bpf_map_lookup_elem(&uindex, &key);
	if (!ip)
		return NULL;
	base = *ip;
	key++;
	ip = bpf_map_lookup_elem(&uindex, &key);
	if (!ip || *ip < base || *ip >= m->n_rows)
		return NULL;
	/* The last row with pc <= off lies in [base, *ip]: a slot is at most 4 KiB, so 13 halvings do. */
	len = *ip - base + 1;
	for (int k = 0; k < 13; k++) { /* always 13: an exit on len == 1 would double the paths per halving */
		__u32 half = len / 2;

		key = m->row_base + base + half;
		row = bpf_map_lookup_elem(&urows, &key);
		if (!row)
			return NULL;
		base += half & (__u32)ML_LE_MASK(row->pc, off);
		len -= half;
	}
	key = m->row_base + base;
	row = bpf_map_lookup_elem(&urows, &key);
	if (!row || row->pc > (__u32)off)
		return NULL;
	return row;
}

/* A row's rule as one word: cfa_off in bits 0-15, rbp_off8 in 16-23, the kind in 24-31. */
#define ML_UW_RULE(cfa_off, rbp_off8, kind) \
	((__u32)(__u16)(cfa_off) | (__u32)(__u8)(rbp_off8) << 16 | (__u32)(kind) << 24)

/*
 * The rule for pc in the process's tables. A global function: the verifier checks it once, on its own, not
 * once per path of the frame step that calls it.
 */
__noinline __u32 uw_lookup(const struct ml_umaps *um, __u64 pc)
{
	const struct ml_urow *row = NULL;
	const struct ml_umap *m;

	if (!um)
		return ML_UW_RULE(0, 0, ML_UW_NONE_FDE);
	m = uw_map(um, pc);
	if (m)
		row = uw_row(m, pc);
	return row ? ML_UW_RULE(row->cfa_off, row->rbp_off8, row->kind) : ML_UW_RULE(0, 0, ML_UW_NONE_FDE);
}

/* The rule for looking up pc (a return address less one, or an exact pc): cached, else searched and cached. */
static __always_inline __u32 uw_rule(struct uw_walk *c, __u64 pc)
{
	__u64 hh = pc * ML_UWC_MUL, val;
	typeof(c->cache->e[0]) *e = &c->cache->e[hh >> (64 - ML_UWC_BITS)];
	__u32 rule;

	val = e->val;
	if (e->key == (pc | ((hh ^ val) * ML_UWC_MUL) >> 48 << 48) && (__u32)(val >> 32) == c->gen)
		return (__u32)val;
	rule = uw_lookup(c->um, pc);
	val = (__u64)c->gen << 32 | rule;
	e->val = val;
	e->key = pc | ((hh ^ val) * ML_UWC_MUL) >> 48 << 48;
	return rule;
}

/*
 * Note a word the walk read (see uwmemo): written whether or not the walk will be remembered, no branch.
 * The counters live in map memory (memo->n, st.nr), not in the walk state on the stack: the verifier then
 * sees them as unknown numbers and checks a loop step once, not once per value.
 */
static __always_inline void uw_rec(struct uw_walk *c, __u64 addr, __u32 flags, __u64 val)
{
	struct ml_uwmemo *m = c->memo;
	__u32 n = m->n;

	m->off[n & (ML_UWM_CHECKS - 1)] = (__s32)((__s64)(addr - c->sp0) >> 3 << 4) | flags;
	m->val[n & (ML_UWM_CHECKS - 1)] = val;
	m->n = n + 1;
}

/* One native frame: from (pc, sp, bp) to the caller's. 1 ends the walk. */
static __always_inline long uw_one(struct uw_walk *c)
{
	__u32 rule = uw_rule(c, c->exact ? c->pc : c->pc - 1);
	__u8 kind = rule >> 24;
	__u64 cfa, ra, ra_at, bp = c->bp, word;
	struct ml_stack *st = &c->sc->st;
	__s64 off;

	switch (ML_UW_KIND_CFA(kind)) {
	case ML_UW_RSP:
	case ML_UW_RBP:
		off = ML_UW_KIND_SCALED(kind) ? (__s64)(__s16)rule * 8 : (__s16)rule;
		if (ML_UW_KIND_CFA(kind) == ML_UW_RBP) {
			if (!c->bp_ok)
				goto bad;
			c->memo->bp_used |= c->memo->bp_reg;
		}
		cfa = (ML_UW_KIND_CFA(kind) == ML_UW_RSP ? c->sp : c->bp) + off;
		ra_at = cfa - 8;
		if (cfa <= c->sp || uw_word(c, ra_at, &ra))
			goto bad;
		if (ML_UW_KIND_RBP(kind) == ML_UW_RBP_AT) {
			__u64 at = cfa + (__s64)(__s8)(rule >> 16) * 8;

			if (uw_word(c, at, &bp))
				goto bad;
			uw_rec(c, at, ML_UWM_REL, bp - c->sp0);
			c->memo->bp_reg = 0;
			c->bp_ok = 1;
		} else if (ML_UW_KIND_RBP(kind) == ML_UW_RBP_LOST) {
			c->bp_ok = 0;
		}
		c->exact = 0;
		break;
	case ML_UW_SIGNAL:
		c->memo->keep = 0; /* a walk through a signal frame is not remembered */
		if (uw_word(c, c->sp + ML_UC_RIP, &ra) || uw_word(c, c->sp + ML_UC_RSP, &cfa) ||
		    uw_word(c, c->sp + ML_UC_RBP, &bp) || cfa <= c->sp)
			goto bad;
		/* The handler "returned" to the trampoline's first byte: no call precedes it, name it as is. */
		if (st->nr && st->nr <= ML_MAX_FRAMES)
			st->ips[(st->nr - 1) & 127] |= ML_IP_EXACT;
		c->bp_ok = 1;
		c->memo->bp_reg = 0;
		c->exact = 1;
		ra_at = 0;
		break;
	case ML_UW_NONE_FDE:
		/* No table covers the pc: the frame-pointer chain, if rbp looks like one. */
		if (!c->bp_ok)
			goto bad;
		c->memo->bp_used |= c->memo->bp_reg;
		ra_at = c->bp + 8;
		if (c->bp < c->sp || c->bp - c->sp > ML_FP_WINDOW || uw_word(c, ra_at, &ra) || uw_word(c, c->bp, &bp))
			goto bad;
		uw_rec(c, c->bp, ML_UWM_REL, bp - c->sp0);
		c->memo->bp_reg = 0;
		cfa = c->bp + 16;
		c->exact = 0;
		c->memo->n_fp++;
		break;
	default: /* the outermost frame (_start, a thread's start) or rules we do not follow: the end */
		return 1;
	}
	uw_rec(c, ra_at, 0, ra); /* a frame's return address or the word that ended the walk: checked either way */
	if (!ra)
		return 1;
	if (ra < 0x1000 || ra >= ML_USER_TOP)
		goto bad;
	word = c->exact ? ra | ML_IP_EXACT : ra;
	c->pc = ra;
	c->sp = cfa;
	c->bp = bp;
	if (c->want_first) {
		c->want_first = 0;
		c->first = ra;
		return 0;
	}
	if (st->nr >= ML_MAX_FRAMES) {
		c->memo->truncated = 1;
		return 1;
	}
	/* the frame's check: a replay that stops after it resumes from here (rbp rule lost, or frame pointers) */
	c->memo->off[(c->memo->n - 1) & (ML_UWM_CHECKS - 1)] |=
		ML_UWM_FRAME | (ML_UW_KIND_RBP(kind) & ML_UW_RBP_LOST) << 1 |
		(((__u64)(ML_UW_KIND_CFA(kind) ^ ML_UW_NONE_FDE) - 1) >> 63) << 3;
	st->ips[st->nr & 127] = word;
	c->h = (c->h ^ word) * ML_FNV_PRIME;
	st->nr++;
	return 0;
bad:
	/* Not remembered: the walk may have stopped at memory that can be read another time. */
	c->memo->keep = 0;
	c->bad = 1;
	return 1;
}

/*
 * Check idx of a remembered walk against the stack now; 1 ends the replay (c->bad: a word differs). A replay
 * that stops resumes from its last frame checked.
 */
static __always_inline long uwm_one(struct uw_walk *c, __u32 idx)
{
	const struct ml_uwmemo *m = c->memo;
	struct ml_uwreplay *rp = &c->sc->rp;
	struct ml_stack *st = &c->sc->st;
	__s64 at;
	__s32 off;
	__u64 w, d;

	if (idx >= m->n || idx >= ML_UWM_CHECKS)
		return 1;
	off = m->off[idx & (ML_UWM_CHECKS - 1)];
	at = (__s64)(off >> 4) * 8;
	d = c->sp0 + at - c->win_lo;
	/* In the window, the word is there (the entry's stack pointer and so every check is word-aligned). */
	if (d < ML_UW_CHUNK)
		w = uw_win(c, d);
	else if (uw_word(c, c->sp0 + at, &w))
		goto differs;
	if (off & ML_UWM_REL)
		w -= c->sp0;
	if (w != m->val[idx & (ML_UWM_CHECKS - 1)])
		goto differs;
	if (off & ML_UWM_REL) {
		rp->bp_prev = rp->bp_at;
		rp->bp_at = idx + 1;
	}
	if (off & ML_UWM_FRAME) {
		if (st->nr >= ML_MAX_FRAMES)
			goto differs;
		st->ips[st->nr & 127] = w;
		c->h = (c->h ^ w) * ML_FNV_PRIME;
		st->nr++;
		if (off & ML_UWM_LOST)
			rp->lost_at = idx + 1;
		if (off & ML_UWM_FP)
			rp->n_fp++;
		rp->resume = idx + 1;
	}
	return 0;
differs:
	c->bad = 1;
	return 1;
}

static long uwm_step(__u32 i, void *arg)
{
	struct uw_walk *c = arg;

	return uwm_one(c, i * 4) || uwm_one(c, i * 4 + 1) || uwm_one(c, i * 4 + 2) || uwm_one(c, i * 4 + 3);
}

/*
 * Two frames a call: the call and the walk state's reloads are paid once for both. Four pass the verifier's
 * million instructions, and so do two with the first-frame handling of a walk from a system call, which
 * takes a frame a call (uw_step1).
 */
static long uw_step2(__u32 i, void *arg)
{
	struct uw_walk *c = arg;

	return uw_one(c) || uw_one(c);
}

static long uw_step1(__u32 i, void *arg)
{
	return uw_one(arg);
}

/*
 * The native walk from uw's pc and sp: replayed from the walk remembered for the same caller where every word
 * it read is the same, else done with the tables (and remembered, where nothing in it depended on chance).
 * A walk from a system call (from_ip) is not remembered. 0 when the per-CPU memo cannot be had.
 */
static __always_inline int uw_unwind(struct uw_walk *c, bool from_ip)
{
	__u32 set = ML_UWM_SETS; /* the scratch entry, unless the walk can be remembered */
	struct ml_uwmemo *m;
	struct ml_counters *cn;
	__u64 h0 = c->h, pc0 = c->pc, bp0 = c->bp, seq;
	struct ml_uwreplay *rp = &c->sc->rp;

	if (!from_ip && !(c->sp0 & 7))
		set = ((c->pc ^ (__u64)c->gen << 47 ^ (c->sp0 & 0xffff8) << 30) * ML_UWC_MUL) >> (64 - ML_UWM_BITS);
	m = bpf_map_lookup_elem(&uwmemo, &set);
	if (!m)
		return 0;
	c->memo = m;
	cn = counters();
	rp->pc = pc0;
	rp->sp = c->sp;
	rp->bp = bp0;
	rp->bp_ok = 1;
	rp->bp_reg = 1;
	rp->h = h0;
	rp->n_fp = 0;
	rp->resume = 0;
	rp->bp_at = rp->bp_prev = rp->lost_at = 0;
	c->h = rp->h; /* as a map value: the same unknown to the verifier whichever way the walk below is reached */
	if (set < ML_UWM_SETS && READ_ONCE(m->pc0) == pc0 && m->gen == c->gen &&
	    (!m->bp_used || c->bp - c->sp0 == m->bp0)) {
		seq = READ_ONCE(m->seq);
		barrier();
		bpf_loop(ML_UWM_CHECKS / 4 + 1, uwm_step, c, 0);
		barrier();
		if (!c->bad && c->sc->st.nr == m->nr && c->h == m->h && READ_ONCE(m->seq) == seq &&
		    READ_ONCE(m->pc0) == pc0) {
			/* h over the frames replayed is the one remembered: also no entry torn by a preempting walk */
			cnt_inc(cn, ML_STAT_UW_MEMO);
			goto out;
		}
		if (rp->resume) {
			/*
			 * The last frame checked: its return address, the stack above it, and rbp as the checks
			 * up to it left it (a frame reads at most one saved rbp, before its return address).
			 */
			__u32 k = (rp->resume - 1) & (ML_UWM_CHECKS - 1);
			__u32 b = rp->bp_at <= rp->resume ? rp->bp_at : rp->bp_prev;

			rp->pc = m->val[k];
			rp->sp = c->sp0 + (__s64)(m->off[k] >> 4) * 8 + 8;
			if (b) {
				rp->bp = c->sp0 + m->val[(b - 1) & (ML_UWM_CHECKS - 1)];
				rp->bp_reg = 0;
			}
			rp->bp_ok = rp->lost_at <= b;
		}
	}
	/*
	 * Written while it is empty; made valid only if no other walk wrote it meanwhile. A failed replay's
	 * confirmed frames stay (the walk goes on from the last); with none, the walk starts over.
	 */
	seq = (__u64)bpf_get_prandom_u32() << 32 | (__u32)bpf_get_current_pid_tgid();
	WRITE_ONCE(m->pc0, 0);
	WRITE_ONCE(m->seq, seq);
	barrier();
	if (!rp->resume)
		m->bp_used = 0; /* (a replay that confirmed no frame left the stack and its hash as they were) */
	c->bad = 0;
	c->pc = rp->pc;
	c->sp = rp->sp;
	c->bp = rp->bp;
	c->bp_ok = rp->bp_ok;
	m->n = rp->resume;
	m->n_fp = rp->n_fp;
	m->bp_reg = rp->bp_reg;
	m->truncated = 0;
	m->keep = 1;
	if (from_ip)
		bpf_loop(ML_MAX_FRAMES + 2, uw_step1, c, 0);
	else
		bpf_loop((ML_MAX_FRAMES + 3) / 2, uw_step2, c, 0);
	if (set < ML_UWM_SETS && m->keep && m->n <= ML_UWM_CHECKS) {
		m->nr = c->sc->st.nr;
		m->h = c->h;
		m->gen = c->gen;
		m->bp0 = bp0 - c->sp0;
		barrier();
		WRITE_ONCE(m->pc0, READ_ONCE(m->seq) == seq ? pc0 : 0);
	}
out:
	if (c->bad) {
		cnt_inc(cn, ML_STAT_UW_STOP);
		c->sc->st.flags |= ML_STACK_UW_STOPPED;
	}
	if (m->truncated)
		cnt_inc(cn, ML_STAT_UW_TRUNCATED);
	if (cn && m->n_fp)
		cn->v[ML_STAT_UW_FP] += m->n_fp;
	cnt_inc(cn, ML_STAT_UW_STACKS);
	return 1;
}

/*
 * Stack capture. At function entry the caller's return address is at [rsp] whatever the code keeps; the
 * frames above it come from the unwinding tables where the process has them (falling back to frame
 * pointers where no table covers a pc), else from the frame-pointer chain, and in a Python process the
 * interpreter's own frame records supply the Python frames. At a system call (from_ip) the walk starts at
 * the interrupted pc and its first frame is the caller. The frame-pointer walk is our own rather than
 * bpf_get_stackid(): that one reads on until a read faults, and a fault costs more than everything else
 * done per event. It stops at a NULL or non-increasing frame pointer, or one that leaves the stack window,
 * so a well-formed chain ends without a fault, and rbp holding anything but a frame pointer (code built
 * without them) is mostly rejected before the first read.
 */
static __always_inline void capture_stack(struct pt_regs *ctx, struct ml_thread *th, __u64 *caller,
					  __u64 *stack_id, bool from_ip)
{
	__u64 fp = PT_REGS_FP(ctx), sp = PT_REGS_SP(ctx), ret = 0;
	__u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
	const struct ml_umaps *um = unwind_tables ? bpf_map_lookup_elem(&umaps, &tgid) : NULL;
	const struct ml_pyproc *pp;
	struct ml_scratch *sc;
	struct ml_stack *st;
	__u64 h = 0xcbf29ce484222325ULL;

	*stack_id = ML_STACK_NONE;
	*caller = 0;
	if (!um) {
		bpf_probe_read_user(&ret, sizeof(ret), (void *)sp);
		*caller = ret;
	}
	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return;
	st = &sc->st;
	st->flags = 0;
	st->nr_py = 0;
	st->nr = 0;
	if (um) {
		struct uw_walk uw = { .sc = sc, .um = um, .h = h, .win_lo = ~0ULL, .bp = fp, .bp_ok = 1, .gen = um->gen };

		uw.cache = bpf_map_lookup_elem(&uwcache, &zero);
		if (!uw.cache)
			return;
		if (from_ip) {
			uw.pc = PT_REGS_IP(ctx);
			uw.sp = sp;
			uw.exact = 1;
			uw.want_first = 1;
		} else {
			/* The return address comes with the first chunk of the stack: one read of user memory, not two. */
			if (uw_word(&uw, sp, &ret))
				bpf_probe_read_user(&ret, sizeof(ret), (void *)sp);
			*caller = ret;
			uw.pc = ret;
			uw.sp = sp + 8;
		}
		uw.sp0 = sp;
		if (uw.pc >= 0x1000 && uw.pc < ML_USER_TOP && !uw_unwind(&uw, from_ip))
			return;
		if (from_ip)
			*caller = uw.first;
		h = uw.h;
	} else if (fp >= sp && fp - sp <= ML_FP_WINDOW) {
		/* The window check rejects most garbage in rbp before the first read. */
		struct fp_walk fw = { .st = st, .fp = fp, .h = h };

		bpf_loop(ML_MAX_FRAMES, fp_step, &fw, 0);
		st->nr = fw.nr;
		h = fw.h;
	}
	pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	if (pp)
		py_frames(sc, pp, th, &h);
	if (!st->nr && !st->nr_py)
		return;
	h ^= st->flags;
	h ^= (__u64)st->nr << 48;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	if (h == ML_STACK_NONE)
		h = 1;
	*stack_id = h;
	if (!bpf_map_lookup_elem(&stacks_sent, &h)) {
		__u64 words = st->nr + 2 * (__u64)st->nr_py, len = ML_STACK_HDR + 8 * words;
		__u8 one = 1;

		st->id = h;
		if (len > sizeof(*st))
			len = sizeof(*st);
		/* Not delivered (ring full): not marked sent, so the next event with this stack tries again. */
		if (bpf_ringbuf_output(&stack_events, st, len, 0))
			stat_inc(ML_STAT_DROP_STACK);
		else
			bpf_map_update_elem(&stacks_sent, &h, &one, BPF_ANY);
	}
}

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

static __always_inline void remember(struct ml_counters *c, __u32 tgid, __u8 layer, __u64 addr, __u64 size,
				     __u64 caller, __u64 stack_id, __u32 spec, __s16 device)
{
	struct ml_slot *s;

	cnt_inc(c, ML_STAT_ALLOC_CALLS);
	cnt_inc(c, layer_slot(layer));
	if (size < min_size || size > max_size) {
		cnt_inc(c, ML_STAT_FILTERED);
		return;
	}
	s = slot_claim(c, tgid, layer, addr);
	if (!s) {
		cnt_inc(c, ML_STAT_DROP_ALLOCS_FULL);
		return;
	}
	/* ts_ns goes last: a reader skips a slot whose ts_ns is 0, i.e. one still being written. The barriers
	 * keep the compiler from moving the field stores across the two timestamp stores. */
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
	WRITE_ONCE(s->ts_ns, bpf_ktime_get_ns());
}

SEC("uprobe")
int BPF_KPROBE(alloc_enter)
{
	__u32 idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_thread *th;
	struct ml_call *t;
	__u64 sp = PT_REGS_SP(ctx), size, now, *caller, *stack_id;
	struct ml_args args;

	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx & (ML_MAX_SPECS - 1)];
	load_args(ctx, &args, s->count_arg >= ML_ARG_STACK1 || s->count2_arg >= ML_ARG_STACK1);
	th = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!th) {
		stat_inc(ML_STAT_DROP_THREAD);
		return 0;
	}
	if (s->kind == ML_KIND_WRAP) {
		/* No return probe on C++ code: an exception unwinding through the kernel's return trampoline
		 * would terminate the target. The allocation is taken where the wrapper calls into C. */
		th->wrap.sp = sp;
		th->wrap.entry_ns = bpf_ktime_get_ns();
		caller = &th->wrap.caller;
		stack_id = &th->wrap.stack_id;
		goto capture;
	}
	t = &th->calls[s->group & (ML_GROUPS - 1)];
	now = bpf_ktime_get_ns();
	if (t->sp) {
		/* A deeper stack pointer means the allocator is calling itself, an equal one a tail call
		 * (reallocarray jumps to realloc): either way the outer call accounts for it. */
		if (sp <= t->sp && in_flight(t, now, s->group)) {
			stat_inc(ML_STAT_NESTED);
			return 0;
		}
		stat_inc(ML_STAT_DROP_LOST_RETURN);
	}
	size = s->size_arg ? arg_n(&args, s->size_arg) : 1;
	/* A product that overflows is an allocation that fails: keep it from reading as realloc(p, 0). */
	if (s->count_arg)
		size = mul_sat(size, arg_n(&args, s->count_arg));
	if (s->count2_arg)
		size = mul_sat(size, arg_n(&args, s->count2_arg));
	t->sp = sp;
	t->entry_ns = now;
	t->size = size;
	t->spec = idx;
	t->out_ptr = s->out_arg ? arg_n(&args, s->out_arg) : 0;
	t->size_out_ptr = s->size_out_arg ? arg_n(&args, s->size_out_arg) + s->size_out_off : 0;
	t->addr = s->addr_arg ? arg_n(&args, s->addr_arg) : 0;
	t->free_ptr = s->free_arg ? arg_n(&args, s->free_arg) : 0;
	t->free_ts = 0;
	t->device = -1;
	if (s->device_arg) {
		__s32 dev = -1;

		if (!bpf_probe_read_user(&dev, sizeof(dev), (void *)(arg_n(&args, s->device_arg) + s->device_off)))
			t->device = dev;
	}
	if (t->free_ptr) {
		struct ml_slot *a = slot_find(bpf_get_current_pid_tgid() >> 32, s->layer, t->free_ptr);
		__u64 ts = a ? READ_ONCE(a->ts_ns) : 0;

		t->free_ts = ts ? ts : 1; /* 1: not ours, nothing to release */
	}
	/* A size only known at return cannot be filtered here: capture, and let the return filter. */
	if (!s->size_out_arg && (size < min_size || size > max_size)) {
		t->stack_id = ML_STACK_NONE;
		t->caller = 0;
		return 0;
	}
	if (s->use_wrap && th->wrap.sp && sp < th->wrap.sp && now - th->wrap.entry_ns < ML_CALL_STALE_NS) {
		t->caller = th->wrap.caller;
		t->stack_id = th->wrap.stack_id;
		th->wrap.sp = 0;
		return 0;
	}
	caller = &t->caller;
	stack_id = &t->stack_id;
capture:
	/* One call site: the unwinder is verified once per program, not once per caller. */
	capture_stack(ctx, th, caller, stack_id, false);
	return 0;
}

/*
 * The in-flight call a return probe belongs to, or NULL. The return of a nested call arrives with a
 * deeper stack than the outer call's entry + 8, and finds nothing here.
 */
static __always_inline struct ml_call *returning_call(struct pt_regs *ctx, __u32 idx)
{
	struct ml_thread *th;
	struct ml_call *t;

	/* The cookie is a row number user space set; the mask alone bounds it for the verifier (a range check
	 * here lets the compiler drop the mask, and the verifier then loses the bound). */
	th = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (!th)
		return NULL;
	t = &th->calls[specs[idx & (ML_MAX_SPECS - 1)].group & (ML_GROUPS - 1)];
	if (!t->sp || PT_REGS_SP(ctx) != t->sp + 8)
		return NULL;
	return t;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_counters *c;
	struct ml_call *t = returning_call(ctx, idx);
	__u64 ret = PT_REGS_RC(ctx), addr = 0, size;
	int ok;

	if (!t)
		return 0;
	idx = t->spec;
	t->sp = 0;
	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx & (ML_MAX_SPECS - 1)];
	c = counters();
	size = t->size;

	if (s->ret == ML_RET_ERR0) {
		ok = (__s32)ret == 0;
		if (ok && t->out_ptr)
			bpf_probe_read_user(&addr, sizeof(addr), (void *)t->out_ptr);
		else if (ok)
			addr = t->addr;
		if (ok && t->size_out_ptr) {
			__u64 v = 0;

			bpf_probe_read_user(&v, sizeof(v), (void *)t->size_out_ptr);
			size *= v;
		}
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
		} else if (addr || size == 0) {
			if (t->free_ts > 1 && forget(c, tgid, s->layer, t->free_ptr, t->free_ts)) {
				cnt_inc(c, ML_STAT_FREE_CALLS);
				cnt_inc(c, layer_slot(s->layer) + 1);
			} else if (t->free_ts <= 1 && addr) {
				cnt_inc(c, ML_STAT_FREE_CALLS);
				cnt_inc(c, layer_slot(s->layer) + 1);
				cnt_inc(c, ML_STAT_FREE_UNKNOWN);
			}
		}
		if (!addr && size == 0)
			return 0;
	}
	if (!ok || !addr) {
		cnt_inc(c, ML_STAT_ALLOC_FAILED);
		return 0;
	}
	remember(c, tgid, s->layer, addr, size, t->caller, t->stack_id, idx, (__s16)t->device);
	return 0;
}

static __always_inline int release(struct ml_counters *c, __u8 layer, __u64 ptr)
{
	if (!ptr) {
		cnt_inc(c, ML_STAT_FREE_NULL);
		return 0;
	}
	cnt_inc(c, ML_STAT_FREE_CALLS);
	cnt_inc(c, layer_slot(layer) + 1);
	forget(c, bpf_get_current_pid_tgid() >> 32, layer, ptr, 0);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(free_enter)
{
	__u32 idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_args args;

	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx & (ML_MAX_SPECS - 1)];
	load_args(ctx, &args, false);
	/*
	 * The low-rate releases (cudaFree, free_cpu, ...) have a return probe and mark themselves in flight,
	 * so the release they make inside (cudaFree calling cuMemFree, cudaFreeHost calling cuMemFreeHost)
	 * is not counted twice. The C library's free, the hot path, skips this.
	 */
	if (s->track_free) {
		struct ml_thread *th = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0,
							    BPF_LOCAL_STORAGE_GET_F_CREATE);
		struct ml_call *t;
		__u64 sp = PT_REGS_SP(ctx);

		if (th) {
			__u64 now = bpf_ktime_get_ns();

			t = &th->calls[s->group & (ML_GROUPS - 1)];
			if (sp <= t->sp && in_flight(t, now, s->group)) {
				stat_inc(ML_STAT_NESTED);
				return 0;
			}
			t->sp = sp;
			t->entry_ns = now;
			t->spec = idx;
		}
	}
	return release(counters(), s->layer, arg_n(&args, s->free_arg));
}

SEC("uretprobe")
int BPF_KRETPROBE(free_exit)
{
	struct ml_call *t = returning_call(ctx, bpf_get_attach_cookie(ctx));

	if (t)
		t->sp = 0;
	return 0;
}

/*
 * PyTorch's CUDA caching allocator announces every tensor block it hands out and takes back through
 * USDT probes pytorch:malloc(ptr, device, size, stream) and pytorch:free(ptr). The probe sits inside
 * the allocator, so frame 0 is the probe's own address; the frames above come from the frame-pointer walk.
 */
SEC("usdt")
int BPF_USDT(torch_malloc, __u64 ptr, long device, __u64 size, long stream)
{
	__u64 caller, stack_id;

	if (!ptr)
		return 0;
	capture_stack(ctx, bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE),
		      &caller, &stack_id, false);
	caller = PT_REGS_IP(ctx);
	remember(counters(), bpf_get_current_pid_tgid() >> 32, ML_LAYER_TORCH_CUDA, ptr, size, caller, stack_id,
		 ML_MAX_SPECS - 1, (__s16)device);
	return 0;
}

SEC("usdt")
int BPF_USDT(torch_free, __u64 ptr)
{
	return release(counters(), ML_LAYER_TORCH_CUDA, ptr);
}

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
 * --follow: a traced process that forks a new process (not a thread) makes it traced too, and user space
 * attaches to it at once; an exec replaces a traced process's image, whose libraries must be probed anew.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(follow_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid, one = 1;

	if (child->pid != child->tgid || !bpf_map_lookup_elem(&traced, &ptgid))
		return 0;
	if (bpf_map_update_elem(&traced, &ctgid, &one, BPF_ANY))
		stat_inc(ML_STAT_DROP_PROC_EVENT);
	else
		proc_event(ML_PROC_FORK, ctgid, ptgid);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(follow_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;

	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	/* The task lives on in the new image: calls in flight in the old one never return. */
	bpf_task_storage_delete(&threads, p);
	proc_event(ML_PROC_EXEC, tgid, 0);
	return 0;
}

#define ML_NR_MMAP 9
#define ML_NR_MPROTECT 10
#define ML_NR_MUNMAP 11
#define ML_NR_BRK 12
#define ML_NR_MREMAP 25
#define ML_MAP_ANONYMOUS 0x20

/*
 * Heap-growth mode. Every system call exit passes here while the mode is on anywhere, so the test for the
 * five calls of interest comes first, then the process filter.
 */
SEC("tp_btf/sys_exit")
int BPF_PROG(heap_exit, struct pt_regs *regs, long ret)
{
	long nr = regs->orig_ax;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ml_heap_proc *hp;
	struct ml_counters *c;
	struct ml_thread *th;
	__u64 caller, stack_id, addr = 0, size = 0;

	if (nr != ML_NR_BRK && nr != ML_NR_MMAP && nr != ML_NR_MUNMAP && nr != ML_NR_MREMAP)
		return 0;
	hp = bpf_map_lookup_elem(&heap_procs, &tgid);
	if (!hp || (ret < 0 && ret > -4096))
		return 0;
	/* Memory taken inside a traced allocator call (posix_memalign for a PyTorch tensor, pinned memory)
	 * belongs to that call's layer. */
	th = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, 0);
	if (th) {
		__u64 now = bpf_ktime_get_ns();

		for (__u32 g = 0; g < ML_GROUPS; g++)
			if (in_flight(&th->calls[g], now, g))
				return 0;
	}
	c = counters();
	if (nr == ML_NR_BRK) {
		if (!hp->max_brk || (__u64)ret <= hp->max_brk) {
			if (!hp->max_brk)
				hp->max_brk = ret;
			return 0;
		}
		addr = hp->max_brk;
		size = (__u64)ret - hp->max_brk;
		hp->max_brk = ret;
	} else if (nr == ML_NR_MMAP) {
		if (!(regs->r10 & ML_MAP_ANONYMOUS) || !regs->dx /* PROT_NONE: a reservation */)
			return 0;
		addr = ret;
		size = regs->si;
	} else if (nr == ML_NR_MUNMAP) {
		if (ret == 0)
			release(c, ML_LAYER_LIBC, regs->di);
		return 0;
	} else {
		/* mremap: the old range goes (when it was ours), the new one comes. */
		if (forget(c, tgid, ML_LAYER_LIBC, regs->di, 0)) {
			cnt_inc(c, ML_STAT_FREE_CALLS);
			cnt_inc(c, layer_slot(ML_LAYER_LIBC) + 1);
		}
		addr = ret;
		size = regs->dx;
	}
	capture_stack(regs, th, &caller, &stack_id, true);
	remember(c, tgid, ML_LAYER_LIBC, addr, size, caller, stack_id, ML_SPEC_HEAP, -1);
	return 0;
}

/* Start-up calibration of the cost of one probe hit (user/overhead.c): does nothing. */
SEC("uprobe")
int calib(struct pt_regs *ctx)
{
	return 0;
}
