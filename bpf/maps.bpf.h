/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the BPF units share: the maps and global variables more than one of them uses, and their value types.
 * Each is defined here, __weak, and every unit includes it: bpftool gen object (libbpf's linker) keeps one
 * definition of each, so the linked object and its skeleton have each map and variable once, by its name.
 * (A map or variable that one unit alone uses is defined in that unit.)
 */
#ifndef MEMLEAK_AI_MAPS_BPF_H
#define MEMLEAK_AI_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "memleak.h"

/* Set by user space between open and load. */
const volatile __u64 min_size __weak = 0;
const volatile __u64 max_size __weak = ~0ULL;

/*
 * The outstanding allocations (see memleak.h): written by the allocator probes and heap-growth mode. Its levels
 * are array maps user space makes as the table fills (user/collect/slots.c), each sized on its own.
 */
struct ml_table_level {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE | BPF_F_INNER_MAP);
	__uint(max_entries, 1); /* each level is sized when made */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct ml_slot)); /* by size: BTF may hold the struct only as a declaration */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, ML_TABLE_LEVELS);
	__type(key, __u32);
	__array(values, struct ml_table_level);
} table SEC(".maps") __weak;

/* The newest level, and each level's slots - 1 (a power of two): written by user space before it publishes. */
volatile __u32 table_top __weak;
volatile __u32 table_masks[ML_TABLE_LEVELS] __weak;

/* All counters in one per-CPU element: one lookup per event, not one per counter. */
struct ml_counters {
	__u64 v[ML_STAT_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ml_counters);
} stats SEC(".maps") __weak;

/*
 * In-flight allocator calls of one thread, one per nesting group. Task storage dies with the thread, so an
 * exiting thread leaves nothing behind.
 */
struct ml_call {
	__u64 sp;	    /* stack pointer at entry of the outermost call of the group; 0 = none in flight */
	__u64 entry_ns;	    /* when it began: a call in flight for longer lost its return (see ML_CALL_STALE_NS) */
	__u64 size;	    /* bytes, or the multiplier of a size read at return */
	__u64 out_ptr;	    /* address of the out-parameter */
	__u64 size_out_ptr; /* address of the size read at return */
	__u64 addr;	    /* address given as an input argument */
	__u64 free_ptr;	    /* pointer being released by a realloc */
	__u64 free_ts;	    /* identity of that allocation when the call began */
	__u64 caller;
	__u64 stack_id;
	__u32 spec;
	__s32 device;
};

/* The caller of the innermost ML_KIND_WRAP function entered (c10::alloc_cpu), for the allocation it makes. */
struct ml_wrap {
	__u64 sp, caller, stack_id, entry_ns;
};

/* The rss layer: the thread's last fault that may allocate a page, until the page allocator answers it. */
struct ml_rss_fault {
	__u64 page, ts_ns;
	__u64 ip, sp;	      /* the user registers at the fault: the page allocation must come from the same entry */
	__u64 err;	      /* the fault's error code */
	__u64 vlo, vhi, vgen; /* the anonymous mapping the thread last faulted in, as of the process's gen */
	__u64 cap_ip, cap_sp, cap_ns, cap_caller, cap_stack; /* the last stack captured at a fault, and when */
};

/*
 * Stack capture (stack.bpf.c), for a probe's event: the registers it starts from go in, the immediate caller
 * and the stack's id (ML_STACK_NONE: the caller alone) come out.
 */
struct ml_capture {
	__u64 ip, sp, bp;
	__u64 fault; /* capture_stack_ip at a page fault: ip is the faulting code's own frame (caller = ip, exact) */
	__u64 caller, stack_id;
};

/* The first six integer arguments and three stack words, copied once: the verifier refuses a computed offset into the
 * context. */
struct ml_args {
	__u64 v[9];
};

struct ml_thread {
	struct ml_call calls[ML_GROUPS];
	struct ml_wrap wrap;
	struct ml_rss_fault rss;
	__u64 py_tstate;  /* this thread's PyThreadState, once found (checked again at every use) */
	__u64 py_miss_ns; /* when a search last found none: not searched again for ML_PY_RETRY_NS */
	/*
	 * alloc_enter's arguments and capture, kept here rather than on its stack: the probe, capture_stack and
	 * py_frames share the 512 bytes of BPF stack, and kernel 6.18.44's verifier counted 592 with them there.
	 */
	struct ml_args args;
	struct ml_capture cap;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ml_thread);
} threads SEC(".maps") __weak;

/* Process events (struct ml_proc_event and its larger kinds) for user space: proc.bpf.c, rss.bpf.c. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} proc_events SEC(".maps") __weak;

/* The processes the rss layer traces, by tgid (user space adds them; a traced process's forks add theirs). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct ml_rss_proc);
} rss_procs SEC(".maps") __weak;

#endif
