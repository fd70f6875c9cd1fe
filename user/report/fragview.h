/* A process's C heap fragmentation in a report: free-but-resident memory and the stacks whose blocks hold it. */
#ifndef ML_FRAGVIEW_H
#define ML_FRAGVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "collect/heapfrag.h"
#include "collect/ledger.h"

struct jw;
struct stackview;

#define ML_FRAG_TEXT_TOP 5  /* holder stacks listed in text */
#define ML_FRAG_JSON_TOP 32 /* ... in JSON */

/* "C heap: pid N X free but resident ...; held by Y of blocks from ..." and the ranked holder stacks. */
void ml_text_frag(FILE *f, struct stackview *sv, int pid, const struct ml_heapfrag *fr);
/* The "fragmentation" object of a process. */
void ml_json_frag(struct jw *w, struct stackview *sv, const struct ml_heapfrag *fr);
/* Free resident bytes charged to stacks the tool recorded: what fragmentation explains of a process's memory. */
uint64_t ml_frag_named(const struct ml_heapfrag *fr);
/*
 * A heap-growth row (the break grown beyond its peak) of a process whose heap holds free resident memory:
 * fresh heap taken while old heap sat free is possibly fragmentation, not growth of what the stack keeps.
 */
bool ml_row_possible_frag(struct stackview *sv, const struct ml_row *row);

#endif
