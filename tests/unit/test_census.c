/* The heap census of collect/census.c: chunks typed by vtable ranges, names, growth over walks, and undo. */
#include <errno.h>
#include <string.h>
#include "check.h"
#include "collect/census.h"

#define NODE "_ZTVN5torch8autograd9generated14AddmmBackward0E"
#define SHARED "_ZTVSt23_Sp_counted_ptr_inplaceIN3c1010TensorImplESaIS1_ELN9__gnu_cxx12_Lock_policyE2EE"
#define DELETER                                                                                                        \
	"_ZTVSt19_Sp_counted_deleterIPN5torch8autograd9generated10TBackward0EPFvPNS1_4NodeEESaIvELN9__gnu_cxx12_"      \
	"Lock_policyE2EE"

static struct census_type find(struct census *c, const char *name)
{
	struct census_type top[8];
	uint64_t chunks, typed;
	size_t n = census__top(c, top, 8, &chunks, &typed);

	for (size_t i = 0; i < n; i++)
		if (!strcmp(top[i].name, name))
			return top[i];
	return (struct census_type){.name = NULL};
}

/* One walk: nodes chunks of AddmmBackward0 (vptr 16 bytes into its vtable), 5 make_shared blocks, 1 array of
 * nodes (count word first), and 100 chunks of plain data. */
static void walk(struct census *c, uint64_t nodes, uint64_t at_s)
{
	census__begin(c);
	for (uint64_t i = 0; i < nodes; i++)
		census__chunk(c, 0x10000 + 16, 0, 96);
	for (int i = 0; i < 5; i++)
		census__chunk(c, 0x20000 + 16, 1, 64);
	census__chunk(c, 3, 0x10000 + 16, 320);
	for (int i = 0; i < 100; i++)
		census__chunk(c, 0x7fff12345678ULL, 42, 48);
	census__end(c, at_s * 1000000000ULL);
}

/* In-use chunks by size, the base kept, the growth since, and a heap walked again counted once. */
static void sizes_checks(void)
{
	struct census *c = NULL;
	uint64_t n = 0;
	int64_t g = 0;

	CHECK_EQ_INT(census__new(2, &c), 0, "made for sizes");
	if (!c)
		return;
	CHECK(!census__in_use(c, 80, &n), "sizes: none before a walk");
	CHECK_EQ_INT(census__size_base(c), -EAGAIN, "sizes: no base before a walk");
	census__begin(c);
	for (int i = 0; i < 3; i++)
		census__size(c, 80);
	census__size(c, 1008);
	census__size(c, CENSUS_SIZE_MAX + 16);
	census__end(c, 1000000000ULL);
	CHECK(census__in_use(c, 80, &n) && n == 3, "sizes: three 80-byte chunks");
	CHECK(census__in_use(c, CENSUS_SIZE_MAX + 16, &n) && n == 1, "sizes: a larger chunk counted by its exact size");
	CHECK(!census__size_growth(c, 80, &g), "sizes: no growth without a base");
	CHECK_EQ_INT(census__size_base(c), 0, "sizes: the base kept");

	census__begin(c);
	for (int i = 0; i < 5; i++)
		census__size(c, 80);
	census__mark(c);
	census__size(c, 80); /* a heap whose walk met a changing header ... */
	census__size(c, 80);
	census__undo(c);
	census__size(c, 80); /* ... walked again */
	census__end(c, 2000000000ULL);
	CHECK(census__in_use(c, 80, &n) && n == 6, "sizes: a heap walked again counts once (6)");
	CHECK(census__size_growth(c, 80, &g) && g == 3, "sizes: 80-byte chunks grew by 3 since the base");
	CHECK(census__size_growth(c, 1008, &g) && g == -1, "sizes: the 1008-byte one is gone");
	CHECK(census__size_base(c) == 0, "sizes: a new base");

	/* 1 MiB blocks: a 1048592-byte chunk in a heap, or mapped alone in 1052672 bytes (pages): both count. */
	census__begin(c);
	census__size(c, 1048592);
	census__size(c, 1052672);
	census__size(c, 1052672);
	census__end(c, 3000000000ULL);
	CHECK(census__in_use(c, 1052672, &n) && n == 2, "sizes: two mmapped chunks of 1052672 bytes");
	CHECK(census__size_growth(c, 1048592, &g) && g == 3, "sizes: a 1 MiB block's chunks, heap and mmapped: 3");
	CHECK(census__size_growth(c, 200000 * 16, &g) && g == 0, "sizes: a large size never seen: none");
	census__free(c);
}

/* A walk that stopped part-way, left out: the rise before and after it still reads as growth; not thrice. */
static void discard_checks(void)
{
	struct census *c = NULL;
	struct census_type t;

	CHECK_EQ_INT(census__new(3, &c), 0, "made for discards");
	if (!c)
		return;
	census__add_range(c, 0x10000, 0x10000 + 0x98, NODE);
	walk(c, 1000, 10);
	walk(c, 2000, 12);
	census__begin(c);
	for (int i = 0; i < 700; i++) /* the heap changed under the walk: a third of the nodes read */
		census__chunk(c, 0x10000 + 16, 0, 96);
	CHECK(census__discard(c), "a short walk left out");
	walk(c, 3000, 16);
	t = find(c, "torch::autograd::generated::AddmmBackward0");
	CHECK(t.growing && t.count == 3001 && census__walks(c) == 3, "growing at the next whole walk (3 walks kept)");
	CHECK(census__discard(c) && census__discard(c) && !census__discard(c),
	      "at most CENSUS_DISCARD_MAX (2) left out in a row");
	census__free(c);
}

int main(void)
{
	struct census *c = NULL;
	struct census_type t;
	uint64_t chunks, typed;
	struct census_type top[4];

	CHECK_EQ_INT(census__new(1, &c), 0, "made");
	CHECK(!census__add_range(c, 0x10000, 0x10000 + 0x98, NODE) &&
		  !census__add_range(c, 0x20000, 0x20000 + 0x38, SHARED),
	      "two vtables");
	CHECK_EQ_U64(census__ntypes(c), 2, "two types");
	CHECK(!census__add_range(c, 0x30000, 0x30000 + 0x20, DELETER), "a control block's vtable");
	walk(c, 1000, 1);
	CHECK(census__top(c, top, 4, &chunks, &typed) == 2 && chunks == 1106 && typed == 1006,
	      "1,106 chunks, 1,006 typed (the array's count word looked past)");
	t = find(c, "torch::autograd::generated::AddmmBackward0");
	CHECK(t.name && t.count == 1001 && t.bytes == 1000 * 96 + 320, "the nodes, named without 'vtable for '");
	CHECK(!t.growing, "one walk: not growing yet");
	t = find(c, "c10::TensorImpl");
	CHECK(t.name && t.count == 5, "a make_shared block is its T");
	census__begin(c);
	census__chunk(c, 0x30000 + 16, 0, 32);
	census__end(c, 1500000000ULL);
	t = find(c, "shared_ptr control block of torch::autograd::generated::TBackward0");
	CHECK(t.name && t.count == 1, "a shared_ptr's control block names its T");

	/* A walk that stops halfway is undone and walked again: nothing counts twice. */
	census__begin(c);
	census__mark(c);
	census__chunk(c, 0x10000 + 16, 0, 96);
	census__undo(c);
	census__chunk(c, 0x20000 + 40, 0, 64);
	census__chunk(c, 0x20000 + 0x38, 0, 64); /* one past the vtable's end: untyped */
	census__end(c, 2000000000ULL);
	CHECK(census__top(c, top, 4, &chunks, &typed) == 1 && chunks == 2 && typed == 1 && top[0].count == 1,
	      "the undone chunk is not counted; a word past the range's end is untyped");

	/* Counts rising at each of three walks: growing, by the rate over the kept walks. */
	census__free(c);
	CHECK_EQ_INT(census__new(1, &c), 0, "made again");
	census__add_range(c, 0x10000, 0x10000 + 0x98, NODE);
	census__add_range(c, 0x20000, 0x20000 + 0x38, SHARED);
	walk(c, 1000, 10);
	walk(c, 2000, 12);
	t = find(c, "torch::autograd::generated::AddmmBackward0");
	CHECK(!t.growing && t.per_s == 500, "two walks: 500/s, not yet growing");
	walk(c, 3000, 14);
	t = find(c, "torch::autograd::generated::AddmmBackward0");
	CHECK(t.growing && t.per_s == 500 && t.count == 3001, "three walks, a new high at each: growing at 500/s");
	CHECK(census__top(c, top, 4, &chunks, &typed) == 2 && top[0].growing && !top[1].growing &&
		  !strcmp(top[1].name, "c10::TensorImpl"),
	      "growing types first");
	walk(c, 3000, 16);
	t = find(c, "torch::autograd::generated::AddmmBackward0");
	CHECK(!t.growing, "a walk with no rise: not growing");
	CHECK_EQ_INT(census__walks(c), 4, "four walks");
	discard_checks();

	/* A library's vtables read two walks late (a slow first sync): its type counts from then on, so 5 steady
	 * blocks do not seem to grow from zero, and a rise needs three walks that all knew the type. */
	census__free(c);
	CHECK_EQ_INT(census__new(1, &c), 0, "made a third time");
	census__add_range(c, 0x10000, 0x10000 + 0x98, NODE);
	walk(c, 1000, 20);
	walk(c, 2000, 22);
	census__add_range(c, 0x20000, 0x20000 + 0x38, SHARED);
	walk(c, 3000, 24);
	walk(c, 4000, 26);
	t = find(c, "c10::TensorImpl");
	CHECK(t.name && t.count == 5 && !t.growing && t.per_s == 0, "read late, steady: 0/s, not growing");
	t = find(c, "torch::autograd::generated::AddmmBackward0");
	CHECK(t.growing && t.per_s == 500, "the type known from the start still grows at 500/s");
	CHECK(!census__settled(c), "two walks since the late vtables: not settled (the walks stay unpaced)");
	walk(c, 5000, 28);
	CHECK(census__settled(c), "three walks since: settled");
	census__free(c);
	sizes_checks();
	return SUMMARY("census");
}
