/* Open-addressing hash table from a 64-bit key to a non-NULL pointer. */
#include "lib/u64map.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "lib/hash.h"

static struct u64slot *slot_of(struct u64slot *slots, size_t cap, uint64_t key)
{
	size_t mask = cap - 1, i = ml_hash64(key) & mask;

	while (slots[i].val && slots[i].key != key)
		i = (i + 1) & mask;
	return &slots[i];
}

void *u64map__get(const struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return NULL;
	return slot_of(m->slots, m->cap, key)->val;
}

static int grow(struct u64map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64, i;
	struct u64slot *slots, *sl;

	if (cap > SIZE_MAX / sizeof(*slots))
		return -ENOMEM;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 0; i < m->cap; i++) {
		if (!m->slots[i].val)
			continue;
		sl = slot_of(slots, cap, m->slots[i].key);
		*sl = m->slots[i];
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

/* Insert, or replace the value of an existing key (which never allocates). */
int u64map__put(struct u64map *m, uint64_t key, void *val)
{
	struct u64slot *sl;
	int err;

	if (m->cap) {
		sl = slot_of(m->slots, m->cap, key);
		if (sl->val) {
			sl->val = val;
			return 0;
		}
	}
	/* Keep the load at or under 3/4 so probe chains stay short. */
	if ((m->n + 1) * 4 > m->cap * 3) {
		err = grow(m);
		if (err)
			return err;
	}
	sl = slot_of(m->slots, m->cap, key);
	m->n++;
	sl->key = key;
	sl->val = val;
	return 0;
}

/*
 * Empties slot i and moves later entries of its run back into the hole when their home slot is not after
 * it, so that every lookup still meets them before an empty slot (linear probing's deletion, no tombstones).
 */
static void remove_at(struct u64map *m, size_t i)
{
	size_t mask = m->cap - 1;

	for (size_t j = (i + 1) & mask; m->slots[j].val; j = (j + 1) & mask) {
		size_t home = ml_hash64(m->slots[j].key) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i] = (struct u64slot){0};
	m->n--;
}

/*
 * Slot i is looked at again after a removal, since an entry moved into it. An entry from the table's start
 * (its run wrapped) may move to the end and be asked again: hence keep's "called again for kept entries".
 */
void u64map__sweep(struct u64map *m, u64map_keep_fn keep, void *ctx)
{
	for (size_t i = 0; i < m->cap;) {
		if (m->slots[i].val && !keep(ctx, m->slots[i].key, m->slots[i].val))
			remove_at(m, i);
		else
			i++;
	}
}

void u64map__free_values(struct u64map *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		free(m->slots[i].val);
	free(m->slots);
	m->slots = NULL;
	m->cap = m->n = 0;
}
