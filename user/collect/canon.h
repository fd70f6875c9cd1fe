/*
 * The stack ids the ledger's rows are keyed by. Frame-pointer walks through code without frame pointers pick
 * up garbage frames that the report cuts away; stacks that read the same once cut are one row, keyed by the
 * first of them still in use. Each captured stack is read once (through the report's function) and its answer
 * kept while allocations refer to it.
 */
#ifndef ML_CANON_H
#define ML_CANON_H

#include <stdint.h>

/* How a captured stack reads once cut: a hash of what is shown, or 0 on failure; *traits its ML_ROW_* traits. */
typedef uint64_t (*canon_fn)(void *ctx, uint32_t tgid, uint64_t stack_id, unsigned int *traits);

struct canon;

int canon__new(struct canon **out); /* 0 or -ENOMEM */
void canon__free(struct canon *c);  /* NULL-safe */
/* The function stacks are read with; none (the default): every stack is its own id. */
void canon__set(struct canon *c, canon_fn fn, void *ctx);

/* A pass over the table begins: the stacks it does not ask for are forgotten at its canon__sweep. */
void canon__begin(struct canon *c);
/* The id a captured stack of tgid is shown as, and its traits (0 when it has none). */
uint64_t canon__of(struct canon *c, uint32_t tgid, uint64_t id, unsigned int *traits);
/*
 * After a pass: forget the stacks no allocation refers to any more, and the ways of reading no live stack is
 * shown by (the next stack read that way is shown as itself).
 */
void canon__sweep(struct canon *c);

#endif
