/* Probe attachment: finds the allocator table's functions in the target's mapped objects and attaches to them. */
#ifndef ML_PROBES_H
#define ML_PROBES_H

#include <stdbool.h>
#include "procmaps.h"

struct memleak_bpf;
struct probes;

struct probes *probes__new(struct memleak_bpf *skel, int pid);
void probes__free(struct probes *p); /* detaches everything; NULL-safe */

/*
 * Attach to every object in `maps` the table applies to that is not attached yet (objects are known by
 * device and inode, so a library mapped again or under another name is not probed twice). Returns the
 * number of objects newly attached, or a negative errno; on error nothing from this call stays attached.
 */
int probes__sync(struct probes *p, const struct ml_maps *maps);

unsigned int probes__n_objects(const struct probes *p);
unsigned int probes__n_links(const struct probes *p);
/* The path of the i-th attached object (as the target maps it) and how many functions it has probed. */
const char *probes__object(const struct probes *p, unsigned int i, unsigned int *nfuncs);

#endif
