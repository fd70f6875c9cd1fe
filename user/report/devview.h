/* The CUDA caching allocator's memory by device in a report: reserved, allocated, and what live blocks pin. */
#ifndef ML_DEVVIEW_H
#define ML_DEVVIEW_H

#include <stddef.h>
#include <stdio.h>
#include "collect/snapshot.h"

struct jw;

#define ML_PINS_SHOWN 3 /* pinning rows named per device */

/* "cuda device N: reserved R, allocated to tensors A, cached C; P of it pinned by ..., most by [n] (B)" */
void ml_text_devices(FILE *f, const struct ml_snapshot *s, const size_t *order);
/* The "devices" array. */
void ml_json_devices(struct jw *w, const struct ml_snapshot *s, const size_t *order);

#endif
