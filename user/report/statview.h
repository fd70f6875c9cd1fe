/* The counters since attach in a report (text "events:", "dropped:" ... lines; the JSON "stats" object). */
#ifndef ML_STATVIEW_H
#define ML_STATVIEW_H

#include <stddef.h>
#include <stdio.h>
#include "collect/snapshot.h"
#include "unwind/unwind.h"

struct jw;

/* The i-th drop counter: its stats slot and JSON name; 0 past the last one. */
size_t ml_drop_stat(size_t i, unsigned int *slot, const char **name);
void ml_text_counters(FILE *f, const struct ml_snapshot *s, const struct unwind_loading *tables);
/* The Python frames of a report: undecoded among the rows shown; code objects decoded as their stacks came. */
struct ml_py_tally {
	uint64_t unresolved;
	uint64_t learned, learn_ns;
};

/* The "stats" object, with how many rows the report shows and their Python frames' tally. */
void ml_json_all_stats(struct jw *w, const struct ml_snapshot *s, size_t shown, struct ml_py_tally py,
		       const struct unwind_loading *tables);

#endif
