/* --follow: the traced process's children (DataLoader workers and the like), each probed and resolved on its own. */
#ifndef ML_FOLLOW_H
#define ML_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include "attach/probes.h"
#include "session/tracee.h"

struct memleak_bpf;
struct followers;
struct pyframes;
struct symbolizer;
struct unwinder;

struct follow_opts {
	struct probes_opts probes; /* as for the first process; pid is set per follower */
	bool python;		   /* Python frames */
	struct unwinder *uw;	   /* unwinding tables shared by all traced processes; NULL: frame pointers */
	const char *debug_dir;	   /* --debug-dir, NULL: the default */
	size_t max;		   /* followers at most; more are counted and left alone */
	const struct tracee *root; /* the first process (-p, -c), whose children are workers; NULL for none */
};

int followers__new(struct memleak_bpf *skel, const struct follow_opts *o, struct followers **out);
void followers__free(struct followers *f); /* detaches from all of them; NULL-safe */

/*
 * Trace a process: one forked by a traced process, a descendant found at start, or (parent 0) one that a
 * whole-node selector picked. Prints a notice.
 * 0, -EEXIST when it is traced already, -ESRCH when it is gone, -ENOSPC over the limit, other -errno.
 */
int followers__add(struct followers *f, int pid, int parent);

/* The process ran exec: its new image gets new probes (on before the old come off) and a new Python decoder. */
int followers__exec(struct followers *f, int pid);

/*
 * Probe libraries the followers loaded since the last call (all of them on a full scan, else those without a
 * loader watch), and drop those that exited, calling gone(ctx, pid) for each (before it is forgotten).
 */
void followers__sync(struct followers *f, bool full, void (*gone)(void *ctx, int pid), void *ctx);

/*
 * Heap-growth mode (--max-overhead) for every follower, now and later ones: the C library's probes dropped, or
 * with windows, closed until followers__window opens them.
 */
void followers__heap_mode(struct followers *f, bool windows);
/* The C heap's sampling windows: every link of those layers closed or reopened, in every follower. */
void followers__window(struct followers *f, unsigned int mask, bool open);
/* --max-overhead's shedding: the probes of these layers (a bit per enum ml_layer) off, now and in later ones. */
void followers__drop_layers(struct followers *f, unsigned int mask);
/* Tensor sampling: the allocation side of those layers paused (or resumed) in every follower, new ones too. */
void followers__pause(struct followers *f, unsigned int mask, bool pause);
/* The step clock's sampling: its links closed (or attached again) in every follower, new ones too. */
void followers__step(struct followers *f, bool on);
/* The followers' pids, at most max of them; returns how many. */
size_t followers__pids(const struct followers *f, int *out, size_t max);

/* Once per report: bound the followers' Python caches. */
void followers__trim(struct followers *f);

/* The follower with this pid, or NULL. */
struct tracee *followers__find(struct followers *f, int pid);
/* How many processes are followed now. */
size_t followers__count(const struct followers *f);
/* The i-th of them (i below the count). */
const struct tracee *followers__at(const struct followers *f, size_t i);

struct ml_child {
	int pid, parent;
};

/*
 * The living descendants of root (children, their children, ...) read from /proc, parents before their
 * children, for those that existed before memleak-ai attached. *out is malloc'd. 0 or -errno.
 */
int ml_descendants(int root, struct ml_child **out, size_t *n);

#endif
