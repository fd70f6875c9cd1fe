/*
 * The process events of a run (forks, execs, a -c target's stops at dlopen, OOM choices, CUDA out-of-memory
 * errors) and the set of traced processes they change: what the run's set-up and its event loop both call.
 * Private to session/; each function takes the run's state (session/state.h).
 */
#ifndef ML_SESSION_PROCEVENTS_H
#define ML_SESSION_PROCEVENTS_H

#include <stddef.h>
#include "attach/probes.h"
#include "session/fleet.h"

struct session;
struct tracee;

/* The first process's probes options, every layer of the run (a follower's pid is set by follow.c). */
struct probes_opts procevents__root_probes(struct session *ss);

/* The traced process with this pid, the first one or a follower, or NULL. */
struct tracee *procevents__tracee_of(struct session *ss, int tgid);

/*
 * --follow (and whole-node runs): the fork and exec tracepoints, the ring their events come on, and the
 * descendants the first process has already. 0 or a negative errno, its one line printed.
 */
int procevents__follow(struct session *ss);

/* The events' ring, once (the rss layer's releases come on it without --follow). 0 or a negative errno. */
int procevents__open_ring(struct session *ss);

/* What the loop hands on after it read the ring: the first process ran exec, or stopped at a dlopen (-c). */
void procevents__root_exec(struct session *ss);
void procevents__loader_stopped(struct session *ss);

/* followers__sync's and selector__scan's callbacks (ctx: the session). */
void procevents__follower_gone(void *ctx, int pid);
int procevents__node_add(void *ctx, int pid);

/* The traced processes as the fleet outputs see them, and their pids in ss->pids (how many; 0: out of memory). */
struct fleet_procs procevents__fleet_of(struct session *ss);
size_t procevents__traced_pids(struct session *ss);

#endif
