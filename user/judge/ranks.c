/* Ranks that diverge from the others of their job (see ranks.h). */
#include "judge/ranks.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/grow.h"

/* One rank's kept reports, oldest first. */
struct rank_hist {
	char *job, *rank;
	bool seen;
	unsigned int n;
	double t[RANKS_KEEP];
	uint64_t steps[RANKS_KEEP];
	uint64_t bytes[RANKS_KEEP][ML_LAYER_MAX];
};

struct ranks {
	struct rank_hist *h;
	size_t n, cap;
	struct rank_apart *apart;
	size_t napart, capapart;
	size_t compared;
};

int ranks__new(struct ranks **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void hist_free(struct rank_hist *h)
{
	free(h->job);
	free(h->rank);
}

void ranks__free(struct ranks *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		hist_free(&r->h[i]);
	free(r->h);
	free(r->apart);
	free(r);
}

static bool same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* The history of (job, rank), made empty when new; NULL when out of memory. */
static struct rank_hist *hist_of(struct ranks *r, const char *job, const char *rank)
{
	struct rank_hist *h;

	for (size_t i = 0; i < r->n; i++)
		if (same(r->h[i].job, job) && same(r->h[i].rank, rank))
			return &r->h[i];
	if (ml_grow(&r->h, &r->cap, r->n + 1, sizeof(*r->h)))
		return NULL;
	h = &r->h[r->n];
	memset(h, 0, sizeof(*h));
	h->job = job ? strdup(job) : NULL;
	h->rank = strdup(rank);
	if ((job && !h->job) || !h->rank) {
		hist_free(h);
		return NULL;
	}
	r->n++;
	return h;
}

static void push(struct rank_hist *h, const struct rank_in *in, double now)
{
	if (h->n == RANKS_KEEP) {
		memmove(h->t, h->t + 1, (RANKS_KEEP - 1) * sizeof(h->t[0]));
		memmove(h->steps, h->steps + 1, (RANKS_KEEP - 1) * sizeof(h->steps[0]));
		memmove(h->bytes, h->bytes + 1, (RANKS_KEEP - 1) * sizeof(h->bytes[0]));
		h->n--;
	}
	h->t[h->n] = now;
	h->steps[h->n] = in->steps;
	memcpy(h->bytes[h->n], in->bytes, sizeof(h->bytes[0]));
	h->n++;
}

/* Ranks gone since the last update (their process exited) lose their history. */
static void drop_unseen(struct ranks *r)
{
	size_t k = 0;

	for (size_t i = 0; i < r->n; i++) {
		if (r->h[i].seen)
			r->h[k++] = r->h[i];
		else
			hist_free(&r->h[i]);
	}
	r->n = k;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n) but v[skip], sorted in scratch. */
static double median_but(const double *v, size_t n, size_t skip, double *scratch)
{
	size_t m = 0;

	for (size_t i = 0; i < n; i++)
		if (i != skip)
			scratch[m++] = v[i];
	qsort(scratch, m, sizeof(*scratch), cmp_double);
	return m % 2 ? scratch[m / 2] : (scratch[m / 2 - 1] + scratch[m / 2]) / 2;
}

/* Whether every rank of the group stepped over its kept reports: growth is then read per step. */
static bool all_step(struct rank_hist *const *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (g[i]->n < 2 || g[i]->steps[g[i]->n - 1] <= g[i]->steps[0])
			return false;
	return true;
}

static double growth(const struct rank_hist *h, unsigned int layer, bool per_step)
{
	double d = (double)h->bytes[h->n - 1][layer] - (double)h->bytes[0][layer];

	if (h->n < 2)
		return 0;
	if (per_step)
		return d / (double)(h->steps[h->n - 1] - h->steps[0]);
	return h->t[h->n - 1] > h->t[0] ? d / (h->t[h->n - 1] - h->t[0]) : 0;
}

/* Compare one job's ranks (g[0..n), at least three) in one layer; those apart into r->apart. */
static int compare_layer(struct ranks *r, struct rank_hist *const *g, const struct rank_in *const *in, size_t n,
			 unsigned int layer, double *b, double *gr, double *scratch)
{
	bool per_step = all_step(g, n);
	double min_growth = per_step ? RANKS_MIN_GROWTH_STEP : RANKS_MIN_GROWTH_S;

	for (size_t i = 0; i < n; i++) {
		b[i] = (double)in[i]->bytes[layer];
		gr[i] = growth(g[i], layer, per_step);
	}
	for (size_t i = 0; i < n; i++) {
		double mb = median_but(b, n, i, scratch), mg = median_but(gr, n, i, scratch), over = b[i] - mb;
		bool by_bytes = over > fmax((double)RANKS_MIN_BYTES, RANKS_SHARE * mb);
		bool by_growth = g[i]->n >= 3 && gr[i] - mg > fmax(min_growth, 0.5 * fabs(mg)) &&
				 over > (double)RANKS_MIN_GROWN_BYTES;

		if (!by_bytes && !by_growth)
			continue;
		if (ml_grow(&r->apart, &r->capapart, r->napart + 1, sizeof(*r->apart)))
			return -ENOMEM;
		r->apart[r->napart++] = (struct rank_apart){.job = in[i]->job,
							    .rank = in[i]->rank,
							    .pid = in[i]->pid,
							    .layer = layer,
							    .others = n - 1,
							    .bytes = in[i]->bytes[layer],
							    .median_bytes = mb,
							    .growth = gr[i],
							    .median_growth = mg,
							    .per_step = per_step};
	}
	return 0;
}

/* Compare the ranks of in[]'s job job_of (an index into in[]): each layer in turn. */
static int compare_job(struct ranks *r, const struct rank_in *in, size_t n, size_t job_of, bool *done)
{
	struct rank_hist **g = calloc(n, sizeof(*g));
	const struct rank_in **gi = calloc(n, sizeof(*gi));
	double *b = calloc(3 * n, sizeof(*b));
	size_t m = 0;
	int err = g && gi && b ? 0 : -ENOMEM;

	for (size_t i = 0; !err && i < n; i++) {
		if (!same(in[i].job, in[job_of].job))
			continue;
		done[i] = true;
		gi[m] = &in[i];
		if (!(g[m++] = hist_of(r, in[i].job, in[i].rank))) /* pushed to at this update: found, never made */
			err = -ENOMEM;
	}
	if (!err && m >= 3) {
		r->compared += m;
		for (unsigned int l = 0; l < ML_LAYER_MAX && !err; l++)
			err = compare_layer(r, g, gi, m, l, b, b + n, b + 2 * n);
	}
	free(g), free(gi), free(b);
	return err;
}

int ranks__update(struct ranks *r, const struct rank_in *in, size_t n, double now_s, const struct rank_apart **out,
		  size_t *nout)
{
	bool *done = calloc(n ? n : 1, sizeof(*done));
	int err = done ? 0 : -ENOMEM;

	r->napart = 0;
	r->compared = 0;
	for (size_t i = 0; i < r->n; i++)
		r->h[i].seen = false;
	for (size_t i = 0; i < n && !err; i++) {
		struct rank_hist *h = hist_of(r, in[i].job, in[i].rank);

		if (!h) {
			err = -ENOMEM;
			break;
		}
		h->seen = true;
		push(h, &in[i], now_s);
	}
	if (!err)
		drop_unseen(r);
	for (size_t i = 0; i < n && !err; i++)
		if (!done[i])
			err = compare_job(r, in, n, i, done);
	free(done);
	*out = r->napart ? r->apart : NULL;
	*nout = r->napart;
	return err;
}

size_t ranks__compared(const struct ranks *r)
{
	return r->compared;
}
