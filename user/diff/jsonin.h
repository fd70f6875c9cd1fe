/* `memleak-ai diff`'s reader of JSON Lines (--json, -f json): one report of the file as a diff_run. */
#ifndef ML_JSONIN_H
#define ML_JSONIN_H

#include <stdio.h>
#include "diff/diffrun.h"

enum diff_pick { DIFF_FIRST, DIFF_LAST };

/*
 * Read the first or last report of the JSON Lines in f into r. Lines of another type are skipped, as the
 * schema allows; so is a last line cut short (a run killed while writing it). 0, or -EINVAL (the input is not
 * what it should be) or -ENOMEM, with *why saying what (free it).
 */
int jsonin__read(FILE *f, enum diff_pick pick, struct diff_run *r, char **why);

#endif
