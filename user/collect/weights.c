/* What a sampled record stands for: the epochs, scales, rss shift and size weights the ledger counts through. */
#include "collect/weights.h"
#include <errno.h>
#include <stdlib.h>
#include "attach/allocators.h"
#include "collect/sizeweights.h"
#include "lib/grow.h"

struct weights {
	const struct sizeweights *sizes; /* not owned; NULL: no size weighs */
	uint32_t rss_shift;		 /* the rss layer's sampling shift: its records weigh 2^shift pages */
	/* Time-sampled layers (weights__set_epoch): from since_ns on, a record made weighs 2^shift. */
	struct {
		uint64_t since_ns;
		uint32_t shift;
	} epochs[ML_LAYER_MAX][WEIGHTS_EPOCHS];
	unsigned int nepochs[ML_LAYER_MAX];
	/* Scaled layers (weights__add_scale): a row's record stands for the w of the last epoch begun before it. */
	struct scale_list {
		struct scale_epoch {
			uint64_t since_ns;
			double w;
		} * v;
		size_t n, cap;
		bool whole; /* cleared once: its epochs' weights are set again for every record (moving ones) */
	} scales[ML_LAYER_MAX];
};

int weights__new(const struct sizeweights *sizes, struct weights **out)
{
	struct weights *w = calloc(1, sizeof(*w));

	*out = w;
	if (!w)
		return -ENOMEM;
	w->sizes = sizes;
	return 0;
}

void weights__free(struct weights *w)
{
	if (!w)
		return;
	for (unsigned int i = 0; i < ML_LAYER_MAX; i++)
		free(w->scales[i].v);
	free(w);
}

int weights__set_epoch(struct weights *w, unsigned int layer, uint64_t since_ns, uint32_t shift)
{
	if (layer >= ML_LAYER_MAX || shift > 32)
		return -EINVAL;
	if (w->nepochs[layer] >= WEIGHTS_EPOCHS)
		return -ENOSPC;
	w->epochs[layer][w->nepochs[layer]].since_ns = since_ns;
	w->epochs[layer][w->nepochs[layer]++].shift = shift;
	return 0;
}

uint32_t weights__shift(const struct weights *w, unsigned int layer)
{
	return layer < ML_LAYER_MAX && w->nepochs[layer] ? w->epochs[layer][w->nepochs[layer] - 1].shift : 0;
}

uint32_t weights__record_shift(const struct weights *w, unsigned int layer, uint64_t ts)
{
	for (unsigned int i = layer < ML_LAYER_MAX ? w->nepochs[layer] : 0; i-- > 0;)
		if (ts >= w->epochs[layer][i].since_ns)
			return w->epochs[layer][i].shift;
	return 0;
}

int weights__add_scale(struct weights *w, unsigned int layer, uint64_t since_ns, double s)
{
	struct scale_list *l = layer < ML_LAYER_MAX ? &w->scales[layer] : NULL;

	if (!l || s <= 0 || (l->n && since_ns < l->v[l->n - 1].since_ns))
		return -EINVAL;
	if (l->n && since_ns == l->v[l->n - 1].since_ns) { /* the epoch's weight measured again */
		l->v[l->n - 1].w = s;
		return 0;
	}
	if (ml_grow(&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return -ENOMEM;
	l->v[l->n++] = (struct scale_epoch){.since_ns = since_ns, .w = s};
	return 0;
}

void weights__clear_scale(struct weights *w, unsigned int layer)
{
	if (layer < ML_LAYER_MAX) {
		w->scales[layer].n = 0;
		w->scales[layer].whole = true;
	}
}

void weights__set_rss_shift(struct weights *w, uint32_t shift)
{
	w->rss_shift = shift;
}

uint32_t weights__rss_shift(const struct weights *w)
{
	return w->rss_shift;
}

/* What a record of a scaled layer made at ts by an allocator row stands for; 0 when it is not scaled. */
static double scale_of(const struct weights *w, uint8_t layer, uint8_t spec, uint64_t ts)
{
	const struct scale_list *s = layer < ML_LAYER_MAX ? &w->scales[layer] : NULL;
	size_t lo = 0, hi = s ? s->n : 0;

	if (!hi || spec >= ml_allocators_n || ts < s->v[0].since_ns)
		return 0;
	while (hi - lo > 1) { /* the last epoch begun at or before ts */
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].since_ns <= ts)
			lo = mid;
		else
			hi = mid;
	}
	return s->v[lo].w;
}

double weights__scaled(const struct weights *w, const volatile struct ml_slot *sl, uint8_t layer, uint8_t spec,
		       uint64_t ts, double *window)
{
	double s = sizeweights__of(w->sizes, sl), scale = window || s <= 0 ? scale_of(w, layer, spec, ts) : 0;

	if (window)
		*window = layer < ML_LAYER_MAX && !w->scales[layer].whole ? scale : 0;
	return s > 0 ? s : scale;
}

double weights__of(const struct weights *w, const volatile struct ml_slot *sl, uint8_t layer, uint8_t spec, uint64_t ts)
{
	double s = weights__scaled(w, sl, layer, spec, ts, NULL);

	return s > 0 ? s : (double)(1ULL << weights__record_shift(w, layer, ts));
}
