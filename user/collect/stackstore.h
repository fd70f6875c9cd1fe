/*
 * The stack dictionary: every distinct stack the BPF side handed over (the stack_events ring), kept by its
 * id. Frames are interned once, and stacks share their outer frames (a stack is a path in a tree of
 * 8-byte nodes), so a job can have millions of distinct stacks at a few dozen bytes each. Nothing is ever dropped: an
 * allocation's stack id resolves for as long as the run lasts.
 */
#ifndef ML_STACKSTORE_H
#define ML_STACKSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

struct stackstore;

struct stackstore_stats {
	uint64_t stacks;     /* distinct stacks kept */
	uint64_t frames;     /* distinct stack words (frames) kept */
	uint64_t nodes;	     /* tree nodes: stacks share their outer frames */
	uint64_t bytes;	     /* memory the dictionary holds */
	uint64_t received;   /* records read from the ring (a stack the kernel's cache evicted comes again) */
	uint64_t collisions; /* records whose id was known with other words: the first stack is kept */
	uint64_t malformed;  /* records too short or with impossible counts: ignored */
};

int stackstore__new(struct stackstore **out);
void stackstore__free(struct stackstore *ss); /* NULL-safe */

/*
 * Read the BPF side's stack records from this ring buffer map, in a thread of the store's own, as they
 * come. 0 or a negative errno. Every call is thread-safe.
 */
int stackstore__attach(struct stackstore *ss, int ring_fd);
/*
 * Take every record the ring holds now (before reading records that name them), unless the reader thread is
 * taking them already. 0 or a negative errno.
 */
int stackstore__drain(struct stackstore *ss);

/* Add one record as the ring carries it (struct ml_stack, header and words in use): 0 new, 1 known, or -errno. */
int stackstore__add(struct stackstore *ss, const void *rec, size_t len);

/* The stack with this id, into *out (id, counts, flags and words): 0, or -ENOENT when it was never handed over. */
int stackstore__get(struct stackstore *ss, uint64_t id, struct ml_stack *out);

/*
 * Call fn(ctx, record) for each new stack the ring brings from now on, as it is kept: in the reader thread (or
 * a drain's), with the dictionary locked, so fn must be quick and must not call the store. NULL: none.
 */
typedef void (*stackstore_new_fn)(void *ctx, const struct ml_stack *st);
void stackstore__on_new(struct stackstore *ss, stackstore_new_fn fn, void *ctx);

/* The ML_STACK_* flags of the stack with this id, or -ENOENT. */
int stackstore__flags(struct stackstore *ss, uint64_t id);
/* Its flags (or -ENOENT) and, in *word, its innermost word (0 for an empty stack), without copying the rest. */
int stackstore__leaf(struct stackstore *ss, uint64_t id, uint64_t *word);

void stackstore__stats(struct stackstore *ss, struct stackstore_stats *out);

#endif
