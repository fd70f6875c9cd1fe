/*
 * The ledger's rows of cut walks, merged into the complete stack they belong to. A native walk that had to
 * stop early (ML_STACK_UW_STOPPED) names only the inner part of its stack, and a caller-only capture none of
 * it. When exactly one complete stack of the same process and layer, from the same caller and with the same
 * Python frames, begins with those frames, the row is that stack's: its allocations join that row.
 */
#ifndef ML_CUTMERGE_H
#define ML_CUTMERGE_H

#include "collect/snapshot.h"
#include "collect/stackstore.h"

/* Merge the snapshot's cut rows (st: a stack buffer to read into). Returns the rows merged, or -ENOMEM. */
int cutmerge__run(struct ml_snapshot *s, struct stackstore *stacks, struct ml_stack *st);

#endif
