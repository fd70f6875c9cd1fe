/* Two runs' rows, matched and judged (see compare.h). */
#include "diff/compare.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/grow.h"

/*
 * A change counts when it is at least floor and at least what it was (it doubled): two runs of one job keep
 * alike, but the pages they touch (the rss layer) read 1.6 times apart and more (docs/diff.md).
 */
#define DIFF_MARGIN 1.0

const char *diff__change_name(enum diff_change c)
{
	static const char *const names[DIFF_CHANGES] = {"grown", "appeared", "vanished", "shrunk"};

	return c < DIFF_CHANGES ? names[c] : "?";
}

/* Bytes held at the result's step count (a row's or a layer's figures, or none): projected back along their growth
 * per step, never below 0. */
static double bytes_at(const struct diff_result *res, const struct diff_run *run, const struct diff_figs *f)
{
	double b;

	if (!f)
		return 0;
	if (!res->at_steps || run->steps <= res->at_steps || !f->stepped)
		return f->bytes;
	b = f->bytes - f->per_step * (run->steps - res->at_steps);
	return b > 0 ? b : 0;
}

static double rate(const struct diff_result *res, const struct diff_row *row)
{
	return !row ? 0 : res->per_step ? row->f.per_step : row->f.per_s;
}

static bool rose(double from, double to, double floor)
{
	return to - from >= floor && to - from >= DIFF_MARGIN * fabs(from);
}

/*
 * Whether a change of growth per step is borne out by the bytes held: they moved the same way by at least a third
 * of what the change adds (or takes away) over the steps compared. A row of transient buffers (a backward pass's
 * 130 KiB, there at some reports and not others) reads a slope of 1.1 KiB a step over 600 steps while it holds no
 * more; a leak holds what it grows by. Each way: two runs of a fixed loop, the buffers caught in one, named the
 * row shrunk one way round. Per second, the runs' durations are not known: true.
 */
static bool borne_out(const struct diff_result *res, double bytes_rise, double rate_rise)
{
	double steps = res->at_steps ? res->at_steps : res->b->steps;

	return !res->per_step || bytes_rise >= rate_rise * steps / 3;
}

/*
 * Whether a run's row holds more now than the other run's row ever held (its peak): a passing buffer caught at
 * one run's last report and not at the other's holds no more than that peak. Two runs of one leaking loop at 300
 * steps named a backward pass's buffers grown (190 KiB against 58 KiB, a peak of 190 KiB) without it.
 */
static bool beyond_peak(const struct diff_row *other, double bytes)
{
	return !other || bytes > other->f.peak_bytes;
}

/* What changed between a and b (either may be NULL), or DIFF_CHANGES when nothing worth naming did. */
static enum diff_change judge(const struct diff_result *res, const struct diff_opts *o, const struct diff_item *it)
{
	bool faster = rose(it->a_rate, it->b_rate, o->min_rate) &&
		      borne_out(res, it->b_bytes - it->a_bytes, it->b_rate - it->a_rate);
	bool slower = rose(it->b_rate, it->a_rate, o->min_rate) &&
		      borne_out(res, it->a_bytes - it->b_bytes, it->a_rate - it->b_rate);
	bool grew = beyond_peak(it->a, it->b_bytes), fell = beyond_peak(it->b, it->a_bytes);

	/* a run that listed its top stacks only says nothing of one smaller than the smallest it listed */
	if (!it->a && faster)
		return DIFF_GROWN;
	if (!it->a)
		return it->b_bytes >= o->min_bytes && (!res->a->partial || it->b_bytes > res->a->smallest)
			   ? DIFF_APPEARED
			   : DIFF_CHANGES;
	if (!it->b)
		return it->a_bytes >= o->min_bytes && (!res->b->partial || it->a_bytes > res->b->smallest)
			   ? DIFF_VANISHED
			   : DIFF_CHANGES;
	if (grew && (faster || rose(it->a_bytes, it->b_bytes, o->min_bytes)))
		return DIFF_GROWN;
	if (fell && (slower || rose(it->b_bytes, it->a_bytes, o->min_bytes)))
		return DIFF_SHRUNK;
	return DIFF_CHANGES;
}

static int consider(struct diff_result *res, const struct diff_opts *o, const struct diff_row *a,
		    const struct diff_row *b)
{
	struct diff_item it = {.a = a, .b = b};

	it.a_bytes = bytes_at(res, res->a, a ? &a->f : NULL);
	it.b_bytes = bytes_at(res, res->b, b ? &b->f : NULL);
	it.a_rate = rate(res, a);
	it.b_rate = rate(res, b);
	it.change = judge(res, o, &it);
	if (it.change == DIFF_CHANGES) {
		res->unchanged++;
		return 0;
	}
	if (ml_grow(&res->items, &res->capitems, res->nitems + 1, sizeof(*res->items)))
		return -ENOMEM;
	res->items[res->nitems++] = it;
	return 0;
}

/* Named rows by change, then by the larger of their change in growth and in bytes, largest first. */
static int by_change(const void *x, const void *y)
{
	const struct diff_item *a = x, *b = y;
	double da = fabs(a->b_rate - a->a_rate), db = fabs(b->b_rate - b->a_rate);

	if (a->change != b->change)
		return a->change < b->change ? -1 : 1;
	if (da != db)
		return da > db ? -1 : 1;
	da = fabs(a->b_bytes - a->a_bytes);
	db = fabs(b->b_bytes - b->a_bytes);
	return da > db ? -1 : da < db;
}

/* Each layer of either run, once, A's first; the gates are the layers': a leak's rows split as its stacks do. */
static int compare_layers(struct diff_result *res, const struct diff_opts *o)
{
	const struct diff_run *runs[2] = {res->a, res->b};

	for (int k = 0; k < 2; k++)
		for (size_t i = 0; i < runs[k]->nlayers; i++) {
			const char *name = runs[k]->layers[i].name;
			struct diff_layer_cmp c = {
			    .name = name, .a = diffrun__layer(res->a, name), .b = diffrun__layer(res->b, name)};

			if (k && c.a)
				continue;
			c.a_bytes = bytes_at(res, res->a, c.a ? &c.a->f : NULL);
			c.b_bytes = bytes_at(res, res->b, c.b ? &c.b->f : NULL);
			c.over = (o->fail_over >= 0 && c.b_bytes - c.a_bytes > o->fail_over) ||
				 (o->fail_over_per_step >= 0 && res->per_step &&
				  (c.b ? c.b->f.per_step : 0) - (c.a ? c.a->f.per_step : 0) > o->fail_over_per_step);
			res->over += c.over;
			if (ml_grow(&res->layers, &res->caplayers, res->nlayers + 1, sizeof(*res->layers)))
				return -ENOMEM;
			res->layers[res->nlayers++] = c;
		}
	return 0;
}

int diff__compare(const struct diff_run *a, const struct diff_run *b, const struct diff_opts *o,
		  struct diff_result *out)
{
	int err = 0;

	*out = (struct diff_result){.a = a, .b = b, .per_step = a->stepped && b->stepped};
	if (out->per_step && !o->same_run && a->steps > 0 && b->steps > 0)
		out->at_steps = a->steps < b->steps ? a->steps : b->steps;
	for (size_t i = 0; i < a->nrows && !err; i++) {
		const struct diff_row *m = diffrun__find(b, a->rows[i].key);

		out->matched += m != NULL;
		err = consider(out, o, &a->rows[i], m);
	}
	for (size_t i = 0; i < b->nrows && !err; i++)
		if (!diffrun__find(a, b->rows[i].key))
			err = consider(out, o, NULL, &b->rows[i]);
	if (!err && out->nitems) /* qsort's array may not be NULL, even empty */
		qsort(out->items, out->nitems, sizeof(*out->items), by_change);
	return err ? err : compare_layers(out, o);
}

void diff__result_free(struct diff_result *res)
{
	free(res->items);
	free(res->layers);
	res->items = NULL;
	res->layers = NULL;
	res->nitems = res->capitems = res->nlayers = res->caplayers = 0;
}
