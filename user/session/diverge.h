/*
 * Ranks that diverge, at each report (judge/ranks.h): the traced processes grouped by job and rank (a rank's
 * DataLoader workers with it), compared, and for each rank that stands apart in a layer the Python line (the
 * site of its rows) whose bytes lie furthest above the other ranks' median at that line.
 */
#ifndef ML_DIVERGE_H
#define ML_DIVERGE_H

#include <stddef.h>
#include "judge/ranks.h"

struct session;
struct ml_snapshot;

/*
 * Compare the ranks of snap's processes (traced[0..ntraced)); the view is valid until the next call. Nothing to
 * compare (fewer than three ranks of a job): an empty view. 0 or -ENOMEM.
 */
int diverge__report(struct session *ss, const struct ml_snapshot *snap, const int *traced, size_t ntraced,
		    struct ml_rank_view *view);

#endif
