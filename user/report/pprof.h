/* pprof output: the final report as a gzipped profile.proto, for go tool pprof, Pyroscope and Parca. */
#ifndef ML_PPROF_H
#define ML_PPROF_H

#include <stdint.h>
#include <stdio.h>

struct ml_snapshot;
struct ml_judgement;
struct stackview;

/* Write one profile of every stack of the snapshot; 0 or a negative errno. */
int ml_pprof_write(FILE *out, const struct ml_snapshot *s, const struct ml_judgement *j, struct stackview *sv,
		   uint64_t duration_ns);

#endif
