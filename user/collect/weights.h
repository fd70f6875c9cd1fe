/*
 * What a sampled record of the allocation table stands for. Four schemes weigh records: a time-sampled layer's
 * epochs (a record weighs 2^shift), the sampling windows' scales (a record stands for w), the rss layer's
 * sampling shift, and the sampled C heap's weights by chunk size (sizeweights.c). The ledger counts through them.
 */
#ifndef ML_WEIGHTS_H
#define ML_WEIGHTS_H

#include <stdint.h>
#include "memleak.h"

/* Epochs of one time-sampled layer, at most: they only follow one another. */
#define WEIGHTS_EPOCHS 8

struct sizeweights;
struct weights;

/* sizes: the sampled C heap's weights by chunk size (not owned), or NULL. 0 or -ENOMEM. */
int weights__new(const struct sizeweights *sizes, struct weights **out);
void weights__free(struct weights *w); /* NULL-safe */

/* A record of layer made from since_ns on weighs 2^shift. 0, -EINVAL or -ENOSPC (WEIGHTS_EPOCHS taken). */
int weights__set_epoch(struct weights *w, unsigned int layer, uint64_t since_ns, uint32_t shift);
/* The layer's weight now, as a shift (0: every record counts once). */
uint32_t weights__shift(const struct weights *w, unsigned int layer);
/* The weight (as a shift) of a record of this layer made at ts. */
uint32_t weights__record_shift(const struct weights *w, unsigned int layer, uint64_t ts);

/*
 * A record of layer made by an allocator row from since_ns on (until the layer's next scale) stands for s.
 * The same since_ns again sets that scale anew. 0, -EINVAL or -ENOMEM.
 */
int weights__add_scale(struct weights *w, unsigned int layer, uint64_t since_ns, double s);
void weights__clear_scale(struct weights *w, unsigned int layer); /* back to the layer's shift */

/* The rss layer's sampling shift: records the test rejects are skipped, the others weigh 2^shift. */
void weights__set_rss_shift(struct weights *w, uint32_t shift);
uint32_t weights__rss_shift(const struct weights *w);

/*
 * What a sampled record stands for: its size's weight, else its layer's scale at ts; 0 when not scaled. *window
 * (if given): the scale alone, its sizes' weights left out; 0 when none, or when set for all records at once.
 */
double weights__scaled(const struct weights *w, const volatile struct ml_slot *sl, uint8_t layer, uint8_t spec,
		       uint64_t ts, double *window);
/* What a record stands for: as scaled, else 2^shift of its record-time weight. */
double weights__of(const struct weights *w, const volatile struct ml_slot *sl, uint8_t layer, uint8_t spec,
		   uint64_t ts);

#endif
