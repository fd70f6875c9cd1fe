/*
 * The hash table the caches and the canon keep (lib/u64map.c): puts, gets, and the in-place sweep, whose
 * deletions move entries back along their runs. Checked against a plain array of what each key should hold,
 * with keys chosen to collide (runs that wrap the table's end) as well as spread.
 */
#include <stdint.h>
#include <stdlib.h>
#include "check.h"
#include "lib/hash.h"
#include "lib/u64map.h"

#define NKEYS 5000

struct model {
	uint64_t key[NKEYS];
	int val[NKEYS]; /* what the map holds for key[i]: its index + 1, 0 when absent */
	unsigned int calls;
};

/* Drops keys whose index is a multiple of drop_every; counts the calls. */
struct sweep_ctx {
	struct model *m;
	unsigned int drop_every, refused;
};

static bool keep_some(void *ctx, uint64_t key, void *val)
{
	struct sweep_ctx *c = ctx;
	int i = *(int *)val - 1;

	c->m->calls++;
	if (c->m->key[i] != key || i % c->drop_every)
		return true;
	c->m->val[i] = 0;
	c->refused++;
	return false;
}

/* Every key the model holds is found with its value, and every key it dropped is gone. */
static int mismatches(const struct u64map *map, const struct model *m)
{
	int bad = 0;

	for (int i = 0; i < NKEYS; i++) {
		int *v = u64map__get(map, m->key[i]);

		if (m->val[i] ? !v || *v != m->val[i] : v != NULL)
			bad++;
	}
	return bad;
}

static void sweep_round(const char *what, uint64_t (*key_of)(int i))
{
	static struct model m;
	static int vals[NKEYS];
	struct u64map map = {};
	struct sweep_ctx c = {.m = &m};
	char name[160];
	int puts_failed = 0;

	m.calls = 0;
	for (int i = 0; i < NKEYS; i++) {
		m.key[i] = key_of(i);
		vals[i] = i + 1;
		m.val[i] = i + 1;
		puts_failed += u64map__put(&map, m.key[i], &vals[i]) != 0;
	}
	snprintf(name, sizeof(name), "%s: %d keys put, each found", what, NKEYS);
	CHECK(!puts_failed && map.n == NKEYS && !mismatches(&map, &m), name);
	for (unsigned int k = 0, every[] = {7, 4, 1}; k < 3; k++) {
		size_t before = map.n, cap = map.cap;

		c.drop_every = every[k];
		c.refused = 0;
		u64map__sweep(&map, keep_some, &c);
		snprintf(name, sizeof(name), "%s: a sweep dropping every %u-th key keeps the rest findable", what,
			 every[k]);
		CHECK(!mismatches(&map, &m) && map.n == before - c.refused && map.cap == cap, name);
	}
	snprintf(name, sizeof(name), "%s: the last sweep left nothing", what);
	CHECK_EQ_U64(map.n, 0, name);
	/* Put again after the sweeps: the emptied slots take keys as new ones did. */
	for (int i = 0; i < NKEYS; i += 2) {
		m.val[i] = i + 1;
		u64map__put(&map, m.key[i], &vals[i]);
	}
	snprintf(name, sizeof(name), "%s: keys put again after the sweeps are found", what);
	CHECK(!mismatches(&map, &m) && map.n == NKEYS / 2, name);
	free(map.slots);
}

/* Keys far apart, and the first integers. */
static uint64_t spread(int i)
{
	return 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
}

static uint64_t small(int i)
{
	return (uint64_t)i + 1;
}

static void empty_map(void)
{
	struct u64map map = {};
	struct model m = {0};
	struct sweep_ctx c = {.m = &m, .drop_every = 1};

	u64map__sweep(&map, keep_some, &c);
	CHECK(map.n == 0 && map.cap == 0 && m.calls == 0, "an empty map sweeps to nothing, asking nothing");
}

/* A run across the table's end: keys homed in its last slots push entries to its start, and their removal
 * moves the start's entries back across the end. Entry 0 is the key that made the table. */
static void wrapped_run(void)
{
	static struct model m;
	static int vals[41];
	struct u64map map = {};
	struct sweep_ctx c = {.m = &m, .drop_every = 2};
	int n = 1, found = 0;

	m.key[0] = 1;
	for (uint64_t k = 2; n < 41 && k < 1000000; k++)
		if ((ml_hash64(k) & 63) >= 61)
			m.key[n++] = k;
	for (int i = 0; i < n; i++) {
		vals[i] = m.val[i] = i + 1;
		u64map__put(&map, m.key[i], &vals[i]);
	}
	for (int i = 0; i < n; i++)
		found += u64map__get(&map, m.key[i]) == &vals[i];
	CHECK(map.cap == 64 && found == n && n == 41, "40 keys homed in the last 3 of 64 slots wrap to the start");
	u64map__sweep(&map, keep_some, &c);
	CHECK(!mismatches(&map, &m) && c.refused == 21 && map.n == 20, "the wrapped run swept: every other one found");
	free(map.slots);
}

int main(void)
{
	empty_map();
	sweep_round("spread keys", spread);
	sweep_round("small keys", small);
	wrapped_run();
	return SUMMARY("u64map");
}
