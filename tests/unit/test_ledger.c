/* Unit tests of the aggregation: the real BPF tables and iterator, filled from user space, summed by stack. */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include "attach/allocators.h"
#include "check.h"
#include "collect/ledger.h"
#include "collect/sizeweights.h"
#include "collect/slots.h"
#include "collect/stackstore.h"
#include "gunzip.h"
#include "judge/verdict.h"
#include "profile.pb-c.h"
#include "report/pprof.h"
#include "report/stackview.h"
#include "memleak.skel.h"

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The table of the skeleton last loaded: its levels, made as a run makes them. */
static struct slots *T;

static struct memleak_bpf *load(uint32_t max_allocs)
{
	struct memleak_bpf *skel = memleak_bpf__open();

	if (!skel)
		return NULL;
	if (memleak_bpf__load(skel)) {
		memleak_bpf__destroy(skel);
		return NULL;
	}
	slots__free(T);
	if (slots__new(skel, ledger_table_slots(max_allocs), &T)) {
		memleak_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/* A record written as the BPF side writes one: claimed on its probe chain, ts_ns last. */
static void put_layer(struct memleak_bpf *skel, uint32_t tgid, uint64_t addr, uint64_t size, uint64_t ts,
		      uint64_t stack, uint64_t caller, unsigned int layer)
{
	struct ml_slot *s = slots__claim(T, tgid, (uint8_t)layer, addr);

	if (!s)
		return;
	s->ts_ns = 0;
	s->size = size;
	s->caller = caller;
	s->stack_id = stack;
	s->tgid = tgid;
	s->layer = (__u8)layer;
	s->spec = 0;
	s->device = 0;
	s->ts_ns = ts;
}

static void put(struct memleak_bpf *skel, uint32_t tgid, uint64_t addr, uint64_t size, uint64_t ts, uint64_t stack,
		uint64_t caller)
{
	put_layer(skel, tgid, addr, size, ts, stack, caller, ML_LAYER_LIBC);
}

static void del(struct memleak_bpf *skel, uint32_t tgid, uint64_t addr)
{
	struct ml_slot *s = slots__find(T, tgid, ML_LAYER_LIBC, addr);

	if (s)
		s->addr = ML_SLOT_TOMB;
}

/* Hand a stack to the store as the ring would: native words then Python word pairs. */
static int add_stack(struct stackstore *ss, uint64_t id, unsigned int flags, unsigned int nr, unsigned int nr_py,
		     const uint64_t *words)
{
	struct ml_stack st = {.id = id, .nr = nr, .nr_py = (uint16_t)nr_py, .flags = (uint16_t)flags};

	memcpy(st.ips, words, (nr + 2 * nr_py) * sizeof(*words));
	return stackstore__add(ss, &st, ML_STACK_HDR + 8 * (nr + 2 * nr_py));
}

static void stackstore_checks(void)
{
	struct stackstore *ss;
	struct stackstore_stats st;
	struct ml_stack *out = malloc(sizeof(*out));
	uint64_t w[ML_STACK_WORDS];
	bool all = true;

	if (stackstore__new(&ss)) {
		CHECK(false, "store: created");
		free(out);
		return;
	}
	for (unsigned int i = 0; i < ML_STACK_WORDS; i++)
		w[i] = 0x400000 + i * 0x10;
	CHECK_EQ_INT(add_stack(ss, 42, 0, 3, 1, w), 0, "store: a new stack is added");
	CHECK_EQ_INT(add_stack(ss, 42, 0, 3, 1, w), 1, "store: the same stack sent again is known");
	CHECK(stackstore__get(ss, 42, out) == 0 && out->nr == 3 && out->nr_py == 1 && out->ips[0] == 0x400000 &&
		  out->ips[4] == 0x400040,
	      "store: words read back");
	CHECK_EQ_INT(stackstore__get(ss, 43, out), -ENOENT, "store: an id never sent is not found");
	w[0] = 0x1;
	CHECK_EQ_INT(add_stack(ss, 42, 0, 3, 1, w), 1, "store: other words under a known id");
	stackstore__stats(ss, &st);
	CHECK(st.collisions == 1 && st.stacks == 1, "store: the collision is counted, the first stack kept");
	w[0] = 0x400000;
	/* the deepest stack the wire allows, and records that lie about their counts */
	CHECK_EQ_INT(add_stack(ss, 44, 0, ML_MAX_FRAMES, ML_MAX_PYFRAMES, w), 0, "store: the deepest stack fits");
	CHECK(stackstore__get(ss, 44, out) == 0 && out->nr == ML_MAX_FRAMES && out->nr_py == ML_MAX_PYFRAMES &&
		  out->ips[ML_STACK_WORDS - 1] == w[ML_STACK_WORDS - 1],
	      "store: the deepest stack read back whole");
	out->id = 45;
	out->nr = 10;
	out->nr_py = 0;
	CHECK_EQ_INT(stackstore__add(ss, out, ML_STACK_HDR + 8 * 9), -EINVAL,
		     "store: a record shorter than its counts");
	out->nr = ML_MAX_FRAMES + 1;
	CHECK_EQ_INT(stackstore__add(ss, out, sizeof(*out)), -EINVAL, "store: more frames than the wire has");
	CHECK_EQ_INT(stackstore__add(ss, out, 8), -EINVAL, "store: a record shorter than the header");
	/* many stacks sharing their frames: each one kept, frames interned once */
	for (uint64_t i = 0; i < 100000; i++) {
		uint64_t v[30];

		for (int k = 0; k < 30; k++)
			v[k] = k == 0	? 0x600000 + i % 1000
			       : k == 1 ? 0x700000 + i / 1000
					: 0x500000 + (uint64_t)k * 64;
		if (add_stack(ss, 1000 + i, 0, 30, 0, v))
			all = false;
	}
	CHECK(all, "store: 100000 stacks added");
	for (uint64_t i = 0; i < 100000 && all; i += 997)
		if (stackstore__get(ss, 1000 + i, out) || out->nr != 30 || out->ips[0] != 0x600000 + i % 1000 ||
		    out->ips[1] != 0x700000 + i / 1000 || out->ips[29] != 0x500000 + 29 * 64)
			all = false;
	CHECK(all, "store: every stack reads back as sent");
	stackstore__stats(ss, &st);
	CHECK(st.stacks == 100002 && st.frames == ML_STACK_WORDS + 1000 + 100 + 28, "store: frames interned once");
	CHECK_EQ_INT(st.malformed, 3, "store: malformed records counted");
	free(out);
	stackstore__free(ss);
}

static const struct ml_row *find(const struct ml_snapshot *s, uint64_t caller)
{
	for (size_t i = 0; i < s->nrows; i++)
		if (s->rows[i].key.caller == caller)
			return &s->rows[i];
	return NULL;
}

/* The test's heap walk: 80-byte chunks grew by *ctx since the base, other sizes not known. */
static bool growth_of_80(void *ctx, uint64_t chunk, int64_t *growth)
{
	*growth = *(const int64_t *)ctx;
	return chunk == 80;
}

static bool growth_whole(void *ctx, uint64_t chunk, int64_t *growth)
{
	*growth = *(const int64_t *)ctx;
	return chunk == 0;
}

/*
 * The sampled C heap weighed by chunk size: 64-byte records (80-byte chunks) made since the base walk stand
 * for the size's growth over their number; older records, and sizes with fewer than SIZEWEIGHT_MIN_RECORDS
 * records, weigh as the windows' scale says.
 */
static void size_weight_checks(struct stackstore *ss, uint64_t now)
{
	struct memleak_bpf *skel = load(4096);
	const struct ml_snapshot *s;
	struct sizeweights *sw = NULL;
	struct ledger *l = NULL;
	int64_t grew = 20;
	struct sizeweights_proc proc = {
	    .tgid = 7, .since_ns = now - 2000000000ULL, .until_ns = now, .growth = growth_of_80, .ctx = &grew};

	CHECK_EQ_U64(sizeweights__chunk(1), 32, "chunk: the minimum");
	CHECK_EQ_U64(sizeweights__chunk(24), 32, "chunk: 24 bytes fit 32");
	CHECK_EQ_U64(sizeweights__chunk(25), 48, "chunk: 25 bytes take 48");
	CHECK_EQ_U64(sizeweights__chunk(64), 80, "chunk: 64 bytes take 80");
	CHECK_EQ_U64(sizeweights__chunk(1000), 1008, "chunk: 1000 bytes take 1008");
	if (!skel || sizeweights__new(&sw) ||
	    ledger__new(skel, &(struct ledger_opts){.slots = T, .tgid = 7, .stacks = ss, .sizes = sw}, &l)) {
		CHECK(false, "size weights: a ledger");
		goto out;
	}
	ledger__add_scale(l, ML_LAYER_LIBC, now - 5000000000ULL, 2.0);
	for (uint64_t i = 0; i < 5; i++)
		put(skel, 7, 0x1000 + i * 0x100, 64, now, 5, 0xa0);
	put(skel, 7, 0x9000, 64, now - 3000000000ULL, 5, 0xa0); /* before the base */
	put(skel, 7, 0xa000, 1000, now, 9, 0xb0);
	put(skel, 7, 0xb000, 1000, now, 9, 0xb0);
	put(skel, 8, 0xc000, 64, now, 5, 0xc0); /* another process's */
	CHECK_EQ_INT(sizeweights__weigh(sw, T, &proc, 1), 0, "weigh");
	CHECK(ledger__collect(l, &s) == 0 && s->nrows == 3, "collect weighed records: three rows");
	CHECK(find(s, 0xa0) && find(s, 0xa0)->bytes == 5 * 64 * 4 + 64 * 2 && find(s, 0xa0)->count == 5 * 4 + 2,
	      "80-byte chunks grew by 20 and 5 records live: each weighs 4; the one before the base 2");
	CHECK(find(s, 0xb0) && find(s, 0xb0)->bytes == 2 * 1000 * 2 && find(s, 0xb0)->count == 4,
	      "two records of a size are too few: the windows' scale");
	CHECK(find(s, 0xc0) && find(s, 0xc0)->count == 2, "another process's records: the windows' scale");
	grew = 3;
	CHECK_EQ_INT(sizeweights__weigh(sw, T, &proc, 1), 0, "weigh again");
	CHECK(ledger__collect(l, &s) == 0 && find(s, 0xa0) && find(s, 0xa0)->count == 5 + 2,
	      "a size that grew less than its live records: each stands for itself");
	sizeweights__drop(sw, 7);
	CHECK(ledger__collect(l, &s) == 0 && find(s, 0xa0) && find(s, 0xa0)->count == 6 * 2,
	      "weights dropped: the windows' scale again");
	/* Weighed whole (jemalloc): 5 x 64 + 2 x 1000 = 2320 bytes of records since the base, memory 23200 more. */
	proc.whole = true;
	proc.growth = growth_whole;
	grew = 23200;
	CHECK_EQ_INT(sizeweights__weigh(sw, T, &proc, 1), 0, "weigh whole");
	CHECK(ledger__collect(l, &s) == 0 && find(s, 0xa0) && find(s, 0xa0)->count == 5 * 10 + 2 &&
		  find(s, 0xa0)->bytes == 5 * 64 * 10 + 64 * 2 && find(s, 0xb0) && find(s, 0xb0)->count == 2 * 10,
	      "weighed whole: every record since the base stands for 10, whatever its size; older ones as scaled");
	CHECK(find(s, 0xc0) && find(s, 0xc0)->count == 2, "weighed whole: another process's records as scaled");
	grew = -4096;
	CHECK_EQ_INT(sizeweights__weigh(sw, T, &proc, 1), 0, "weigh whole again");
	CHECK(ledger__collect(l, &s) == 0 && find(s, 0xb0) && find(s, 0xb0)->count == 2,
	      "memory that shrank: each record stands for itself");
	/* A walk read before the newest records: 4 records between the base and it set the weight (20 / 4), and the
	 * five 0xa0 records made after it take that weight without setting it (20 / 9 would weigh the leak down). */
	for (uint64_t i = 0; i < 4; i++)
		put(skel, 7, 0xd000 + i * 0x100, 64, now - 1000000000ULL, 5, 0xd0);
	proc = (struct sizeweights_proc){.tgid = 7,
					 .since_ns = now - 2000000000ULL,
					 .until_ns = now - 500000000ULL,
					 .growth = growth_of_80,
					 .ctx = &grew};
	grew = 20;
	CHECK_EQ_INT(sizeweights__weigh(sw, T, &proc, 1), 0, "weigh by a walk before the newest records");
	CHECK(ledger__collect(l, &s) == 0 && find(s, 0xd0) && find(s, 0xd0)->count == 4 * 5 && find(s, 0xa0) &&
		  find(s, 0xa0)->count == 5 * 5 + 2,
	      "records after the walk take its weight, 5: they do not set it");
out:
	ledger__free(l);
	sizeweights__free(sw);
	memleak_bpf__destroy(skel);
}

/* A process the test does not describe: its frames show as addresses. */
static int no_process(void *ctx, int tgid, struct ml_resolver *out)
{
	return -1;
}

/*
 * The pprof encoding of a collected snapshot, decoded back: one sample a row, its values in the order of the
 * sample types (inuse_space, inuse_objects, growth_space, peak_space), and its layer, verdict and pid labels.
 */
static void pprof_checks(struct ledger *l, const struct ml_snapshot *s)
{
	static const char *const types[] = {"inuse_space", "inuse_objects", "growth_space", "peak_space"};
	struct ml_judgement j[8] = {};
	struct stackview *sv = NULL;
	Perftools__Profiles__Profile *prof = NULL;
	char *buf = NULL;
	size_t len = 0, plen = 0, matched = 0;
	uint8_t *raw = NULL;
	FILE *f = open_memstream(&buf, &len);

	for (size_t i = 0; i < 8; i++)
		j[i].verdict = i == 0 ? ML_V_GROWING : ML_V_STABLE;
	if (!f || stackview__new(l, no_process, NULL, &sv) || s->nrows > 8) {
		CHECK(false, "pprof: set up");
		goto out;
	}
	CHECK_EQ_INT(ml_pprof_write(f, s, j, sv, NULL, NULL, 1000000000ULL, 0), 0, "pprof: written");
	fclose(f);
	f = NULL;
	raw = gunzip(buf, len, &plen);
	prof = raw ? perftools__profiles__profile__unpack(NULL, plen, raw) : NULL;
	CHECK(prof != NULL, "pprof: gzip of a profile.proto that decodes");
	if (!prof)
		goto out;
	CHECK_EQ_INT((int)prof->n_sample_type, 4, "pprof: four sample types");
	for (size_t k = 0; k < 4 && k < prof->n_sample_type; k++)
		CHECK_EQ_STR(prof->string_table[prof->sample_type[k]->type], types[k], "pprof: sample type in order");
	CHECK_EQ_INT((int)prof->n_sample, (int)s->nrows, "pprof: one sample a row");
	CHECK_EQ_U64((uint64_t)prof->duration_nanos, 1000000000ULL, "pprof: the duration it covers");
	for (size_t i = 0; i < prof->n_sample; i++) {
		const Perftools__Profiles__Sample *sm = prof->sample[i];

		for (size_t r = 0; r < s->nrows; r++) {
			const struct ml_row *row = &s->rows[r];
			const char *layer = NULL, *verdict = NULL;
			int64_t pid = -1;

			if (sm->n_value != 4 || sm->value[0] != (int64_t)row->bytes ||
			    sm->value[1] != (int64_t)row->count)
				continue;
			for (size_t k = 0; k < sm->n_label; k++) {
				const char *key = prof->string_table[sm->label[k]->key];

				if (!strcmp(key, "layer"))
					layer = prof->string_table[sm->label[k]->str];
				else if (!strcmp(key, "verdict"))
					verdict = prof->string_table[sm->label[k]->str];
				else if (!strcmp(key, "pid"))
					pid = sm->label[k]->num;
			}
			if (layer && !strcmp(layer, "libc") && verdict &&
			    !strcmp(verdict, ml_verdict_name(r == 0 ? ML_V_GROWING : ML_V_STABLE)) &&
			    pid == row->key.tgid && sm->value[2] == row->growth_bytes &&
			    sm->value[3] == (int64_t)row->bytes)
				matched++;
		}
	}
	CHECK_EQ_INT((int)matched, (int)s->nrows,
		     "pprof: each row's bytes, count, growth and peak, its layer, verdict and pid, in a sample");
out:
	if (f)
		fclose(f);
	perftools__profiles__profile__free_unpacked(prof, NULL);
	free(raw);
	free(buf);
	stackview__free(sv);
}

static uint64_t on_now_ns;
static double on_elapsed;

static void on_collect(void *ctx, uint64_t now_ns, double elapsed_s)
{
	(*(int *)ctx)++;
	on_now_ns = now_ns;
	on_elapsed = elapsed_s;
}

int main(void)
{
	struct memleak_bpf *skel = load(4096);
	struct stackstore *ss;
	const struct ml_snapshot *s;
	const struct ml_row *r;
	struct ledger *l;
	uint64_t now = mono_ns();
	int on_calls = 0;

	if (!skel) {
		printf("not ok - load BPF (needs root)\nunit ledger: 0 passed, 1 failed\n");
		return 1;
	}
	stackstore_checks();
	if (stackstore__new(&ss))
		return SUMMARY("ledger");
	CHECK_EQ_INT(ledger__new(skel, &(struct ledger_opts){.slots = T, .tgid = 7, .stacks = ss}, &l), 0,
		     "ledger created");
	if (!l)
		return SUMMARY("ledger");

	/* stack A: 3 blocks, stack B: 1 block, another caller within stack A's stack id is a separate row */
	put(skel, 7, 0x1000, 100, now - 3000000000ULL, 5, 0xa0);
	put(skel, 7, 0x2000, 200, now - 1000000000ULL, 5, 0xa0);
	put(skel, 7, 0x3000, 300, now - 2000000000ULL, 5, 0xa0);
	put(skel, 7, 0x4000, 4096, now - 500000000ULL, 9, 0xb0);
	put(skel, 7, 0x5000, 7, now, 5, 0xc0);
	CHECK_EQ_INT(ledger__collect(l, &s), 0, "collect 1");
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
	CHECK_EQ_INT(ledger__collect(l, &s), 0, "collect 2");
	r = find(s, 0xa0);
	CHECK(r && r->bytes == 500 && r->count == 2 && r->growth_bytes == -100, "stack A shrank by 100");
	CHECK(r && r->oldest_ts_ns == now - 2000000000ULL, "oldest moves to the next-oldest block");
	r = find(s, 0xb0);
	CHECK(r && r->bytes == 5096 && r->growth_bytes == 1000, "stack B grew by 1000");
	CHECK(find(s, 0xc0) == NULL && s->nrows == 2, "emptied stack disappears");
	CHECK(s->layers[ML_LAYER_LIBC].growth_bytes == 5596 - 4703, "layer growth");
	pprof_checks(l, s); /* growth here differs from bytes: -100 and +1000 */

	/* other processes' entries are keyed apart; a collect tells its moment as it begins (the step clock's read) */
	put(skel, 8, 0x1000, 50, now, 5, 0xa0);
	ledger__on_collect(l, on_collect, &on_calls);
	CHECK(ledger__collect(l, &s) == 0 && s->nrows == 3, "other tgid gets its own row");
	CHECK(on_calls == 1 && on_now_ns == s->now_ns && on_elapsed == s->elapsed_s && on_elapsed > 0,
	      "on_collect: once, at the snapshot's now and elapsed");
	del(skel, 8, 0x1000);
	ledger__free(l);

	/* min-age: young blocks are left out but their stack stays referenced */
	ledger__new(skel, &(struct ledger_opts){.slots = T, .tgid = 7, .stacks = ss, .min_age_ns = 1500000000ULL}, &l);
	CHECK_EQ_INT(ledger__collect(l, &s), 0, "collect with min-age");
	r = find(s, 0xa0);
	CHECK(r && r->bytes == 300 && r->count == 1, "of blocks 1 s and 2 s old only the 2 s one counts");
	CHECK(find(s, 0xb0) == NULL, "stack with only young blocks not shown");
	ledger__free(l);
	memleak_bpf__destroy(skel);

	/*
	 * A walk that stopped early joins the one complete stack that extends it (same process, caller and
	 * Python frames); where two complete stacks extend it, it stays a row of its own.
	 */
	skel = load(4096);
	ledger__new(skel, &(struct ledger_opts){.slots = T, .tgid = 7, .stacks = ss}, &l);
	{
		const uint64_t full1[] = {0x10, 0x11, 0x12, 0x13, 0xf0, 0xf1}, full2[] = {0x10, 0x11, 0x99, 0xf0, 0xf1};
		const uint64_t cut1[] = {0x10, 0x11, 0x12, 0xf0, 0xf1}, cut2[] = {0x10, 0xf0, 0xf1};
		const uint64_t cut3[] = {0x10, 0x11, 0x12, 0xf0, 0xf2}; /* other Python frames */

		add_stack(ss, 200, 0, 4, 1, full1);
		add_stack(ss, 201, 0, 3, 1, full2);
		add_stack(ss, 202, ML_STACK_UW_STOPPED, 3, 1, cut1);
		add_stack(ss, 203, ML_STACK_UW_STOPPED, 1, 1, cut2);
		add_stack(ss, 204, ML_STACK_UW_STOPPED, 3, 1, cut3);
		put(skel, 7, 0x1000, 1000, now, 200, 0xa0);
		put(skel, 7, 0x2000, 2000, now, 201, 0xa0);
		put(skel, 7, 0x3000, 30, now, 202, 0xa0);
		put(skel, 7, 0x4000, 40, now, 203, 0xa0);
		put(skel, 7, 0x5000, 50, now, 204, 0xa0);
		put(skel, 8, 0x3000, 60, now, 202, 0xa0); /* another process: no complete stack there */
		/* caller-only captures: one caller with a single complete stack, one (0xa0) with two */
		put(skel, 7, 0x6000, 70, now, ML_STACK_NONE, 0xb1);
		put(skel, 7, 0x7000, 700, now, 200, 0xb1);
		put(skel, 7, 0x8000, 80, now, ML_STACK_NONE, 0xa0);
		CHECK_EQ_INT(ledger__collect(l, &s), 0, "collect stopped walks");
		CHECK(s->nrows == 7 && s->stopped_merged == 2,
		      "a stopped walk and a caller-only row merged, seven rows left");
		for (size_t i = 0; i < s->nrows; i++) {
			const struct ml_row *x = &s->rows[i];

			if (x->key.stack_id == 200 && x->key.caller == 0xa0)
				CHECK(x->bytes == 1030 && x->count == 2 && x->cut_count == 1 &&
					  x->cut_key.stack_id == 202,
				      "the cut walk's block joins its complete stack, which names it for its history");
			if (x->key.stack_id == 203)
				CHECK(x->bytes == 40, "a prefix two stacks extend stays apart");
			if (x->key.stack_id == 204)
				CHECK(x->bytes == 50, "other Python frames stay apart");
			if (x->key.stack_id == 202)
				CHECK(x->key.tgid == 8 && x->bytes == 60, "another process's cut walk stays apart");
			if (x->key.caller == 0xb1)
				CHECK(x->key.stack_id == 200 && x->bytes == 770 && x->count == 2,
				      "a caller-only capture joins its caller's one complete stack");
			if (x->key.caller == 0xa0 && x->key.stack_id == ML_STACK_NONE)
				CHECK(x->bytes == 80, "a caller-only capture two stacks extend stays apart");
		}
	}
	ledger__free(l);
	memleak_bpf__destroy(skel);

	/*
	 * Tensor sampling's weights: a torch_cpu record made before the first epoch counts once, one made in the
	 * 1-in-2 epoch twice, one made in the 1-in-4 epoch four times; other layers are untouched.
	 */
	skel = load(4096);
	ledger__new(skel, &(struct ledger_opts){.slots = T, .tgid = 7, .stacks = ss}, &l);
	CHECK(ledger__set_weight(l, ML_LAYER_TORCH_CPU, now - 2000000000ULL, 1) == 0 &&
		  ledger__set_weight(l, ML_LAYER_TORCH_CPU, now - 1000000000ULL, 2) == 0,
	      "two weight epochs");
	CHECK(ledger__weight_shift(l, ML_LAYER_TORCH_CPU) == 2 && ledger__weight_shift(l, ML_LAYER_LIBC) == 0,
	      "the weight now");
	put_layer(skel, 7, 0x1000, 100, now - 3000000000ULL, 5, 0xa0, ML_LAYER_TORCH_CPU);
	put_layer(skel, 7, 0x2000, 100, now - 1500000000ULL, 5, 0xa0, ML_LAYER_TORCH_CPU);
	put_layer(skel, 7, 0x3000, 100, now - 1000000000ULL, 5, 0xa0, ML_LAYER_TORCH_CPU);
	put_layer(skel, 7, 0x4000, 100, now, 5, 0xa0, ML_LAYER_TORCH_CPU);
	put(skel, 7, 0x5000, 100, now, 5, 0xa0);
	CHECK(ledger__collect(l, &s) == 0 && s->nrows == 2, "collect weighted records: two rows");
	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *x = &s->rows[i];

		if (x->key.layer == ML_LAYER_TORCH_CPU)
			CHECK(x->bytes == 100 + 200 + 400 + 400 && x->count == 1 + 2 + 4 + 4,
			      "torch_cpu: 1 + 2 + 4 + 4 records' worth (1100 bytes, 11)");
		else
			CHECK(x->bytes == 100 && x->count == 1, "libc unweighted");
	}
	CHECK(s->layers[ML_LAYER_TORCH_CPU].bytes == 1100 && s->layers[ML_LAYER_TORCH_CPU].count == 11,
	      "the layer's total weighted too");
	for (int i = 0; i < LEDGER_EPOCHS - 2; i++)
		ledger__set_weight(l, ML_LAYER_TORCH_CPU, now + (uint64_t)i, 3);
	CHECK_EQ_INT(ledger__set_weight(l, ML_LAYER_TORCH_CPU, now + 100, 4), -ENOSPC, "epochs are bounded");
	CHECK_EQ_INT(ledger__set_weight(l, ML_LAYER_MAX, now, 1), -EINVAL, "a layer out of range refused");
	ledger__free(l);
	memleak_bpf__destroy(skel);

	/*
	 * Scales of two layers side by side (tensor sampling's release ratio, the C heap's windows): each layer's
	 * records weigh its own last epoch; the same epoch measured again takes the new weight; clearing one layer's
	 * scales leaves the other's.
	 */
	skel = load(4096);
	ledger__new(skel, &(struct ledger_opts){.slots = T, .tgid = 7, .stacks = ss}, &l);
	CHECK(ledger__add_scale(l, ML_LAYER_TORCH_CPU, now - 1500000000ULL, 2.0) == 0 &&
		  ledger__add_scale(l, ML_LAYER_TORCH_CPU, now - 1500000000ULL, 3.0) == 0 &&
		  ledger__add_scale(l, ML_LAYER_LIBC, now - 1000000000ULL, 1.5) == 0,
	      "scale epochs in two layers, one measured again");
	CHECK_EQ_INT(ledger__add_scale(l, ML_LAYER_LIBC, now - 2000000000ULL, 2.0), -EINVAL,
		     "an epoch before the layer's last refused");
	put_layer(skel, 7, 0x1000, 100, now - 2000000000ULL, 5, 0xa0, ML_LAYER_TORCH_CPU);
	put_layer(skel, 7, 0x2000, 100, now, 5, 0xa0, ML_LAYER_TORCH_CPU);
	put(skel, 7, 0x3000, 100, now, 5, 0xa0);
	ledger__clear_scale(l, ML_LAYER_LIBC);
	CHECK(ledger__collect(l, &s) == 0 && s->nrows == 2, "collect scaled records: two rows");
	CHECK_EQ_U64(s->layers[ML_LAYER_TORCH_CPU].bytes, 100 + 300, "torch_cpu: once before its epoch, 3 after");
	CHECK_EQ_U64(s->layers[ML_LAYER_TORCH_CPU].count, 1 + 3, "torch_cpu's count likewise");
	CHECK_EQ_U64(s->layers[ML_LAYER_LIBC].bytes, 100, "libc's scales cleared: once");
	ledger__free(l);
	memleak_bpf__destroy(skel);

	/* many stacks: every one gets its row, nothing is folded or lost */
	skel = load(4096);
	ledger__new(skel, &(struct ledger_opts){.slots = T, .tgid = 7, .stacks = ss}, &l);
	for (int i = 0; i < 3000; i++)
		put(skel, 7, 0x10000 + (uint64_t)i * 16, 10 + (uint64_t)(i % 7), now, 1 + (uint64_t)i,
		    0x100 + (uint64_t)i);
	CHECK_EQ_INT(ledger__collect(l, &s), 0, "collect 3000 stacks");
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
	CHECK_EQ_INT(ledger__collect(l, &s), 0, "collect after a half-written slot");
	CHECK(find(s, 0xdead0) == NULL && s->nrows == 3000, "half-written slot skipped");
	ledger__free(l);
	memleak_bpf__destroy(skel);
	size_weight_checks(ss, now);
	stackstore__free(ss);
	return SUMMARY("ledger");
}
