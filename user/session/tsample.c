/* Tensor sampling: the torch_cpu allocation probes on 1/2^n of the time (see tsample.h). */
#include "session/tsample.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "attach/probes.h"
#include "collect/ledger.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "session/follow.h"
#include "session/overhead.h"
#include "memleak.skel.h"

#define TENSOR_LAYERS (1U << ML_LAYER_TORCH_CPU)

struct tsample {
	struct memleak_bpf *skel;
	int fd;			      /* the next toggle */
	unsigned int shift;	      /* the allocation side is on 1/2^shift of the time; 0: not sampling */
	bool on;		      /* ... and on now */
	uint64_t toggles, toggle_ns;  /* toggles made, and the time they took (closing a link waits) */
	uint64_t since_ns;	      /* the last halving: its records weigh by the releases since */
	uint64_t frees_at;	      /* PyTorch's CPU tensor releases counted (ts_phase.frees) then */
	uint64_t span, gaps;	      /* its on phases: releases from their first to last allocation, ... */
	uint64_t calls;		      /* ... the allocations each saw (gaps: one fewer a phase) */
	uint64_t began_ns, closed_ns; /* when sampling began, and when its last on phase closed (0: none) */
	uint64_t wait_until_ns;	      /* an on phase's close waits for its gated steps to end until then */
	bool waited;		      /* ... and this one did */
	uint64_t waits, wait_ns;      /* closes that waited for a step to end, and how long in all */
	uint64_t sealed;	      /* closes that could wait no longer (struct ml_steps: gate) */
};

int tsample__new(struct memleak_bpf *skel, struct tsample **out)
{
	struct tsample *t = calloc(1, sizeof(*t));
	int err;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->skel = skel;
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (t->fd < 0) {
		err = -errno;
		free(t);
		return err;
	}
	*out = t;
	return 0;
}

void tsample__free(struct tsample *t)
{
	if (!t)
		return;
	close(t->fd);
	if (t->toggles)
		ml_info("tensor sampling: %" PRIu64 " toggles of the allocation probes, %.1f ms each on average; "
			"%" PRIu64 " closes waited %.1f ms on average for a step to end, %" PRIu64
			" sealed before it did",
			t->toggles, (double)t->toggle_ns / 1e6 / (double)t->toggles, t->waits,
			t->waits ? (double)t->wait_ns / 1e6 / (double)t->waits : 0.0, t->sealed);
	free(t);
}

/*
 * Records weigh the work of the whole cycle over the work the on phases sampled, releases counting work: the
 * probes slow the work while on, so more of it falls in the off phase than its share of the time says (2^shift).
 * A phase's sample is what the BPF side saw between its first and last allocation (struct ml_ts_phase), plus one
 * mean gap an allocation: the toggles themselves take tens of milliseconds, longer on a loaded machine, and are
 * neither side's.
 */
static void phase_begin(struct tsample *t)
{
	struct ml_ts_phase *p = &t->skel->bss->ts_phase;

	p->first = p->last = 0;
	__atomic_store_n(&p->calls, 0, __ATOMIC_SEQ_CST);
}

static void phase_end(struct tsample *t)
{
	const struct ml_ts_phase *p = &t->skel->bss->ts_phase;
	uint64_t calls = __atomic_load_n(&p->calls, __ATOMIC_SEQ_CST);

	t->calls += calls;
	if (calls >= 2 && p->last >= p->first) {
		t->span += p->last - p->first;
		t->gaps += calls - 1;
	}
}

static void weigh(struct tsample *t, const struct tsample_env *e)
{
	uint64_t total = __atomic_load_n(&t->skel->bss->ts_phase.frees, __ATOMIC_SEQ_CST) - t->frees_at;
	double w;
	int err;

	if (t->span < SAMPLE_MIN_TICKS || !t->gaps)
		return; /* too few: the time share (2^shift) stands */
	w = (double)total * (double)t->gaps / ((double)t->span * (double)t->calls);
	ml_dbg("tensor sampling: 1/%u on, releases %" PRIu64 " in all, %" PRIu64 " spanned by %" PRIu64
	       " allocations of %" PRIu64 ": weight %.2f",
	       1U << t->shift, total, t->span, t->gaps, t->calls, w);
	err = ledger__add_scale(e->ledger, ML_LAYER_TORCH_CPU, t->since_ns, w < 1 ? 1 : w);
	if (err)
		ml_notice("tensor sampling: cannot weigh the records: %s", strerror(-err));
}

/* How long an on phase lasts now. */
static uint64_t on_ns(const struct tsample *t)
{
	return (uint64_t)(OVERHEAD_TENSOR_PERIOD_S * 1e9) >> t->shift;
}

/* The on phase's time from `from`: its end, and how long its close may wait for its steps (ML_TS_STEP_SPAN more). */
static void window(struct tsample *t, uint64_t from)
{
	__atomic_store_n(&t->skel->bss->ts_from_ns, from, __ATOMIC_SEQ_CST);
	__atomic_store_n(&t->skel->bss->ts_until_ns, from + on_ns(t), __ATOMIC_SEQ_CST);
	t->wait_until_ns = from + (ML_TS_STEP_SPAN + 1) * on_ns(t) + 10000000;
}

/* Whether a step begun in the current on phase is still under way, recording every tensor it makes. */
static bool steps_gated(const struct tsample *t)
{
	uint32_t id = __atomic_load_n(&t->skel->bss->ts_phase_id, __ATOMIC_SEQ_CST), key = 0, next;
	int fd = bpf_map__fd(t->skel->maps.steps);
	bool first = true;

	while (!bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		struct ml_steps v;

		first = false;
		key = next;
		if (!bpf_map_lookup_elem(fd, &key, &v) && v.gate == id &&
		    ml_gate_open(v.gate, t->skel->bss->ts_sealed_id))
			return true;
	}
	return false;
}

/*
 * An on phase ends when its time is up and no step begun in it is under way (struct ml_steps: gate): re-armed for
 * a few milliseconds while one is, up to ML_TS_STEP_SPAN phases' length; then sealed, its unfinished steps not
 * counted. False while it waits.
 */
static bool close_ready(struct tsample *t)
{
	struct itimerspec its = {};
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC);

	if (!steps_gated(t))
		return true;
	if (now < t->wait_until_ns) {
		t->waited = true;
		ml_timespec(&its.it_value, 0.002);
		timerfd_settime(t->fd, 0, &its, NULL);
		return false;
	}
	__atomic_store_n(&t->skel->bss->ts_sealed_id, t->skel->bss->ts_phase_id, __ATOMIC_SEQ_CST);
	t->sealed++;
	return true;
}

/* The tensor layers' allocation side on or off in every traced process; the timer set for the next toggle. */
static void toggle(struct tsample *t, const struct tsample_env *e, bool on)
{
	double period = OVERHEAD_TENSOR_PERIOD_S, on_s = period / (1U << t->shift), off_s = period - on_s;
	struct itimerspec its = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC), until = t->skel->bss->ts_until_ns;
	int err = 0;

	if (!on && t->on && t->waited && t0 > until) { /* waited for steps: the share stays 1/2^n */
		double held = (double)(t0 - t->skel->bss->ts_from_ns) / 1e9;

		t->waits++;
		t->wait_ns += t0 - until;
		if (held > on_s)
			off_s = held * (double)((1U << t->shift) - 1);
	}
	t->waited = false;

	if (on)
		phase_begin(t);
	if (e->root)
		err = probes__pause(e->root, TENSOR_LAYERS, !on);
	if (e->followers)
		followers__pause(e->followers, TENSOR_LAYERS, !on);
	if (on) { /* the phase's length counts from when its probes are all on */
		__atomic_add_fetch(&t->skel->bss->ts_phase_id, 1, __ATOMIC_SEQ_CST);
		window(t, ml_clock_ns(CLOCK_MONOTONIC));
	}
	/* Weighed as an on phase closes (no allocation returns in view any more): whole cycles only, so that
	 * the weight does not swing with the phase a report falls in. */
	if (!on && t->on) {
		phase_end(t);
		weigh(t, e);
		t->closed_ns = ml_clock_ns(CLOCK_MONOTONIC);
	}
	if (err && err != -ESRCH)
		ml_notice("tensor sampling: cannot attach the allocation probes again: %s", strerror(-err));
	t->on = on;
	t->toggles++;
	t->toggle_ns += ml_clock_ns(CLOCK_MONOTONIC) - t0;
	ml_timespec(&its.it_value, on ? on_s : off_s);
	timerfd_settime(t->fd, 0, &its, NULL);
}

/* k more halvings of the time the tensor allocation probes are on: their records weigh 2^k times as much. */
void tsample__more(struct tsample *t, const struct tsample_env *e, unsigned int k)
{
	unsigned int first = !t->shift;
	int err;

	t->shift += k;
	t->skel->bss->wrap_sampled = 1;
	t->since_ns = ml_clock_ns(CLOCK_MONOTONIC);
	t->frees_at = __atomic_load_n(&t->skel->bss->ts_phase.frees, __ATOMIC_SEQ_CST);
	t->span = t->gaps = t->calls = 0;
	if (t->on) { /* a phase under way counts from here, at the new length */
		phase_begin(t);
		window(t, t->since_ns);
	}
	err = ledger__set_weight(e->ledger, ML_LAYER_TORCH_CPU, t->since_ns, t->shift);
	if (err)
		ml_notice("tensor sampling: cannot weigh the records: %s", strerror(-err));
	if (first) {
		t->began_ns = t->since_ns;
		toggle(t, e, false); /* the first period starts with the probes off; later ones keep their phase */
	}
}

void tsample__stop(struct tsample *t)
{
	if (!t->shift)
		return;
	t->shift = 0;
	t->skel->bss->wrap_sampled = 0;
	timerfd_settime(t->fd, 0, &(struct itimerspec){}, NULL);
}

int tsample__timer_fd(const struct tsample *t)
{
	return t ? t->fd : -1;
}

void tsample__timer(struct tsample *t, const struct tsample_env *e)
{
	uint64_t expirations;

	if (read(t->fd, &expirations, sizeof(expirations)) < 0 || !t->shift)
		return;
	if (t->on && !close_ready(t))
		return;
	toggle(t, e, !t->on);
}

uint64_t tsample__phase_ns(const struct tsample *t)
{
	if (!t || !t->shift)
		return 0;
	return t->closed_ns > t->began_ns ? t->closed_ns : t->began_ns;
}
