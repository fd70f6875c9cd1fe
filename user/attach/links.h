/*
 * The uprobe links of one traced process, and their lifecycle: each kept with the layers of its object's rows,
 * then dropped (shedding), paused (tensor sampling) or closed and opened again (the C heap's windows) by layer.
 * probes.c finds what to attach and makes the links; here they live until dropped or freed.
 */
#ifndef ML_LINKS_H
#define ML_LINKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bpf_link;
struct links;
struct memleak_bpf;

/* Which program a row goes to, as a batch of a uprobe_multi link; the step clock's entries have a batch of their own,
 * of no layer, sampled in time apart from the layers' links (links__step). */
enum links_batch { LINKS_ALLOC_RET, LINKS_FREE_RET, LINKS_FREE, LINKS_ALLOC, LINKS_STEP, LINKS_NBATCH };

/* A mark of the links made so far: those made after it are one object's, taken or given back together. */
struct links_mark {
	size_t nlinks, nmulti;
};

int links__new(struct memleak_bpf *skel, int pid, struct links **out);
void links__free(struct links *l); /* detaches everything; NULL-safe */

/* Keep a link made with libbpf (a single uprobe, a USDT probe). 0 or -ENOMEM (the caller destroys it). */
int links__add(struct links *l, struct bpf_link *link);
/*
 * A uprobe_multi link of batch b's program at cnt offsets of path, each with its cookie, attached and kept with
 * its recipe for attaching it again. 0 or a negative errno (nothing kept).
 */
int links__add_multi(struct links *l, int b, const char *path, const uint64_t *offs, const uint64_t *cookies,
		     uint32_t cnt);

struct links_mark links__mark(const struct links *l);
/*
 * The links made since mark are an object's whose rows are of these layers; while sampling is in an off-phase
 * they are paused or closed at once, so that a library found meanwhile waits for the next on-phase.
 */
void links__commit(struct links *l, struct links_mark mark, unsigned int layers);
void links__rollback(struct links *l, struct links_mark mark); /* the links made since mark detached */

/*
 * Detach the links whose objects' rows are all of the layers in mask (a bit per enum ml_layer); an object whose
 * rows mix a layer kept with one dropped keeps its links.
 */
void links__drop(struct links *l, unsigned int mask);
/* Whether links__pause (and links__window) have anything to pause for mask. */
bool links__pausable(const struct links *l, unsigned int mask);
/*
 * Close (pause) or attach again the allocation-side uprobe_multi links of the objects whose rows are all of the
 * layers in mask; their release links stay. 0 or a negative errno (a resume that failed leaves them closed).
 */
int links__pause(struct links *l, unsigned int mask, bool pause);
/*
 * Every uprobe_multi link of mask's layers attached again (releases first) or closed (allocations at once,
 * releases LINKS_GRACE_US later). 0 or the first attach error.
 */
int links__window(struct links *l, unsigned int mask, bool open);

/*
 * The step clock's links (batch LINKS_STEP) closed or attached again: its traps cost one a step, sampled in time
 * when steps come fast. 0 or the first attach error.
 */
int links__step(struct links *l, bool on);

#endif
