/* --follow: the traced process's children (DataLoader workers and the like), each probed and resolved on its own. */
#ifndef ML_FOLLOW_H
#define ML_FOLLOW_H

#include <stdbool.h>
#include <stddef.h>
#include "attach/probes.h"
#include "report/stackview.h"

struct memleak_bpf;
struct followers;
struct pyframes;
struct symbolizer;
struct unwinder;

/*
 * One traced process's image, the first one's or a follower's: probe the objects pid maps that pr has not
 * seen, look for its Python interpreter (py may be NULL; not finding one usable is a notice, never an
 * error), bring the unwinding tables of what it maps into uw (may be NULL: frame pointers only), and
 * refresh sym (may be NULL) with the maps as they are now. Returns probes__sync's result.
 */
int ml_process_sync(int pid, struct probes *pr, struct pyframes *py, struct unwinder *uw, struct symbolizer *sym);

/*
 * The process ran exec: probes made from po and, with python, a Python decoder, synced on its new image
 * and swapped in for *pr and *py only when that worked. The new links go on before the old ones come off:
 * both run the same programs on the same per-thread state, so a call in flight across the swap keeps its
 * return. 0 or a negative errno (the old probes then stay).
 */
int ml_process_reprobe(struct memleak_bpf *skel, const struct probes_opts *po, bool python, struct probes **pr,
		       struct pyframes **py, struct unwinder *uw, struct symbolizer *sym);

struct follow_opts {
	struct probes_opts probes; /* as for the first process; pid is set per follower */
	bool python;               /* Python frames */
	struct unwinder *uw;       /* unwinding tables shared by all traced processes; NULL: frame pointers */
	const char *debug_dir;     /* --debug-dir, NULL: the default */
	size_t max;                /* followers at most; more are counted and left alone */
};

struct followers *followers__new(struct memleak_bpf *skel, const struct follow_opts *o);
void followers__free(struct followers *f); /* detaches from all of them; NULL-safe */

/*
 * Trace a process: one forked by a traced process, or a descendant found at start. Prints a notice.
 * 0, -EEXIST when it is traced already, -ESRCH when it is gone, -ENOSPC over the limit, other -errno.
 */
int followers__add(struct followers *f, int pid, int parent);

/* The process ran exec: its new image gets new probes (on before the old come off) and a new Python decoder. */
int followers__exec(struct followers *f, int pid);

/*
 * Probe libraries the followers loaded since the last call, and drop those that exited, calling
 * gone(ctx, pid) for each (before it is forgotten).
 */
void followers__sync(struct followers *f, void (*gone)(void *ctx, int pid), void *ctx);

/* Heap-growth mode (--max-overhead) for every follower, now and later ones. */
void followers__heap_mode(struct followers *f);
/* Heap-growth mode for one process (bpf heap_procs). 0 or -errno. */
int ml_heap_track(struct memleak_bpf *skel, int pid);
/* The followers' pids, at most max of them; returns how many. */
size_t followers__pids(const struct followers *f, int *out, size_t max);

/* Once per report: bound the followers' Python caches. */
void followers__trim(struct followers *f);

/* The symbolizer and Python decoder of a follower; -ENOENT when pid is not one. */
int followers__resolver(struct followers *f, int pid, struct ml_resolver *out);


struct ml_child {
	int pid, parent;
};

/*
 * The living descendants of root (children, their children, ...) read from /proc, parents before their
 * children, for those that existed before memleak-ai attached. *out is malloc'd. 0 or -errno.
 */
int ml_descendants(int root, struct ml_child **out, size_t *n);

#endif
