/* A process's C heap fragmentation in a report: free-but-resident memory and the stacks whose blocks hold it. */
#ifndef ML_FRAGVIEW_H
#define ML_FRAGVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "collect/heapfrag.h"
#include "collect/ledger.h"
#include "judge/victims.h"

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

/*
 * A victim row's line: "fresh heap taken because [N] pins the freed space", with the bytes; N is the pinning
 * row's place in order (rows of s) as the report numbers rows.
 */
/* The 1-based place of the row of key k in the report's order, 0 when it has none. */
size_t ml_place_of(const struct ml_snapshot *s, const size_t *order, const struct ml_agg_key *k);
void ml_text_victim(FILE *f, const struct ml_victim *v, const struct ml_snapshot *s, const size_t *order);
/* Its "victim" object in stacks[]. */
void ml_json_victim(struct jw *w, const struct ml_victim *v, const struct ml_snapshot *s, const size_t *order);
/* Per process, "fragmentation: pid P: X of fresh heap free again (rows [a], [b]), pinned by [N]". */
void ml_text_victims(FILE *f, const struct ml_victim *v, size_t n, const struct ml_snapshot *s, const size_t *order);

#endif
