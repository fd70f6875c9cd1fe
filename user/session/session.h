/*
 * A run of memleak-ai from start to end: attach to the process (or start the command), trace it and its
 * children, and at every interval collect, judge and report, until it exits, a signal or the count.
 */
#ifndef ML_SESSION_H
#define ML_SESSION_H

#include "session/opts.h"

struct memleak_bpf;

/*
 * Set the BPF object up before it loads, as a run with options o does: the allocator table, the tables'
 * sizes, the unwinder, uprobe_multi links (multi), heap-growth mode's program only when it can be needed, the rss
 * layer's only when it is on.
 */
void session__configure_bpf(struct memleak_bpf *skel, const struct ml_opts *o, bool multi);

/* Open, configure and load the BPF object. 0 or a negative errno, its one line printed (a step of session/). */
int session__load_bpf(const struct ml_opts *o, bool multi, struct memleak_bpf **out);

/* The whole run, as the options say; each failure printed once. Returns the exit status (0 or 1). */
int session__run(const struct ml_opts *o);

#endif
