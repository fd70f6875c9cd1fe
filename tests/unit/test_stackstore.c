/*
 * The stack dictionary (collect/stackstore.c): stacks added as the ring's records come, read back word for word.
 * The store reuses the last stack's outer nodes while the words agree; the checks here take stacks that share,
 * then leave, then share again a longer part of an earlier path, in orders that would read back another stack's
 * words if a node past the point where two paths part were reused.
 */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "collect/stackstore.h"
#include "memleak.h"

static struct ml_stack rec;

/* Stack id with nr native words, nr_py Python frames (two words each), word k = base + k (innermost first). */
static int add(struct stackstore *ss, uint64_t id, uint32_t nr, uint16_t nr_py, const uint64_t *w)
{
	size_t n = nr + 2 * (size_t)nr_py;

	memset(&rec, 0, sizeof(rec));
	rec.id = id;
	rec.nr = nr;
	rec.nr_py = nr_py;
	memcpy(rec.ips, w, n * sizeof(*w));
	return stackstore__add(ss, &rec, ML_STACK_HDR + 8 * n);
}

/* Whether id reads back as nr, nr_py and the words w. */
static bool reads(struct stackstore *ss, uint64_t id, uint32_t nr, uint16_t nr_py, const uint64_t *w)
{
	static struct ml_stack out;

	if (stackstore__get(ss, id, &out) || out.nr != nr || out.nr_py != nr_py)
		return false;
	return !memcmp(out.ips, w, (nr + 2 * (size_t)nr_py) * sizeof(*w));
}

/* Outermost words are the last ones: the stacks below share their tails (the thread's start, the module frame). */
static void shared_paths(void)
{
	struct stackstore *ss;
	/* a and b part at their third word from the outside; c follows a there and parts at the first word */
	uint64_t a[6] = {0xa0, 0xa1, 0xa2, 0x3, 0x2, 0x1}, b[6] = {0xb0, 0xb1, 0xb2, 0xb3, 0x2, 0x1},
		 c[6] = {0xc0, 0xa1, 0xa2, 0x3, 0x2, 0x1}, d[3] = {0x3, 0x2, 0x1},
		 e[7] = {0xe, 0xa0, 0xa1, 0xa2, 0x3, 0x2, 0x1};
	bool all = true;

	if (stackstore__new(&ss)) {
		CHECK(0, "stackstore__new");
		return;
	}
	CHECK(!add(ss, 1, 6, 0, a) && !add(ss, 2, 6, 0, b) && !add(ss, 3, 6, 0, c), "three stacks added");
	/* d is a's outer half: a path's prefix; e is a with one more inner word; then a's words with one changed */
	CHECK(!add(ss, 4, 3, 0, d) && !add(ss, 5, 7, 0, e), "a prefix of a path, and a path one longer");
	CHECK(add(ss, 1, 6, 0, a) == 1, "an id seen again is known, not added");
	for (int round = 0; round < 2; round++) {
		all &= reads(ss, 1, 6, 0, a) && reads(ss, 2, 6, 0, b) && reads(ss, 3, 6, 0, c);
		all &= reads(ss, 4, 3, 0, d) && reads(ss, 5, 7, 0, e);
	}
	CHECK(all, "each reads back word for word");
	{
		/* b again under a new id after c: b's path was left two stacks ago, at its third word */
		uint64_t b2[6] = {0xb0, 0xb1, 0xb2, 0xb3, 0x2, 0x1}, mixed[6] = {0xb0, 0xb1, 0xa2, 0x3, 0x2, 0x1};

		CHECK(!add(ss, 6, 6, 0, b2) && !add(ss, 7, 6, 0, mixed),
		      "b's words again, then a's outer half with b's inner");
		CHECK(reads(ss, 6, 6, 0, b2) && reads(ss, 7, 6, 0, mixed) && reads(ss, 2, 6, 0, b) &&
			  reads(ss, 1, 6, 0, a),
		      "paths that part and join again read back as added");
	}
	{
		/* Python frames: two words each, after the native ones; the same words as a native-only stack */
		uint64_t py[8] = {0xa0, 0xa1, 0xa2, 0x3, 0x2, 0x1, 0x77, 0x78};

		CHECK(!add(ss, 8, 6, 1, py) && reads(ss, 8, 6, 1, py) && reads(ss, 1, 6, 0, a),
		      "a stack with a Python frame beside the native one it extends");
	}
	stackstore__free(ss);
}

/* Stacks of random words from a few values, so that they share outer parts of every length. */
static void random_paths(void)
{
	enum { N = 3000 };
	static uint64_t w[N][ML_MAX_FRAMES];
	static uint32_t nr[N];
	struct stackstore *ss;
	int bad = 0, failed = 0;

	if (stackstore__new(&ss)) {
		CHECK(0, "stackstore__new");
		return;
	}
	srand(7);
	for (int i = 0; i < N; i++) {
		nr[i] = 1 + (uint32_t)(rand() % 40);
		for (uint32_t k = 0; k < nr[i]; k++) /* outer words (high k) from 2 values, inner from 4 */
			w[i][k] = k > nr[i] / 2 ? 0x100 + (uint64_t)(rand() % 2) : 0x200 + (uint64_t)(rand() % 4);
		/* half the time, the previous stack's outer words with new inner ones */
		if (i && rand() % 2) {
			uint32_t keep = nr[i] < nr[i - 1] ? nr[i] : nr[i - 1];

			for (uint32_t k = 0; k < keep / 2; k++)
				w[i][nr[i] - 1 - k] = w[i - 1][nr[i - 1] - 1 - k];
		}
		failed += add(ss, 1000 + (uint64_t)i, nr[i], 0, w[i]) < 0;
	}
	for (int i = 0; i < N; i++)
		bad += !reads(ss, 1000 + (uint64_t)i, nr[i], 0, w[i]);
	CHECK(!failed && !bad, "3,000 stacks sharing outer words at random read back word for word");
	if (bad)
		printf("#   %d read back otherwise\n", bad);
	stackstore__free(ss);
}

int main(void)
{
	shared_paths();
	random_paths();
	return SUMMARY("stackstore");
}
