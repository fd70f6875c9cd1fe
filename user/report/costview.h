/* The tool's cost in a report: its text lines and its "overhead" and "modes" JSON objects. */
#ifndef ML_COSTVIEW_H
#define ML_COSTVIEW_H

#include <stdio.h>

struct jw;
struct ml_overhead;

/* The cost line, the C heap's mode and what the budget shed. */
void ml_text_overhead(FILE *f, const struct ml_overhead *ov);
/* The "overhead" object (the cost as measured), then "modes" (the C heap's mode, each step shed). */
void ml_json_overhead(struct jw *w, const struct ml_overhead *ov);

#endif
