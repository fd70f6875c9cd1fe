/*
 * One series' classification (ml_judge, trend.h): the growth tests of bytes and counts over the
 * judged samples, the verdict they make and the leak score. Pure functions of the samples; verdict.c keeps the
 * history they are fed from.
 */
#include "judge/trend.h"
#include <math.h>

/* Least-squares slope of y over t; 0 when the t do not spread. */
double ml_slope(const double *t, const double *y, size_t n)
{
	double mt = 0, my = 0, num = 0, den = 0;

	for (size_t i = 0; i < n; i++)
		mt += t[i], my += y[i];
	mt /= (double)n;
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		num += (t[i] - mt) * (y[i] - my);
		den += (t[i] - mt) * (t[i] - mt);
	}
	return den > 0 ? num / den : 0;
}

/*
 * Whether a series rises over the window, and how convincingly (see struct ml_trend). New highs rather than
 * ups: a level with noise on it goes up about every other interval but stops setting highs once its range is
 * seen; a leak sets one every interval; a cache that filled up sets none any more. The drop and regularity
 * tests keep a series that jumps about from passing on a few lucky highs.
 */
static struct ml_trend trend(const double *t, const double *y, size_t n, double min_net, double step)
{
	struct ml_trend r = {0};
	size_t moves = n - 1, nrates = 0;
	double hi = y[0], drops = 0, mean = 0, var = 0, inv_dt = 0, rate[ML_SERIES_MAX];
	bool recent = false;

	if (n < 2 || n > ML_SERIES_MAX)
		return r;
	r.net = y[n - 1] - y[0];
	r.per_s = ml_slope(t, y, n);
	for (size_t i = 1; i < n; i++) {
		double dt = t[i] - t[i - 1];

		if (y[i] > hi) {
			r.highs++;
			hi = y[i];
			recent |= i + 2 >= n;
		}
		if (y[i] < y[i - 1])
			drops += y[i - 1] - y[i];
		/* Per second, so that a short last report (the final one) reads as even as the others. */
		rate[nrates++] = dt > 0 ? (y[i] - y[i - 1]) / dt : y[i] - y[i - 1];
		inv_dt += dt > 0 ? 1 / dt : 1;
	}
	for (size_t i = 0; i < nrates; i++)
		mean += rate[i];
	mean /= (double)nrates;
	for (size_t i = 0; i < nrates; i++)
		var += (rate[i] - mean) * (rate[i] - mean);
	var /= (double)nrates;
	/* Records of step each, made at random (sampled): their number an interval varies by itself, as Poisson's
	 * does (variance step * rate / dt). Only what varies beyond that is unevenness. */
	if (step > 0 && mean > 0)
		var = fmax(0, var - step * mean * inv_dt / (double)nrates);
	if (mean > 0)
		r.regularity = 1 - fmin(1.0, sqrt(var) / mean) / 2;
	/* Evenness asked for: CV at most 0.5 over three or four intervals (four lucky highs are easy), 1 beyond. */
	if (n < 4 || !recent || r.net <= 0 || r.net < min_net || r.highs * 4 < moves * 3 || drops * 4 > r.net ||
	    mean <= 0 || sqrt(var) > mean * (n < 6 ? 0.5 : 1.0))
		return r;
	r.rising = true;
	r.evidence = (double)r.highs / (double)moves * r.regularity * (0.5 + 0.5 * fmin(1.0, r.net / fmax(y[0], 1.0)));
	return r;
}

/*
 * The samples of a series at least span seconds apart, counted back from the newest: fewer, further apart.
 * Their number.
 */
static size_t spaced(const double *t, const double *b, const double *c, size_t n, double span, double *ot, double *ob,
		     double *oc)
{
	size_t m = 0;

	for (size_t i = n; i-- > 0;) {
		if (m && ot[m - 1] - t[i] < span)
			continue;
		ot[m] = t[i], ob[m] = b[i], oc[m] = c ? c[i] : 0;
		m++;
	}
	for (size_t i = 0; i < m / 2; i++) {
		double x;

		x = ot[i], ot[i] = ot[m - 1 - i], ot[m - 1 - i] = x;
		x = ob[i], ob[i] = ob[m - 1 - i], ob[m - 1 - i] = x;
		x = oc[i], oc[i] = oc[m - 1 - i], oc[m - 1 - i] = x;
	}
	return m;
}

/*
 * The trends of bytes and counts; the number of samples they saw. A weighed row (each record standing for step
 * bytes) moves in steps of one record: at a rate of a step an interval or less, intervals without a step are no
 * halt, so the trends see samples spaced two steps apart at the row's rate, when five of them are there.
 */
static size_t trends(struct ml_judgement *j, const double *t, const double *bytes, const double *counts, size_t n,
		     double step)
{
	double ts[ML_SERIES_MAX], bs[ML_SERIES_MAX], cs[ML_SERIES_MAX];
	size_t m = 0;

	if (step > 0 && n >= 2 && j->growth_bytes_per_s * (t[n - 1] - t[n - 2]) <= step && n <= ML_SERIES_MAX)
		m = spaced(t, bytes, counts, n, 2 * step / j->growth_bytes_per_s, ts, bs, cs);
	if (m >= 5 && m < n) { /* spaced samples hold several steps each: their unevenness is the row's own */
		t = ts, bytes = bs, counts = counts ? cs : NULL;
		step = 0;
		j->from_t = ts[0];
	} else {
		m = n;
	}
	j->bytes = trend(t, bytes, m, 0, step);
	if (counts) /* one allocation a report at least; a record counts for count / records */
		j->count = trend(t, counts, m, (double)(m - 1),
				 step > 0 && bytes[m - 1] > 0 ? step * counts[m - 1] / bytes[m - 1] : 0);
	return m;
}

struct ml_judgement ml_judge(const double *t, const double *bytes, const double *counts, size_t n, double oldest_age_s,
			     double interval_s, double step)
{
	struct ml_judgement j = {.verdict = ML_V_NEW, .intervals = n ? (uint32_t)(n - 1) : 0};
	size_t ups = 0, downs = 0, moves, nt;
	double net;

	if (counts && n)
		j.count_growth = (int64_t)(n >= 2 ? counts[n - 1] - counts[n - 2] : counts[0]);
	j.from_t = n ? t[0] : 0;
	if (n < 2)
		return j;
	for (size_t i = 1; i < n; i++) {
		if (bytes[i] > bytes[i - 1])
			ups++;
		else if (bytes[i] < bytes[i - 1])
			downs++;
	}
	moves = n - 1;
	net = bytes[n - 1] - bytes[0];
	j.window_s = t[n - 1] - t[0];
	j.growth_bytes_per_s = ml_slope(t, bytes, n);
	j.growth_per_interval = j.growth_bytes_per_s * j.window_s / (double)moves;
	nt = trends(&j, t, bytes, counts, n, step);
	/* Short-lived allocations: nothing at this stack outlives one report interval. */
	if (interval_s > 0 && oldest_age_s < interval_s && n >= 3 && ups + downs > 0 && ups < moves) {
		j.verdict = ML_V_CHURN;
		j.monotonic = 0;
		j.bytes.rising = j.count.rising = false;
		j.bytes.evidence = j.count.evidence = 0;
		return j;
	}
	if (n < 4) /* three changes at least before calling anything a trend */
		return j;
	/*
	 * Over the shortest window (three changes) a single signal can rise by chance (four samples of noise
	 * in increasing order, evenly enough): there, both must rise. From five samples on, either suffices.
	 */
	if (nt == 4 && counts && j.bytes.rising != j.count.rising) {
		j.bytes.rising = j.count.rising = false;
		j.bytes.evidence = j.count.evidence = 0;
	}
	if (j.bytes.rising || j.count.rising) {
		j.verdict = ML_V_GROWING;
		j.monotonic = (double)ups / (double)moves;
		/* More evidence (reports, new highs, even steps, growth relative to the start) makes a stronger
		 * candidate. */
		j.leak_score = fmin(1.0, (double)moves / 6.0) * fmax(j.bytes.evidence, j.count.evidence);
	} else if (net < 0 && j.growth_bytes_per_s < 0 && downs * 4 >= moves * 3) {
		j.verdict = ML_V_SHRINKING;
		j.monotonic = (double)downs / (double)moves;
	} else {
		j.verdict = ML_V_STABLE;
		j.monotonic = (double)(moves - ups - downs) / (double)moves;
	}
	return j;
}
