/* The classification of one series (trend.c): shared with verdict.c, which fits per-step growth with it too. */
#ifndef ML_TREND_H
#define ML_TREND_H

#include <stddef.h>

/* Least-squares slope of y over t; 0 when the t do not spread. */
double ml_slope(const double *t, const double *y, size_t n);

#endif
