/* The wire contract between the BPF programs and user space: keys, values, probe specs, counters. */
#ifndef MEMLEAK_AI_WIRE_H
#define MEMLEAK_AI_WIRE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define ML_MAX_SPECS 128   /* rows of the allocator table that can be attached at once (a power of two) */
#define ML_MAX_FRAMES 127  /* deepest user stack kept (the perf stack limit) */
#define ML_STACK_NONE 0ULL /* stack_id when only the immediate caller was captured (no frame-pointer chain) */
#define ML_USER_TOP 0x800000000000ULL /* x86_64 user addresses lie below this */
#define ML_MIN_USER_ADDR 0x1000ULL    /* nothing is mapped in the first page: a lower return address is garbage */
#define ML_FRAME_MASK ML_MAX_FRAMES   /* index mask into a stack's native words: ML_MAX_FRAMES + 1 is a power of two */
#define ML_FP_WINDOW (1ULL << 20)     /* rbp further than this above rsp at entry is not taken for a frame pointer */

/* Layers: where an allocation comes from. User space owns the names (user/attach/allocators.c). */
enum ml_layer {
	ML_LAYER_LIBC = 0,	 /* C heap */
	ML_LAYER_CUDA = 1,	 /* device memory reserved from the CUDA runtime or driver */
	ML_LAYER_CUDA_HOST = 2,	 /* pinned host memory */
	ML_LAYER_TORCH_CUDA = 3, /* PyTorch's CUDA caching allocator: memory handed to tensors */
	ML_LAYER_TORCH_CPU = 4,	 /* PyTorch CPU tensors */
	ML_LAYER_CUDA_MAP = 5,	 /* virtual ranges mapped with cuMemMap (backed by cuMemCreate memory) */
	ML_LAYER_RSS = 6,	 /* anonymous pages made resident (or copied on write) by a traced process's fault */
	ML_LAYER_TORCH_HOST = 7, /* PyTorch's pinned host caching allocator: blocks handed out (pin_memory) */
	ML_LAYER_MAX = 8,
};

/*
 * Nesting groups. A call made while a call of the same group is in flight on the thread is the outer
 * call's implementation (realloc calling malloc, cudaMalloc calling cuMemAlloc, c10::alloc_cpu calling
 * posix_memalign) and is not counted again; a call of another group is (raw_alloc reaching cudaMalloc).
 */
enum ml_group {
	ML_GROUP_HEAP = 0, /* libc, torch_cpu */
	ML_GROUP_CUDA = 1, /* cuda, cuda_map */
	ML_GROUP_CUDA_HOST = 2,
	ML_GROUP_TORCH_CUDA = 3, /* torch_cuda, torch_host: neither calls the other */
	ML_GROUPS = 4,
};

/* Argument numbers 1-6 are registers; these name the first stack-passed words at function entry. */
#define ML_ARG_STACK1 7 /* [rsp + 8] */
#define ML_ARG_STACK2 8 /* [rsp + 16] */
#define ML_ARG_STACK3 9 /* [rsp + 24] */

/* What a probed function does. */
enum ml_kind {
	ML_KIND_ALLOC = 1,   /* returns (or writes) a new allocation */
	ML_KIND_FREE = 2,    /* releases the pointer in free_arg */
	ML_KIND_REALLOC = 3, /* releases free_arg and returns a new allocation */
	ML_KIND_WRAP = 4,    /* entry only: remembers its caller for the allocation made inside it (no return probe) */
	ML_KIND_RAISE = 5,   /* entry only: an out-of-memory error is being made; its message is the std::string
				in size_arg (struct ml_oom_raise_event) */
	ML_KIND_STEP = 6,    /* entry only: a training step (the step clock, by default the autograd engine's
				backward pass), counted per process in the steps map (struct ml_steps) */
};

/* How success is told at return. */
enum ml_ret {
	ML_RET_PTR = 0,	 /* the return value is the pointer; NULL means failure */
	ML_RET_ERR0 = 1, /* the return value is an error code, 0 = success; pointer in *out_arg */
	ML_RET_PAIR =
	    2, /* a returned pair of words {pointer, handle} (rax, rdx): the handle is what the release gets */
};

/*
 * One row of the allocator table as the BPF side sees it. Argument numbers are 1-based, 0 = unused.
 * The uprobe's attach cookie is the row index.
 */
struct ml_spec {
	__u8 kind;	   /* enum ml_kind */
	__u8 ret;	   /* enum ml_ret */
	__u8 layer;	   /* enum ml_layer */
	__u8 group;	   /* enum ml_group */
	__u8 size_arg;	   /* bytes */
	__u8 count_arg;	   /* multiplies size (calloc, reallocarray, pitched heights) */
	__u8 count2_arg;   /* multiplies again (3-D depth) */
	__u8 out_arg;	   /* pointer-sized out-parameter holding the pointer (or handle) at return */
	__u8 free_arg;	   /* pointer released (free, realloc) */
	__u8 addr_arg;	   /* the allocation's address is this input argument (cuMemMap) */
	__u8 size_out_arg; /* the byte size is read at return from *(u64 *)(arg + size_out_off) (pitch) */
	__u8 size_out_off;
	__u8 device_arg; /* the CUDA device index is the s32 at *(arg + device_off) at entry (cuMemCreate's prop) */
	__u8 device_off;
	__u8 handle;	 /* the "pointer" is a handle, not an address (cuMemCreate) */
	__u8 track_free; /* a release with a return probe: releases nested in it are not counted again */
	__u8 use_wrap;	 /* take caller and stack from the ML_KIND_WRAP call this one runs inside */
	__u8 pad[7];
};

/*
 * Outstanding allocations live in one open-addressing table (BPF arrays that user space maps): slots are
 * claimed with compare-and-swap on `addr`, probed from ml_slot_hash() by ml_slot_next(), and released by turning
 * `addr` into a tombstone. A report is then a sequential read of memory, not a syscall per entry. The table grows by
 * levels: new records go to the newest level, a release looks from the newest down, and older levels drain.
 */
#define ML_TABLE_LEVELS 8		/* levels of the table, made as it fills: new records go to the newest */
#define ML_TABLE_FIRST_SLOTS (1U << 18) /* the first level's slots (12 MiB); each next one has 4 times as many */
#define ML_TABLE_FILL 25		/* percent of the newest level's slots live when the next one is published */
#define ML_TABLE_AHEAD 15 /* ... and when it is made: making 48 MiB takes 20 to 250 ms, a burst's 150,000 records */
#define ML_SLOT_EMPTY 0ULL
#define ML_SLOT_TOMB 1ULL
#define ML_MAX_PROBES 32 /* slots tried before an allocation is dropped (counted) as "table full" */

struct ml_slot {
	__u64 addr;  /* ML_SLOT_EMPTY, ML_SLOT_TOMB, or the allocation's address */
	__u64 ts_ns; /* bpf_ktime_get_ns() at return, 0 while the slot is being written; also the identity */
	__u64 size;
	__u64 caller;	/* return address at [rsp] on entry: the immediate caller, never lost */
	__u64 stack_id; /* key in the stack table (a hash of the frames above the caller), or ML_STACK_NONE */
	__u32 tgid;
	__u8 layer; /* part of the key: a caching allocator's first block shares its segment's address */
	__u8 spec;
	__s16 device; /* CUDA device index, -1 when not known */
};

static inline __u64 ml_slot_hash(__u32 tgid, __u8 layer, __u64 addr)
{
	__u64 h = (addr >> 4) ^ ((__u64)tgid << 40) ^ ((__u64)layer << 56);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

/* The slot after slot i, the p-th of its chain: steps of 1, 2, 3 ... reach every slot of a power of two once.
 * Linear steps made runs of full slots that dropped records from 35 % live; these drop none at 80 %. */
static inline __u32 ml_slot_next(__u32 i, __u32 p, __u32 mask)
{
	return (i + p + 1) & mask;
}

/*
 * Python frames. A thread's PyThreadState is found by its pthread_self() value, which on x86_64 glibc is the
 * thread's fs base; its chain of _PyInterpreterFrame records is then walked. Each frame takes two words of
 * the stack table: word 0 packs the code object's address, the instruction index and whether the frame is
 * the outermost of its call of the eval loop; word 1 is the code object's co_linetable pointer, the check
 * user space uses to tell that the code object at that address is still the one that ran (every live code
 * object has a line table of its own; function objects would not do: a closure or a 3.11 comprehension
 * gets a new one at each call). Only the innermost ML_PY_CHECKED frames carry it (it costs a read); 0 in
 * the others, which user space checks by type alone.
 */
#define ML_MAX_PYFRAMES 192
#define ML_PY_CODE_BITS 44 /* code address >> 3 */
#define ML_PY_INSTR_SHIFT 44
#define ML_PY_INSTR_UNKNOWN 0x7ffffULL /* 19 bits: no instruction index (frame not started, or index too large) */
#define ML_PY_ENTRY (1ULL << 63)
#define ML_PY_NONE 0xffff     /* an offset the interpreter version does not have */
#define ML_PY_FRAME_MAX 96    /* bytes of an _PyInterpreterFrame read at once: every field used lies below */
#define ML_PY_MAX_THREADS 256 /* PyThreadState records looked at to find the current thread's */
#define ML_PY_MAX_INTERPS 4

static inline __u64 ml_py_word0(__u64 code, __u64 instr, int entry)
{
	return (code >> 3) | (instr << ML_PY_INSTR_SHIFT) | (entry ? ML_PY_ENTRY : 0);
}
static inline __u64 ml_py_code(__u64 w0)
{
	return (w0 & ((1ULL << ML_PY_CODE_BITS) - 1)) << 3;
}
static inline __u64 ml_py_instr(__u64 w0)
{
	return (w0 >> ML_PY_INSTR_SHIFT) & ML_PY_INSTR_UNKNOWN;
}

/* Where a traced process's interpreter keeps its threads and frames (offsets from user/python/pyoffsets.c). */
struct ml_pyproc {
	__u64 runtime;		   /* address of _PyRuntime */
	__u16 runtime_interp_head; /* _PyRuntimeState.interpreters.head */
	__u16 interp_next, interp_threads_head;
	__u16 tstate_next, tstate_thread_id;
	__u16 tstate_cframe, cframe_current_frame; /* 3.11, 3.12: tstate->cframe->current_frame */
	__u16 tstate_current_frame;		   /* 3.13: tstate->current_frame */
	__u16 frame_code, frame_previous, frame_instr, frame_owner, frame_is_entry, frame_size;
	__u16 code_adaptive;			  /* first instruction: offset of co_code_adaptive in the code object */
	__u16 code_check;			  /* co_linetable: a pointer each live code object has its own of */
	__u16 tstate_block_off, tstate_block_len; /* one read of the thread state covering thread_id and the
						   * frame pointer field (cframe or current_frame); len <= 128 */
	__u8 owner_cstack;  /* owner value of the eval loop's own entry frames (3.12+), 0xff when none */
	__u8 instr_is_next; /* frame_instr points past the current instruction */
	__u8 pad[2];
};

#define ML_STACK_WORDS (ML_MAX_FRAMES + 2 * ML_MAX_PYFRAMES) /* 511 */
#define ML_STACK_WORD_MASK ML_STACK_WORDS /* index mask into a stack's words: ML_STACK_WORDS + 1 is a power of two */
#define ML_PY_OFF_MASK 127 /* mask of a field's offset in a frame or thread-state read (both at most 128 bytes) */
_Static_assert(((ML_MAX_FRAMES + 1) & ML_MAX_FRAMES) == 0, "ML_MAX_FRAMES + 1 is a power of two");
_Static_assert(((ML_STACK_WORDS + 1) & ML_STACK_WORDS) == 0, "ML_STACK_WORDS + 1 is a power of two");
_Static_assert(ML_PY_FRAME_MAX <= ML_PY_OFF_MASK + 1, "a frame read fits the offset mask");

/* Stack flags */
#define ML_STACK_PY_TRUNCATED 1 /* deeper Python frames than ML_MAX_PYFRAMES: the outermost are missing */
#define ML_STACK_PY_BROKEN 2	/* the frame chain could not be read to its end */
#define ML_STACK_UW_STOPPED 4	/* the native walk stopped before the stack's end: the outer frames are missing */

/*
 * A stack as handed to user space (the stack_events ring, once per stack): its id (the hash allocations
 * refer to), nr native frames above the immediate caller, then nr_py Python frames, two words each,
 * innermost first. A record holds the ML_STACK_HDR bytes of header and only the words in use.
 */
#define ML_STACK_HDR 16
#define ML_STACK_RING_BYTES (128U << 20) /* at full fidelity: a torch import's burst of new stacks */
#define ML_STACK_RING_BUDGET (16U << 20) /* under a budget, which samples what a burst sends */
struct ml_stack {
	__u64 id;
	__u32 nr;
	__u16 nr_py;
	__u16 flags;
	__u64 ips[ML_STACK_WORDS];
};

/*
 * Native unwinding without frame pointers (user/unwind/unwind.c builds the tables, the BPF side walks them).
 * Each file's .eh_frame/.debug_frame becomes rows sorted by pc in the shared row array, at row_base; an
 * index (one entry per 2^shift bytes of the file's range, plus one) gives the first row to search for a
 * pc, so a lookup is a binary search of a few rows. Tables are shared by every process that maps the file.
 */
#define ML_UW_MAX_SHIFT 12 /* index slots cover 2^shift bytes, shift chosen per file in [MIN, MAX] */
#define ML_UW_MIN_SHIFT 6
#define ML_UW_ROWS_PER_SLOT 4
#define ML_UW_FILES 4096 /* files with a table at once (user space) */
#define ML_UW_MAPS 512	 /* executable mappings of one process that can have a table */
#define ML_UW_PROCS 4096 /* processes with their mappings registered */
/* The row and index arrays grow a chunk at a time (1 MiB of rows, 512 KiB of index), up to --unwind-mem. */
#define ML_UW_ROW_CHUNK_BITS 17
#define ML_UW_IDX_CHUNK_BITS 16
#define ML_UW_CHUNKS 4096 /* chunks of each: 4 GiB of rows, the most --unwind-mem allows */

/* ml_urow.kind: bits 0-2 the CFA rule, bits 3-4 the rbp rule, bit 5 cfa_off counts 8-byte words. */
enum ml_uw_cfa {
	ML_UW_RSP = 0,	    /* CFA = rsp + cfa_off; return address at CFA - 8 */
	ML_UW_RBP = 1,	    /* CFA = rbp + cfa_off */
	ML_UW_STOP = 2,	    /* cannot be unwound from (expression rules, _start): the stack ends here */
	ML_UW_NONE_FDE = 3, /* no FDE covers the pc: frame pointers are tried */
	ML_UW_SIGNAL = 4,   /* a signal trampoline: the interrupted registers are in the ucontext at rsp */
};
enum ml_uw_rbp {
	ML_UW_RBP_SAME = 0, /* the caller's rbp is this frame's */
	ML_UW_RBP_AT = 1,   /* saved at CFA + 8 * rbp_off8 */
	ML_UW_RBP_LOST = 2, /* not recoverable: a caller needing it stops */
};
#define ML_UW_KIND(cfa, rbp, scaled) ((cfa) | ((rbp) << 3) | ((scaled) << 5))
#define ML_UW_KIND_CFA(k) ((k)&7)
#define ML_UW_KIND_RBP(k) (((k) >> 3) & 3)
#define ML_UW_KIND_SCALED(k) (((k) >> 5) & 1)

struct ml_urow {
	__u32 pc;      /* offset from the file's table base (ml_umap.adj maps a runtime pc there) */
	__s16 cfa_off; /* bytes, or 8-byte words when the kind says so */
	__s8 rbp_off8; /* rbp saved at CFA + 8 * rbp_off8 */
	__u8 kind;
};

/*
 * One executable mapping with a table: pc in [start, end) is looked up at pc - adj in the file's table, whose
 * place in the shared arrays is copied here so a frame needs no other lookup to find it.
 */
struct ml_umap {
	__u64 start, end, adj;
	__u32 row_base, n_rows;	 /* rows [row_base, row_base + n_rows) of the row array */
	__u32 idx_base, n_slots; /* index entries [idx_base, idx_base + n_slots] (one more than slots) */
	__u32 shift, pad;	 /* a slot covers 2^shift bytes */
};

/*
 * A process's executable mappings with tables, sorted by start. gen is new at every change of a process's
 * list (user space counts them across processes), so a rule cached for (pc, gen) is the process's rule.
 */
struct ml_umaps {
	__u32 n, gen;
	struct ml_umap m[ML_UW_MAPS];
};

/* Offsets of the interrupted registers in the x86-64 signal frame's ucontext (struct sigcontext at 40). */
#define ML_UC_RBP 120
#define ML_UC_RSP 160
#define ML_UC_RIP 168

/* Stack words with this bit set are the exact pc where a signal interrupted the code, not a return address. */
#define ML_IP_EXACT (1ULL << 63)

/* Aggregation key: one allocation stack in one layer of one process. */
struct ml_agg_key {
	__u32 tgid;
	__u8 layer;
	__u8 pad[3];
	__u64 stack_id;
	__u64 caller;
};

/*
 * Heap-growth mode (--max-overhead): with the C library's probes off, the growth of a process's address
 * space is taken at the system calls that make it: brk beyond its previous peak, anonymous mmap (large
 * malloc blocks, Python's arenas), mremap, munmap. Such records carry this pseudo row number.
 */
#define ML_SPEC_HEAP (ML_MAX_SPECS - 2)
#define ML_SPEC_BRK (ML_MAX_SPECS - 3) /* ... the program break grown beyond its peak: fresh C heap */

struct ml_heap_proc {
	__u64 max_brk; /* highest program break seen; 0 until the first brk call */
};

/*
 * The rss layer (bpf/rss.bpf.c): one record per anonymous page (or huge page) a traced process's fault made
 * resident, keyed by the page's address, charged to the stack that faulted; a page copied on write is
 * keyed at its address + ML_RSS_COPY, so a process's own first touch and a later copy of the same page are
 * two records. Records go with munmap, mremap (moved), madvise(DONTNEED, FREE, REMOVE), a shrinking break,
 * MAP_FIXED over the range, exit and exec.
 *
 * Sampling: a page is recorded when ml_rss_sampled(page, shift) holds, and then stands for 2^shift pages.
 * shift (the global rss_shift) only grows; on a change user space drops the records the new test rejects,
 * and every record left weighs 2^shift. Fault and release test the same address, so they always agree.
 */
#define ML_PAGE_SHIFT 12
#define ML_PAGE_BYTES (1ULL << ML_PAGE_SHIFT)
#define ML_RSS_COPY 1ULL		/* added to a copy's key (page addresses have their low 12 bits clear) */
#define ML_RSS_MAX_SHIFT 16		/* one page in 65536 at most */
#define ML_RSS_INLINE_PAGES 8192	/* ranges released or moved in the system call's own BPF program; larger ones */
					/* are told to user space (struct ml_rss_event), which sweeps the table */
#define ML_SPEC_RSS (ML_MAX_SPECS - 4)	/* a first touch */
#define ML_SPEC_COPY (ML_MAX_SPECS - 5) /* a copy on write */
#define ML_SPEC_RSS_HEAP (ML_MAX_SPECS - 6) /* a first touch of a page of the C heap (below the break) */
/* Copies a page-table scan found (user space only, collect/cowscan.h): one record per child and owner, keyed
 * above ML_USER_TOP where no release or move reaches, exact (never sampled), size the bytes of all of them. */
#define ML_SPEC_COPY_SCAN (ML_MAX_SPECS - 7)

static inline int ml_rss_sampled(__u64 page, __u32 shift)
{
	__u64 h = (page >> ML_PAGE_SHIFT) * 0x9e3779b97f4a7c15ULL;

	return shift == 0 || (h >> (64 - shift)) == 0;
}

/*
 * Per traced process, for the rss layer's releases. (A fault that finds a page not present makes a new record
 * even where one exists: that page's release was missed, or the kernel swapped it out. So a release told to
 * user space late loses nothing.)
 */
struct ml_rss_proc {
	__u64 brk; /* the program break as last seen (0 until known) */
	__u64 gen; /* one more at every unmap, move or replacement: a thread's remembered mapping is stale */
};

/* Process events for --follow: a traced process forked a new process, or a traced process ran exec. */
enum ml_proc_event_type {
	ML_PROC_FORK = 1,
	ML_PROC_EXEC = 2,
	ML_PROC_DLOPEN = 3,	 /* the dynamic loader reported a change of the link map (dlopen, dlclose) */
	ML_PROC_OOM = 4,	 /* the kernel's OOM killer chose a traced process (struct ml_oom_event) */
	ML_PROC_RSS_RELEASE = 5, /* a range over ML_RSS_INLINE_PAGES went: user space drops its rss records */
	ML_PROC_RSS_MOVE = 6,	 /* ... or moved (mremap): user space moves them */
	ML_PROC_CUDA_FAIL = 7,	 /* a cuda-layer allocation failed (struct ml_cuda_fail_event): out of memory */
	ML_PROC_OOM_RAISE = 8,	 /* an ML_KIND_RAISE row ran (struct ml_oom_raise_event): the error is raised */
	ML_PROC_PY_EXIT = 9,	 /* a CPython interpreter began to finalize (Py_FinalizeEx): its teardown frees */
};

struct ml_proc_event {
	__u32 type;
	__u32 tgid;   /* the new process (fork) or the one that ran exec */
	__u32 parent; /* fork: the traced process that forked it */
	__u32 pad;
	__u64 ts_ns;
};

/* ML_PROC_OOM: the victim's resident memory when it was chosen, as the kernel's mark_victim event gives it. */
struct ml_oom_event {
	struct ml_proc_event hdr; /* type ML_PROC_OOM, tgid the victim */
	__u64 anon_bytes, file_bytes, shmem_bytes;
};

/* ML_PROC_CUDA_FAIL: the failed call (its allocator row, return code) and the stack of its request. */
struct ml_cuda_fail_event {
	struct ml_proc_event hdr;
	__u64 size, stack_id, caller;
	__s32 device, error;
	__u32 spec, pad;
};

/*
 * ML_PROC_OOM_RAISE: the stack that raises and the message's first ML_OOM_MSG - 1 bytes, NUL-terminated;
 * msg_len is the whole message's length, so a longer one is known to be cut.
 */
#define ML_OOM_MSG 1024
struct ml_oom_raise_event {
	struct ml_proc_event hdr;
	__u64 stack_id, caller, msg_len;
	__u32 spec, pad;
	char msg[ML_OOM_MSG];
};

/* ML_PROC_RSS_RELEASE, ML_PROC_RSS_MOVE: [lo, hi) of hdr.tgid, records older than hdr.ts_ns; a move goes to `to`. */
struct ml_rss_event {
	struct ml_proc_event hdr;
	__u64 lo, hi, to;
};

/*
 * The step clock: a traced process's training steps (its ML_KIND_STEP probe's hits), by tgid in the steps map.
 * User space reads them at each report and deletes a process's entry when it forgets the process.
 */
#define ML_MAX_STEP_PROCS 4096
struct ml_steps {
	__u64 count;
	__u64 last_ns; /* bpf_ktime_get_ns() of the last one */
	/*
	 * Of them, those tensor sampling saw: steps begun in an on phase and ended before it was sealed (by_step),
	 * else steps begun while one was open (ts_from_ns..ts_until_ns).
	 */
	__u64 sampled;
	__u64 period_ns; /* a moving mean of the time between steps, pauses left out */
	/*
	 * Tensor sampling by whole steps, while steps come at most ML_TS_STEP_SPAN on phases apart: a step begun in
	 * on phase `gate` records every tensor it makes, one begun outside records none (0: closed), so that a
	 * row's records and the steps they are read against are the same steps.
	 */
	__u32 gate;
	__u32 by_step;
};
/* Whole steps are sampled while a step lasts at most this many on phases' length: user space waits for it. */
#define ML_TS_STEP_SPAN 2

/* Whether a step's gate is open: set in an on phase (0 is none) that has not been sealed since (ts_sealed_id). */
static inline int ml_gate_open(__u32 gate, __u32 sealed_id)
{
	return gate > sealed_id;
}

/* Per-CPU counters, indexed by enum ml_stat. */
enum ml_stat {
	ML_STAT_ALLOC_CALLS = 0,  /* allocating calls that returned */
	ML_STAT_ALLOC_FAILED,	  /* returned NULL / an error: not recorded */
	ML_STAT_FREE_CALLS,	  /* free-like calls, free(NULL) excluded */
	ML_STAT_FREE_NULL,	  /* free(NULL) and realloc(NULL, n)'s release side */
	ML_STAT_FREE_MATCHED,	  /* released an allocation we had recorded */
	ML_STAT_FREE_UNKNOWN,	  /* released an address we never saw (allocated before attach) */
	ML_STAT_NESTED,		  /* allocator calls made by the allocator itself, counted once */
	ML_STAT_DROP_ALLOCS_FULL, /* outstanding-allocation table full: allocation not recorded */
	ML_STAT_DROP_STACK,	  /* a new stack not handed to user space (its ring full): sent again next time */
	ML_STAT_DROP_THREAD,	  /* no per-thread state could be created */
	ML_STAT_DROP_LOST_RETURN, /* an entry whose return probe never fired (replaced) */
	ML_STAT_REALLOC_RACE,	  /* realloc's old block was freed and reused by another thread meanwhile */
	ML_STAT_PY_FRAMES,	  /* stacks captured in a Python process with Python frames */
	ML_STAT_PY_NO_THREAD,	  /* ... from a thread with no Python thread state (or none running Python code) */
	ML_STAT_PY_TRUNCATED,	  /* ... deeper than ML_MAX_PYFRAMES: the outermost frames are missing */
	ML_STAT_PY_BROKEN,	  /* ... whose frame chain could not be read to its end */
	ML_STAT_DROP_PROC_EVENT,  /* a fork or exec of a traced process not told to user space (ring buffer full) */
	ML_STAT_FILTERED,	  /* allocations outside --min-size/--max-size: not recorded */
	ML_STAT_TAKEOVER,	  /* a record whose address the allocator handed out again: its release was missed */
	ML_STAT_UW_STACKS,	  /* stacks unwound with the tables */
	ML_STAT_UW_FP,		  /* frames taken from frame pointers: no table covered their pc */
	ML_STAT_UW_STOP,	 /* unwinds that ended before the stack's end: a pc no table or frame pointer covers, */
				 /* an unreadable or non-increasing frame (the outermost frame's end is not counted) */
	ML_STAT_UW_TRUNCATED,	 /* deeper than ML_MAX_FRAMES native frames */
	ML_STAT_UW_MEMO,	 /* stacks unwound by replaying a remembered walk (every word it read the same) */
	ML_STAT_RSS_FAULTS,	 /* faults of traced processes on anonymous private memory that could add a page */
	ML_STAT_RSS_PAGES,	 /* pages recorded as made resident (a huge page counts its 4 KiB pages) */
	ML_STAT_RSS_COPIES,	 /* pages recorded as copied on write */
	ML_STAT_RSS_SAMPLED_OUT, /* faults the sampling test left out */
	ML_STAT_RSS_VMA_BUSY,	 /* faults whose mapping could not be looked at (its lock busy): not recorded */
	ML_STAT_RSS_LOST,	 /* pages allocated for a pending fault that could not be recorded (table full) */
	ML_STAT_RSS_MOVE_LOST,	 /* records an mremap moved to an address the sampling test rejects */
	ML_STAT_LOADER_HITS,	 /* traps on the dynamic loader's _dl_debug_state (ldso_stop, ldso_notify) */
	ML_STAT_STEP_HITS,	 /* traps on the step clock's probe (ML_KIND_STEP) */
	ML_STAT_TP_NS,		 /* ns the kernel tracepoints' programs spent on traced processes' events (tp_cost) */
	ML_STAT_RSS_TP_NS,	 /* ... of them, the rss layer's programs */
	ML_STAT_MAX,
};

/* Per-layer event counters (allocating calls and releases), for the header's rates. */
#define ML_STAT_LAYER_BASE 40
#define ML_STAT_LAYER_ALLOCS(layer) (ML_STAT_LAYER_BASE + 2 * (layer))
#define ML_STAT_LAYER_FREES(layer) (ML_STAT_LAYER_BASE + 2 * (layer) + 1)
/*
 * Probe hits (traps) per layer, the cost's own count (user/session/overhead.c): every entry trap (nested calls,
 * free(NULL), failed and filtered calls, wrapper entries, USDT probes) and every return trap, counted first
 * thing in each program, whatever it goes on to do.
 */
#define ML_STAT_HIT_BASE (ML_STAT_LAYER_BASE + 2 * ML_LAYER_MAX)
#define ML_STAT_ENTRY_HITS(layer) (ML_STAT_HIT_BASE + 2 * (layer))
#define ML_STAT_RET_HITS(layer) (ML_STAT_HIT_BASE + 2 * (layer) + 1)

/*
 * Tensor sampling's measure of the work done while PyTorch's CPU allocation probes were on (user/session/budget.c):
 * the torch_cpu releases counted so far (frees), and their count at the first and last allocation that the on
 * phase saw return (first, last; calls, how many). The span between those, not the time the toggles took, is
 * what the phase sampled.
 */
struct ml_ts_phase {
	__u64 frees;
	__u64 first, last, calls;
};

/*
 * Why each walk ended, one counter per reason: every stack the table unwinder walks (ML_STAT_UW_STACKS) counts
 * one enum ml_uw_end, every Python frame walk (ML_STAT_PY_FRAMES + ML_STAT_PY_NO_THREAD) one enum ml_py_end.
 */
enum ml_uw_end {
	ML_UW_END_OUTERMOST = 0,  /* the table's rule ends the stack: _start, a thread's start, a rule not followed */
	ML_UW_END_NULL_RET,	  /* a return address of 0: the stack's end */
	ML_UW_END_DEPTH,	  /* ML_MAX_FRAMES native frames (ML_STAT_UW_TRUNCATED) */
	ML_UW_END_STEPS,	  /* the walk's loop ran out of steps */
	ML_UW_END_RBP_LOST,	  /* stopped early (ML_STAT_UW_STOP) from here: a CFA from rbp, rbp lost below */
	ML_UW_END_NO_PROGRESS,	  /* the CFA is not above the stack pointer */
	ML_UW_END_RET_UNREADABLE, /* the return address's word cannot be read */
	ML_UW_END_RBP_UNREADABLE, /* the saved rbp's word cannot be read */
	ML_UW_END_SIGNAL,	  /* a signal frame's saved registers cannot be read */
	ML_UW_END_NO_FDE,	  /* the pc's table has no row for it, and the frame-pointer chain fails */
	ML_UW_END_NO_TABLE,	  /* the pc is in no mapping with a table, and the frame-pointer chain fails */
	ML_UW_END_BAD_RET,	  /* a return address outside user space */
	ML_UW_ENDS,
};

enum ml_py_end {
	ML_PY_END_NO_THREAD = 0, /* the thread has no Python thread state */
	ML_PY_END_CHAIN_END,	 /* the frame chain read to its end (none at all: no Python code running) */
	ML_PY_END_UNREADABLE,	 /* a frame cannot be read (ML_STAT_PY_BROKEN) */
	ML_PY_END_DEPTH,	 /* ML_MAX_PYFRAMES frames, or the stack's words full (ML_STAT_PY_TRUNCATED) */
	ML_PY_END_STEPS,	 /* the walk's loop ran out of steps: entry frames (ML_STAT_PY_TRUNCATED) */
	ML_PY_ENDS,
};

#define ML_STAT_UW_END_BASE (ML_STAT_HIT_BASE + 2 * ML_LAYER_MAX)
#define ML_STAT_PY_END_BASE (ML_STAT_UW_END_BASE + ML_UW_ENDS)
#define ML_STAT_SLOTS (ML_STAT_PY_END_BASE + ML_PY_ENDS)
#define ML_STAT_UW_END(why) (ML_STAT_UW_END_BASE + (why))
#define ML_STAT_PY_END(why) (ML_STAT_PY_END_BASE + (why))
_Static_assert(ML_STAT_MAX <= ML_STAT_LAYER_BASE, "the counters end before the per-layer ones begin");

#endif
