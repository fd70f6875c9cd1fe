/*
 * Pages a forked process copied from its parent, found from outside with no fault traced: both page tables are
 * read through /proc/PID/pagemap and compared frame by frame. The rss layer sees copies at their faults; when
 * the budget stops tracing those, this finds them instead, at the cost of the tool's own reads.
 *
 * A page counts as copied by the child when, at one read, child and parent mapped the same frame and, at a
 * later one, the parent still maps that frame and the child another. The exclusive bit is not used: it turns
 * on as well when the parent writes, frees or unmaps its side, and for a large folio it only means "maybe".
 * Pages already apart at the first read are not counted (whoever copied them, it was before the scan).
 * Page frame numbers need CAP_SYS_ADMIN; without it every frame reads 0 and nothing counts (cowscan__pass
 * says -EPERM).
 */
#ifndef ML_COWSCAN_H
#define ML_COWSCAN_H

#include <stdint.h>

struct cowscan;

struct cowscan_opts {
	uint64_t max_pages;   /* page-table entries compared per child and pass (a pass resumes where one ends) */
	uint64_t max_tracked; /* pages of a child's inherited memory kept track of (4 bytes each) */
};

int cowscan__new(const struct cowscan_opts *o, struct cowscan **out);
void cowscan__free(struct cowscan *c); /* NULL-safe */

/*
 * child, forked from parent, is compared from now on over its anonymous private writable memory that parent
 * maps at the same addresses. 0 (also when already added), -ESRCH when either is gone, -ENOMEM. *truncated
 * gets the pages left out over max_tracked.
 */
int cowscan__add(struct cowscan *c, int child, int parent, uint64_t *truncated);
/* pid exited or exec'd: as a child it is dropped, as a parent its children are. */
void cowscan__remove(struct cowscan *c, int pid);
int cowscan__has(const struct cowscan *c, int child);

/* Who owns a copied page: an id the caller keeps (0: nobody known), asked when the copy is found. */
typedef uint32_t (*cowscan_owner_fn)(void *ctx, int parent, uint64_t addr);

/*
 * One pass: each child's next max_pages pages compared with its parent's. A page newly copied is charged to
 * owner(addr); one counted before and no longer the same (released, remapped) is taken off. Returns the
 * pages compared, or -EPERM when frame numbers read as 0 (no CAP_SYS_ADMIN).
 */
long cowscan__pass(struct cowscan *c, cowscan_owner_fn owner, void *ctx);

/* The same for one child (its first pass right after the fork: what it copies from then on is counted). */
long cowscan__pass_child(struct cowscan *c, int child, cowscan_owner_fn owner, void *ctx);

/* Every child's copied bytes per owner now, with the time (CLOCK_MONOTONIC ns) its first copy was found. */
typedef void (*cowscan_total_fn)(void *ctx, int child, uint32_t owner, uint64_t bytes, uint64_t first_ns);
void cowscan__totals(const struct cowscan *c, cowscan_total_fn fn, void *ctx);

#endif
