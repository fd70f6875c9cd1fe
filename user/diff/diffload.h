/* One side of a diff from a file: JSON Lines or pprof, told apart by their first bytes. */
#ifndef ML_DIFFLOAD_H
#define ML_DIFFLOAD_H

#include "diff/diffrun.h"
#include "diff/jsonin.h"

/*
 * Read report `pick` of path (a profile holds one report: pick does not matter) into *out. 0, or a negative
 * errno with *why saying what is wrong with the file (free it; NULL when the errno says it all).
 */
int diff__load(const char *path, enum diff_pick pick, struct diff_run **out, char **why);

#endif
