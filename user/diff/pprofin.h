/* `memleak-ai diff`'s reader of pprof profiles (--pprof, -f pprof, --pprof-dir, a store's download). */
#ifndef ML_PPROFIN_H
#define ML_PPROFIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "diff/diffrun.h"

/*
 * Read the profile in f, after the first npre bytes of it already read into pre (NULL when none), gzipped or not,
 * into r: inuse_space and inuse_objects by stack, with the labels
 * memleak-ai writes (layer; bytes_per_s, bytes_per_step, steps). A profile without a layer label is read as
 * layer "-". 0, or -EINVAL or -ENOMEM with *why saying what (free it).
 */
int pprofin__read(FILE *f, const uint8_t *pre, size_t npre, struct diff_run *r, char **why);

#endif
