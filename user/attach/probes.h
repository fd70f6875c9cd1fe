/* Probe attachment: finds the allocator table's functions in the target's mapped objects and attaches to them. */
#ifndef ML_PROBES_H
#define ML_PROBES_H

#include <stdbool.h>
#include "lib/procmaps.h"

struct memleak_bpf;
struct bpf_link;
struct bpf_program;
struct probes;
struct rowcache;

struct probes_opts {
	int pid;
	struct rowcache *rows; /* what each object file was found to hold, shared by all tracees; NULL: none */
	unsigned int layers;   /* bit mask of enum ml_layer to trace */
	bool torch_raw;	       /* also the allocator rows marked optin (return probes on C++ code) */
	const char *step;      /* the step clock's function (ML_STEP_DEFAULT or --step's), NULL: none */
	bool multi;	       /* the four allocator programs were loaded for uprobe_multi links */
	/* PyTorch's USDT programs, loaded apart: the release's or the allocation's, NULL when there are none */
	struct bpf_program *(*usdt_prog)(void *ctx, bool is_free);
	void *usdt_ctx;
};

int probes__new(struct memleak_bpf *skel, const struct probes_opts *o, struct probes **out);
void probes__free(struct probes *p); /* detaches everything; NULL-safe */

/*
 * Attach to every object in `maps` not looked at yet (objects are known by device and inode, so a library
 * mapped again or under another name is not probed twice). Prints a notice when a layer becomes active.
 * Returns the number of objects newly probed, or a negative errno; on error nothing from the failing
 * object stays attached.
 */
int probes__sync(struct probes *p, const struct ml_maps *maps);

/* -c: a probe that stops the target where the dynamic loader has mapped its libraries; NULL if none. */
struct bpf_link *probes__loader_stop(struct probes *p, const struct ml_maps *maps);
/*
 * Any other traced process: a probe there that sends an ML_PROC_DLOPEN event instead, so its mappings are read
 * again when its libraries change rather than on every scan; NULL if none (a static program).
 */
struct bpf_link *probes__loader_watch(struct probes *p, const struct ml_maps *maps);
/* Whether the last sync left an object to look at again: its mapping changed while it was being opened. */
bool probes__retry_pending(const struct probes *p);
/* A static executable without allocator symbols: no C library mapped, none coming, nothing probed. */
bool probes__libc_missing(const struct probes *p, const struct ml_maps *maps);
/* The initial attach is complete: layers activated from now on are announced on stderr. */
void probes__started(struct probes *p);
/*
 * --max-overhead's shedding: detach the probes of these layers (a bit per enum ml_layer) and probe them in no
 * object found later. An object whose rows mix a layer kept with one dropped keeps its probes.
 */
void probes__drop_layers(struct probes *p, unsigned int mask);
/*
 * Tensor sampling (the budget's ML_SHED_TORCH_CPU_SAMPLING): close (pause) or attach again the allocation-side
 * links of the objects whose rows are all of the layers in mask; their release probes stay on, so what was
 * recorded is still released. uprobe_multi links only. 0 or a negative errno (a resume that failed leaves
 * those links closed).
 */
int probes__pause(struct probes *p, unsigned int mask, bool pause);
/*
 * Time-sliced sampling of a whole layer (the C heap): every link of mask's layers attached again (releases
 * first) or closed (allocations at once, releases 20 ms later), in every object the process maps. 0 or the
 * first attach error.
 */
int probes__window(struct probes *p, unsigned int mask, bool open);
/* The step clock's links closed or attached again (the budget's ML_SHED_STEP_SAMPLING). 0 or the first attach error. */
int probes__step(struct probes *p, bool on);
/* Whether probes__pause (and probes__window) have anything to pause for mask. */
bool probes__pausable(const struct probes *p, unsigned int mask);
/* Objects with probes attached, and in *nfuncs the functions probed in them. */
unsigned int probes__n_probed(const struct probes *p, unsigned int *nfuncs);
unsigned int probes__active_layers(const struct probes *p); /* bit mask of layers with probes attached */
/* The process stops at its loader's reports (-c): a library it maps is probed before its code runs. */
void probes__held(struct probes *p, bool held);
/* The C heap allocator the process uses, as probed: "glibc", "jemalloc", "tcmalloc", ..., or NULL. */
const char *probes__heap(const struct probes *p);

#endif
