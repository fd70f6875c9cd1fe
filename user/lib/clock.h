/* Clock readings in nanoseconds. */
#ifndef ML_CLOCK_H
#define ML_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC is the clock of the BPF side's timestamps (bpf_ktime_get_ns). */
static inline uint64_t ml_clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* secs (>= 0) as a timespec; never all zero, which would disarm a timer. */
static inline void ml_timespec(struct timespec *ts, double secs)
{
	ts->tv_sec = (time_t)secs;
	ts->tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9);
	if (!ts->tv_sec && !ts->tv_nsec)
		ts->tv_nsec = 1;
}

#endif
