/*
 * A traced process's fleet labels: its rank, local rank, world size and job id (four variables of its
 * environment, nothing else read from it), its container id (from its cgroup) and its comm. The command
 * line is never read: it is unbounded and can carry secrets.
 */
#ifndef ML_PROCLABELS_H
#define ML_PROCLABELS_H

#include <stdbool.h>
#include <stddef.h>

struct ml_labels {
	char *rank, *local_rank, *world_size; /* decimal, as set; NULL when unset or not a number */
	char *job;			      /* TORCHELASTIC_RUN_ID; NULL when unset, empty or too long */
	char *container;		      /* a 64-hex-digit container id from the cgroup path; NULL: none */
	char *comm;			      /* never NULL once read ("" if unreadable) */
};

/*
 * Read them from /proc/PID. 0, -ESRCH/-ENOENT when the process is gone, -ENOMEM. A value that is not what
 * its variable should hold (a rank that is not a number, a job id over 256 bytes) is left out, never
 * cut. Values are the target's bytes: outputs escape them.
 */
int ml_labels__read(int pid, struct ml_labels *out);
void ml_labels__clear(struct ml_labels *l);
/* Parsers on the raw text, for the tests: environ ('\0'-separated) and /proc/PID/cgroup. 0 or -ENOMEM. */
int ml_labels__parse_environ(const char *buf, size_t len, struct ml_labels *out);
int ml_labels__parse_cgroup(const char *text, struct ml_labels *out);

#endif
