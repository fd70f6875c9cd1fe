/* pprof output: the final report as a gzipped profile.proto, for go tool pprof, Pyroscope and Parca. */
#ifndef ML_PPROF_H
#define ML_PPROF_H

#include <stdint.h>
#include <stdio.h>

struct ml_snapshot;
struct ml_judgement;
struct stackview;
struct findings;
struct steps;

/*
 * Write one profile of the stacks of the snapshot (of process tgid only, unless 0); 0 or a negative errno.
 * Each sample is labelled with its layer, verdict and pid, its process's rank, role and comm when known, and
 * numbers: bytes_per_s, and with st's step clock bytes_per_step and its process's steps.
 * Its values: inuse_space, inuse_objects, growth_space, and peak_space (the row's highest bytes in f, the
 * run's findings, or its bytes now when f is NULL or never saw it).
 */
int ml_pprof_write(FILE *out, const struct ml_snapshot *s, const struct ml_judgement *j, struct stackview *sv,
		   const struct steps *st, const struct findings *f, uint64_t duration_ns, int tgid);

#endif
