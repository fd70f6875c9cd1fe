/* The frames of a row as every output shows them: native frames resolved, Python frames spliced in. */
#ifndef ML_STACKVIEW_H
#define ML_STACKVIEW_H

#include <stddef.h>
#include <stdio.h>
#include "collect/heapfrag.h"
#include "collect/ledger.h"
#include "lib/frameclass.h"
#include "lib/proclabels.h"
#include "lib/procmem.h"
#include "symbolize/symbolizer.h"

struct pyframes;
struct stackview;

/* Where the frames of one traced process are resolved; py may be NULL (no Python frames). */
/* A process the kernel's OOM killer chose: its resident memory at that moment. */
struct ml_oom {
	bool killed;
	uint64_t anon_bytes, file_bytes, shmem_bytes;
};

struct ml_resolver {
	struct symbolizer *sym;
	struct pyframes *py;
	const char *heap;		   /* the process's C heap allocator ("glibc", "jemalloc", ...), or NULL */
	const struct ml_labels *labels;	   /* its fleet labels, or NULL */
	const char *role;		   /* "main" or "worker", or NULL */
	int parent;			   /* the traced process it was forked from, 0 for none */
	const struct ml_oom *oom;	   /* what the OOM killer ended, or NULL */
	const struct ml_procmem *mem;	   /* its resident memory at this report, or NULL (not read) */
	const struct ml_procmem *mem_base; /* ... and when it was first read (at attach) */
	const struct ml_heapfrag *frag;	   /* its C heap's fragmentation at this report, or NULL (not read) */
};

/* Fills *out for a traced process; non-zero when the process is not known (its frames show as addresses). */
typedef int (*stackview_lookup_fn)(void *ctx, int tgid, struct ml_resolver *out);

/* Nothing is owned. */
int stackview__new(struct ledger *l, stackview_lookup_fn lookup, void *ctx, struct stackview **out);
void stackview__free(struct stackview *sv); /* NULL-safe */

/*
 * The frames of a row, innermost (the allocation's caller) first. Python frames take the place of the
 * interpreter's eval-loop frame that ran them; those the native chain does not reach follow it at the
 * outer end. A native chain is cut at the first frame past the caller that lies in no mapped object
 * (without frame pointers the chain walks into garbage, and a made-up frame is worse than a short stack).
 * *out stays valid until the next call; *flags gets the stack's ML_STACK_* flags. Returns the count.
 */
size_t stackview__frames(struct stackview *sv, const struct ml_row *row, const struct ml_frame *const **out,
			 unsigned int *flags);

/*
 * Where a row's memory is kept, as its user would fix it: a hash of its Python stack (files, lines, functions),
 * whatever native path below it allocated; a row without Python frames is a site of its own. Two Linear layers
 * built on one line are one site; their gradients, made by the backward call's line, another.
 */
uint64_t stackview__site(struct stackview *sv, const struct ml_row *r);
/* The job's own line of a row, "file:line in function", or its first frame's label: for one-line mentions. */
void ml_put_row_line(FILE *f, struct stackview *sv, const struct ml_row *row);
/* The C heap allocator of a traced process, or NULL when not known. */
const char *stackview__heap(struct stackview *sv, int tgid);
/* What is known of a traced process (its resolver); non-zero when it is not traced (any more). */
int stackview__proc(struct stackview *sv, int tgid, struct ml_resolver *out);

/* Python frames that could not be decoded among the frames of rows order[0..n) (order NULL: the first n). */
size_t stackview__unresolved(struct stackview *sv, const struct ml_snapshot *s, const size_t *order, size_t n);
/* Why a Python frame with no function could not be decoded. */
const char *ml_frame_unresolved(const struct ml_frame *fr);

/* Room for any label: names taken from a Python target are at most 4096 bytes each. */
#define ML_FRAME_LABEL_MAX (2 * 4 * 4096 + 64) /* UTF-8: up to 4 bytes a character */

/* For ledger__set_canon: a hash of how the stack reads once its native chain is cut; ctx is the stack view. */
uint64_t stackview__canon(void *ctx, uint32_t tgid, uint64_t stack_id, unsigned int *traits);

struct jw;
/* A stack's "frames" array, innermost first, as the stacks[] objects of the JSON report carry it. */
void ml_json_frames(struct jw *w, const struct ml_frame *const *frames, size_t n);

/* A frame's one-line name: "func", "train_step (train.py:42)", or "0x1234" when unknown. */
const char *ml_frame_label(const struct ml_frame *fr, char *buf, size_t len);

#endif
