/*
 * Victims of fragmentation. A row of fresh C heap (the break's growth or address space heap-growth mode saw
 * a stack add, or heap pages the rss layer saw it touch first) names the code that reached new memory, not
 * what keeps it: where other blocks pin the space freed below, the next allocation takes fresh heap and is
 * freed again. After the heap walk, each growing row of fresh heap is looked at in its ranges: when most of
 * what the walk covered is free again, the row is a victim, not a leak candidate, and the in-use chunks that
 * pin that free space name the row that keeps it. Fresh heap still in use is a victim too when most of it holds
 * other rows' recorded blocks: the row only reached new memory that another row's blocks then took.
 */
#ifndef ML_VICTIMS_H
#define ML_VICTIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "collect/snapshot.h"
#include "judge/verdict.h"

struct ledger;
struct ml_heapfrag;

struct ml_victim {
	struct ml_agg_key key;	  /* the row of fresh heap */
	uint64_t walked_bytes;	  /* of its ranges, what the last heap walk covered */
	uint64_t free_bytes;	  /* ... and found free again (free chunks, the top) */
	uint64_t pinned_bytes;	  /* free resident bytes held by the pinning row's chunks in those ranges */
	uint64_t filled_bytes;	  /* in use: the bytes other rows' recorded blocks fill there (weighted); 0: freed */
	struct ml_agg_key pinner; /* that row, or the one filling the most (layer ML_LAYER_MAX: no record) */
};

/* What one row of fresh heap came to in the last walk: all that its judgement rests on (victims__judge). */
struct ml_victim_sample {
	bool rss;	/* pages the rss layer saw touched first, not the C heap's growth */
	bool growing;	/* judged growing: a leak candidate unless it is a victim */
	bool wider;	/* its walk was capped or broke, and the next may read more (HEAPFRAG_WIDEN_MAX, _BROKEN_MAX) */
	uint64_t range; /* its records' bytes (unweighted: sampled rss pages count once) */
	uint64_t walked, free;	     /* of its ranges, what the walk covered, and found free again */
	double own_pin, other_pin;   /* free bytes its ranges' recorded holders pin, weighted: its own, others' */
	double own_fill, other_fill; /* bytes recorded blocks in its ranges hold, weighted: its own, others' */
};

/* What a row of fresh heap is, by victims__judge. */
enum ml_victim_call {
	ML_VICTIM_NOT,	  /* no victim: a leak candidate when growing */
	ML_VICTIM_HELD,	  /* grew past the walk, not held before (or a wider walk comes): new until one tells */
	ML_VICTIM_KEPT,	  /* the walk did not cover it since: the victim it was, with the last walk's figures */
	ML_VICTIM_FREED,  /* mostly free again, pinned more by other rows than by its own blocks */
	ML_VICTIM_FILLED, /* mostly in use, filled more by other rows' blocks than by its own */
};

/*
 * The judgement of one row of fresh heap from its sample alone: was, whether it was a victim at the last report;
 * was_held, whether it was held then. Pure, so that its thresholds are tested apart from the walks.
 */
enum ml_victim_call victims__judge(const struct ml_victim_sample *s, bool was, bool was_held);

/* The last heap walk of process tgid (NULL: none). */
typedef const struct ml_heapfrag *(*victims_frag_fn)(void *ctx, int tgid);

/* One report's judgement of the rows of fresh heap. */
struct ml_victims {
	struct ml_victim *v; /* its victims, sorted by key */
	size_t n;
	struct ml_agg_key *held; /* growing rows that grew past the last walk: new until a walk tells (sorted) */
	size_t nheld;
};

/*
 * The victims among the rows of fresh heap, growing or not yet (j parallel to s->rows), each with its pinner,
 * and the growing rows held for want of a walk since they grew. prev is the last report's: a row whose ranges
 * the walk has not covered since stays a victim; a row held then is not held again, unless its walk was capped
 * or broke and the next may read more (struct ml_victim_sample's wider). out's arrays are malloc'd
 * (victims__clear). 0 or -ENOMEM.
 */
int victims__find(const struct ml_snapshot *s, const struct ml_judgement *j, struct ledger *l, victims_frag_fn frag,
		  void *ctx, const struct ml_victims *prev, struct ml_victims *out);
void victims__clear(struct ml_victims *v);

/* The victim of a row's key in v[n] (sorted), or NULL. */
const struct ml_victim *victims__of(const struct ml_victim *v, size_t n, const struct ml_agg_key *key);
/* Whether key is among held[n] (sorted, as victims__find gives them). */
bool victims__held(const struct ml_agg_key *held, size_t n, const struct ml_agg_key *key);

#endif
