/* Closing several BPF links at once. */
#ifndef ML_CLOSEALL_H
#define ML_CLOSEALL_H

#include <stddef.h>

/*
 * Close every descriptor in fds[0..n) (negative ones skipped), each on a thread of its own, and return when
 * all are closed. Closing a uprobe link takes its breakpoints out at once, then waits for the probes in
 * flight to finish (a grace period, tens of milliseconds); one after another, a target keeps paying for
 * the links not closed yet while the first wait. Falls back to closing in turn when a thread cannot start.
 */
void ml_close_all(const int *fds, size_t n);
/* The same for first[0..n1), then, delay_us after their closing began, for then[0..n2). */
void ml_close_staggered(const int *first, size_t n1, unsigned int delay_us, const int *then, size_t n2);

#endif
