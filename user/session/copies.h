/*
 * The copy scan in a run (collect/cowscan.h): once the budget stops the rss layer's fault tracing, the
 * children of traced processes are compared with their parents at each report, and the pages they copied
 * become rss records in the ledger's table, each charged to the parent's row that owns the address (the
 * line that built what lives there), or to no stack when the parent's rows do not cover it.
 */
#ifndef ML_COPIES_H
#define ML_COPIES_H

#include <stddef.h>

struct copies;
struct ledger;

int copies__new(struct ledger *l, struct copies **out);
void copies__free(struct copies *c); /* NULL-safe */

/* pid exited or exec'd. */
void copies__gone(struct copies *c, int pid);

/* child was just forked from parent: its first comparison now, so that its copies count from the start. */
void copies__fork(struct copies *c, int child, int parent);

/* Before a report: children[i] forked from parents[i] are compared (new ones from now on), and the copies
 * found so far are written to the table. 0 or a negative errno (said once on stderr). */
int copies__pass(struct copies *c, const int *children, const int *parents, size_t n);

#endif
