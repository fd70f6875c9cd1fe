/* `memleak-ai diff`'s output: text for people, one JSON object, or a self-contained HTML page. */
#ifndef ML_DIFFVIEW_H
#define ML_DIFFVIEW_H

#include <stdio.h>
#include "diff/compare.h"

struct diffview_opts {
	size_t top;	  /* rows shown per change in text and HTML (JSON has them all) */
	double fail_over; /* the gates, < 0 when off: said beside the verdict */
	double fail_over_per_step;
};

int diffview__text(FILE *f, const struct diff_result *res, const struct diffview_opts *o);
int diffview__json(FILE *f, const struct diff_result *res, const struct diffview_opts *o);
int diffview__html(FILE *f, const struct diff_result *res, const struct diffview_opts *o);

#endif
