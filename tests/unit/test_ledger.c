/* Unit tests of the aggregation: the real BPF tables and iterator, filled from user space, summed by stack. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "allocators.h"
#include "check.h"
#include "ledger.h"
#include "memleak.skel.h"


static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static struct memleak_bpf *load(uint32_t max_allocs, uint32_t max_stacks)
{
	struct memleak_bpf *skel = memleak_bpf__open();

	if (!skel)
		return NULL;
	skel->rodata->table_mask = ledger_table_slots(max_allocs) - 1;
	bpf_map__set_max_entries(skel->maps.table, ledger_table_slots(max_allocs));
	bpf_map__set_max_entries(skel->maps.stacks, max_stacks);
	if (memleak_bpf__load(skel)) {
		memleak_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/* Walk a probe chain as the BPF side does: the slot index holding (tgid, addr), or with claim the first free one. */
static int probe(struct memleak_bpf *skel, uint32_t tgid, uint64_t addr, bool claim, struct ml_slot *sl)
{
	int fd = bpf_map__fd(skel->maps.table);
	uint32_t mask = skel->rodata->table_mask;
	uint32_t start = (uint32_t)ml_slot_hash(tgid, ML_LAYER_LIBC, addr);

	for (uint32_t p = 0; p < ML_MAX_PROBES; p++) {
		uint32_t i = (start + p) & mask;

		bpf_map_lookup_elem(fd, &i, sl);
		if (claim && (sl->addr == ML_SLOT_EMPTY || sl->addr == ML_SLOT_TOMB))
			return (int)i;
		if (!claim && sl->addr == ML_SLOT_EMPTY)
			return -1;
		if (!claim && sl->addr == addr && sl->tgid == tgid && sl->layer == ML_LAYER_LIBC)
			return (int)i;
	}
	return -1;
}

static void put(struct memleak_bpf *skel, uint32_t tgid, uint64_t addr, uint64_t size, uint64_t ts, uint64_t stack,
		uint64_t caller)
{
	struct ml_slot sl;
	int i = probe(skel, tgid, addr, true, &sl);

	sl = (struct ml_slot){ .addr = addr, .ts_ns = ts, .size = size, .caller = caller, .stack_id = stack,
			       .tgid = tgid, .layer = ML_LAYER_LIBC };
	if (i >= 0)
		bpf_map_update_elem(bpf_map__fd(skel->maps.table), &i, &sl, BPF_ANY);
}

static void del(struct memleak_bpf *skel, uint32_t tgid, uint64_t addr)
{
	struct ml_slot sl;
	int i = probe(skel, tgid, addr, false, &sl);

	sl.addr = ML_SLOT_TOMB;
	if (i >= 0)
		bpf_map_update_elem(bpf_map__fd(skel->maps.table), &i, &sl, BPF_ANY);
}

static const struct ml_row *find(const struct ml_snapshot *s, uint64_t caller)
{
	for (size_t i = 0; i < s->nrows; i++)
		if (s->rows[i].key.caller == caller)
			return &s->rows[i];
	return NULL;
}

int main(void)
{
	struct memleak_bpf *skel = load(4096, 64);
	const struct ml_snapshot *s;
	const struct ml_row *r;
	struct ledger *l;
	uint64_t now = mono_ns();

	if (!skel) {
		printf("not ok - load BPF (needs root)\nunit ledger: 0 passed, 1 failed\n");
		return 1;
	}
	l = ledger__new(skel, &(struct ledger_opts){ .tgid = 7, .max_stacks = 64 });
	CHECK(l != NULL, "ledger created");
	if (!l)
		return SUMMARY("ledger");

	/* stack A: 3 blocks, stack B: 1 block, another caller within stack A's stack id is a separate row */
	put(skel, 7, 0x1000, 100, now - 3000000000ULL, 5, 0xa0);
	put(skel, 7, 0x2000, 200, now - 1000000000ULL, 5, 0xa0);
	put(skel, 7, 0x3000, 300, now - 2000000000ULL, 5, 0xa0);
	put(skel, 7, 0x4000, 4096, now - 500000000ULL, 9, 0xb0);
	put(skel, 7, 0x5000, 7, now, 5, 0xc0);
	CHECK(ledger__collect(l, &s) == 0, "collect 1");
	CHECK(s->nrows == 3, "three rows");
	CHECK(s->rows[0].key.caller == 0xb0 && s->rows[0].bytes == 4096, "largest first");
	r = find(s, 0xa0);
	CHECK(r && r->bytes == 600 && r->count == 3, "stack A summed: 600 bytes in 3");
	CHECK(r && r->oldest_ts_ns == now - 3000000000ULL, "stack A oldest");
	CHECK(r && r->growth_bytes == 600, "first report: growth = bytes");
	CHECK(s->layers[ML_LAYER_LIBC].bytes == 4703 && s->layers[ML_LAYER_LIBC].count == 5, "layer totals");

	del(skel, 7, 0x1000);
	put(skel, 7, 0x6000, 1000, now, 9, 0xb0);
	del(skel, 7, 0x5000);
	CHECK(ledger__collect(l, &s) == 0, "collect 2");
	r = find(s, 0xa0);
	CHECK(r && r->bytes == 500 && r->count == 2 && r->growth_bytes == -100, "stack A shrank by 100");
	CHECK(r && r->oldest_ts_ns == now - 2000000000ULL, "oldest moves to the next-oldest block");
	r = find(s, 0xb0);
	CHECK(r && r->bytes == 5096 && r->growth_bytes == 1000, "stack B grew by 1000");
	CHECK(find(s, 0xc0) == NULL && s->nrows == 2, "emptied stack disappears");
	CHECK(s->layers[ML_LAYER_LIBC].growth_bytes == 5596 - 4703, "layer growth");

	/* other processes' entries are keyed apart */
	put(skel, 8, 0x1000, 50, now, 5, 0xa0);
	CHECK(ledger__collect(l, &s) == 0 && s->nrows == 3, "other tgid gets its own row");
	del(skel, 8, 0x1000);
	ledger__free(l);

	/* min-age: young blocks are left out but their stack stays referenced */
	l = ledger__new(skel, &(struct ledger_opts){ .tgid = 7, .max_stacks = 64, .min_age_ns = 1500000000ULL });
	CHECK(ledger__collect(l, &s) == 0, "collect with min-age");
	r = find(s, 0xa0);
	CHECK(r && r->bytes == 300 && r->count == 1, "of blocks 1 s and 2 s old only the 2 s one counts");
	CHECK(find(s, 0xb0) == NULL, "stack with only young blocks not shown");
	ledger__free(l);
	memleak_bpf__destroy(skel);

	/* many stacks: every one gets its row, nothing is folded or lost */
	skel = load(4096, 16);
	l = ledger__new(skel, &(struct ledger_opts){ .tgid = 7, .max_stacks = 16 });
	for (int i = 0; i < 3000; i++)
		put(skel, 7, 0x10000 + (uint64_t)i * 16, 10 + (uint64_t)(i % 7), now, 1 + (uint64_t)i, 0x100 + (uint64_t)i);
	CHECK(ledger__collect(l, &s) == 0, "collect 3000 stacks");
	{
		uint64_t bytes = 0, n = 0, want = 0;

		for (int i = 0; i < 3000; i++)
			want += 10 + (uint64_t)(i % 7);
		for (size_t i = 0; i < s->nrows; i++)
			bytes += s->rows[i].bytes, n += s->rows[i].count;
		CHECK(s->nrows == 3000 && bytes == want && n == 3000, "3000 rows, every byte accounted");
		CHECK(s->rows[0].bytes == 16 && s->rows[s->nrows - 1].bytes == 10, "ranked by bytes");
	}
	/* a slot being written (ts 0) is skipped, not counted with stale fields */
	put(skel, 7, 0x990000, 5, 0, 1, 0xdead0);
	CHECK(ledger__collect(l, &s) == 0, "collect after a half-written slot");
	CHECK(find(s, 0xdead0) == NULL && s->nrows == 3000, "half-written slot skipped");
	ledger__free(l);
	memleak_bpf__destroy(skel);
	return SUMMARY("ledger");
}
