/*
 * Whole-node targets (--match, --cgroup, --all-python): which processes of the machine are traced, found by
 * scanning /proc (and the cgroup's member list) at every scan tick, so a process is picked up within a
 * second of starting, or of entering the cgroup.
 */
#ifndef ML_SELECT_H
#define ML_SELECT_H

#include <regex.h>
#include <stdbool.h>

struct selector_opts {
	const regex_t *match; /* --match: against the command line, words joined by spaces */
	const char *cgroup;   /* --cgroup: a cgroup directory (v1 or v2) */
	bool all_python;      /* --all-python: CPython 3.11 to 3.13 */
	int self;	      /* never selected: memleak-ai's own pid */
};

struct selector;

/* A --cgroup that is neither a cgroup directory nor a path as /proc/PID/cgroup shows one: its stat's errno. */
int selector__new(const struct selector_opts *o, struct selector **out);
void selector__free(struct selector *s); /* NULL-safe */

/*
 * Offer every process that matches now and was not offered before: a new process, or one whose image
 * changed (exec) since it was last looked at. add(ctx, pid) returns 0 or a negative errno. Returns how many
 * were offered, or a negative errno when /proc (or the cgroup) cannot be read.
 */
int selector__scan(struct selector *s, int (*add)(void *ctx, int pid), void *ctx);

#endif
