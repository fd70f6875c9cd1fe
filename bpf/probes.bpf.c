// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of memleak-ai, the allocator probes: generic entry and return probes driven by the allocator table
 * (user/attach/allocators.c), and PyTorch's USDT probes. Outstanding allocations go to the table (table.bpf.h), their
 * stacks come from stack.bpf.c.
 */
#include "table.bpf.h"

/* After table.bpf.h: usdt.bpf.h needs the kernel types of vmlinux.h. */
#include <bpf/usdt.bpf.h>

char LICENSE[] SEC("license") = "GPL";

/* Set by user space between open and load. */
const volatile struct ml_spec specs[ML_MAX_SPECS] = {};
/* Tensor sampling is on (user space sets it): a wrapped call is taken only with its wrapper's entry seen. */
__u32 wrap_sampled = 0;
/* Tensor sampling's on phases (user space clears first..calls before each one). */
struct ml_ts_phase ts_phase = {};
/*
 * Tensor sampling: when the on phase ends (CLOCK_MONOTONIC ns). A close that comes late (the loop busy with a
 * report) leaves the probes attached but recording nothing, so the share sampled stays the one chosen.
 */
__u64 ts_until_ns = 0;
/* ... and when it began, its probes all on: the steps made between count as sampled (struct ml_steps). */
__u64 ts_from_ns = 0;
/* The on phases user space opened, and the last one it sealed: ended before every step begun in it had ended. */
__u32 ts_phase_id = 0;
__u32 ts_sealed_id = 0;
/* The step clock is itself sampled in time (user space sets it): steps it misses cannot gate, time does. */
__u32 ts_steps_sampled = 0;

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

/* A call the wrapper (c10::alloc_cpu) made, its entry just before: that entry took the stack. (Tested where it
 * is used rather than kept in a variable: the verifier then tracks one state fewer through the program.) */
static __always_inline bool wrapper_took_stack(const struct ml_thread *th, __u64 sp, __u64 now)
{
	return th->wrap.sp && sp < th->wrap.sp && now - th->wrap.entry_ns < ML_CALL_STALE_NS;
}

/*
 * The size the spec's arguments ask for: a product that overflows is an allocation that fails, kept from
 * reading as realloc(p, 0).
 */
static __always_inline __u64 call_size(const volatile struct ml_spec *s, const struct ml_args *a)
{
	__u64 size = s->size_arg ? arg_n(a, s->size_arg) : 1;

	if (s->count_arg)
		size = mul_sat(size, arg_n(a, s->count_arg));
	if (s->count2_arg)
		size = mul_sat(size, arg_n(a, s->count2_arg));
	return size;
}

/*
 * The call in flight, as its return probe reads it: where its results go, the pointer it frees (with that
 * allocation's time), the device.
 */
static __always_inline void record_call(struct ml_call *t, const volatile struct ml_spec *s, const struct ml_args *a,
					__u32 idx, __u64 sp, __u64 now, __u64 size)
{
	t->sp = sp;
	t->entry_ns = now;
	t->size = size;
	t->spec = idx;
	t->out_ptr = s->out_arg ? arg_n(a, s->out_arg) : 0;
	t->size_out_ptr = s->size_out_arg ? arg_n(a, s->size_out_arg) + s->size_out_off : 0;
	t->addr = s->addr_arg ? arg_n(a, s->addr_arg) : 0;
	t->free_ptr = s->free_arg ? arg_n(a, s->free_arg) : 0;
	t->free_ts = 0;
	t->device = -1;
	if (s->device_arg) {
		__s32 dev = -1;

		if (!bpf_probe_read_user(&dev, sizeof(dev), (void *)(arg_n(a, s->device_arg) + s->device_off)))
			t->device = dev;
	}
	if (t->free_ptr) {
		struct ml_slot *sl = slot_find(bpf_get_current_pid_tgid() >> 32, s->layer, t->free_ptr);
		__u64 ts = sl ? READ_ONCE(sl->ts_ns) : 0;

		t->free_ts = ts ? ts : 1; /* 1: not ours, nothing to release */
	}
}

/*
 * Whether a c10::Error under construction is the CUDA caching allocator's out-of-memory error, by its
 * message's first words: the base constructor is probed (torch before 2.15 inlines OutOfMemoryError's), and
 * every other error PyTorch raises passes through it too. The message is a std::string passed by reference:
 * { char *data; size_t len; ... }.
 */
static __always_inline bool oom_message(__u64 str)
{
	const char want[] = "CUDA out of memory";
	char got[sizeof(want) - 1];
	__u64 data;

	if (bpf_probe_read_user(&data, sizeof(data), (void *)str) ||
	    bpf_probe_read_user(got, sizeof(got), (void *)data))
		return false;
	for (int i = 0; i < (int)sizeof(got); i++)
		if (got[i] != want[i])
			return false;
	return true;
}

/*
 * An out-of-memory error under construction (c10::OutOfMemoryError): a raise with no failed call behind it
 * (set_per_process_memory_fraction) is seen too.
 */
static __always_inline void oom_raised(__u32 spec, __u64 str, const struct ml_capture *cap)
{
	struct ml_oom_raise_event *e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);
	__u64 hdr[2] = {};

	if (!e)
		return;
	e->hdr = (struct ml_proc_event){
	    .type = ML_PROC_OOM_RAISE, .tgid = bpf_get_current_pid_tgid() >> 32, .ts_ns = bpf_ktime_get_ns()};
	e->stack_id = cap->stack_id;
	e->caller = cap->caller;
	e->spec = spec;
	e->pad = 0;
	e->msg[0] = 0;
	if (bpf_probe_read_user(hdr, sizeof(hdr), (void *)str) ||
	    bpf_probe_read_user_str(e->msg, sizeof(e->msg), (void *)hdr[0]) < 0)
		hdr[1] = 0;
	e->msg_len = hdr[1];
	bpf_ringbuf_submit(e, 0);
}

/* Training steps per traced process (the step clock); user space reads them at each report. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ML_MAX_STEP_PROCS);
	__type(key, __u32);
	__type(value, struct ml_steps);
} steps SEC(".maps");

/* The mean time between steps, over about the last eight; a gap of eight times it is a pause, left out. */
static __always_inline void step_period(struct ml_steps *s, __u64 now)
{
	__u64 d = now - s->last_ns, p = s->period_ns;

	if (!s->last_ns || now <= s->last_ns || (p && d > 8 * p))
		return;
	s->period_ns = p ? p - p / 8 + d / 8 : d;
}

/*
 * Tensor sampling at a step's start: the step that ends here counts if tensor sampling saw all of it (its gate
 * open, its phase not sealed); the one that begins is gated if it begins in an on phase and steps are short enough
 * for user space to wait for it. Longer steps are sampled in time: a step counts if it begins in an on phase.
 */
static __always_inline void step_gate(struct ml_steps *s, __u64 now)
{
	__u64 from = READ_ONCE(ts_from_ns), until = READ_ONCE(ts_until_ns);
	bool in = now >= from && now <= until;

	if (s->gate) {
		if (ml_gate_open(s->gate, READ_ONCE(ts_sealed_id)))
			__sync_fetch_and_add(&s->sampled, 1);
	} else if (!s->by_step && in) {
		__sync_fetch_and_add(&s->sampled, 1);
	}
	s->by_step = !READ_ONCE(ts_steps_sampled) && s->period_ns && until > from &&
		     s->period_ns <= ML_TS_STEP_SPAN * (until - from);
	s->gate = s->by_step && in ? READ_ONCE(ts_phase_id) : 0;
}

/* Whether tensor sampling records a torch_cpu allocation now: by its process's step gate, else by time. */
static __always_inline bool tensor_sampled(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ml_steps *s = bpf_map_lookup_elem(&steps, &tgid);

	if (s && s->by_step && !READ_ONCE(ts_steps_sampled))
		return ml_gate_open(s->gate, READ_ONCE(ts_sealed_id));
	return bpf_ktime_get_ns() <= READ_ONCE(ts_until_ns);
}

/*
 * A step begins: one more for the process. No stack, no thread state: the clock's cost is its trap. A function
 * of its own so that its locals stay off alloc_enter's frame, which stack capture's share of 512 bytes needs.
 */
static __noinline int step_enter(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct ml_steps *s = bpf_map_lookup_elem(&steps, &tgid), first = {};
	__u64 now = bpf_ktime_get_ns();

	stat_inc(ML_STAT_STEP_HITS);
	if (!s) {
		bpf_map_update_elem(&steps, &tgid, &first, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&steps, &tgid);
		if (!s)
			return 0;
	}
	__sync_fetch_and_add(&s->count, 1);
	step_period(s, now);
	s->last_ns = now;
	if (READ_ONCE(wrap_sampled))
		step_gate(s, now);
	return 0;
}

/* An exception raised: taken when its message says a CUDA allocation ran out of memory. */
static __always_inline int raise_enter(struct pt_regs *ctx, struct ml_thread *th, __u32 idx, __u64 msg)
{
	struct ml_capture *cap = &th->cap;

	if (!oom_message(msg))
		return 0;
	*cap = (struct ml_capture){.sp = PT_REGS_SP(ctx), .bp = PT_REGS_FP(ctx)};
	capture_stack(th, cap);
	oom_raised(idx, msg, cap);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(alloc_enter)
{
	__u32 idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_thread *th;
	struct ml_call *t;
	__u64 sp = PT_REGS_SP(ctx), size, now, *caller, *stack_id;
	struct ml_args *args;

	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx & (ML_MAX_SPECS - 1)];
	if (s->kind == ML_KIND_STEP)
		return step_enter();
	hit(s->layer, false);
	if (s->layer == ML_LAYER_TORCH_CPU && READ_ONCE(wrap_sampled) && !tensor_sampled())
		return 0;
	th = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!th) {
		stat_inc(ML_STAT_DROP_THREAD);
		return 0;
	}
	args = &th->args;
	load_args(ctx, args, s->count_arg >= ML_ARG_STACK1 || s->count2_arg >= ML_ARG_STACK1);
	if (s->kind == ML_KIND_WRAP) {
		/* No return probe on C++ code: an exception unwinding through the kernel's return trampoline
		 * would terminate the target. The allocation is taken where the wrapper calls into C. */
		th->wrap.sp = sp;
		th->wrap.entry_ns = bpf_ktime_get_ns();
		caller = &th->wrap.caller;
		stack_id = &th->wrap.stack_id;
		goto capture;
	}
	if (s->kind == ML_KIND_RAISE)
		return raise_enter(ctx, th, idx, arg_n(args, s->size_arg));
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
	if (s->use_wrap && !wrapper_took_stack(th, sp, now) && READ_ONCE(wrap_sampled)) {
		/*
		 * The wrapper (c10::alloc_cpu) was entered before its probe came on: the call began outside the
		 * sampling window, and taken here its stack would start a frame deeper, a row of its own.
		 */
		t->sp = 0;
		return 0;
	}
	size = call_size(s, args);
	record_call(t, s, args, idx, sp, now, size);
	/* A size only known at return cannot be filtered here: capture, and let the return filter. */
	if (!s->size_out_arg && (size < min_size || size > max_size)) {
		t->stack_id = ML_STACK_NONE;
		t->caller = 0;
		return 0;
	}
	if (s->use_wrap && wrapper_took_stack(th, sp, now)) {
		t->caller = th->wrap.caller;
		t->stack_id = th->wrap.stack_id;
		th->wrap.sp = 0;
		return 0;
	}
	caller = &t->caller;
	stack_id = &t->stack_id;
capture:
	/* One call site for either. */
	th->cap = (struct ml_capture){.sp = sp, .bp = PT_REGS_FP(ctx)};
	capture_stack(th, &th->cap);
	*caller = th->cap.caller;
	*stack_id = th->cap.stack_id;
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

/* A device allocation that failed: user space writes the out-of-memory report with the request's stack. */
static __always_inline void cuda_failed(__u32 tgid, __u32 spec, __u64 size, __s32 error, const struct ml_call *t)
{
	struct ml_cuda_fail_event *e = bpf_ringbuf_reserve(&proc_events, sizeof(*e), 0);

	if (!e)
		return;
	e->hdr = (struct ml_proc_event){.type = ML_PROC_CUDA_FAIL, .tgid = tgid, .ts_ns = bpf_ktime_get_ns()};
	e->size = size;
	e->stack_id = t->stack_id;
	e->caller = t->caller;
	e->device = t->device;
	e->error = error;
	e->spec = spec;
	e->pad = 0;
	bpf_ringbuf_submit(e, 0);
}

/* A torch_cpu allocation whose entry was seen returns: where the on phase's span reaches, in releases. */
static __always_inline void ts_mark(void)
{
	__u64 f = READ_ONCE(ts_phase.frees);

	if (!__sync_fetch_and_add(&ts_phase.calls, 1))
		ts_phase.first = f;
	ts_phase.last = f;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_exit)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32, idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_counters *c;
	struct ml_call *t;
	__u64 ret = PT_REGS_RC(ctx), addr = 0, size;
	int ok;

	hit(specs[idx & (ML_MAX_SPECS - 1)].layer, true);
	t = returning_call(ctx, idx);
	if (!t)
		return 0;
	idx = t->spec;
	t->sp = 0;
	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx & (ML_MAX_SPECS - 1)];
	c = counters();
	size = t->size;
	if (s->layer == ML_LAYER_TORCH_CPU)
		ts_mark();

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
		addr = s->ret == ML_RET_PAIR ? PT_REGS_RC2(ctx) : ret;
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
				cnt_inc(c, layer_frees(s->layer));
			} else if (t->free_ts <= 1 && addr) {
				cnt_inc(c, ML_STAT_FREE_CALLS);
				cnt_inc(c, layer_frees(s->layer));
				cnt_inc(c, ML_STAT_FREE_UNKNOWN);
			}
		}
		if (!addr && size == 0)
			return 0;
	}
	if (!ok || !addr) {
		cnt_inc(c, ML_STAT_ALLOC_FAILED);
		if (s->layer == ML_LAYER_CUDA)
			cuda_failed(tgid, idx, size, (__s32)ret, t);
		return 0;
	}
	remember(c, tgid, s->layer, addr, size, t->caller, t->stack_id, idx, (__s16)t->device);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(free_enter)
{
	__u32 idx = bpf_get_attach_cookie(ctx);
	const volatile struct ml_spec *s;
	struct ml_args args;
	__u64 ptr;

	if (idx >= ML_MAX_SPECS)
		return 0;
	s = &specs[idx & (ML_MAX_SPECS - 1)];
	hit(s->layer, false);
	load_args(ctx, &args, false);
	/*
	 * The low-rate releases (cudaFree, free_cpu, ...) have a return probe and mark themselves in flight,
	 * so the release they make inside (cudaFree calling cuMemFree, cudaFreeHost calling cuMemFreeHost)
	 * is not counted twice. The C library's free, the hot path, skips this.
	 */
	if (s->track_free) {
		struct ml_thread *th =
		    bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
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
	ptr = arg_n(&args, s->free_arg);
	if (ptr && s->layer == ML_LAYER_TORCH_CPU)
		__sync_fetch_and_add(&ts_phase.frees, 1);
	return release(counters(), s->layer, ptr);
}

SEC("uretprobe")
int BPF_KRETPROBE(free_exit)
{
	__u32 idx = bpf_get_attach_cookie(ctx);
	struct ml_call *t;

	hit(specs[idx & (ML_MAX_SPECS - 1)].layer, true);
	t = returning_call(ctx, idx);
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
	struct ml_capture cap = {.sp = PT_REGS_SP(ctx), .bp = PT_REGS_FP(ctx)};

	hit(ML_LAYER_TORCH_CUDA, false);
	if (!ptr)
		return 0;
	capture_stack(bpf_task_storage_get(&threads, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE),
		      &cap);
	/* The caller is the probe's own address (cap.caller is its function's caller). */
	remember(counters(), bpf_get_current_pid_tgid() >> 32, ML_LAYER_TORCH_CUDA, ptr, size, PT_REGS_IP(ctx),
		 cap.stack_id, ML_MAX_SPECS - 1, (__s16)device);
	return 0;
}

SEC("usdt")
int BPF_USDT(torch_free, __u64 ptr)
{
	hit(ML_LAYER_TORCH_CUDA, false);
	return release(counters(), ML_LAYER_TORCH_CUDA, ptr);
}

/* Start-up calibration of the cost of one probe hit (user/session/overhead.c): does nothing. */
SEC("uprobe")
int calib(struct pt_regs *ctx)
{
	return 0;
}
