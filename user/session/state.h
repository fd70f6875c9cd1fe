/*
 * The state of a run, shared by its set-up and tear-down (session.c), its event loop (loop.c) and the process
 * events both of them hand on (procevents.c); and the loop's entry, which set-up calls. Private to session/.
 */
#ifndef ML_SESSION_STATE_H
#define ML_SESSION_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "attach/rowcache.h"
#include "judge/victims.h"
#include "report/oomview.h"
#include "session/budget.h"
#include "session/copies.h"
#include "session/fleet.h"
#include "session/opts.h"
#include "session/target.h"
#include "session/tracee.h"

#define FAST_SCAN_S 0.05 /* libraries come and go most right after start: rescan this often at first, */
#define FAST_SCANS 40	 /* this many times, then once a second */
/*
 * A process whose dynamic loader is watched (ldso_notify) has its mappings read when a library comes or goes,
 * once right after the watch is on (what was mapped between the first scan and the watch), and on every
 * FULL_SCAN_EVERY-th scan (a safety net): a PyTorch process's maps cost ~10 ms of CPU to read. Only a process
 * without the watch is read at each of the fast scans.
 */
#define FULL_SCAN_EVERY 15
#define MAX_FOLLOWERS 1024
#define READ_ONCE_U64(x) ((uint64_t)__atomic_load_n(&(x), __ATOMIC_RELAXED)) /* a BPF global the programs write */
#define N_OUTPUTS 3	   /* the main output (-f, -o), then --json and --pprof */
#define RSS_MAX_RATE 250.0 /* rss layer: pages recorded a second before it samples (each one costs a stack) */

struct session {
	const struct ml_opts *o;
	struct memleak_bpf *skel;
	struct target tgt;
	struct tracee root; /* the first process; followers are tracees too */
	struct tracee_env env;
	bool multi;	     /* uprobe_multi links */
	unsigned int layers; /* as --layers, less libc once in heap-growth mode */
	struct followers *followers;
	struct rowcache rows;	/* what probing found in each object file: a follower's probes read none again */
	struct bgobj *usdt_obj; /* PyTorch's USDT programs, loaded in the background */
	struct selector *sel;	/* --match, --cgroup, --all-python: no first process, every match a follower */
	struct metrics_server *metrics; /* --metrics-listen */
	struct pusher *push;		/* --push, --pprof-dir */
	struct ring_buffer *proc_rb;	/* --follow's fork and exec events */
	bool root_exec;			/* the first process ran exec (once or more) since the events were last read */
	struct stackstore *stacks;
	struct ledger *ledger;
	struct slots *slots;	   /* the allocation table's levels, made right after the BPF object loads */
	struct sizeweights *sizes; /* the sampled C heap's weights by chunk size (budget__heap_by_size) */
	struct verdicts *verdicts;
	struct steps *steps; /* the step clock's counts per process (NULL: --step none) */
	struct ranks *ranks; /* the ranks of a job compared (session/diverge.c), made at the first report */
	size_t *rank_rows, cap_rank_rows; /* ... each divergent rank's row, for the report */
	struct findings *findings;	  /* what the run found while its processes lived: last live report, peaks */
	pthread_mutex_t learn_lock;	  /* the stack store's reader thread decodes new stacks' code objects ... */
	struct pyframes *learn_py;	  /* ... with the first process's decoder (NULL: none, or being replaced) */
	bool py_exit_due;	   /* the first process's interpreter began its teardown: report before it frees */
	uint64_t py_exit_seen;	   /* -c: the BPF side's count of stops at that teardown, when last handled */
	bool py_teardown;	   /* ... it did: reports from here on are not the run's findings */
	struct ml_victims victims; /* the last report's victims of fragmentation and rows held (judge/victims.h) */
	bool walk_soon; /* a growing row of fresh heap waits for a heap walk to be told: the next report walks */
	struct html_timeline *timeline;
	struct stackview *sv;
	struct overhead *ov;
	struct rsspages *rss;  /* the rss layer, when on */
	struct copies *copies; /* its copy scan, made when its faults are no longer traced */
	FILE *out, *extra_out[N_OUTPUTS - 1];
	struct reporter *reps[N_OUTPUTS];
	struct budget *budget;			/* --max-overhead's actions: heap-growth mode, shedding */
	struct budget_env benv;			/* what they change (budget_env_of) */
	struct bpf_link *fork_link, *exec_link; /* --follow's tracepoints */
	struct bpf_link *oom_link;		/* the OOM killer's choice of a traced process (mark_victim) */
	bool oom_report;			/* a follower was chosen: report now, before its exit drops it */
	struct ml_cuda_oom cuda_oom;		/* a CUDA out-of-memory burst's first failed call and raise ... */
	bool cuda_oom_due;			/* ... for the report written now */
	uint64_t cuda_oom_ns;			/* the last of the burst: it goes on while they come */
	bool closing;				/* the final report is due: read what is left, start nothing new */
	struct bpf_link *ld_stop;		/* -c: stops the target at each report of its dynamic loader (dlopen) */
	uint64_t ld_stops_seen;			/* the BPF side's count of those stops when the last one was handled */
	uint64_t ld_held_ns, ld_handled;	/* how long the target was held at them, and how many were handled */
	uint64_t ld_last_ns;			/* when the last of them was handled (0: none yet) */
	int sfd, tick_fd, scan_fd;
	uint64_t seq, scans, start_ns;
	int *pids; /* the traced processes' pids, for the overhead sample */
	size_t cap_pids;
};

/* learn.c: the stack store's hook (stackstore__on_new), and the decoder it uses from now on (NULL: none). */
void session__learn_stack(void *ctx, const struct ml_stack *st);
void session__learn_with(struct session *ss, struct pyframes *py);

/* The event loop, until the final report. 0 or a negative errno, its one line printed (a step of session/). */
int session__loop(struct session *ss);

/* Arm a timerfd of the loop to fire every secs. 0 or a negative errno. */
int session__arm_timer(int fd, double secs);

#endif
