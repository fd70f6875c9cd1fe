/*
 * The run's findings in a report (judge/findings.h): the target's exit and what it freed, the peak, and each
 * row's peak. Text and JSON.
 */
#ifndef ML_FINDVIEW_H
#define ML_FINDVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "judge/findings.h"

struct jw;
struct stackview;

/* "the target exited ..." and the plain statement that an exiting interpreter frees what a live job keeps. */
void ml_text_exit(FILE *f, const struct ml_exit_view *xv, uint64_t start_ns);
void ml_json_exit(struct jw *w, const struct ml_exit_view *xv, uint64_t start_ns);

/* "peak: ..." per layer, the resident high-water mark, and the rows that held the most at the peak. */
void ml_text_peak(FILE *f, struct stackview *sv, const struct findings *fd, uint64_t start_ns);
void ml_json_peak(struct jw *w, struct stackview *sv, const struct findings *fd, uint64_t start_ns);

/* A row's peak (when above its bytes now, or always after the exit) and what the exit freed of it. */
void ml_text_row_peak(FILE *f, const struct findings *fd, const struct ml_row *row, bool exited, uint64_t start_ns);
void ml_json_row_peak(struct jw *w, const struct findings *fd, const struct ml_row *row, bool exited,
		      uint64_t start_ns);

#endif
