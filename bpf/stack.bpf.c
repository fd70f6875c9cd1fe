// SPDX-License-Identifier: GPL-2.0
/*
 * BPF side of memleak-ai, stack capture: the native walk (the unwinding tables user space builds, with their
 * rule cache and remembered walks, or the frame-pointer chain), the Python frames (python.bpf.c), and the
 * hand-over of each new stack to user space.
 */
#include "common.bpf.h"
#include "hash.bpf.h"

/*
 * Stacks live in user space (user/collect/stackstore.c), keyed by their hash. A stack not handed over yet goes out
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

/* Where a stack is assembled, per CPU (struct ml_scratch in common.bpf.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ml_scratch);
} scratch SEC(".maps");

/* Native unwinding tables (see memleak.h; searched in uwtables.bpf.c), and each process's mappings with one. */
const volatile __u8 unwind_tables = 0; /* 1: unwind with the tables where a process has them */

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
	__u64 bp0;	   /* rbp at entry - the stack pointer, compared where bp_used */
	__u32 gen, n;	   /* n checks */
	__u32 nr, n_fp;	   /* native frames, frames by frame pointer */
	__u8 truncated, bp_used;
	/* While the walk is done: rbp is still rbp at entry; nothing seen that forbids remembering it. Kept in
	 * map memory with the counters, where the verifier does not follow each value as it does on the stack. */
	__u8 bp_reg, keep;
	__u8 stop; /* why the walk ended, enum ml_uw_end: written where it ends, counted once (uw_unwind) */
	__u8 pad[3];
	__s32 off[ML_UWM_CHECKS]; /* see ML_UWM_REL */
	__u64 val[ML_UWM_CHECKS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ML_UWM_SETS + 1);
	__type(key, __u32);
	__type(value, struct ml_uwmemo);
} uwmemo SEC(".maps");

struct fp_walk {
	struct ml_stack *st;
	__u64 fp, h;
	__u32 nr;
};

/* One frame of the frame-pointer chain. */
static long fp_step(__u32 i, void *arg)
{
	struct fp_walk *c = arg;
	struct {
		__u64 next, ret;
	} fr;

	if (bpf_probe_read_user(&fr, sizeof(fr), (void *)c->fp) || fr.ret < ML_MIN_USER_ADDR || fr.ret >= ML_USER_TOP)
		return 1;
	c->st->ips[i & ML_FRAME_MASK] = fr.ret;
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
#define ML_UW_RET_INSTANCES 4 /* pending return probes looked through for one frame */

struct uw_walk {
	struct ml_scratch *sc;
	const struct ml_umaps *um;
	struct ml_uwc *cache;
	struct ml_uwmemo *memo; /* the walk's checks are written here (or read, replaying) */
	__u64 pc, sp, bp, h, win_lo, first, sp0;
	__u64 ri; /* the thread's innermost pending uretprobe return (struct return_instance *) not yet passed, or 0 */
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

/*
 * A function with a return probe pending (malloc at full fidelity, when a fault inside it is captured) has its
 * return address swapped for the uprobe trampoline's; the kernel keeps the real one in the thread's list of
 * return instances (*ri), innermost first, each with the stack slot it took it from. A walk goes up the stack
 * in the same order: instances below ra_at are of frames not on its path, one at ra_at is this frame's.
 * Returns 1 when *ra was swapped (the walk is then not remembered: the slot reads the same whoever the
 * caller was).
 */
static __always_inline int ret_swapped(__u64 *ri, __u64 ra_at, __u64 *ra)
{
	if (!bpf_core_field_exists(((struct return_instance *)0)->orig_ret_vaddr) ||
	    !bpf_core_field_exists(((struct return_instance *)0)->stack))
		return 0;
	for (int i = 0; i < ML_UW_RET_INSTANCES && *ri; i++) {
		struct return_instance *r = (struct return_instance *)*ri;
		__u64 slot = BPF_CORE_READ(r, stack);

		if (slot > ra_at)
			return 0;
		*ri = (__u64)BPF_CORE_READ(r, next);
		if (slot == ra_at) {
			*ra = BPF_CORE_READ(r, orig_ret_vaddr);
			return 1;
		}
	}
	return 0;
}

/* The calling thread's pending return instances (see ret_swapped), or 0. */
static __always_inline __u64 pending_returns(void)
{
	struct uprobe_task *ut = BPF_CORE_READ(bpf_get_current_task_btf(), utask);

	/* (a kernel whose uprobe_task keeps no such list: no swapped address is looked through) */
	return ut && bpf_core_field_exists(ut->return_instances) ? (__u64)BPF_CORE_READ(ut, return_instances) : 0;
}

/* One native frame: from (pc, sp, bp) to the caller's. 1 ends the walk. */
static __always_inline long uw_one(struct uw_walk *c)
{
	__u32 rule = uw_rule(c, c->exact ? c->pc : c->pc - 1);
	__u8 kind = rule >> 24;
	__u64 cfa, ra, ra_at, bp = c->bp, word;
	struct ml_stack *st = &c->sc->st;
	__u8 why;
	__s64 off;

	switch (ML_UW_KIND_CFA(kind)) {
	case ML_UW_RSP:
	case ML_UW_RBP:
		off = ML_UW_KIND_SCALED(kind) ? (__s64)(__s16)rule * 8 : (__s16)rule;
		if (ML_UW_KIND_CFA(kind) == ML_UW_RBP) {
			why = ML_UW_END_RBP_LOST;
			if (!c->bp_ok)
				goto bad;
			c->memo->bp_used |= c->memo->bp_reg;
		}
		cfa = (ML_UW_KIND_CFA(kind) == ML_UW_RSP ? c->sp : c->bp) + off;
		ra_at = cfa - 8;
		why = ML_UW_END_NO_PROGRESS;
		if (cfa <= c->sp)
			goto bad;
		why = ML_UW_END_RET_UNREADABLE;
		if (uw_word(c, ra_at, &ra))
			goto bad;
		if (ML_UW_KIND_RBP(kind) == ML_UW_RBP_AT) {
			__u64 at = cfa + (__s64)(__s8)(rule >> 16) * 8;

			why = ML_UW_END_RBP_UNREADABLE;
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
		why = ML_UW_END_SIGNAL;
		if (uw_word(c, c->sp + ML_UC_RIP, &ra) || uw_word(c, c->sp + ML_UC_RSP, &cfa) ||
		    uw_word(c, c->sp + ML_UC_RBP, &bp))
			goto bad;
		why = ML_UW_END_NO_PROGRESS;
		if (cfa <= c->sp)
			goto bad;
		/* The handler "returned" to the trampoline's first byte: no call precedes it, name it as is. */
		if (st->nr && st->nr <= ML_MAX_FRAMES)
			st->ips[(st->nr - 1) & ML_FRAME_MASK] |= ML_IP_EXACT;
		c->bp_ok = 1;
		c->memo->bp_reg = 0;
		c->exact = 1;
		ra_at = 0;
		break;
	case ML_UW_NONE_FDE:
		/* No table covers the pc: the frame-pointer chain, if rbp looks like one. */
		why = ML_UW_END_NO_FDE + (rule & 1); /* (uw_lookup: 1, the pc is in no mapping with a table) */
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
		c->memo->stop = ML_UW_END_OUTERMOST;
		return 1;
	}
	if (c->ri && ra_at && ret_swapped(&c->ri, ra_at, &ra))
		c->memo->keep = 0;
	uw_rec(c, ra_at, 0, ra); /* a frame's return address or the word that ended the walk: checked either way */
	if (!ra) {
		c->memo->stop = ML_UW_END_NULL_RET;
		return 1;
	}
	why = ML_UW_END_BAD_RET;
	if (ra < ML_MIN_USER_ADDR || ra >= ML_USER_TOP)
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
		c->memo->stop = ML_UW_END_DEPTH;
		return 1;
	}
	/* the frame's check: a replay that stops after it resumes from here (rbp rule lost, or frame pointers) */
	c->memo->off[(c->memo->n - 1) & (ML_UWM_CHECKS - 1)] |=
	    ML_UWM_FRAME | (ML_UW_KIND_RBP(kind) & ML_UW_RBP_LOST) << 1 |
	    (((__u64)(ML_UW_KIND_CFA(kind) ^ ML_UW_NONE_FDE) - 1) >> 63) << 3;
	st->ips[st->nr & ML_FRAME_MASK] = word;
	c->h = (c->h ^ word) * ML_FNV_PRIME;
	st->nr++;
	return 0;
bad:
	/* Not remembered: the walk may have stopped at memory that can be read another time. */
	c->memo->stop = why;
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
		st->ips[st->nr & ML_FRAME_MASK] = w;
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
 * Replay the walk remembered in m: 1 when every word it read is the same again, its frames then the walk's. Else
 * rp says where the walk goes on: after the last frame checked, with rbp as the checks up to it left it.
 */
static __always_inline int uwm_replay(struct uw_walk *c, const struct ml_uwmemo *m, struct ml_uwreplay *rp, __u64 pc0)
{
	__u64 seq = READ_ONCE(m->seq);

	barrier();
	bpf_loop(ML_UWM_CHECKS / 4 + 1, uwm_step, c, 0);
	barrier();
	/* h over the frames replayed is the one remembered: also no entry torn by a preempting walk */
	if (!c->bad && c->sc->st.nr == m->nr && c->h == m->h && READ_ONCE(m->seq) == seq && READ_ONCE(m->pc0) == pc0)
		return 1;
	if (rp->resume) {
		/* (a frame reads at most one saved rbp, before its return address) */
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
	return 0;
}

/* The walk's end in the counters: stopped early, truncated, frames by frame pointer. */
static __always_inline void uw_tally(struct uw_walk *c, const struct ml_uwmemo *m, struct ml_counters *cn)
{
	if (c->bad) {
		cnt_inc(cn, ML_STAT_UW_STOP);
		c->sc->st.flags |= ML_STACK_UW_STOPPED;
	}
	if (m->truncated)
		cnt_inc(cn, ML_STAT_UW_TRUNCATED);
	end_inc(cn, ML_STAT_UW_END_BASE, m->stop, ML_UW_ENDS);
	if (cn && m->n_fp)
		cn->v[ML_STAT_UW_FP] += m->n_fp;
	cnt_inc(cn, ML_STAT_UW_STACKS);
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
	    (!m->bp_used || c->bp - c->sp0 == m->bp0) && uwm_replay(c, m, rp, pc0)) {
		cnt_inc(cn, ML_STAT_UW_MEMO);
		goto out;
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
	m->stop = ML_UW_END_STEPS;
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
	uw_tally(c, m, cn);
	return 1;
}

/*
 * The native walk with the process's tables um, into sc's stack and *h; cap->caller is the first frame's return
 * address. 0 when the per-CPU state it needs cannot be had: nothing is captured then.
 */
static __always_inline int table_walk(struct ml_scratch *sc, const struct ml_umaps *um, struct ml_capture *cap,
				      bool from_ip, __u64 *h)
{
	__u32 zero = 0;
	__u64 ret = 0;
	struct uw_walk uw = {.sc = sc,
			     .um = um,
			     .h = *h,
			     .win_lo = ~0ULL,
			     .bp = cap->bp,
			     .bp_ok = 1,
			     .gen = um->gen,
			     .ri = pending_returns()};

	uw.cache = bpf_map_lookup_elem(&uwcache, &zero);
	if (!uw.cache)
		return 0;
	if (from_ip) {
		uw.pc = cap->ip;
		uw.sp = cap->sp;
		uw.exact = 1;
		uw.want_first = !cap->fault;
	} else {
		/* The return address comes with the first chunk of the stack: one read of user memory, not two. */
		if (uw_word(&uw, cap->sp, &ret))
			bpf_probe_read_user(&ret, sizeof(ret), (void *)cap->sp);
		cap->caller = ret;
		uw.pc = ret;
		uw.sp = cap->sp + 8;
	}
	uw.sp0 = cap->sp;
	if (uw.pc >= ML_MIN_USER_ADDR && uw.pc < ML_USER_TOP && !uw_unwind(&uw, from_ip))
		return 0;
	if (from_ip)
		cap->caller = uw.first;
	*h = uw.h;
	return 1;
}

/*
 * The native frames, into sc's stack and *h: from the process's tables um where it has them, else from the
 * frame-pointer chain. A function of its own, so that its walk's state is off the stack when py_frames runs:
 * a probe, capture_stack and py_frames share 512 bytes. 0 when nothing can be captured.
 */
static __noinline int native_walk(struct ml_scratch *sc, const struct ml_umaps *um, struct ml_capture *cap,
				  bool from_ip, __u64 *h)
{
	__u64 fp = cap->bp, sp = cap->sp;

	if (um)
		return table_walk(sc, um, cap, from_ip, h);
	/* The window check rejects most garbage in rbp before the first read. */
	if (fp >= sp && fp - sp <= ML_FP_WINDOW) {
		struct fp_walk fw = {.st = &sc->st, .fp = fp, .h = *h};

		bpf_loop(ML_MAX_FRAMES, fp_step, &fw, 0);
		sc->st.nr = fw.nr;
		*h = fw.h;
	}
	return 1;
}

/* Hands the stack st, known as h, to user space unless it was lately. */
static __always_inline void hand_over(struct ml_stack *st, __u64 h)
{
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
static __always_inline void capture(struct ml_thread *th, struct ml_capture *cap, bool from_ip)
{
	__u32 zero = 0, tgid = bpf_get_current_pid_tgid() >> 32;
	const struct ml_umaps *um = unwind_tables ? bpf_map_lookup_elem(&umaps, &tgid) : NULL;
	struct ml_scratch *sc;
	struct ml_stack *st;
	__u64 h = ML_FNV_BASIS, ret = 0;

	cap->stack_id = ML_STACK_NONE;
	cap->caller = 0;
	if (!um) {
		bpf_probe_read_user(&ret, sizeof(ret), (void *)cap->sp);
		cap->caller = ret;
	}
	sc = bpf_map_lookup_elem(&scratch, &zero);
	if (!sc)
		return;
	st = &sc->st;
	st->flags = 0;
	st->nr_py = 0;
	st->nr = 0;
	if (!native_walk(sc, um, cap, from_ip, &h))
		return;
	if (from_ip && cap->fault)
		cap->caller = cap->ip | ML_IP_EXACT;
	py_frames(sc, th, tgid, &h);
	if (!st->nr && !st->nr_py)
		return;
	h ^= st->flags;
	h ^= (__u64)st->nr << 48;
	h = ml_hash_mix(h);
	if (h == ML_STACK_NONE)
		h = 1;
	cap->stack_id = h;
	hand_over(st, h);
}

/* The global functions (see common.bpf.h): each program verifies the one walk it calls, from_ip known. */
__noinline int capture_stack(struct ml_thread *th, struct ml_capture *cap)
{
	if (cap)
		capture(th, cap, false);
	return 0;
}

__noinline int capture_stack_ip(struct ml_thread *th, struct ml_capture *cap)
{
	if (cap)
		capture(th, cap, true);
	return 0;
}
