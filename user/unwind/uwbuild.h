/*
 * The builder thread of unwinding tables: at SCHED_IDLE it takes the next queued file under the unwinder's lock,
 * parses it outside the lock and hands the table back under it (unwind.c keeps the queue and places the table).
 */
#ifndef MEMLEAK_AI_UWBUILD_H
#define MEMLEAK_AI_UWBUILD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "unwind/uwparse.h"

struct uwbuild;

/* One file to build: its slot and queueing, the file open on fd as pid maps it, its path. */
struct uwbuild_job {
	int slot, fd, pid;
	uint32_t job;
	char *path; /* the builder's to free; NULL: out of memory */
};

struct uwbuild_ops {
	/* Under the lock: the next file into *j, its fd handed over; false when none is queued. */
	bool (*take)(void *ctx, struct uwbuild_job *j);
	/* Under the lock: the file's table (err 0; p->conv is the builder's to free) or -ENOMEM. */
	void (*built)(void *ctx, const struct uwbuild_job *j, int err, struct uw_parsed *p);
	void *ctx;
};

/* Start the thread; lock and debug_dir are the caller's and outlive it. 0 or -errno. */
int uwbuild__new(pthread_mutex_t *lock, const char *debug_dir, const struct uwbuild_ops *ops, struct uwbuild **out);
/* Stop and join the thread; called without the lock. NULL-safe. */
void uwbuild__free(struct uwbuild *b);
/* Under the lock: a file was queued. */
void uwbuild__kick(struct uwbuild *b);
/*
 * Under the lock, while tables wait: once they have waited UWBUILD_IDLE_MAX_NS, the thread runs at normal priority.
 * At SCHED_IDLE on a machine whose cores are all busy (a training job's loaders), libtorch_cpu.so's table took
 * 29 s, and the stacks meanwhile stopped in it; by then the first reports, which idling was for, are made.
 */
void uwbuild__hurry(struct uwbuild *b, uint64_t waited_ns);
#define UWBUILD_IDLE_MAX_NS 5000000000ULL

#endif
