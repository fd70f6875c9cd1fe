/* Ranks that stand apart from the others of their job (judge/ranks.h), as text lines and the JSON "ranks" object. */
#ifndef ML_RANKVIEW_H
#define ML_RANKVIEW_H

#include <stddef.h>
#include "report/emit.h"

struct jw;
struct ml_snapshot;

/* "rank 3: +60.0 MiB torch_cpu over the other 3 ranks' median ..., at train.py:88 in step", a line each. */
void ml_text_ranks(struct reporter *r, const struct ml_snapshot *s);
/* "ranks": {"compared", "apart": [...]}; a row's "stack" is its place among the shown[0..shown) of order. */
void ml_json_ranks(struct jw *w, struct reporter *r, const struct ml_snapshot *s, const size_t *order, size_t shown);

#endif
