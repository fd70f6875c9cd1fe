/*
 * How much one probe hit costs on this machine: empty programs on the C library's own malloc and free, timed in
 * a child of memleak-ai by a thread of their own while the run starts. Only the budget's first decision waits.
 */
#ifndef ML_SESSION_CALIB_H
#define ML_SESSION_CALIB_H

#include <stdbool.h>

struct bpf_program;
struct calib;

/* What a calibration found: ns of one entry trap, of a return probe's own trap, and of a bare malloc + free pair. */
struct calib_figures {
	int err; /* 0, or why it could not time a hit (a negative errno) */
	double hit_ns, ret_ns, base_ns;
};

int calib__new(struct calib **out);
void calib__free(struct calib *c); /* NULL-safe; stops a calibration under way and waits for its thread */

/*
 * Start it with a do-nothing uprobe_multi program of its own, before the BPF object is loaded (the traced
 * processes' probes are uprobe_multi links then). 0 or a negative errno.
 */
int calib__start_multi(struct calib *c);

/* Start it with the object's do-nothing program (progs.calib), unless it was started already. 0 or a negative errno. */
int calib__start(struct calib *c, const struct bpf_program *prog);

/*
 * -EAGAIN while it runs; 1 when it ended since the last call, its thread joined and its figures in *ret (once);
 * 0 when there is nothing (more) to take: never started, or taken already.
 */
int calib__take(struct calib *c, struct calib_figures *ret);

#endif
