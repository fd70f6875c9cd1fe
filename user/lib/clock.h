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

#endif
