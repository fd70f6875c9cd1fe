/*
 * The allocation table's levels (collect/slots.c) on the real BPF object: the first level's size, the sampled
 * fill, a level made ahead but unused until published, the sizes levels grow by and their cap, where claims go
 * and that searches find records in older levels, and what the BPF side is told (the outer map, table_top,
 * table_masks). Needs root.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include "check.h"
#include "collect/slots.h"
#include "memleak.skel.h"

static bool in_level(const struct slots *t, unsigned int k, const struct ml_slot *s)
{
	return s && s >= t->lv[k].v && s < t->lv[k].v + t->lv[k].len;
}

/* n records claimed for tgid from key base on, as a probe would write them. How many found a slot. */
static uint32_t fill(struct slots *t, uint32_t tgid, uint64_t base, uint32_t n)
{
	uint32_t got = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct ml_slot *s = slots__claim(t, tgid, ML_LAYER_LIBC, base + i * 16ULL);

		if (s) {
			s->tgid = tgid;
			s->layer = ML_LAYER_LIBC;
			s->ts_ns = 1;
			got++;
		}
	}
	return got;
}

/* The outer map holds a map at level k. */
static bool in_outer(struct memleak_bpf *skel, uint32_t k)
{
	uint32_t id;

	return !bpf_map_lookup_elem(bpf_map__fd(skel->maps.table), &k, &id) && id;
}

static void grow_checks(struct memleak_bpf *skel)
{
	struct slots *t = NULL;
	struct ml_slot *ahead;

	CHECK_EQ_INT(slots__new(skel, 2097152, &t), 0, "made for the default --max-allocs");
	if (!t)
		return;
	CHECK(t->n == 1 && t->lv[0].len == ML_TABLE_FIRST_SLOTS && slots__bytes(t) == 12ULL << 20,
	      "one level of 262,144 slots, 12 MiB");
	CHECK(in_outer(skel, 0) && !in_outer(skel, 1) && skel->bss->table_top == 0 &&
		  skel->bss->table_masks[0] == ML_TABLE_FIRST_SLOTS - 1,
	      "the BPF side told: level 0 in the outer map, its mask, top 0");
	CHECK_EQ_INT(slots__fill(t), 0, "empty: 0 % live");
	CHECK_EQ_U64(fill(t, 7, 0x100000, ML_TABLE_FIRST_SLOTS / 5), ML_TABLE_FIRST_SLOTS / 5, "20 % filled");
	CHECK(slots__fill(t) >= ML_TABLE_AHEAD && slots__fill(t) < ML_TABLE_FILL,
	      "20 % live: past the mark to make the next, not the one to publish it (the sample takes 4,096 slots)");
	CHECK_EQ_INT(slots__prepare(t), 0, "the next level made ahead");
	ahead = t->lv[1].v;
	CHECK(t->n == 1 && t->spare && t->lv[1].len == 4 * ML_TABLE_FIRST_SLOTS && in_outer(skel, 1) &&
		  skel->bss->table_masks[1] == 4 * ML_TABLE_FIRST_SLOTS - 1 && skel->bss->table_top == 0,
	      "made ahead: in the outer map with its mask, the top still 0");
	CHECK(slots__capacity(t) == ML_TABLE_FIRST_SLOTS && slots__bytes(t) == 60ULL << 20,
	      "its slots not counted yet, its 48 MiB counted");
	CHECK(in_level(t, 0, slots__claim(t, 7, ML_LAYER_LIBC, 0x6000000)), "a new record still goes to level 0");
	CHECK_EQ_INT(slots__prepare(t), 0, "made ahead once only");
	CHECK(t->lv[1].v == ahead, "... the same level");
	fill(t, 7, 0x10000000, ML_TABLE_FIRST_SLOTS / 10);
	CHECK(slots__fill(t) >= ML_TABLE_FILL, "30 % live: past the mark to publish");
	CHECK_EQ_INT(slots__grow(t), 0, "a second level");
	CHECK(t->n == 2 && !t->spare && t->lv[1].v == ahead && skel->bss->table_top == 1,
	      "the level made ahead published: top 1");
	CHECK_EQ_INT(slots__fill(t), 0, "the new level is empty");
	CHECK(in_level(t, 1, slots__claim(t, 7, ML_LAYER_LIBC, 0x7000000)), "a new record goes to the newest level");
	CHECK(in_level(t, 0, slots__find(t, 7, ML_LAYER_LIBC, 0x100000 + 16)), "an older record found in level 0");
	CHECK(!slots__find(t, 8, ML_LAYER_LIBC, 0x100000 + 16), "... for its own process only");
	CHECK(fill(t, 7, 0x100000 + 32, 1) == 1 && in_level(t, 1, slots__find(t, 7, ML_LAYER_LIBC, 0x100000 + 32)),
	      "a key an older level holds (a release missed) claimed again: a record in the newest, found first");
	CHECK_EQ_INT(slots__grow(t), 0, "a third level, made as it is published");
	CHECK(t->n == 3 && t->lv[2].len == 2097152 && slots__capacity(t) == 262144 + 1048576 + 2097152,
	      "the third capped at --max-allocs's 2,097,152 slots");
	CHECK_EQ_INT(slots__grow(t), -ENOSPC, "no fourth: the levels hold the slots asked for");
	CHECK(slots__prepare(t) == -ENOSPC && !t->spare, "... nor one made ahead");
	CHECK_EQ_U64(slots__bytes(t), (262144ULL + 1048576 + 2097152) * 48, "156 MiB in all");
	slots__free(t);
}

/* The watching thread's decisions, look by look: a level made ahead only on ML_TABLE_AHEAD read looks in a row. */
static void step_checks(void)
{
	static const struct {
		unsigned int fill;
		bool dropped;
		enum slots_step want;
	} looks[] = {{13, false, SLOTS_WAIT},	 {15, false, SLOTS_WAIT}, {13, false, SLOTS_WAIT},
		     {15, false, SLOTS_WAIT},	 {16, false, SLOTS_WAIT}, {15, false, SLOTS_PREPARE},
		     {17, false, SLOTS_PREPARE}, {25, false, SLOTS_GROW}, {2, false, SLOTS_WAIT},
		     {2, true, SLOTS_GROW},	 {15, false, SLOTS_WAIT}, {14, false, SLOTS_WAIT}};
	unsigned int ahead = 0, wrong = 0;

	for (size_t i = 0; i < sizeof(looks) / sizeof(looks[0]); i++)
		wrong += slots__step(&ahead, looks[i].fill, looks[i].dropped) != looks[i].want;
	CHECK_EQ_INT(wrong, 0,
		     "a 15 % look between 13 % ones makes nothing; three in a row make a level ahead; 25 % or a drop "
		     "publishes one at once, and the count starts over");
}

int main(void)
{
	step_checks();
	struct memleak_bpf *skel = memleak_bpf__open_and_load();
	struct slots *t = NULL;

	if (!skel) {
		CHECK(0, "load the BPF object (root needed)");
		return SUMMARY("slots");
	}
	grow_checks(skel);
	CHECK_EQ_INT(slots__new(skel, 1024, &t), 0, "made for --max-allocs 16 (1,024 slots)");
	CHECK(t && t->n == 1 && t->lv[0].len == 1024 && slots__prepare(t) == -ENOSPC && slots__grow(t) == -ENOSPC,
	      "one level of 1,024 slots, and no other");
	CHECK(t && skel->bss->table_top == 0 && skel->bss->table_masks[0] == 1023, "the BPF side told its mask");
	slots__free(t);
	memleak_bpf__destroy(skel);
	return SUMMARY("slots");
}
