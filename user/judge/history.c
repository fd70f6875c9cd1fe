/* One stack's history across reports: the samples kept, folded and restated (see history.h). */
#include "judge/history.h"
#include <string.h>

void hist__push(struct hist *h, const struct sample *s)
{
	if (h->n_short == ML_HIST_SHORT) {
		/* Fold the oldest recent sample into the long history every ML_HIST_FOLD samples. */
		if (h->folded++ % ML_HIST_FOLD == 0) {
			if (h->n_long == ML_HIST_LONG)
				memmove(h->old, h->old + 1, --h->n_long * sizeof(*h->old));
			h->old[h->n_long++] = h->recent[0];
		}
		memmove(h->recent, h->recent + 1, --h->n_short * sizeof(*h->recent));
	}
	h->recent[h->n_short++] = *s;
}

void hist__restate(struct hist *h, const struct sample *s)
{
	if (!h->n_short)
		hist__push(h, s);
	else
		h->recent[h->n_short - 1] = *s;
}

size_t hist__series(const struct hist *h, double *t, double *b, double *c)
{
	size_t n = 0;

	for (; n < hist__len(h); n++) {
		const struct sample *s = hist__at(h, (uint32_t)n);

		t[n] = s->t, b[n] = s->b, c[n] = s->c;
	}
	return n;
}

void hist__reweighed(const struct hist *h, double fb, double fc, double wmean, double *rb, double *rc)
{
	for (uint32_t i = 0; i < hist__len(h); i++) {
		const struct sample *s = hist__at(h, i);
		double k = s->wmean > 0 && wmean > 0 ? (double)s->wmean / wmean : 1;

		rb[i] = (double)(s->rb - s->wb) + (double)s->wb * fb * k;
		rc[i] = (double)(s->rc - s->wc) + (double)s->wc * fc * k;
	}
}

uint64_t hist__report_at(const struct hist *h, double t)
{
	for (uint32_t i = 0; i < hist__len(h); i++)
		if (hist__at(h, i)->t == t)
			return hist__at(h, i)->seq;
	return 0;
}
