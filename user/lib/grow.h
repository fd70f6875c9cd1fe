/* One growable array: the capacity doubles, and the old buffer stays valid when growing fails. */
#ifndef ML_GROW_H
#define ML_GROW_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Make room for need elements of elem bytes in *p (capacity *cap, in elements). 0 or -ENOMEM. */
static inline int ml_grow(void *p, size_t *cap, size_t need, size_t elem)
{
	void **pp = p;
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2 / elem)
			return -ENOMEM;
		n *= 2;
	}
	q = realloc(*pp, n * elem);
	if (!q)
		return -ENOMEM;
	*pp = q;
	*cap = n;
	return 0;
}

/* Whether an array grown for a burst holds more than need calls for: over four times need, and 64 more. */
static inline bool ml_oversized(size_t cap, size_t need)
{
	return cap > 4 * need + 64;
}

/* Give back what an oversized array no longer needs: cut to need + 64. Keeps the old buffer when realloc fails. */
static inline void ml_fit(void *p, size_t *cap, size_t need, size_t elem)
{
	void **pp = p, *q;

	if (!ml_oversized(*cap, need))
		return;
	q = realloc(*pp, (need + 64) * elem);
	if (!q)
		return;
	*pp = q;
	*cap = need + 64;
}

#endif
