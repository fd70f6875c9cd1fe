/*
 * Leak verdicts: per-stack history of outstanding bytes and live allocations across reports, and
 * growing/stable/shrinking/churn calls. A stack grows when its bytes or its allocation count rise (ml_trend).
 */
#include "judge/verdict.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "collect/steps.h"
#include "judge/history.h"
#include "judge/trend.h"
#include "lib/grow.h"

/*
 * The share of an interval after which a final report is an interval of its own: under sampling it misses a
 * step about as often as a whole one does (e^-0.9 = 41 %, e^-1 = 37 %, for a step an interval).
 */
#define RESTATE_WHOLE 0.9

struct verdicts {
	struct hist *h; /* in the last snapshot's row order */
	size_t n, cap_h;
	struct hist *spare; /* the buffer the next update writes its histories into (room()) */
	size_t cap_spare, cap_j, cap_order, cap_rank;
	uint32_t *slot; /* h's index by key (find_hist): cap slots (a power of two), each an index + 1 or 0: free */
	size_t cap;
	struct ml_judgement *j;
	size_t *order;
	double *rank; /* what growing rows are ordered by: their leak score, but see rank_rows() */
	uint64_t t0_ns;
	uint64_t updates;
	double last_now;	   /* the last report's time */
	uint64_t hw_closed_ns;	   /* the C heap's last sampling window closed then (verdicts__heap_window) */
	uint64_t ts_closed_ns;	   /* tensor sampling's last on phase closed then (verdicts__tensor_phase) */
	uint64_t seq;		   /* the report being judged (verdicts__report_seq); 0: the update's number */
	const struct steps *steps; /* the step clocks (verdicts__steps), or NULL */
};

void verdicts__steps(struct verdicts *v, const struct steps *st)
{
	v->steps = st;
}

void verdicts__heap_window(struct verdicts *v, uint64_t closed_ns)
{
	v->hw_closed_ns = closed_ns;
}

void verdicts__tensor_phase(struct verdicts *v, uint64_t closed_ns)
{
	v->ts_closed_ns = closed_ns;
}

void verdicts__report_seq(struct verdicts *v, uint64_t seq)
{
	v->seq = seq;
}

const char *ml_verdict_name(enum ml_verdict v)
{
	static const char *const names[] = {"new", "growing", "stable", "shrinking", "churn", "import", "victim"};

	return v <= ML_V_VICTIM ? names[v] : "unknown";
}

int verdicts__new(struct verdicts **out)
{
	*out = calloc(1, sizeof(struct verdicts));
	return *out ? 0 : -ENOMEM;
}

void verdicts__free(struct verdicts *v)
{
	if (!v)
		return;
	free(v->h);
	free(v->spare);
	free(v->slot);
	free(v->j);
	free(v->order);
	free(v->rank);
	free(v);
}

/*
 * The histories are found by their key's hash (ml_key_hash, as the ledger's rows are), not kept sorted: sorting
 * moved each 1.3-KB history a dozen times a report, and with the bsearch took 35-41 % of the tool's CPU at full
 * fidelity (two million records).
 */
/* The index of h[n] by key, twice as many slots as histories at least. 0 or -ENOMEM. */
static int index_build(const struct hist *h, size_t n, uint32_t **slot, size_t *cap)
{
	size_t c = 16;

	while (c < 2 * n)
		c *= 2;
	*slot = calloc(c, sizeof(**slot));
	if (!*slot)
		return -ENOMEM;
	*cap = c;
	for (size_t i = 0; i < n; i++) {
		size_t s = ml_key_hash(&h[i].key) & (c - 1);

		while ((*slot)[s])
			s = (s + 1) & (c - 1);
		(*slot)[s] = (uint32_t)i + 1;
	}
	return 0;
}

static struct hist *find_hist(const struct verdicts *v, const struct ml_agg_key *k)
{
	for (size_t s = v->cap ? ml_key_hash(k) & (v->cap - 1) : 0; v->cap && v->slot[s]; s = (s + 1) & (v->cap - 1))
		if (ml_key_same(&v->h[v->slot[s] - 1].key, k))
			return &v->h[v->slot[s] - 1];
	return NULL;
}

/*
 * A C heap window row's records' mean window weight: each window's own (its length against its cycle, set once),
 * whatever its sizes' weights make of it. As windows shorten, a record stands for more: sampled_leak's kept blocks
 * under jemalloc, 43, 88, 141, 152, 157 records at one weight, read 7.1, 14.5, 23.3, 25.1, 25.9 K and stable
 * beside stress-ng where the counts reported rose evenly. 0 when the windows weigh all records alike.
 */
static double window_mean(const struct ml_row *r)
{
	return r->window_weights > 0 && r->weighed_records ? (double)r->window_weights / (double)r->weighed_records : 0;
}

/*
 * A sampled record weighs what its layer's weight is now, and that weight moves each time it is measured again:
 * a C heap window's with its size's weight, a sampled tensor's with the releases its layer's on phases spanned.
 * Such a row is judged on its records seen at today's weights, else a weight measured higher reads as growth of
 * a row whose records stay the same (five of them, "growing" from 9.7 to 18.7 KB), and one measured lower as a
 * fall (models_list.py's kept models, 4.1 MB then 2.5 MB, read stable for five reports); each sample's weighed
 * records in proportion to their window weight (window_mean). Records that weigh 1 (made before sampling began)
 * stay at 1: weighed too, a leak's rate would slow 2^shift-fold from then on. What it retained and its count
 * growth stay differences of the counts reported (j), as usage.md defines them. The series judged go to rb and rc.
 */
static struct ml_judgement by_records(const struct ml_row *r, const struct hist *h, const struct ml_judgement *j,
				      const double *t, size_t n, double age, double interval, double step, double *rb,
				      double *rc)
{
	double unit_b = (double)(r->raw_bytes - r->weighed_raw_bytes),
	       unit_c = (double)(r->records - r->weighed_records);
	struct ml_judgement jr;

	hist__reweighed(h, ((double)r->bytes - unit_b) / (double)r->weighed_raw_bytes,
			((double)r->count - unit_c) / (double)r->weighed_records, window_mean(r), rb, rc);
	jr = ml_judge(t, rb, rc, n, age, interval, step);
	jr.count_growth = j->count_growth;
	jr.bytes.net = j->bytes.net;
	jr.count.net = j->count.net;
	jr.from_t = j->from_t; /* where those differences begin */
	return jr;
}

/* A row of the C heap's sampling windows: its records change only while a window is open. */
static bool heap_window_row(const struct ml_row *r)
{
	return (r->traits & ML_ROW_SAMPLED) && r->key.layer == ML_LAYER_LIBC;
}

/* A row of tensor sampling's records: they come only while the allocation probes are on. */
static bool tensor_row(const struct ml_row *r)
{
	return r->key.layer == ML_LAYER_TORCH_CPU && (r->traits & ML_ROW_WEIGHED);
}

/*
 * The time of a torch_cpu row's sample under tensor sampling: when the last on phase closed (or sampling began,
 * before the first), not the report. Tensor sampling's period (1 s) is about a report's, so reports saw none, one
 * or two phases each (models_list.py's kept models: 0.84, 1.43, 1.43, 2.10, 3.03 MB, rates CV over 1: stable
 * for eight reports). At the phases the samples are even. A C heap window's row (heap_window_row) is timed the
 * same way at its last window's close (verdicts__heap_window): sampled_leak's kept blocks, timed at the reports,
 * read 10.0, 10.5, 12.9, 18.6, 19.0 K blocks and stable. True when no phase closed since the row's last sample:
 * it is restated then, at that sample's time.
 */
static uint64_t phase_at_ns(const struct verdicts *v, uint64_t closed_ns, uint64_t now_ns)
{
	return closed_ns < v->t0_ns ? v->t0_ns : closed_ns > now_ns ? now_ns : closed_ns;
}

static bool phase_time(const struct verdicts *v, uint64_t closed_ns, const struct hist *old, uint64_t now_ns, double *t)
{
	uint64_t at = phase_at_ns(v, closed_ns, now_ns);
	double last = old && old->n_short ? old->recent[old->n_short - 1].t : -1;

	*t = (double)(at - v->t0_ns) / 1e9;
	if (*t > last)
		return false;
	*t = last;
	return true;
}

/*
 * The time of a sample of a process that steps: its clock stands still while the process pauses (STEPS_PAUSE_MAX_S
 * at most a pause), so a leak that waits with its job between epochs is not read as one that stopped. True when it
 * made no step since the row's last sample and pauses (a step overdue), within a pause's cap: that sample is
 * restated, at its time. Told by the
 * steps, not the times: a tensor-sampled row's are its phases', up to a second off the reports the pauses count.
 */
static bool step_time(const struct hist *old, const struct step_count *sc, double interval, double *t)
{
	const struct sample *last = old && old->n_short ? &old->recent[old->n_short - 1] : NULL;

	*t -= sc->paused_s;
	if (!last)
		return false;
	if (last->steps == (double)sc->count && sc->pause_s > 0 && sc->pause_s <= STEPS_PAUSE_MAX_S) {
		*t = last->t;
		return true;
	}
	if (*t <= last->t) /* steps again, a phase's moment after the pause began: an interval on */
		*t = last->t + interval;
	return false;
}

/* A row judged on its records at today's weights (by_records): a C heap window's, or a sampled tensor layer's. */
static bool reweighed_row(const struct ml_row *r)
{
	return (heap_window_row(r) || tensor_row(r)) && r->weighed_records && r->weighed_raw_bytes &&
	       r->weighed_raw_bytes <= r->raw_bytes && r->weighed_records <= r->records;
}

/* A row's process's steps at the report: all of them, those tensor sampling saw, and whether it saw them whole. */
struct row_steps {
	double steps, sampled;
	bool whole;
};

/*
 * Sampled steps a tensor-sampled row's growth per step is read over: a step sampled whole holds every tensor it
 * made, one sampled in time may hold one more or one fewer than it made (a phase began or ended between them).
 */
#define MIN_SAMPLED_WHOLE 4
#define MIN_SAMPLED_TIME 8

/*
 * A tensor-sampled row's growth per step: the bytes and number of its records made under sampling against the steps
 * tensor sampling saw, both as of the reports (least squares). Weighed records stand for the phases' share of the
 * work, which swings with how few steps a phase holds: epochs.py's 1 MiB a step read 0.94 to 1.19 MiB so, and
 * records over the steps that made them read it exactly. False while the window holds under two such samples, or
 * fewer sampled steps than min.
 */
static bool per_sampled_step(struct ml_judgement *j, const struct hist *h, unsigned int min)
{
	double x[ML_HIST_SHORT + ML_HIST_LONG], yb[ML_HIST_SHORT + ML_HIST_LONG], yc[ML_HIST_SHORT + ML_HIST_LONG];
	size_t m = 0;

	for (uint32_t i = 0; i < hist__len(h); i++) {
		const struct sample *s = hist__at(h, i);

		if (s->t >= j->from_t && s->sampled > 0 && s->wc > 0)
			x[m] = s->sampled, yb[m] = s->wb, yc[m++] = s->wc;
	}
	if (m < 2 || x[m - 1] < x[0] + min)
		return false;
	j->steps = (uint64_t)(x[m - 1] - x[0]);
	j->bytes_per_step = ml_slope(x, yb, m);
	j->count_per_step = ml_slope(x, yc, m);
	return true;
}

/* A growth test's outcome and evidence from another series of the same signal; its net and slope stay. */
static void take_evidence(struct ml_trend *to, const struct ml_trend *from)
{
	to->rising = from->rising;
	to->highs = from->highs;
	to->regularity = from->regularity;
	to->evidence = from->evidence;
}

/*
 * A row sampled by whole steps, judged as well against the steps sampling saw: each holds every tensor it made, so a
 * leak adds the same records at each, however few a report's phases held. Timed, one to four sampled steps a report
 * (epochs.py beside other work, 1 in 16) made its rates uneven, and it read stable through its pause. Reports that
 * saw no new sampled step add no sample here. Growing so, the row is a candidate with that evidence; its rates,
 * its window and what it retained stay those in time.
 */
static struct ml_judgement by_sampled_steps(const struct hist *h, const struct ml_judgement *j, double age,
					    double interval)
{
	double x[ML_HIST_SHORT + ML_HIST_LONG], yb[ML_HIST_SHORT + ML_HIST_LONG], yc[ML_HIST_SHORT + ML_HIST_LONG];
	struct ml_judgement js, k = *j;
	size_t m = 0;

	if (j->verdict == ML_V_GROWING)
		return *j;
	for (uint32_t i = 0; i < hist__len(h); i++) {
		const struct sample *s = hist__at(h, i);

		if (s->sampled <= 0 || s->wc <= 0)
			continue;
		if (m && s->sampled <= x[m - 1]) /* no step sampled since: the later records stand */
			m--;
		x[m] = s->sampled, yb[m] = s->wb, yc[m++] = s->wc;
	}
	js = ml_judge(x, yb, yc, m, age, interval, 0);
	if (js.verdict != ML_V_GROWING)
		return *j;
	k.verdict = ML_V_GROWING;
	k.monotonic = js.monotonic;
	k.leak_score = js.leak_score;
	take_evidence(&k.bytes, &js.bytes);
	take_evidence(&k.count, &js.count);
	return k;
}

/* Growth per step over the judged samples (from from_t) that counted steps: least squares over the steps. */
static void per_step(struct ml_judgement *j, const double *t, const double *b, const double *c, const double *st,
		     size_t n)
{
	double x[ML_HIST_SHORT + ML_HIST_LONG], yb[ML_HIST_SHORT + ML_HIST_LONG], yc[ML_HIST_SHORT + ML_HIST_LONG];
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (t[i] >= j->from_t && st[i] > 0)
			x[m] = st[i], yb[m] = b[i], yc[m++] = c[i];
	if (m < 2 || x[m - 1] <= x[0])
		return;
	j->steps = (uint64_t)(x[m - 1] - x[0]);
	j->bytes_per_step = ml_slope(x, yb, m);
	j->count_per_step = ml_slope(x, yc, m);
}

/* A row's judgement, its history (old, or none for a new stack) carried into *h with the sample of now. */
static struct ml_judgement judge_row(struct hist *h, const struct hist *old, const struct ml_row *r, double now,
				     uint64_t seq, bool merge, double age, double interval, const struct row_steps *rs)
{
	double t[ML_HIST_SHORT + ML_HIST_LONG], b[ML_HIST_SHORT + ML_HIST_LONG], c[ML_HIST_SHORT + ML_HIST_LONG];
	double rb[ML_HIST_SHORT + ML_HIST_LONG], rc[ML_HIST_SHORT + ML_HIST_LONG];
	double prev = old && old->n_short ? old->recent[old->n_short - 1].c : 0;
	double step = (r->traits & ML_ROW_WEIGHED) && r->records ? (double)r->bytes / (double)r->records : 0;
	struct sample s = {.t = now,
			   .b = (double)r->bytes,
			   .c = (double)r->count,
			   .rb = (float)r->raw_bytes,
			   .rc = (float)r->records,
			   .wb = (float)r->weighed_raw_bytes,
			   .wc = (float)r->weighed_records,
			   .seq = (uint32_t)seq,
			   .wmean = (float)window_mean(r),
			   .steps = rs->steps,
			   .sampled = rs->sampled};
	struct ml_judgement j;
	size_t n;

	*h = old ? *old : (struct hist){.key = r->key};
	h->key = r->key; /* a cut row's history goes on under the complete stack's key */
	if (merge && old)
		hist__restate(h, &s);
	else
		hist__push(h, &s);
	n = hist__series(h, t, b, c);
	j = ml_judge(t, b, c, n, age, interval, step);
	if (merge && old)
		j.count_growth = (int64_t)((double)r->count - prev); /* since the last report still */
	if (reweighed_row(r))
		j = by_records(r, h, &j, t, n, age, interval, step, rb, rc);
	if (rs->whole && tensor_row(r))
		j = by_sampled_steps(h, &j, age, interval);
	j.from_report = hist__report_at(h, j.from_t);
	if (rs->steps > 0) {
		double st[ML_HIST_SHORT + ML_HIST_LONG];

		for (uint32_t i = 0; i < hist__len(h); i++)
			st[i] = hist__at(h, i)->steps;
		if (!tensor_row(r) || !per_sampled_step(&j, h, rs->whole ? MIN_SAMPLED_WHOLE : MIN_SAMPLED_TIME))
			per_step(&j, t, b, c, st,
				 n); /* as reported: at today's weights epochs.py's 1 MiB read 0.74 MiB */
	}
	return j;
}

/*
 * A final report cannot overturn a growing verdict on a row that freed nothing since the last (its bytes or its
 * records did not fall). Within an interval of the last, the restated sample can still jump (a sampling window's
 * records, each weighing 16, landing in it) or dip (the records reweighed, none freed), and either uneven last
 * step read models_list.py's kept models, growing a moment before, as stable. A whole interval on, it is the
 * interval of the stop: the losses loop's rows, growing at report 4 at full fidelity, read stable 1.09 s later
 * in the final report (a suite's run, the loop stalled on a busy machine).
 */
static struct ml_judgement keep_growing(const struct hist *old, const struct ml_row *r, const struct ml_judgement *j)
{
	const struct sample *last = old->n_short ? &old->recent[old->n_short - 1] : NULL;
	struct ml_judgement k = old->last;

	if (old->last.verdict != ML_V_GROWING || j->verdict == ML_V_GROWING || !last || (r->traits & ML_ROW_IMPORT) ||
	    ((double)r->bytes < last->b && (double)r->records < last->rc))
		return *j;
	k.count_growth = j->count_growth;
	k.intervals = j->intervals;
	k.bytes.net = j->bytes.net;
	k.count.net = j->count.net;
	k.from_t = j->from_t;
	return k;
}

/* A row's judgement, adjusted for what its traits say of the evidence. */
static struct ml_judgement by_traits(const struct ml_row *r, struct ml_judgement j, const struct hist *old, bool final)
{
	/*
	 * Imports grow while they run and stay: start-up, not a leak. Told by the importlib frames rather
	 * than a time window, since loading a model later is start-up too and can leak.
	 */
	if (r->traits & ML_ROW_IMPORT)
		j = (struct ml_judgement){
		    .verdict = ML_V_IMPORT, .intervals = j.intervals, .count_growth = j.count_growth};
	/*
	 * Fresh C heap (the break's growth, the first touch of heap pages, or address space heap-growth
	 * mode saw a stack add) names the code that reached new memory, not what keeps it: where freed
	 * blocks cannot be reused (fragmentation), the victim. The weaker evidence: half the score, so an
	 * allocation stack that grows as well ranks above it.
	 */
	if (r->traits & (ML_ROW_BRK | ML_ROW_SPACE))
		j.leak_score *= 0.5;
	/* A row of a few sampled records, each standing for hundreds, moves by hundreds at random. */
	if ((r->traits & ML_ROW_SAMPLED) && r->records < ML_SAMPLED_MIN_RECORDS && j.verdict == ML_V_GROWING)
		j = (struct ml_judgement){
		    .verdict = ML_V_NEW, .intervals = j.intervals, .count_growth = j.count_growth};
	if (final && old)
		j = keep_growing(old, r, &j);
	return j;
}

static const struct verdicts *cmp_ctx;

/*
 * Growing rows are ordered by leak score, raised by up to RANK_BY_GROWTH in proportion to the row's growth rate
 * over the fastest-growing candidate's: evidence first, and between near-equal evidence the row that grows most
 * (a model's 190 MB of tensors at 0.4975 came after eleven 90-KB rows at 0.5 of its C heap metadata). One
 * exception: a cuda row (memory PyTorch's caching allocator reserved) comes after every growing torch_cuda row
 * (tensors) of its process, whose growth its own follows from. The tensors' line is where the job keeps its memory.
 */
#define RANK_BY_GROWTH 0.1

static void rank_rows(struct verdicts *v, const struct ml_snapshot *s)
{
	double top = 0;

	for (size_t i = 0; i < s->nrows; i++)
		if (v->j[i].verdict == ML_V_GROWING && v->j[i].growth_bytes_per_s > top)
			top = v->j[i].growth_bytes_per_s;
	for (size_t i = 0; i < s->nrows; i++) {
		double g = v->j[i].verdict == ML_V_GROWING && top > 0 ? fmax(0, v->j[i].growth_bytes_per_s) / top : 0;

		v->rank[i] = v->j[i].leak_score * (1 + RANK_BY_GROWTH * g);
	}
	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *t = &s->rows[i];

		if (t->key.layer != ML_LAYER_TORCH_CUDA || v->j[i].verdict != ML_V_GROWING)
			continue;
		for (size_t k = 0; k < s->nrows; k++)
			if (s->rows[k].key.layer == ML_LAYER_CUDA && s->rows[k].key.tgid == t->key.tgid &&
			    v->rank[k] >= v->rank[i])
				v->rank[k] = nextafter(v->rank[i], -1.0);
	}
}

static int cmp_order(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	const struct ml_judgement *jx = &cmp_ctx->j[x], *jy = &cmp_ctx->j[y];
	bool gx = jx->verdict == ML_V_GROWING, gy = jy->verdict == ML_V_GROWING;

	if (gx != gy)
		return gx ? -1 : 1;
	if (gx && cmp_ctx->rank[x] != cmp_ctx->rank[y])
		return cmp_ctx->rank[x] > cmp_ctx->rank[y] ? -1 : 1;
	/* Equal scores: bytes and count both rising is more evidence than one of them. */
	if (gx && (jx->bytes.rising && jx->count.rising) != (jy->bytes.rising && jy->count.rising))
		return jx->bytes.rising && jx->count.rising ? -1 : 1;
	return (x > y) - (x < y); /* rows come sorted by bytes */
}

/* A row of the report at now_ns (now s after the first) judged, its history carried from v's into *h. */
static struct ml_judgement update_row(const struct verdicts *v, const struct ml_row *r, struct hist *h, uint64_t now_ns,
				      double now, double interval, bool merge, bool final)
{
	struct hist *old = find_hist(v, &r->key);
	/* A stack whose walks were cut short until its table came goes on with the cut row's history. */
	if (!old && r->cut_count && v->n)
		old = find_hist(v, &r->cut_key);
	double age = r->oldest_ts_ns <= now_ns ? (double)(now_ns - r->oldest_ts_ns) / 1e9 : 0;
	/* Records that come only in on phases (C heap windows, tensor sampling's): timed at the last close. */
	uint64_t closed = heap_window_row(r)		       ? v->hw_closed_ns
			  : r->key.layer == ML_LAYER_TORCH_CPU ? v->ts_closed_ns
							       : 0;
	const struct step_count *sc = steps__of(v->steps, r->key.tgid);
	struct row_steps rs = {
	    .steps = sc ? (double)sc->count : 0, .sampled = sc ? (double)sc->sampled : 0, .whole = sc && sc->whole};
	double t = now;
	struct ml_judgement j;
	bool held = false;

	if (closed && phase_time(v, closed, old, now_ns, &t)) {
		held = true;
		rs.steps = old->recent[old->n_short - 1].steps; /* restated, with its steps */
	} else if (sc) {
		held = step_time(old, sc, interval, &t);
		if (closed) /* the steps at its phase's close, not at the report */
			rs.steps = steps__count_at(sc, phase_at_ns(v, closed, now_ns));
	}
	j = judge_row(h, old, r, t, v->seq ? v->seq : v->updates + 1, merge || held, age, interval, &rs);
	j = by_traits(r, j, old, final);
	h->last = j;
	return j;
}

/*
 * The arrays an update writes, kept from report to report: the histories into the buffer the update before last
 * wrote, the rest in place. Allocated afresh, 1.3 KB a row for 480,000 rows of torch's import at full fidelity,
 * their page faults were a tenth of the tool's CPU. 0 or -ENOMEM, with nothing changed.
 */
static int room(struct verdicts *v, size_t n)
{
	if (ml_grow(&v->spare, &v->cap_spare, n, sizeof(*v->spare)) || ml_grow(&v->j, &v->cap_j, n, sizeof(*v->j)) ||
	    ml_grow(&v->order, &v->cap_order, n, sizeof(*v->order)) ||
	    ml_grow(&v->rank, &v->cap_rank, n, sizeof(*v->rank)))
		return -ENOMEM;
	return 0;
}

/* The buffers back to what n rows need once a burst of rows has gone: a run's start need not stay resident. */
static void shrink(struct verdicts *v, size_t n)
{
	if (ml_oversized(v->cap_spare, n)) { /* written whole by the next update: nothing to keep */
		free(v->spare);
		v->spare = NULL;
		v->cap_spare = 0;
	}
	ml_fit(&v->j, &v->cap_j, n, sizeof(*v->j));
	ml_fit(&v->order, &v->cap_order, n, sizeof(*v->order));
	ml_fit(&v->rank, &v->cap_rank, n, sizeof(*v->rank));
}

int verdicts__update(struct verdicts *v, const struct ml_snapshot *s, bool by_bytes, double restate_s,
		     const struct ml_judgement **out, const size_t **order)
{
	double now, interval = s->elapsed_s;
	struct hist *nh;
	uint32_t *slot;
	size_t cap;
	bool merge;

	if (room(v, s->nrows ? s->nrows : 1))
		return -ENOMEM;
	nh = v->spare;
	if (!v->t0_ns)
		v->t0_ns = s->now_ns;
	now = (double)(s->now_ns - v->t0_ns) / 1e9;
	/*
	 * A final report within an interval of the last (a signal between reports) restates the last sample rather
	 * than adding one: part of an interval sees too few events to rise evenly, and under sampling often none,
	 * so a leak judged growing a moment ago would read as stable. One whose interval is all but whole (the last
	 * of COUNT reports, on its timer tick but a fraction of a ms early as often as late) is a sample of its
	 * own: restated, `-p PID 2 4` judged three samples and called a steady leak new.
	 */
	merge = v->updates && now - v->last_now < restate_s * RESTATE_WHOLE;
	if (merge)
		interval = restate_s;
	/* Stacks that vanished (all their memory freed) drop their history: the table stays as big as the report. */
	for (size_t i = 0; i < s->nrows; i++) {
		v->j[i] = update_row(v, &s->rows[i], &nh[i], s->now_ns, now, interval, merge, restate_s > 0);
		v->order[i] = i;
		v->rank[i] = 0;
	}
	if (index_build(nh, s->nrows, &slot, &cap))
		return -ENOMEM;
	v->last_now = now;
	v->updates++;
	free(v->slot);
	v->slot = slot;
	v->cap = cap;
	v->spare = v->h;
	v->h = nh;
	cap = v->cap_spare;
	v->cap_spare = v->cap_h;
	v->cap_h = cap;
	v->n = s->nrows;
	shrink(v, s->nrows);
	if (!by_bytes) {
		rank_rows(v, s);
		cmp_ctx = v;
		qsort(v->order, s->nrows, sizeof(*v->order), cmp_order);
		cmp_ctx = NULL;
	}
	*out = v->j;
	*order = v->order;
	return 0;
}

void verdicts__rejudge(struct verdicts *v, const struct ml_snapshot *s, bool by_bytes,
		       enum ml_verdict (*again)(void *ctx, const struct ml_agg_key *k), void *ctx)
{
	bool any = false;

	for (size_t i = 0; i < s->nrows && v->j; i++) {
		enum ml_verdict to;

		if (v->j[i].verdict != ML_V_GROWING || (to = again(ctx, &s->rows[i].key)) == ML_V_GROWING)
			continue;
		v->j[i].verdict = to;
		v->j[i].leak_score = 0;
		any = true;
	}
	if (!any || by_bytes)
		return;
	for (size_t i = 0; i < s->nrows; i++)
		v->order[i] = i;
	rank_rows(v, s);
	cmp_ctx = v;
	qsort(v->order, s->nrows, sizeof(*v->order), cmp_order);
	cmp_ctx = NULL;
}

#define SPREAD_MAX 256 /* the growing rows spread: a report shows tens; each is symbolized for its site */

void verdicts__spread(struct verdicts *v, const struct ml_snapshot *s, bool by_bytes,
		      uint64_t (*site)(void *ctx, const struct ml_row *r), void *ctx)
{
	size_t n = 0, firsts = 0, later = 0, *tail;
	uint64_t *seen;

	while (!by_bytes && v->order && n < s->nrows && n < SPREAD_MAX && v->j[v->order[n]].verdict == ML_V_GROWING)
		n++;
	if (n < 3)
		return;
	seen = malloc(n * sizeof(*seen));
	tail = malloc(n * sizeof(*tail));
	for (size_t i = 0; seen && tail && i < n; i++) {
		size_t row = v->order[i], k = 0;
		uint64_t at = site(ctx, &s->rows[row]);

		while (k < firsts && seen[k] != at)
			k++;
		if (k < firsts) {
			tail[later++] = row;
		} else {
			seen[firsts] = at;
			v->order[firsts++] = row; /* firsts <= i: the slot was read already */
		}
	}
	if (seen && tail)
		memcpy(v->order + firsts, tail, later * sizeof(*tail));
	free(seen);
	free(tail);
}

size_t verdicts__series(const struct verdicts *v, const struct ml_agg_key *key, uint64_t *seq, double *bytes,
			size_t max)
{
	const struct hist *h = find_hist(v, key);
	size_t n = 0;

	for (uint32_t i = 0; h && i < hist__len(h) && n < max; i++, n++) {
		const struct sample *s = hist__at(h, i);

		seq[n] = s->seq;
		bytes[n] = s->b;
	}
	return n;
}

size_t verdicts__memory(const struct verdicts *v)
{
	return (v->cap_h + v->cap_spare) * sizeof(struct hist) + v->cap_j * sizeof(struct ml_judgement) +
	       v->cap * sizeof(*v->slot) + (v->cap_order + v->cap_rank) * sizeof(size_t);
}
