/* Ranks that diverge, at each report (see diverge.h). */
#include "session/diverge.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "collect/snapshot.h"
#include "collect/steps.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "report/stackview.h"
#include "session/state.h"

/* A traced process with a rank: which rank_in it adds to. */
struct member {
	int pid;
	size_t group;
};

/* The group of (job, rank) in in[0..*n), added when new; its index. */
static size_t group_of(struct rank_in *in, size_t *n, const char *job, const char *rank)
{
	for (size_t i = 0; i < *n; i++)
		if ((in[i].job == job || (in[i].job && job && !strcmp(in[i].job, job))) && !strcmp(in[i].rank, rank))
			return i;
	in[*n] = (struct rank_in){.job = job, .rank = rank};
	return (*n)++;
}

/* Each traced process with a rank into its group; the main process's pid and steps are the group's. */
static size_t group_all(struct session *ss, const int *traced, size_t ntraced, struct rank_in *in, struct member *mem,
			size_t *nmem)
{
	size_t n = 0;

	*nmem = 0;
	for (size_t i = 0; i < ntraced; i++) {
		struct ml_resolver res;
		size_t g;

		if (stackview__proc(ss->sv, traced[i], &res) || !res.labels || !res.labels->rank)
			continue;
		g = group_of(in, &n, res.labels->job, res.labels->rank);
		mem[(*nmem)++] = (struct member){traced[i], g};
		if (!in[g].pid || (res.role && !strcmp(res.role, "main"))) {
			const struct step_count *c = steps__of(ss->steps, traced[i]);

			in[g].pid = traced[i];
			in[g].steps = c ? c->count : 0;
		}
	}
	return n;
}

static void add_bytes(const struct ml_snapshot *snap, struct rank_in *in, const struct member *mem, size_t nmem)
{
	for (size_t p = 0; p < snap->nprocs; p++)
		for (size_t k = 0; k < nmem; k++)
			if (mem[k].pid == snap->procs[p].tgid)
				for (unsigned int l = 0; l < ML_LAYER_MAX; l++)
					in[mem[k].group].bytes[l] += snap->procs[p].layers[l].bytes;
}

static size_t group_at(const struct member *mem, size_t nmem, int pid)
{
	for (size_t k = 0; k < nmem; k++)
		if (mem[k].pid == pid)
			return mem[k].group;
	return SIZE_MAX;
}

/* A row of the layer in a rank of the job: its site, its rank, its bytes. */
struct site_row {
	uint64_t site;
	size_t group, row;
	uint64_t bytes;
};

static int cmp_site(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;

	return (x->site > y->site) - (x->site < y->site);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* At one site (s[0..n)): the apart rank's bytes less the other ranks' median there (absent: 0); its largest row. */
static double site_excess(const struct site_row *s, size_t n, size_t apart, const struct rank_in *in, size_t nin,
			  uint64_t *per, size_t *row)
{
	size_t m = 0, big = SIZE_MAX;
	uint64_t mine = 0;

	for (size_t g = 0; g < nin; g++)
		per[g] = 0;
	for (size_t i = 0; i < n; i++) {
		per[s[i].group] += s[i].bytes;
		if (s[i].group == apart && (big == SIZE_MAX || s[i].bytes > s[big].bytes))
			big = i;
	}
	mine = per[apart];
	for (size_t g = 0; g < nin; g++)
		if (g != apart &&
		    (in[g].job == in[apart].job || (in[g].job && in[apart].job && !strcmp(in[g].job, in[apart].job))))
			per[m++] = per[g];
	qsort(per, m, sizeof(*per), cmp_u64);
	*row = big == SIZE_MAX ? SIZE_MAX : s[big].row;
	return (double)mine -
	       (m ? (m % 2 ? (double)per[m / 2] : ((double)per[m / 2 - 1] + (double)per[m / 2]) / 2) : 0);
}

/* The site of the apart rank's rows in its layer whose bytes lie furthest above the others' there: its row. */
static size_t best_row(struct session *ss, const struct ml_snapshot *snap, const struct rank_apart *a,
		       const struct rank_in *in, size_t nin, const struct member *mem, size_t nmem)
{
	struct site_row *s = calloc(snap->nrows ? snap->nrows : 1, sizeof(*s));
	uint64_t *per = calloc(nin ? nin : 1, sizeof(*per));
	size_t n = 0, apart = 0, best = SIZE_MAX;
	double top = 0;

	for (size_t g = 0; g < nin; g++)
		if (in[g].rank == a->rank && in[g].job == a->job)
			apart = g;
	for (size_t i = 0; s && per && i < snap->nrows; i++) {
		const struct ml_row *r = &snap->rows[i];
		size_t g = r->key.layer == a->layer ? group_at(mem, nmem, (int)r->key.tgid) : SIZE_MAX;

		if (g != SIZE_MAX)
			s[n++] = (struct site_row){stackview__site(ss->sv, r), g, i, r->bytes};
	}
	if (s && per)
		qsort(s, n, sizeof(*s), cmp_site);
	for (size_t i = 0, j; s && per && i < n; i = j) {
		size_t row;
		double x;

		for (j = i; j < n && s[j].site == s[i].site; j++)
			;
		x = site_excess(s + i, j - i, apart, in, nin, per, &row);
		if (row != SIZE_MAX && (best == SIZE_MAX || x > top))
			top = x, best = row;
	}
	free(s), free(per);
	return best;
}

int diverge__report(struct session *ss, const struct ml_snapshot *snap, const int *traced, size_t ntraced,
		    struct ml_rank_view *view)
{
	struct rank_in *in = calloc(ntraced ? ntraced : 1, sizeof(*in));
	struct member *mem = calloc(ntraced ? ntraced : 1, sizeof(*mem));
	size_t nin, nmem = 0;
	int err = in && mem ? 0 : -ENOMEM;

	memset(view, 0, sizeof(*view));
	if (!err && !ss->ranks)
		err = ranks__new(&ss->ranks);
	if (!err) {
		nin = group_all(ss, traced, ntraced, in, mem, &nmem);
		add_bytes(snap, in, mem, nmem);
		err = ranks__update(ss->ranks, in, nin, (double)snap->now_ns / 1e9, &view->apart, &view->n);
	}
	if (!err && view->n && ml_grow(&ss->rank_rows, &ss->cap_rank_rows, view->n, sizeof(*ss->rank_rows)))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < view->n; i++)
		ss->rank_rows[i] = best_row(ss, snap, &view->apart[i], in, nin, mem, nmem);
	view->row = ss->rank_rows;
	view->compared = err ? 0 : ranks__compared(ss->ranks);
	if (err)
		view->n = 0;
	free(in), free(mem);
	return err;
}
