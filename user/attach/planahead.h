/*
 * An object's probe plan (rowcache.h), read from its symbols or found in the session's cache; and every
 * mapped object of a process planned ahead, on a thread, while the BPF object is verified: the symbol scans
 * (libtorch_cpu's and libtorch_cuda's, half a second together) then no longer wait for it.
 */
#ifndef ML_PLANAHEAD_H
#define ML_PLANAHEAD_H

#include <stdbool.h>
#include "attach/rowcache.h"
#include "lib/procmaps.h"

struct elf_syms;
struct planahead;

/* Whose objects, kept where, looked for as what (probes_opts's part of it). */
struct plan_opts {
	int pid;
	struct rowcache *rows; /* the session's; NULL: none */
	unsigned int layers;   /* bit mask of enum ml_layer traced */
	bool torch_raw;	       /* the optin rows too */
	const char *step;      /* the step clock's function, NULL: none */
};

/* A C library, or a heap allocator that replaces its malloc family: its malloc/free rows are looked for. */
bool planahead__as_libc(const char *path);

/*
 * m's plan as o looks for it: the cache's (o->rows) when a process mapped the same file before, else read
 * from its symbols (*syms, for -v's listing, and *fresh, for the caller to put in the cache once used). 0 or a
 * negative errno (-ESRCH: the process is gone; -EAGAIN: the mapping changed meanwhile); a plan's own err is
 * what the object is (-ENOENT, -ENOEXEC), kept like any plan.
 */
int planahead__plan(const struct plan_opts *o, const struct ml_mapping *m, bool as_libc, const struct rowplan **plan,
		    struct rowplan **fresh, struct elf_syms **syms);

/*
 * Plan o->pid's mapped objects into o->rows on a thread of its own; nothing else may use o->rows until
 * planahead__join. An object it cannot plan is left to the attach, which says why. 0 or a negative errno.
 */
int planahead__start(const struct plan_opts *o, struct planahead **out);
void planahead__join(struct planahead *pa); /* waits for the thread, and frees; NULL-safe */
/*
 * Plan the objects of maps (the caller's) into o->rows now, on the same threads, and wait: a process held at
 * its loader's report (-c) waits for the symbol scans of what it just mapped (libtorch_cpu's, libtorch_cuda's
 * and the rest of torch's at one stop). 0 or a negative errno; what is not planned is planned as it is probed.
 */
int planahead__now(const struct plan_opts *o, const struct ml_maps *maps);

#endif
