/*
 * Unit tests of fragmentation's victims (judge/victims.c): the judgement of synthetic samples of fresh heap, freed
 * again or filled by other rows, held or kept when the walk did not cover it, and the lookups over sorted keys.
 */
#include "check.h"
#include "judge/victims.h"

/* A growing row of the C heap's growth whose 1,000 bytes the walk covered, free of them as given. */
static struct ml_victim_sample walked(uint64_t free)
{
	return (struct ml_victim_sample){.growing = true, .range = 1000, .walked = 1000, .free = free};
}

static void freed(void)
{
	struct ml_victim_sample s = walked(500);

	s.own_pin = 100, s.other_pin = 300;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FREED, "half free, others pin 300 to its 100: freed");
	s.own_pin = 300, s.other_pin = 100;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "its own blocks pin the most: a leak's growth");
	s.own_pin = s.other_pin = 200;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "pinned equally by its own and others': no");
	CHECK_EQ_INT(victims__judge(&s, true, false), ML_VICTIM_NOT, "... not even a victim before: pins are not kept");
	s.own_pin = 0, s.other_pin = 1;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FREED, "others' one pinned byte against none: freed");
	s = walked(250);
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FREED, "no holder recorded, a quarter free: freed");
	s = walked(249);
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "no holder recorded, under a quarter free: no");
	s = walked(125);
	s.own_fill = 0, s.other_fill = 875;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT,
		     "an eighth free is judged by its pins, not its fills: under a quarter, no holder, no");
	s.other_pin = 10;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FREED, "an eighth free, pinned by others: freed");
	s.growing = false;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FREED, "a row not growing is judged the same");
}

static void filled(void)
{
	struct ml_victim_sample s = walked(124); /* under an eighth free: 876 bytes in use */

	s.other_fill = 438, s.own_fill = 100;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FILLED, "others fill half of the 876 in use: filled");
	s.other_fill = 437;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "others fill just under half: no");
	CHECK_EQ_INT(victims__judge(&s, true, false), ML_VICTIM_FILLED, "... a victim at the last report stays one");
	s.own_fill = 437;
	CHECK_EQ_INT(victims__judge(&s, true, false), ML_VICTIM_NOT, "its own fill as much as others': no more");
	s.own_fill = 0, s.other_fill = 1000, s.own_pin = 0, s.other_pin = 1000;
	s.free = 0;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FILLED,
		     "none free, filled by others: pins do not count");
	s.other_fill = 0;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "none free, no fill recorded: a leak candidate");
}

/* Pages first touched in a heap the walk covered are the heap's, whatever holds them. */
static void rss_pages(void)
{
	struct ml_victim_sample s = walked(0);

	s.rss = true, s.own_fill = 1000;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FILLED, "rss pages in use in the heap: filled");
	s.free = 125, s.own_pin = 1000;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FREED,
		     "rss pages an eighth free: freed, own pins aside");
	s.range = 2001;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_HELD, "rss pages past the walk: held like any row");
}

/* Ranges the walk covered under half of: the row waits for the next walk, once, or stays what it was. */
static void uncovered(void)
{
	struct ml_victim_sample s = walked(1000);

	s.range = 2001;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_HELD, "1,000 walked of 2,001, all free: held");
	CHECK_EQ_INT(victims__judge(&s, false, true), ML_VICTIM_NOT, "held at the last report: not held again");
	s.wider = true;
	CHECK_EQ_INT(victims__judge(&s, false, true), ML_VICTIM_HELD, "... unless a capped walk reads more next");
	CHECK_EQ_INT(victims__judge(&s, true, true), ML_VICTIM_KEPT, "... and a victim is kept, widening or not");
	s.wider = false;
	CHECK_EQ_INT(victims__judge(&s, true, false), ML_VICTIM_KEPT, "a victim at the last report: kept");
	CHECK_EQ_INT(victims__judge(&s, true, true), ML_VICTIM_KEPT, "kept, whether held or not");
	s.growing = false;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "not growing: nothing to hold");
	s.growing = true, s.range = 2000;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_FREED, "1,000 walked of 2,000 is half: judged now");
}

/* A row of no bytes, or none walked: nothing says it is a victim. */
static void zero_bytes(void)
{
	struct ml_victim_sample s = {.growing = true};

	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "no range and no walk: no victim");
	CHECK_EQ_INT(victims__judge(&s, true, false), ML_VICTIM_KEPT, "... a victim before stays one");
	s.rss = true;
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_NOT, "rss pages, none walked: no victim");
	s = (struct ml_victim_sample){.growing = true, .range = 1};
	CHECK_EQ_INT(victims__judge(&s, false, false), ML_VICTIM_HELD, "one byte, none walked: held");
}

static struct ml_agg_key key(uint32_t tgid, uint64_t caller)
{
	return (struct ml_agg_key){.tgid = tgid, .layer = ML_LAYER_LIBC, .stack_id = 9, .caller = caller};
}

/*
 * victims__find gives victims and held rows sorted by key (memcmp: these keys' first bytes sort them): the lookups
 * find the first, the last, and no other.
 */
static void lookups(void)
{
	struct ml_victim v[3] = {{.key = key(7, 0xa0)}, {.key = key(7, 0xb0), .free_bytes = 2}, {.key = key(8, 0)}};
	struct ml_agg_key held[2] = {key(7, 0xa0), key(9, 1)}, k = key(7, 0xb0);
	const struct ml_victim *got;

	CHECK(victims__of(v, 3, &v[0].key) == &v[0], "the first victim found by its key");
	CHECK(victims__of(v, 3, &v[1].key) == &v[1], "the middle victim found by its key");
	CHECK(victims__of(v, 3, &v[2].key) == &v[2], "the last victim found by its key");
	got = victims__of(v, 3, &k);
	CHECK(got && got->free_bytes == 2, "the victim of a key equal to one of them, not the same object");
	k = key(7, 0xa8);
	CHECK(!victims__of(v, 3, &k), "a key between two victims: none");
	k.layer = ML_LAYER_RSS, k.caller = 0xa0;
	CHECK(!victims__of(v, 3, &k), "another layer's row of the same stack: none");
	CHECK(!victims__of(NULL, 0, &k), "no victims: none");
	CHECK(victims__held(held, 2, &held[0]) && victims__held(held, 2, &held[1]), "held: the first and the last");
	CHECK(!victims__held(held, 2, &v[1].key) && !victims__held(NULL, 0, &held[0]), "not held: another, or none");
}

/* No fresh heap among the rows: none judged, and nothing asked of the ledger or the walks. */
static void none(void)
{
	struct ml_row rows[2] = {{.key = key(7, 0xa0), .bytes = 100}, {.key = {.tgid = 7, .layer = ML_LAYER_RSS}}};
	struct ml_judgement j[2] = {{.verdict = ML_V_GROWING}, {.verdict = ML_V_GROWING}};
	struct ml_snapshot snap = {.rows = rows, .nrows = 2};
	struct ml_victims prev = {0}, out = {.n = 5};

	CHECK_EQ_INT(victims__find(&snap, j, NULL, NULL, NULL, &prev, &out), 0, "none: found");
	CHECK(!out.v && !out.n && !out.held && !out.nheld, "no row of fresh heap: no victim, none held");
	victims__clear(&out);
}

int main(void)
{
	freed();
	filled();
	rss_pages();
	uncovered();
	zero_bytes();
	lookups();
	none();
	return SUMMARY("victims");
}
