/*
 * `memleak-ai diff`'s judgement: two runs' rows matched by key, each named grown, appeared, vanished or shrunk
 * when its change clears both an absolute floor and its earlier value (it at least doubled: two runs of one
 * job differ by less than that), and the gates a CI job sets, on each layer's total.
 */
#ifndef ML_COMPARE_H
#define ML_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include "diff/diffrun.h"

enum diff_change { DIFF_GROWN, DIFF_APPEARED, DIFF_VANISHED, DIFF_SHRUNK, DIFF_CHANGES };

struct diff_opts {
	double min_bytes;	   /* the smallest change of outstanding bytes named (default 1 MiB) */
	double min_rate;	   /* the smallest change of growth named, per step or per second (default 1 KiB) */
	double fail_over;	   /* a layer whose bytes held grew by more fails the diff; < 0: no gate */
	double fail_over_per_step; /* a layer whose growth per step rose by more fails it; < 0: no gate */
	bool same_run;		   /* A and B are two reports of one run: bytes are compared as they are */
};

/* One row of either run, and what changed. */
struct diff_item {
	enum diff_change change;
	const struct diff_row *a, *b; /* NULL where the run has no such row */
	double a_bytes, b_bytes;      /* at equal steps when both runs step */
	double a_rate, b_rate;	      /* growth per step, or per second (struct diff_result's per_step) */
};

/* A layer of either run: its totals in each (NULL where it has none), bytes at equal steps, the gates. */
struct diff_layer_cmp {
	const char *name;
	const struct diff_layer *a, *b;
	double a_bytes, b_bytes;
	bool over; /* over a --fail-over gate */
};

struct diff_result {
	const struct diff_run *a, *b;
	bool per_step;		 /* rates are per step: both runs had a step clock */
	double at_steps;	 /* bytes are read at this many steps; 0: as reported */
	struct diff_item *items; /* the named rows, by change, then largest change first */
	size_t nitems, capitems;
	size_t matched, unchanged; /* rows in both runs; of all rows, those not named */
	struct diff_layer_cmp *layers;
	size_t nlayers, caplayers;
	size_t over; /* layers over a gate: the diff fails */
};

/* Match and judge; 0 or -ENOMEM. */
int diff__compare(const struct diff_run *a, const struct diff_run *b, const struct diff_opts *o,
		  struct diff_result *out);
void diff__result_free(struct diff_result *res);
const char *diff__change_name(enum diff_change c);

#endif
