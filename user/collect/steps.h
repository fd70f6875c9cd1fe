/*
 * The step clock: each traced process's training steps, counted in BPF at the step function's entry (by default
 * the autograd engine's backward pass) and read here once a report. Growth then reads per step, and a process that
 * stops stepping (a pause between epochs, an evaluation) is seen to pause: its rows' clocks stand still for up to
 * STEPS_PAUSE_MAX_S, so that a leak does not read as stable while the job waits.
 */
#ifndef ML_STEPS_H
#define ML_STEPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

/* The longest pause a process's clock stands still for; after it, time runs again (a job that stopped training). */
#define STEPS_PAUSE_MAX_S 120.0
/* A pause begins once the next step is this many mean step periods late: a step longer than a report is no pause. */
#define STEPS_LATE 3
/* Reports over which a layer's per-step growth is measured: the newest against the oldest kept. */
#define STEPS_KEEP 12

struct steps;

/* One process's steps as of the last read. */
struct step_count {
	int tgid;
	uint64_t count;			/* steps since the clock first counted one in this process */
	uint64_t delta;			/* of them, since the read before */
	uint64_t sampled;		/* of them, those made in tensor sampling's on phases */
	bool whole;			/* ... sampled by whole steps at the last read (struct ml_steps: by_step) */
	double paused_s;		/* seconds its clock stood still since its first step (pauses, each capped) */
	double pause_s;			/* of them, the current pause's (0 while it steps) */
	uint64_t last_ns;		/* its last step (CLOCK_MONOTONIC) */
	uint64_t first_ns, first_count; /* the last step and the count at the first read: the mean period */
	uint32_t gen;			/* the read that last saw it in the map */
	uint64_t raw, raw_sampled;	/* the clock's own counts: steps seen while it was probed */
	double est, est_sampled;	/* what they stand for, summed read by read: count and sampled, unrounded */
	/* The newest STEPS_KEEP reads' times and counts, oldest first: the count at a moment between them. */
	uint64_t read_ns[STEPS_KEEP], read_count[STEPS_KEEP];
	unsigned int nreads;
	/* The newest STEPS_KEEP reads' counts and per-layer bytes, oldest first (steps__keep_bytes). */
	uint64_t kept_steps[STEPS_KEEP];
	int64_t kept_bytes[STEPS_KEEP][ML_LAYER_MAX];
	unsigned int nkept;
};

/* A read's interval: whether the clock was sampled in it, how long it was probed, what a step seen stands for. */
struct steps_window {
	bool sampled;
	double on_ns, scale;
};
/* At most this scale: a read whose interval had the clock probed for less says nothing of it. */
#define STEPS_SCALE_MAX 1024

/* map_fd: the BPF steps map (bpf/probes.bpf.c); func: the step function, as reports name it. 0 or -ENOMEM. */
int steps__new(int map_fd, const char *func, struct steps **out);
const char *steps__func(const struct steps *s);
void steps__free(struct steps *s); /* NULL-safe */

/*
 * Read every process's count, interval_s after the read before, at now_ns (CLOCK_MONOTONIC). on_ns: how long the
 * clock has been probed until now_ns (session/budget.h: budget__step_on_ns); now_ns when it always is. Sampled, a
 * read's steps stand for those of the whole interval. 0 or a negative errno; a process not read is taken as one
 * that made no step.
 */
int steps__read(struct steps *s, double interval_s, uint64_t now_ns, uint64_t on_ns);
/* A process's steps, or NULL while its clock has counted none. */
const struct step_count *steps__of(const struct steps *s, int tgid);
/*
 * The steps a process had made at t_ns (CLOCK_MONOTONIC), at most its count: a tensor-sampled row's sample is of
 * when a sampling phase closed, up to a second before the report, and paired with the report's count it read
 * epochs.py's 1 MiB a step as 0.94 to 1.19 MiB. Between two reads steps are taken as even up to the last step.
 */
double steps__count_at(const struct step_count *c, uint64_t t_ns);
/* Keep this read's outstanding bytes per layer of a process that steps, for its per-step growth. */
void steps__keep_bytes(struct steps *s, int tgid, const int64_t bytes[ML_LAYER_MAX]);
/*
 * A process's growth of a layer per step over its kept reads (up to STEPS_KEEP); false while fewer than two
 * reads apart by a step are kept. *nsteps: the steps it spans.
 */
bool steps__layer_rate(const struct step_count *c, unsigned int layer, double *per_step, uint64_t *nsteps);
/*
 * A layer's growth per step over all processes that step: the sum of their rates (ranks step together, so the
 * node's memory grows by that much a step); *nsteps the most steps one of them spans. False when none has one.
 */
bool steps__total_rate(const struct steps *s, unsigned int layer, double *per_step, uint64_t *nsteps);
/* The process is forgotten (it exited, or ran exec): its count goes, here and in the map. */
void steps__forget(struct steps *s, int tgid);
/* Processes that stepped, and the most steps any of them made. */
size_t steps__procs(const struct steps *s, uint64_t *most);

#endif
