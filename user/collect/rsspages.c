/*
 * The rss layer (bpf/rss.bpf.c) as user space drives it: attaching its programs, adding traced processes,
 * the releases and moves too large for a system call's BPF program, and the sampling interval.
 *
 * User space changes the kernel's table only by compare-and-swap of a record's address to a tombstone (or,
 * for a move, by claiming an empty or released slot the way the BPF side does), so it never undoes a write
 * the BPF side made meanwhile.
 */
#include "collect/rsspages.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "collect/slots.h"
#include "lib/bpfstats.h"
#include "lib/log.h"
#include "memleak.skel.h"

#define RSS_PROGS 4
#define RSS_FAULT_PROGS 3 /* the first three: what the last shed step detaches (rss_exit stays) */

/* The layer's programs, its fault programs first. */
static void rss_progs(struct memleak_bpf *skel, struct bpf_program *out[RSS_PROGS])
{
	out[0] = skel->progs.rss_fault_user;
	out[1] = skel->progs.rss_fault_kernel;
	out[2] = skel->progs.rss_page_alloc;
	out[3] = skel->progs.rss_exit;
}

struct rsspages {
	struct memleak_bpf *skel;
	struct ledger *ledger;
	struct rsspages_opts o;
	struct bpf_link *links[RSS_PROGS];
	uint32_t shift;
	int ncpu;
	uint64_t *pcpu; /* the counters' per-CPU values, read at every scan */
	uint64_t dropped;
	uint64_t last_pages, last_ns;
	bool have_last;
};

int ml_rss_track(struct memleak_bpf *skel, int pid)
{
	struct ml_rss_proc rp = {};
	__u32 key = (__u32)pid;

	return bpf_map_update_elem(bpf_map__fd(skel->maps.rss_procs), &key, &rp, BPF_NOEXIST) && errno != EEXIST
		   ? -errno
		   : 0;
}

void ml_rss_untrack(struct memleak_bpf *skel, int pid)
{
	__u32 key = (__u32)pid;

	if (!skel || pid <= 0) /* a run that failed before its BPF object, or before its first process */
		return;
	bpf_map_delete_elem(bpf_map__fd(skel->maps.rss_procs), &key);
}

int rsspages__new(struct memleak_bpf *skel, struct ledger *l, const struct rsspages_opts *o, struct rsspages **out)
{
	struct rsspages *r = calloc(1, sizeof(*r));
	struct bpf_program *progs[RSS_PROGS];
	int err = 0;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	rss_progs(skel, progs);
	r->ncpu = libbpf_num_possible_cpus();
	r->pcpu = r->ncpu > 0 ? calloc((size_t)r->ncpu * ML_STAT_SLOTS, sizeof(*r->pcpu)) : NULL;
	if (!r->pcpu) {
		free(r);
		return -ENOMEM;
	}
	r->skel = skel;
	r->ledger = l;
	r->o = *o;
	r->shift = o->shift > ML_RSS_MAX_SHIFT ? ML_RSS_MAX_SHIFT : o->shift;
	skel->bss->rss_shift = r->shift;
	ledger__set_rss_shift(l, r->shift);
	for (int i = 0; i < RSS_PROGS && !err; i++) {
		r->links[i] = bpf_program__attach(progs[i]);
		if (!r->links[i]) {
			err = -errno;
			ml_dbg("rss layer: cannot attach %s: %s", bpf_program__name(progs[i]), strerror(-err));
		}
	}
	if (err) {
		rsspages__free(r);
		return err;
	}
	*out = r;
	return 0;
}

void rsspages__free(struct rsspages *r)
{
	if (!r)
		return;
	for (int i = 0; i < RSS_PROGS; i++)
		bpf_link__destroy(r->links[i]);
	free(r->pcpu);
	free(r);
}

static bool cas_tomb(struct ml_slot *s, uint64_t key)
{
	uint64_t expect = key;

	return __atomic_compare_exchange_n(&s->addr, &expect, ML_SLOT_TOMB, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

int ml_rss_put(struct slots *t, const struct ml_slot *rec)
{
	struct ml_slot *s = slots__find(t, rec->tgid, ML_LAYER_RSS, rec->addr);

	if (!rec->size) {
		if (s)
			cas_tomb(s, rec->addr);
		return 0;
	}
	if (s && s->size == rec->size && s->stack_id == rec->stack_id && s->caller == rec->caller)
		return 0;
	if (!s && !(s = slots__claim(t, rec->tgid, ML_LAYER_RSS, rec->addr)))
		return -ENOSPC;
	__atomic_store_n(&s->ts_ns, 0, __ATOMIC_RELEASE); /* a report reading it meanwhile skips it */
	s->size = rec->size;
	s->caller = rec->caller;
	s->stack_id = rec->stack_id;
	s->tgid = rec->tgid;
	s->layer = ML_LAYER_RSS;
	s->spec = rec->spec;
	s->device = -1;
	__atomic_store_n(&s->ts_ns, rec->ts_ns ? rec->ts_ns : 1, __ATOMIC_RELEASE);
	return 0;
}

/* One record of ml_rss_range's: dropped, or moved to its page's place from to on. 1 if it was taken. */
static uint64_t range_one(struct slots *t, struct ml_slot *s, uint32_t shift, uint32_t tgid, uint64_t lo, uint64_t hi,
			  uint64_t to, uint64_t before_ns, uint64_t *lost)
{
	uint64_t key = __atomic_load_n(&s->addr, __ATOMIC_ACQUIRE), page = key & ~ML_RSS_COPY, nkey;
	struct ml_slot v, *d;

	if (key == ML_SLOT_EMPTY || key == ML_SLOT_TOMB || s->layer != ML_LAYER_RSS || s->tgid != tgid || page < lo ||
	    page >= hi)
		return 0;
	v = *s;
	if (!v.ts_ns || v.ts_ns >= before_ns || !cas_tomb(s, key))
		return 0;
	if (!to)
		return 1;
	nkey = page - lo + to + (key & ML_RSS_COPY);
	if (!ml_rss_sampled(nkey & ~ML_RSS_COPY, shift) || !(d = slots__claim(t, tgid, ML_LAYER_RSS, nkey))) {
		if (lost)
			(*lost)++;
		return 1;
	}
	__atomic_store_n(&d->ts_ns, 0, __ATOMIC_RELEASE);
	d->size = v.size;
	d->caller = v.caller;
	d->stack_id = v.stack_id;
	d->tgid = tgid;
	d->layer = ML_LAYER_RSS;
	d->spec = v.spec;
	d->device = -1;
	__atomic_store_n(&d->ts_ns, v.ts_ns, __ATOMIC_RELEASE);
	return 1;
}

uint64_t ml_rss_range(struct slots *t, uint32_t shift, uint32_t tgid, uint64_t lo, uint64_t hi, uint64_t to,
		      uint64_t before_ns, uint64_t *lost)
{
	uint64_t n = 0;

	for (unsigned int k = 0, nl = t->n; k < nl; k++)
		for (size_t i = 0; i < t->lv[k].len; i++)
			n += range_one(t, &t->lv[k].v[i], shift, tgid, lo, hi, to, before_ns, lost);
	return n;
}

void rsspages__event(struct rsspages *r, const struct ml_rss_event *e)
{
	uint64_t lost = 0;

	if (e->hi <= e->lo || e->hi > ML_USER_TOP)
		return;
	ml_rss_range(ledger__slots(r->ledger), r->shift, e->hdr.tgid, e->lo, e->hi,
		     e->hdr.type == ML_PROC_RSS_MOVE ? e->to : 0, e->hdr.ts_ns, &lost);
	r->dropped += lost;
}

/* Drop the records the test for shift rejects. */
static uint64_t resample(const struct slots *t, uint32_t shift)
{
	uint64_t n = 0;

	for (unsigned int k = 0; k < t->n; k++)
		for (size_t i = 0; i < t->lv[k].len; i++) {
			struct ml_slot *s = &t->lv[k].v[i];
			uint64_t key = __atomic_load_n(&s->addr, __ATOMIC_ACQUIRE);

			if (key == ML_SLOT_EMPTY || key == ML_SLOT_TOMB || s->layer != ML_LAYER_RSS ||
			    s->spec == ML_SPEC_COPY_SCAN || ml_rss_sampled(key & ~ML_RSS_COPY, shift))
				continue;
			n += cas_tomb(s, key);
		}
	return n;
}

/* The sampling interval doubles now: the next test is the one for shift + 1. */
static void set_shift(struct rsspages *r, uint32_t shift)
{
	/* The BPF side tests with the new shift first: no record the sweep leaves can be one it rejects. */
	r->skel->bss->rss_shift = shift;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ledger__set_rss_shift(r->ledger, shift);
	r->dropped += resample(ledger__slots(r->ledger), shift);
	r->shift = shift;
}

void rsspages__shed(void *ctx, bool off)
{
	struct rsspages *r = ctx;

	if (off) {
		/* Its faults no longer traced; its releases still are, so what it holds stays true. */
		for (int i = 0; i < RSS_FAULT_PROGS; i++) {
			bpf_link__destroy(r->links[i]);
			r->links[i] = NULL;
		}
		ml_info("rss layer: faults no longer traced (over the budget)");
		return;
	}
	if (r->shift < ML_RSS_MAX_SHIFT) {
		set_shift(r, r->shift + 1);
		ml_info("rss layer: one page in %u recorded from now on (over the budget)", 1U << r->shift);
	}
}

/* Pages recorded since attach, from the per-CPU counters. */
static int recorded_pages(struct rsspages *r, uint64_t *out)
{
	uint64_t v[ML_STAT_SLOTS];
	int err = ml_stats_sum(bpf_map__fd(r->skel->maps.stats), r->ncpu, r->pcpu, v);

	if (!err)
		*out = v[ML_STAT_RSS_PAGES] + v[ML_STAT_RSS_COPIES];
	return err;
}

/* Over the limits: double as often as needed. Returns how many times. */
static int raise_shift(struct rsspages *r, uint64_t records, double rate)
{
	uint32_t shift = r->shift;
	uint64_t records0 = records;
	double rate0 = rate;
	int n;

	/* Each doubling halves both, in expectation. */
	while (shift < ML_RSS_MAX_SHIFT && (records > r->o.max_records || rate > r->o.max_pages_per_s)) {
		shift++;
		records /= 2;
		rate /= 2;
	}
	if (shift == r->shift)
		return 0;
	n = (int)(shift - r->shift);
	set_shift(r, shift);
	ml_info("rss layer: one page in %u recorded from now on (%" PRIu64 " records, %.0f pages/s)", 1U << shift,
		records0, rate0);
	return n;
}

int rsspages__tick(struct rsspages *r, uint64_t now_ns)
{
	uint64_t pages = 0;
	double rate;

	if (!r || recorded_pages(r, &pages))
		return 0;
	if (!r->have_last || now_ns < r->last_ns + 500000000ULL) {
		if (!r->have_last) {
			r->last_pages = pages;
			r->last_ns = now_ns;
			r->have_last = true;
		}
		return 0;
	}
	rate = (double)(pages - r->last_pages) / ((double)(now_ns - r->last_ns) / 1e9);
	r->last_pages = pages;
	r->last_ns = now_ns;
	return raise_shift(r, 0, rate);
}

int rsspages__tune(struct rsspages *r, const struct ml_snapshot *s)
{
	return raise_shift(r, s->rss_records, 0);
}

bool rsspages__faults_traced(const struct rsspages *r)
{
	return r->links[0] != NULL;
}

uint32_t rsspages__shift(const struct rsspages *r)
{
	return r ? r->shift : 0;
}

uint64_t rsspages__dropped(const struct rsspages *r)
{
	return r ? r->dropped : 0;
}
