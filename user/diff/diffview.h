/* `memleak-ai diff`'s output: text for people, one JSON object, or a self-contained HTML page. */
#ifndef ML_DIFFVIEW_H
#define ML_DIFFVIEW_H

#include <stdbool.h>
#include <stdio.h>
#include "diff/compare.h"

struct diffview_opts {
	size_t top;	  /* rows shown per change in text and HTML (JSON has them all) */
	double fail_over; /* the gates, < 0 when off: said beside the verdict */
	double fail_over_per_step;
};

/* Bytes as text and HTML write them ("+1.6 MiB"); a size no run holds (1e18 and over) as the file had it. */
void diffview__put_bytes(FILE *f, double b, bool sign);

int diffview__text(FILE *f, const struct diff_result *res, const struct diffview_opts *o);
int diffview__json(FILE *f, const struct diff_result *res, const struct diffview_opts *o);
int diffview__html(FILE *f, const struct diff_result *res, const struct diffview_opts *o);

#endif
