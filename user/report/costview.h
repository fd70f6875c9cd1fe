/* The tool's cost in a report: its text lines and its "overhead" and "modes" JSON objects. */
#ifndef ML_COSTVIEW_H
#define ML_COSTVIEW_H

#include <stddef.h>
#include <stdio.h>

struct jw;
struct ml_overhead;

/* Room for every layer's part and the rest's: "torch_cuda 100.0%, " is 20 bytes. */
#define ML_COST_PARTS_LEN 256
/* What is costing, as the layers come, each part of at least 0.05 % named ("libc 1.2%, other 0.8%"). */
void ml_cost_parts(const struct ml_overhead *ov, char *buf, size_t len);
/* The cost line, the C heap's mode and what the budget shed. */
void ml_text_overhead(FILE *f, const struct ml_overhead *ov);
/* The "overhead" object (the cost as measured), then "modes" (the C heap's mode, each step shed). */
void ml_json_overhead(struct jw *w, const struct ml_overhead *ov);

#endif
