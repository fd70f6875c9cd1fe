/*
 * One traced process, the model shared by the first one and every follower: its probes, its Python frame
 * decoder and its symbolizer. Every traced process is attached, synced, re-probed after exec and resolved
 * the same way; only what its exit means differs (the first one's ends the run).
 */
#ifndef ML_TRACEE_H
#define ML_TRACEE_H

#include <stdbool.h>
#include "attach/probes.h"
#include "lib/proclabels.h"
#include "report/stackview.h"

struct ledger;
struct sizeweights;
struct memleak_bpf;
struct pyframes;
struct symbolizer;
struct unwinder;

/* What every traced process shares. */
struct tracee_env {
	struct memleak_bpf *skel;
	struct unwinder *uw;   /* unwinding tables of all traced processes; NULL: frame pointers only */
	bool python;	       /* Python frames */
	const char *debug_dir; /* --debug-dir, NULL: the default */
};

#define TRACEE_EARLY_WALKS 3	       /* heap walks at each report before their pacing begins */
#define TRACEE_ROLLUP_CHEAP_NS 1000000 /* an smaps_rollup read this quick is made every report */
#define TRACEE_BROKEN_RETRIES 2	       /* a walk the heap changed under: tried again so often before pacing resumes */

struct tracee {
	int pid, parent; /* parent: the traced process it was forked from, 0 for the first one */
	int pidfd;	 /* a follower's own (its exit, its identity); -1 for the first one (the target's) */
	struct probes *probes;
	struct pyframes *py; /* NULL without Python frames */
	struct symbolizer *sym;
	struct bpf_link *ld_watch; /* the loader's report of a library change (ldso_notify); NULL: rescan always */
	struct ml_labels labels;   /* rank, job, container, comm: read once, at attach */
	const char *role;	   /* "main", or "worker" for a child of a traced process with its rank */
	struct ml_oom oom;	   /* the OOM killer chose it (and its RSS then) */
	bool py_exiting;	   /* its interpreter's teardown began: what it frees from here is not the job's */
	struct ml_procmem mem, mem_base; /* resident memory at the last report, and at the first reading */
	bool mem_ok, mem_base_ok;
	struct ml_heapfrag frag; /* its glibc heap's fragmentation at the last report */
	struct census *census;	 /* its heap's chunks by type, made at the first walk */
	bool frag_ok;
	uint64_t frag_next_ns;	   /* the next walk not before this (CLOCK_MONOTONIC): its cost is paced */
	unsigned int broken_walks; /* walks in a row that the heap changed under */
	/* The C heap weighed by size (tracee__size_due): the base walk's time, and the last walk weighed. */
	uint64_t size_base_ns, size_weighed_ns, size_tried_ns; /* ... and the start a base was taken for */
	uint64_t mem_ns, size_base_anon;    /* when mem was read; its anonymous bytes at the base (not glibc) */
	uint64_t rollup_ns, rollup_next_ns; /* the last smaps_rollup read's time; the next paced one not before */
};

/*
 * The sampled C heap weighed by its sizes' growth (collect/sizeweights.h) when since_ns, the windows' start, is
 * not 0: the first whole walk after it is the base; true (and *out) when a later one is to weigh its records.
 * Else its weights go.
 */
struct sizeweights_proc;
bool tracee__size_due(struct tracee *t, struct sizeweights *sw, uint64_t since_ns, struct sizeweights_proc *out);
/*
 * The size weights' base taken at the windows' start (since_ns), out of turn, once a start: else the records
 * made before the first report's walk, 2 s of them, keep the CPU-time weight (a C leak estimated 0.87, not 0.98).
 * Not in a process with PyTorch, whose tensor releases weigh its records and whose census counts its walks.
 */
void tracee__size_base(struct tracee *t, struct ledger *l, uint64_t since_ns);

/*
 * Probes made from po (po->pid is the process), a Python decoder, and the objects it maps probed with
 * their unwinding tables; no symbolizer yet (tracee__symbolize). t->pid and t->pidfd are left as set.
 * Returns probes__sync's result or a negative errno; t keeps what was made (tracee__release frees it).
 */
int tracee__attach(struct tracee *t, const struct tracee_env *e, const struct probes_opts *po);
/* Its symbolizer, from the maps as they are now. 0 or a negative errno. */
int tracee__symbolize(struct tracee *t, const struct tracee_env *e);
/*
 * Probe the objects it mapped since the last sync, look for its Python interpreter, bring their unwinding
 * tables in, refresh the symbolizer. Returns probes__sync's result.
 */
int tracee__sync(struct tracee *t, const struct tracee_env *e);
/* The same while it is stopped until this returns (unwinder__sync_held): -c's stops at its dlopens. */
int tracee__sync_held(struct tracee *t, const struct tracee_env *e);
/*
 * It ran exec: probes made from po and a new Python decoder, synced on the new image, swapped in only when
 * that worked. The new links go on before the old ones come off: both run the same programs on the same
 * per-thread state, so a call in flight across the swap keeps its return. 0 or a negative errno.
 */
int tracee__reprobe(struct tracee *t, const struct tracee_env *e, const struct probes_opts *po);
/*
 * Its labels and role: a process forked from a traced one (parent, NULL for none) is a worker unless it
 * carries a rank of its own (a launcher's ranks are mains, a rank's DataLoader workers inherit its rank).
 */
void tracee__label(struct tracee *t, const struct tracee *parent);
/* Read its labels again (it ran exec), its role as it was. */
void tracee__relabel(struct tracee *t);
/*
 * Put ldso_notify on its dynamic loader, so its mappings need reading only when its libraries change (and
 * once in a while). Without a loader (a static program) it stays without: it is rescanned at every scan.
 */
void tracee__watch_loader(struct tracee *t);
/*
 * Whether a scan must read its mappings: always without a loader watch or with an object left to open again,
 * else only on a full scan.
 */
static inline bool tracee__needs_scan(const struct tracee *t, bool full)
{
	return full || !t->ld_watch || (t->probes && probes__retry_pending(t->probes));
}
/*
 * Walk its glibc heap's chunk headers for this report, the holders named from the ledger's records. A walk
 * reads most of the heap (90-300 ms for a PyTorch job's 200 MiB) and takes the target's mmap lock for each
 * read: the next one waits pace times as long as the last one took, plus others_ns, the last walks of the
 * other processes traced (pace 200 / --max-overhead keeps all the walks within half the budget's share of
 * one CPU), the report meanwhile showing the last walk's figures with their age. how: paced, only the first
 * walks (another process's paced walk is longer due), now (a row waits for a walk, a size base), or now as the
 * last report's.
 */
enum tracee_walk { TRACEE_WALK_PACED, TRACEE_WALK_EARLY, TRACEE_WALK_NOW, TRACEE_WALK_LAST };
void tracee__scan_heap(struct tracee *t, struct ledger *l, double pace, uint64_t others_ns, enum tracee_walk how);
/*
 * Read its resident memory for this report (the first reading is the baseline growth is counted from): RSS
 * and anonymous bytes from statm each time, Private_Dirty and PSS from smaps_rollup, whose page-table walk is
 * paced as the heap walks are where tracee__rollup_paced() says so (how: TRACEE_WALK_EARLY skips it then).
 */
void tracee__sample_memory(struct tracee *t, double pace, uint64_t others_ns, enum tracee_walk how);
/*
 * Whether its smaps_rollup reads are paced: those that take TRACEE_ROLLUP_CHEAP_NS or more, but not a worker's
 * (see tracee__label()), whose Private_Dirty growth is the copies on write the rss layer explains.
 */
bool tracee__rollup_paced(const struct tracee *t);
/* Where its frames resolve. */
void tracee__resolver(const struct tracee *t, struct ml_resolver *out);
/* Whether it exited (its pidfd is readable); the first one's is watched by the session instead. */
bool tracee__exited(const struct tracee *t);
/* Free its probes, decoder and symbolizer, close its pidfd, forget its unwinding tables. */
void tracee__release(struct tracee *t, const struct tracee_env *e);

/*
 * The kernel's OOM killer chose it (ML_PROC_OOM): its RSS then kept for the reports, and said. False when it
 * was chosen already (one notice).
 */
bool tracee__oom_chosen(struct tracee *t, const struct ml_oom_event *o);
/* The OOM killer must never choose memleak-ai: the report of what grew before a kill is the one most needed. */
void ml_protect_from_oom(void);

/* Heap-growth mode for one process (bpf heap_procs): a fresh entry. 0 or -errno. */
int ml_heap_track(struct memleak_bpf *skel, int pid);

#endif
