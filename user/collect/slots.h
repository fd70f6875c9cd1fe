/*
 * The allocation table as user space holds it: its levels (see memleak.h), each a BPF array mapped here. The
 * first is made at start; the next, four times larger, is made ahead when the newest is ML_TABLE_AHEAD percent live
 * and published (the BPF side's top moved to it) at ML_TABLE_FILL percent or a dropped record, until the levels hold
 * the slots --max-allocs asked for. New records go to the newest level; older ones drain as their records are released.
 * A thread of its own watches the fill: a burst of allocations fills a level in a fraction of a second, whatever the
 * event loop is busy with.
 */
#ifndef ML_SLOTS_H
#define ML_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

struct memleak_bpf;

/* Read-only outside slots.c: the levels made so far, oldest first (n grows, from the watching thread). */
struct slots {
	unsigned int n;
	struct slots_level {
		struct ml_slot *v;
		size_t len; /* a power of two */
	} lv[ML_TABLE_LEVELS];
	struct slots_watch *watch; /* the watching thread, once started */
	struct memleak_bpf *skel;
	uint64_t max_slots; /* the slots the levels may hold in all */
	uint64_t sample_at; /* where slots__fill samples next */
	bool spare;	    /* lv[n] is made ahead: in the BPF side's array of maps, not yet published */
};

/* The first level, made and published. 0 or -errno. */
int slots__new(struct memleak_bpf *skel, uint64_t max_slots, struct slots **out);
void slots__free(struct slots *t); /* NULL-safe; stops the watching thread first */

/* A thread that makes and publishes levels as the newest fills or a record is dropped. 0 or -errno. */
#define SLOTS_WATCH_MS 20	 /* between looks while the newest level fills */
#define SLOTS_IDLE_MS 100	 /* ... and while it is far from ML_TABLE_AHEAD */
#define SLOTS_BURST_PER_S 150000 /* records a second the probes can make at most (memleak.h) */
int slots__watch(struct slots *t);

/*
 * What the watching thread does after a look that read fill percent live: a drop for a full chain (dropped), or
 * ML_TABLE_FILL percent, publishes the next level; ML_TABLE_AHEAD percent read SLOTS_AHEAD_LOOKS looks in a row
 * (*ahead counts them) makes it ahead. A sample of a level 13 % live read 15 % now and then: one look made 96 MiB.
 */
#define SLOTS_AHEAD_LOOKS 3
enum slots_step { SLOTS_WAIT, SLOTS_PREPARE, SLOTS_GROW };
enum slots_step slots__step(unsigned int *ahead, unsigned int fill, bool dropped);

/* The percent of the newest level's slots live, rounded down, from a sample of its slots. */
unsigned int slots__fill(struct slots *t);
/* The next level made ahead, unpublished (at most one): 0, -ENOSPC when the levels hold max_slots, or -errno. */
int slots__prepare(struct slots *t);
/* The next level published, made first unless made ahead: 0, -ENOSPC, or -errno. */
int slots__grow(struct slots *t);

uint64_t slots__capacity(const struct slots *t); /* slots of every level */
uint64_t slots__bytes(const struct slots *t);	 /* their memory and a level made ahead's, mapped here */

/* The slot holding (tgid, layer, key), newest level first, on the probe chains the BPF side uses; or NULL. */
struct ml_slot *slots__find(struct slots *t, uint32_t tgid, uint8_t layer, uint64_t key);
/* A slot for key in the newest level, claimed as the BPF side claims one; the one holding key if any; or NULL. */
struct ml_slot *slots__claim(struct slots *t, uint32_t tgid, uint8_t layer, uint64_t key);

#endif
