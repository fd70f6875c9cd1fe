/* The heap census by type in a report: what the in-use chunks of a process's glibc heap are, by C++ class. */
#ifndef ML_CENSUSVIEW_H
#define ML_CENSUSVIEW_H

#include <stdio.h>
#include "collect/heapfrag.h"

struct jw;

#define ML_CENSUS_TEXT_TOP 3  /* types named in text */
#define ML_CENSUS_JSON_TOP 16 /* ... in JSON */

/* "heap census: pid N X in-use chunks, Y typed by their vtable; growing: +R/s T (C live, B), ..." */
void ml_text_census(FILE *f, int pid, const struct ml_heapfrag *fr);
/* The "census" object of a process. */
void ml_json_census(struct jw *w, const struct ml_heapfrag *fr);

#endif
