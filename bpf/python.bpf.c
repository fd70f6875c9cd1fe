// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of memleak-ai, the CPython frame walker: in a traced process running a CPython interpreter whose
 * layout user space found (user/python/pyoffsets.c), the calling thread's Python frames are appended to the stack
 * being captured (stack.bpf.c), read from the interpreter's own frame records.
 */
#include "common.bpf.h"
#include "hash.bpf.h"

#define ML_PY_CHECKED 1 /* innermost frames whose code object's line table is read as the check */

/* Traced processes running a CPython interpreter whose layout is known, by tgid. Written by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct ml_pyproc);
} pyprocs SEC(".maps");

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
	struct py_thread_walk c = {.pp = pp, .self = self};
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
	owner = win_u8(sc, off + (pp->frame_owner & ML_PY_OFF_MASK));
	c->frame = win_u64(sc, off + (pp->frame_previous & ML_PY_OFF_MASK));
	if (pp->owner_cstack != 0xff && owner == pp->owner_cstack) {
		if (c->nr_py && c->w >= 2) {
			sc->st.ips[(c->w - 2) & ML_STACK_WORD_MASK] = c->prev_w | ML_PY_ENTRY;
			c->h = (c->h ^ ML_PY_ENTRY ^ c->nr_py) * ML_FNV_PRIME;
		}
		return 0;
	}
	if (c->nr_py >= ML_MAX_PYFRAMES || c->w + 1 >= ML_STACK_WORDS) {
		sc->st.flags |= ML_STACK_PY_TRUNCATED;
		return 1;
	}
	code = win_u64(sc, off + (pp->frame_code & ML_PY_OFF_MASK));
	instr = win_u64(sc, off + (pp->frame_instr & ML_PY_OFF_MASK));
	start = code + pp->code_adaptive;
	if (code && instr >= start) {
		idx = (instr - start) / 2;
		if (pp->instr_is_next && idx)
			idx--;
		if (idx >= ML_PY_INSTR_UNKNOWN)
			idx = ML_PY_INSTR_UNKNOWN;
	}
	if (pp->frame_is_entry != ML_PY_NONE)
		entry = win_u8(sc, off + (pp->frame_is_entry & ML_PY_OFF_MASK)) & 1;
	c->prev_w = ml_py_word0(code, idx, entry);
	sc->st.ips[c->w & ML_STACK_WORD_MASK] = c->prev_w;
	/*
	 * The check costs a read of its own: taken for the innermost frames, where short-lived code (closures,
	 * code compiled at run time) runs; the outer ones are long-lived, and user space checks their type.
	 */
	sc->st.ips[(c->w + 1) & ML_STACK_WORD_MASK] =
	    code && c->nr_py < ML_PY_CHECKED ? read_u64(code + pp->code_check) : 0;
	c->h = (c->h ^ c->prev_w) * ML_FNV_PRIME;
	c->h = (c->h ^ sc->st.ips[(c->w + 1) & ML_STACK_WORD_MASK]) * ML_FNV_PRIME;
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

/*
 * Append the Python frames of the calling thread to the stack being built, innermost first; *h goes on.
 * Nothing where the process runs no interpreter user space told of. A global function (see common.bpf.h).
 */
__noinline int py_frames(struct ml_scratch *sc, struct ml_thread *th, __u32 tgid, __u64 *h)
{
	const struct ml_pyproc *pp = bpf_map_lookup_elem(&pyprocs, &tgid);
	struct task_struct *task = bpf_get_current_task_btf();
	struct py_frame_walk c;
	struct ml_counters *cn;
	__u64 self = task->thread.fsbase, ts = th ? th->py_tstate : 0, fptr = 0;
	__u32 why;
	__u16 fptr_off;

	if (!pp || !sc || !h)
		return 0;
	c = (struct py_frame_walk){.sc = sc, .pp = pp, .w = sc->st.nr, .size = pp->frame_size, .h = *h};
	fptr_off = pp->tstate_current_frame != ML_PY_NONE ? pp->tstate_current_frame : pp->tstate_cframe;

	/* The usual case, one read: this thread's known thread state, still its own, and its frame pointer. */
	if (ts && pp->tstate_block_len &&
	    !bpf_probe_read_user(sc->win, pp->tstate_block_len & ML_PY_OFF_MASK, (void *)(ts + pp->tstate_block_off)) &&
	    win_u64(sc, (pp->tstate_thread_id - pp->tstate_block_off) & ML_PY_OFF_MASK) == self) {
		fptr = win_u64(sc, (fptr_off - pp->tstate_block_off) & ML_PY_OFF_MASK);
	} else {
		ts = py_tstate(pp, th, self);
		if (!ts) {
			cn = counters();
			cnt_inc(cn, ML_STAT_PY_NO_THREAD);
			end_inc(cn, ML_STAT_PY_END_BASE, ML_PY_END_NO_THREAD, ML_PY_ENDS);
			return 0;
		}
		fptr = read_u64(ts + fptr_off);
	}
	c.frame = pp->tstate_current_frame != ML_PY_NONE ? fptr : read_u64(fptr + pp->cframe_current_frame);
	if (c.size > ML_PY_FRAME_MAX)
		c.size = ML_PY_FRAME_MAX;
	bpf_loop(ML_MAX_PYFRAMES / 2 + 8, py_frame_step, &c, 0);
	*h = c.h;
	/* Why the walk ended, from how it left the flags: a step that stops early sets one. */
	why = sc->st.flags & ML_STACK_PY_BROKEN	     ? ML_PY_END_UNREADABLE
	      : sc->st.flags & ML_STACK_PY_TRUNCATED ? ML_PY_END_DEPTH
	      : c.frame				     ? ML_PY_END_STEPS
						     : ML_PY_END_CHAIN_END;
	if (c.frame && !(sc->st.flags & ML_STACK_PY_BROKEN))
		sc->st.flags |= ML_STACK_PY_TRUNCATED;
	sc->st.nr_py = c.nr_py;
	cn = counters();
	cnt_inc(cn, c.nr_py ? ML_STAT_PY_FRAMES : ML_STAT_PY_NO_THREAD);
	if (sc->st.flags & ML_STACK_PY_TRUNCATED)
		cnt_inc(cn, ML_STAT_PY_TRUNCATED);
	if (sc->st.flags & ML_STACK_PY_BROKEN)
		cnt_inc(cn, ML_STAT_PY_BROKEN);
	end_inc(cn, ML_STAT_PY_END_BASE, why, ML_PY_ENDS);
	return 0;
}
