/*
 * Unit tests of the merge of cut walks (collect/cutmerge.c) over synthetic rows and stacks: rows in either order,
 * what a merged row sums and keeps, the prefix lengths that are ambiguous and those that are not, and the rows
 * that are never merged. test_ledger.c covers the same rule through a collect.
 */
#include <stdlib.h>
#include "check.h"
#include "collect/cutmerge.h"

#define TGID 7
#define CALLER 0xa0

static struct stackstore *ss;
static struct ml_stack st; /* cutmerge__run's buffer */

/* Hand a stack to the store as the ring would: nr native words then nr_py Python word pairs. */
static void stack(uint64_t id, unsigned int flags, unsigned int nr, unsigned int nr_py, const uint64_t *words)
{
	struct ml_stack s = {.id = id, .nr = nr, .nr_py = (uint16_t)nr_py, .flags = (uint16_t)flags};

	memcpy(s.ips, words, (nr + 2 * nr_py) * sizeof(*words));
	if (stackstore__add(ss, &s, ML_STACK_HDR + 8 * (nr + 2 * nr_py)) < 0)
		CHECK(false, "a synthetic stack stored");
}

/* A row of process TGID's C heap from CALLER: bytes in count blocks, as old as ts. */
static struct ml_row row(uint64_t stack_id, uint64_t bytes, uint64_t count, uint64_t ts)
{
	return (struct ml_row){.key = {.tgid = TGID, .layer = ML_LAYER_LIBC, .stack_id = stack_id, .caller = CALLER},
			       .bytes = bytes,
			       .count = count,
			       .records = count,
			       .raw_bytes = bytes,
			       .oldest_ts_ns = ts};
}

static int merge(struct ml_row *rows, size_t n)
{
	struct ml_snapshot s = {.rows = rows, .nrows = n};

	return cutmerge__run(&s, ss, &st);
}

/*
 * Stacks 1 and 2 complete, 1 = {1,2,3,4} and 2 = {1,2,9}, both with Python frame (0xf0, 0xf1); stopped walks
 * 11 = {1,2,3}, 12 = {1,2}, 13 = {1,2,3,4} (all of 1), 14 = {1,2,3,4,5} (past 1), 15 = {1,2,3} without Python
 * frames, 16 = {} (a stopped walk with no frame), 17 = {1,2,3} (also stopped: never a row to merge into).
 */
static void stacks(void)
{
	const uint64_t full1[] = {1, 2, 3, 4, 0xf0, 0xf1}, full2[] = {1, 2, 9, 0xf0, 0xf1};
	const uint64_t long14[] = {1, 2, 3, 4, 5, 0xf0, 0xf1};

	stack(1, 0, 4, 1, full1);
	stack(2, 0, 3, 1, full2);
	stack(11, ML_STACK_UW_STOPPED, 3, 1, (const uint64_t[]){1, 2, 3, 0xf0, 0xf1});
	stack(12, ML_STACK_UW_STOPPED, 2, 1, (const uint64_t[]){1, 2, 0xf0, 0xf1});
	stack(13, ML_STACK_UW_STOPPED, 4, 1, full1);
	stack(14, ML_STACK_UW_STOPPED, 5, 1, long14);
	stack(15, ML_STACK_UW_STOPPED, 3, 0, full1);
	stack(16, ML_STACK_UW_STOPPED, 0, 0, full1);
	stack(17, ML_STACK_UW_STOPPED, 3, 1, (const uint64_t[]){1, 2, 3, 0xf0, 0xf1});
}

static void nothing_to_merge(void)
{
	struct ml_row rows[2] = {row(1, 100, 1, 10), row(2, 200, 2, 20)};

	CHECK_EQ_INT(merge(rows, 0), 0, "no rows: none merged");
	CHECK_EQ_INT(merge(rows, 2), 0, "complete stacks only: none merged");
	CHECK(rows[0].bytes == 100 && rows[1].bytes == 200 && !rows[0].cut_count && !rows[1].cut_count,
	      "complete stacks only: rows untouched");
	rows[0] = row(14, 30, 1, 5);
	CHECK_EQ_INT(merge(rows, 2), 0, "a stopped walk longer than any complete stack: none merged");
	rows[0] = row(16, 30, 1, 5);
	CHECK_EQ_INT(merge(rows, 2), 0, "a stopped walk of no frame: none merged");
	rows[0] = row(15, 30, 1, 5);
	CHECK_EQ_INT(merge(rows, 2), 0, "a stopped walk without the complete stack's Python frames: none merged");
	CHECK_EQ_U64(rows[0].bytes, 30, "... it stays a row of its own");
}

/* {1,2,3} stopped: stack 1's alone; merged whether its row comes before or after stack 1's. */
static void either_order(void)
{
	struct ml_row before[2] = {row(11, 30, 3, 5), row(1, 1000, 10, 50)};
	struct ml_row after[2] = {row(1, 1000, 10, 50), row(11, 30, 3, 5)};

	CHECK_EQ_INT(merge(before, 2), 1, "cut row first: merged");
	CHECK(before[1].bytes == 1030 && before[1].count == 13 && before[0].bytes == 0 && before[0].count == 0,
	      "cut row first: its bytes and count move to stack 1's row");
	CHECK_EQ_INT(merge(after, 2), 1, "cut row last: merged");
	CHECK(after[0].bytes == 1030 && after[0].count == 13 && after[1].bytes == 0 && after[1].count == 0,
	      "cut row last: its bytes and count move to stack 1's row");
	CHECK(after[0].cut_key.stack_id == 11 && after[0].cut_count == 3, "cut row last: named by stack 1's row");
}

/* Three cut rows into stack 1: the sums, the oldest, the traits that say how counted, the largest named. */
static void what_is_kept(void)
{
	struct ml_row rows[4] = {row(1, 1000, 10, 50), row(11, 30, 3, 5), row(13, 40, 4, 70),
				 row(ML_STACK_NONE, 7, 1, 60)};
	static const char *const emptied[] = {"cut row 1 emptied", "cut row 2 emptied", "cut row 3 emptied"};

	rows[0].traits = ML_ROW_BRK;
	rows[1].traits = ML_ROW_SAMPLED | ML_ROW_IMPORT;
	rows[2].traits = ML_ROW_WEIGHED, rows[2].cow_bytes = 8, rows[2].records = 2, rows[2].raw_bytes = 20;
	rows[3].traits = ML_ROW_COPY_SCAN | ML_ROW_SPACE;
	CHECK_EQ_INT(merge(rows, 4), 3, "a cut walk, a stopped walk of the whole stack, a caller-only row: merged");
	CHECK_EQ_U64(rows[0].bytes, 1077, "bytes summed");
	CHECK_EQ_U64(rows[0].count, 18, "count summed");
	CHECK_EQ_U64(rows[0].records, 16, "records summed");
	CHECK_EQ_U64(rows[0].raw_bytes, 1057, "raw bytes summed");
	CHECK_EQ_U64(rows[0].cow_bytes, 8, "copies on write summed");
	CHECK_EQ_U64(rows[0].oldest_ts_ns, 5, "the oldest block's time");
	CHECK_EQ_U64(rows[0].traits, ML_ROW_BRK | ML_ROW_SAMPLED | ML_ROW_WEIGHED | ML_ROW_COPY_SCAN,
		     "how records were counted joins; import and address space stay the cut rows'");
	CHECK(rows[0].cut_key.stack_id == 13 && rows[0].cut_count == 4, "the cut row of the largest count named");
	for (size_t i = 1; i < 4; i++)
		CHECK(!rows[i].bytes && !rows[i].count && !rows[i].records && !rows[i].raw_bytes && !rows[i].cow_bytes,
		      emptied[i - 1]);
}

/* Cut rows of equal counts: the first in the rows' order is named. */
static void equal_counts(void)
{
	struct ml_row rows[3] = {row(13, 40, 2, 70), row(11, 30, 2, 5), row(1, 1000, 10, 50)};

	CHECK_EQ_INT(merge(rows, 3), 2, "two cut rows of two blocks each: merged");
	CHECK(rows[2].cut_key.stack_id == 13 && rows[2].cut_count == 2, "of equal counts, the first row named");
}

/*
 * Ambiguity is per prefix: {1,2} begins stacks 1 and 2 and stays apart, {1,2,3} only stack 1 and joins it;
 * a complete stack with nothing outstanding, or in another process, layer or caller, does not count.
 */
static void ambiguous_by_length(void)
{
	struct ml_row rows[4] = {row(1, 1000, 10, 50), row(2, 2000, 20, 50), row(12, 20, 2, 5), row(11, 30, 3, 5)};

	CHECK_EQ_INT(merge(rows, 4), 1, "of two cut rows, the one prefix of one stack merged");
	CHECK(rows[0].bytes == 1030 && rows[1].bytes == 2000, "{1,2,3} joins stack 1, stack 2 untouched");
	CHECK_EQ_U64(rows[2].bytes, 20, "{1,2}, which both stacks begin with, stays apart");

	rows[0] = row(1, 1000, 10, 50), rows[1] = row(2, 0, 0, 50), rows[2] = row(12, 20, 2, 5);
	CHECK_EQ_INT(merge(rows, 3), 1, "stack 2 with nothing outstanding: {1,2} merged");
	CHECK_EQ_U64(rows[0].bytes, 1020, "... into stack 1");

	rows[0] = row(1, 1000, 10, 50), rows[1] = row(2, 2000, 20, 50), rows[2] = row(12, 20, 2, 5);
	rows[1].key.tgid = TGID + 1;
	CHECK_EQ_INT(merge(rows, 3), 1, "stack 2 in another process: {1,2} merged into stack 1");
	rows[0] = row(1, 1000, 10, 50), rows[2] = row(12, 20, 2, 5);
	rows[1].key.tgid = TGID, rows[1].key.layer = ML_LAYER_TORCH_CPU;
	CHECK_EQ_INT(merge(rows, 3), 1, "stack 2 in another layer: {1,2} merged into stack 1");
	rows[0] = row(1, 1000, 10, 50), rows[2] = row(12, 20, 2, 5);
	rows[1].key.layer = ML_LAYER_LIBC, rows[1].key.caller = CALLER + 1;
	CHECK_EQ_INT(merge(rows, 3), 1, "stack 2 from another caller: {1,2} merged into stack 1");
}

/* Rows never merged: another caller's, one with no count, a stopped walk as the target. */
static void never_merged(void)
{
	struct ml_row rows[2] = {row(1, 1000, 10, 50), row(11, 30, 3, 5)};

	rows[1].key.caller = CALLER + 1;
	CHECK_EQ_INT(merge(rows, 2), 0, "a cut row from another caller: not merged");
	rows[1] = row(11, 30, 0, 5);
	CHECK_EQ_INT(merge(rows, 2), 0, "a cut row with no count: not merged");
	CHECK_EQ_U64(rows[0].bytes, 1000, "... stack 1 untouched");
	rows[0] = row(17, 1000, 10, 50), rows[1] = row(12, 30, 3, 5);
	CHECK_EQ_INT(merge(rows, 2), 0, "two stopped walks, one the other's prefix: not merged");
	rows[0] = row(1, 1000, 10, 50), rows[1] = row(ML_STACK_NONE, 30, 3, 5);
	rows[1].key.caller = 0;
	CHECK_EQ_INT(merge(rows, 2), 0, "a row with neither stack nor caller: not merged");
}

int main(void)
{
	if (stackstore__new(&ss)) {
		CHECK(false, "a stack store");
		return SUMMARY("cutmerge");
	}
	stacks();
	nothing_to_merge();
	either_order();
	what_is_kept();
	equal_counts();
	ambiguous_by_length();
	never_merged();
	stackstore__free(ss);
	return SUMMARY("cutmerge");
}
