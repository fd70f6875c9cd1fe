/* What a run found while its processes lived: the last live report, the rows' and layers' peaks. */
#include "judge/findings.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/u64map.h"

/* A row's highest outstanding bytes, by its key. */
struct row_high {
	struct ml_agg_key key;
	struct ml_high high;
	uint64_t freed; /* what the exit freed of it (findings__at_exit) */
};

/* A kept copy of a snapshot's arrays; the rest of it is copied whole. */
struct kept {
	struct ml_snapshot s;
	size_t caprows, capprocs, cappins;
	struct ml_judgement *j;
	size_t *order;
	size_t capj, caporder;
	uint64_t seq;
	bool have;
};

struct findings {
	struct kept live;
	struct u64map rows; /* hash of the key -> struct row_high */
	struct ml_peak peak;
	size_t cappeak, capprocs;
	struct u64map procs;		      /* tgid -> index + 1 in peak.procs */
	struct ml_high (*sums)[ML_LAYER_MAX]; /* a report's exact bytes per process and layer, as peak.procs */
	size_t capsums;
	uint64_t peak_snapped; /* the total when the peak's rows were last taken */
};

int findings__new(struct findings **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void findings__free(struct findings *f)
{
	if (!f)
		return;
	free(f->live.s.rows);
	free(f->live.s.procs);
	free(f->live.s.pins);
	free(f->live.j);
	free(f->live.order);
	u64map__free_values(&f->rows);
	free(f->procs.slots);
	free(f->sums);
	free(f->peak.rows);
	free(f->peak.procs);
	free(f);
}

bool findings__in_total(unsigned int layer)
{
	return layer != ML_LAYER_TORCH_CUDA && layer != ML_LAYER_TORCH_HOST && layer != ML_LAYER_RSS &&
	       layer < ML_LAYER_MAX;
}

/* Copy s into k, its arrays into k's own (grown as needed). 0 or -ENOMEM (k unchanged but for capacity). */
static int keep_snapshot(struct kept *k, const struct ml_snapshot *s, const struct ml_judgement *j, const size_t *order)
{
	struct ml_row *rows;
	struct ml_proc_total *procs;
	struct ml_pin *pins;

	if (ml_grow(&k->s.rows, &k->caprows, s->nrows, sizeof(*s->rows)) ||
	    ml_grow(&k->s.procs, &k->capprocs, s->nprocs, sizeof(*s->procs)) ||
	    ml_grow(&k->s.pins, &k->cappins, s->npins, sizeof(*s->pins)) ||
	    ml_grow(&k->j, &k->capj, s->nrows, sizeof(*j)) ||
	    ml_grow(&k->order, &k->caporder, s->nrows, sizeof(*order)))
		return -ENOMEM;
	rows = k->s.rows;
	procs = k->s.procs;
	pins = k->s.pins;
	k->s = *s;
	k->s.rows = rows;
	k->s.procs = procs;
	k->s.pins = pins;
	if (s->nrows) {
		memcpy(rows, s->rows, s->nrows * sizeof(*rows));
		memcpy(k->j, j, s->nrows * sizeof(*j));
		memcpy(k->order, order, s->nrows * sizeof(*order));
	}
	if (s->nprocs)
		memcpy(procs, s->procs, s->nprocs * sizeof(*procs));
	if (s->npins)
		memcpy(pins, s->pins, s->npins * sizeof(*pins));
	k->have = true;
	return 0;
}

static void raise_high(struct ml_high *h, uint64_t bytes, uint64_t count, uint64_t now)
{
	if (h->at_ns && bytes <= h->bytes)
		return;
	h->bytes = bytes;
	h->count = count;
	h->at_ns = now;
}

/* Each row's own peak. -ENOMEM leaves later rows without theirs. */
static int row_peaks(struct findings *f, const struct ml_snapshot *s)
{
	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *r = &s->rows[i];
		uint64_t h = ml_key_hash(&r->key);
		struct row_high *rh = u64map__get(&f->rows, h);

		if (rh && !ml_key_same(&rh->key, &r->key))
			continue; /* another row with the same hash: the first keeps the place */
		if (!rh) {
			rh = calloc(1, sizeof(*rh));
			if (!rh || u64map__put(&f->rows, h, rh)) {
				free(rh);
				return -ENOMEM;
			}
			rh->key = r->key;
		}
		raise_high(&rh->high, r->bytes, r->count, s->now_ns);
	}
	return 0;
}

/* Records that stand for more than themselves (sampled) give estimates, not a high-water mark: left out. */
static bool exact_row(const struct ml_row *r)
{
	return !(r->traits & ML_ROW_WEIGHED);
}

/* The exact rows' bytes and count per layer. */
static void exact_layers(const struct ml_snapshot *s, struct ml_high layers[ML_LAYER_MAX])
{
	memset(layers, 0, ML_LAYER_MAX * sizeof(*layers));
	for (size_t i = 0; i < s->nrows; i++)
		if (exact_row(&s->rows[i]) && s->rows[i].key.layer < ML_LAYER_MAX) {
			layers[s->rows[i].key.layer].bytes += s->rows[i].bytes;
			layers[s->rows[i].key.layer].count += s->rows[i].count;
		}
}

/* The largest exact rows of the moment (the snapshot's rows are largest first). -ENOMEM. */
static int snap_rows(struct findings *f, const struct ml_snapshot *s)
{
	struct ml_peak *p = &f->peak;

	if (ml_grow(&p->rows, &f->cappeak, FINDINGS_PEAK_ROWS, sizeof(*p->rows)))
		return -ENOMEM;
	p->nrows = 0;
	for (size_t i = 0; i < s->nrows && p->nrows < FINDINGS_PEAK_ROWS; i++)
		if (exact_row(&s->rows[i]))
			p->rows[p->nrows++] = s->rows[i];
	return 0;
}

/* A process's peaks, made at its first sight; NULL when out of memory. */
static struct ml_proc_peak *proc_peak(struct findings *f, int tgid)
{
	uintptr_t at = (uintptr_t)u64map__get(&f->procs, (uint64_t)(uint32_t)tgid);
	struct ml_peak *p = &f->peak;

	if (at)
		return &p->procs[at - 1];
	if (ml_grow(&p->procs, &f->capprocs, p->nprocs + 1, sizeof(*p->procs)) ||
	    u64map__put(&f->procs, (uint64_t)(uint32_t)tgid, (void *)(uintptr_t)(p->nprocs + 1)))
		return NULL;
	p->procs[p->nprocs] = (struct ml_proc_peak){.tgid = tgid};
	return &p->procs[p->nprocs++];
}

/* Each process's layers' peaks, from its exact rows (the processes' totals weigh sampled records): one pass. */
static int proc_peaks(struct findings *f, const struct ml_snapshot *s)
{
	struct ml_peak *p = &f->peak;

	for (size_t i = 0; i < s->nprocs; i++)
		if (!proc_peak(f, s->procs[i].tgid))
			return -ENOMEM;
	if (!p->nprocs)
		return 0;
	if (ml_grow(&f->sums, &f->capsums, p->nprocs, sizeof(*f->sums)))
		return -ENOMEM;
	memset(f->sums, 0, p->nprocs * sizeof(*f->sums));
	for (size_t k = 0; k < s->nrows; k++) {
		const struct ml_row *r = &s->rows[k];
		uintptr_t at = (uintptr_t)u64map__get(&f->procs, (uint64_t)r->key.tgid);

		if (at && exact_row(r) && r->key.layer < ML_LAYER_MAX) {
			f->sums[at - 1][r->key.layer].bytes += r->bytes;
			f->sums[at - 1][r->key.layer].count += r->count;
		}
	}
	for (size_t i = 0; i < p->nprocs; i++)
		for (unsigned int l = 0; l < ML_LAYER_MAX; l++)
			if (f->sums[i][l].bytes)
				raise_high(&p->procs[i].layers[l], f->sums[i][l].bytes, f->sums[i][l].count, s->now_ns);
	return 0;
}

/* The layers' peaks, and the rows of the total's peak once it passes the last one taken by the margin. */
static int layer_peaks(struct findings *f, const struct ml_snapshot *s)
{
	struct ml_peak *p = &f->peak;
	struct ml_high now[ML_LAYER_MAX];
	uint64_t total = 0, count = 0;

	exact_layers(s, now);
	for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
		if (now[l].bytes)
			raise_high(&p->layers[l], now[l].bytes, now[l].count, s->now_ns);
		if (findings__in_total(l)) {
			total += now[l].bytes;
			count += now[l].count;
		}
	}
	if (!total)
		return 0;
	raise_high(&p->total, total, count, s->now_ns);
	if (p->nrows && total <= f->peak_snapped + f->peak_snapped / FINDINGS_PEAK_MARGIN)
		return 0;
	f->peak_snapped = total;
	return snap_rows(f, s);
}

int findings__keep(struct findings *f, const struct ml_snapshot *s, const struct ml_judgement *j, const size_t *order,
		   uint64_t seq)
{
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);
	int err = keep_snapshot(&f->live, s, j, order);

	if (!err)
		f->live.seq = seq;
	if (!err)
		err = row_peaks(f, s);
	if (!err)
		err = layer_peaks(f, s);
	if (!err)
		err = proc_peaks(f, s);
	f->peak.keep_ns += ml_clock_ns(CLOCK_MONOTONIC) - t0;
	return err;
}

void findings__rss_peak(struct findings *f, int tgid, uint64_t hwm_bytes)
{
	struct ml_proc_peak *pp = proc_peak(f, tgid);

	if (pp && hwm_bytes > pp->rss_hwm)
		pp->rss_hwm = hwm_bytes;
	if (hwm_bytes > f->peak.rss_hwm) {
		f->peak.rss_hwm = hwm_bytes;
		f->peak.rss_pid = tgid;
	}
}

bool findings__have(const struct findings *f)
{
	return f && f->live.have;
}

/* What remains now of a kept row: its bytes in now's snapshot, found by key (rows are few: a map per call). */
static int freed_by_row(struct findings *f, const struct ml_snapshot *now)
{
	struct u64map left = {};
	int err = 0;

	for (size_t i = 0; i < now->nrows && !err; i++)
		err = u64map__put(&left, ml_key_hash(&now->rows[i].key), (void *)&now->rows[i]);
	for (size_t i = 0; i < f->live.s.nrows && !err; i++) {
		const struct ml_row *r = &f->live.s.rows[i];
		const struct ml_row *n = u64map__get(&left, ml_key_hash(&r->key));
		struct row_high *rh = u64map__get(&f->rows, ml_key_hash(&r->key));
		uint64_t still = n && ml_key_same(&n->key, &r->key) ? n->bytes : 0;

		if (rh && ml_key_same(&rh->key, &r->key))
			rh->freed = r->bytes > still ? r->bytes - still : 0;
	}
	free(left.slots);
	return err;
}

int findings__at_exit(struct findings *f, const struct ml_snapshot *now, struct ml_exit_view *out)
{
	uint64_t live = 0, left = 0;
	int err;

	if (!f->live.have)
		return -ENOENT;
	err = freed_by_row(f, now);
	if (err)
		return err;
	for (unsigned int l = 0; l < ML_LAYER_MAX; l++)
		if (findings__in_total(l)) {
			live += f->live.s.layers[l].bytes;
			left += now->layers[l].bytes;
		}
	out->s = f->live.s; /* its counters too: a report's totals and counters agree */
	out->j = f->live.j;
	out->order = f->live.order;
	out->live_seq = f->live.seq;
	out->live_ns = f->live.s.now_ns;
	out->freed_bytes = live > left ? live - left : 0;
	return 0;
}

bool findings__row(const struct findings *f, const struct ml_agg_key *k, struct ml_high *peak, uint64_t *freed)
{
	const struct row_high *rh = f ? u64map__get(&f->rows, ml_key_hash(k)) : NULL;

	if (!rh || !ml_key_same(&rh->key, k))
		return false;
	*peak = rh->high;
	*freed = rh->freed;
	return true;
}

const struct ml_peak *findings__peak(const struct findings *f)
{
	return f ? &f->peak : NULL;
}
