/*
 * Unit tests of the pprof encoding (report/pprof.c): a small synthetic snapshot written, gunzipped and decoded
 * with protobuf-c, then its sample types, samples, labels, locations, functions, lines and string table checked
 * exactly. The stacks resolve through a ledger, which needs the BPF table: run as root, as test_ledger.c is.
 */
#include <stdlib.h>
#include <time.h>
#include <zlib.h>
#include "check.h"
#include "collect/ledger.h"
#include "collect/slots.h"
#include "collect/stackstore.h"
#include "gunzip.h"
#include "judge/findings.h"
#include "judge/verdict.h"
#include "profile.pb-c.h"
#include "report/pprof.h"
#include "report/stackview.h"
#include "memleak.skel.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;

#define DURATION_NS 3000000000ULL

/* Process 7 has fleet labels; any other is not known (its frames show as addresses, without labels). */
static int lookup(void *ctx, int tgid, struct ml_resolver *out)
{
	static struct ml_labels labels = {.rank = "3", .comm = "train"};

	if (tgid != 7)
		return -1;
	out->labels = &labels;
	out->role = "main";
	return 0;
}

/* The snapshot's profile (of process tgid only, unless 0), decoded; NULL when it cannot be written or read. */
static Profile *encode(const struct ml_snapshot *s, const struct ml_judgement *j, struct stackview *sv,
		       const struct findings *f, int tgid)
{
	Profile *prof = NULL;
	char *buf = NULL;
	size_t len = 0, plen = 0;
	uint8_t *raw;
	FILE *out = open_memstream(&buf, &len);

	if (!out)
		return NULL;
	CHECK_EQ_INT(ml_pprof_write(out, s, j, sv, NULL, f, DURATION_NS, tgid), 0,
		     tgid ? "one process: written" : "written");
	fclose(out);
	raw = gunzip(buf, len, &plen);
	if (raw)
		prof = perftools__profiles__profile__unpack(NULL, plen, raw);
	CHECK(prof != NULL, tgid ? "one process: a gzipped profile.proto" : "a gzipped profile.proto");
	free(raw);
	free(buf);
	return prof;
}

static const char *string(const Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : NULL;
}

static bool is(const char *a, const char *b)
{
	return a && !strcmp(a, b);
}

/* A sample's string label key, or its number as a string ("#7") for a numeric one; NULL when it has none. */
static const char *label(const Profile *p, const Sample *sm, const char *key)
{
	static char num[32];

	for (size_t k = 0; k < sm->n_label; k++) {
		const char *kk = string(p, sm->label[k]->key);

		if (!kk || strcmp(kk, key))
			continue;
		if (!sm->label[k]->str) {
			snprintf(num, sizeof(num), "#%lld", (long long)sm->label[k]->num);
			return num;
		}
		return string(p, sm->label[k]->str);
	}
	return NULL;
}

/* The value types in order, with their units; which one is the default. */
static void sample_types(const Profile *p)
{
	static const char *const types[][2] = {
	    {"inuse_space", "bytes"}, {"inuse_objects", "count"}, {"growth_space", "bytes"}, {"peak_space", "bytes"}};
	struct timespec now;
	int64_t ago;
	static const char *const names[] = {
	    "sample type 0: inuse_space in bytes", "sample type 1: inuse_objects in count",
	    "sample type 2: growth_space in bytes", "sample type 3: peak_space in bytes"};

	CHECK_EQ_U64(p->n_sample_type, 4, "four sample types");
	for (size_t k = 0; k < 4 && k < p->n_sample_type; k++)
		CHECK(is(string(p, p->sample_type[k]->type), types[k][0]) &&
			  is(string(p, p->sample_type[k]->unit), types[k][1]),
		      names[k]);
	CHECK_EQ_STR(string(p, p->default_sample_type), "inuse_space", "the default type: inuse_space");
	CHECK_EQ_INT(p->duration_nanos, (int64_t)DURATION_NS, "the duration it covers");
	clock_gettime(CLOCK_REALTIME, &now);
	ago = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - p->time_nanos - (int64_t)DURATION_NS;
	CHECK(ago >= 0 && ago < 60000000000LL, "it began the duration before it was written");
}

/* Each string once, in the order first used: types and units, then each sample's frames and labels. */
static void string_table(const Profile *p)
{
	static const char *const want[] = {
	    "",
	    "inuse_space",
	    "bytes",
	    "inuse_objects",
	    "count",
	    "growth_space",
	    "peak_space", /* the types */
	    "0x500",
	    "0x1000",
	    "0x2000",
	    "layer",
	    "libc",
	    "verdict",
	    "growing",
	    "pid", /* row 0 */
	    "rank",
	    "3",
	    "role",
	    "main",
	    "comm",
	    "train", /* its process */
	    "bytes_per_s",
	    "bytes_per_step", /* its rates */
	    "0x3000",
	    "torch_cpu",
	    "stable", /* row 1 */
	    "0x600",
	    "new", /* row 2 */
	};
	size_t n = sizeof(want) / sizeof(want[0]), same = 0;

	CHECK_EQ_U64(p->n_string_table, n, "the string table: 28 strings");
	for (size_t i = 0; i < n && i < p->n_string_table; i++)
		same += !strcmp(p->string_table[i], want[i]);
	CHECK_EQ_U64(same, n, "the string table: each string in its place, once");
}

/* Five frames, five locations and functions by first use; a location's one line names its function. */
static void locations(const Profile *p)
{
	static const uint64_t addr[] = {0x500, 0x1000, 0x2000, 0x3000, 0x600};
	static const char *const name[] = {"0x500", "0x1000", "0x2000", "0x3000", "0x600"};
	size_t ok = 0;

	CHECK_EQ_U64(p->n_location, 5, "five locations: frames shared by samples are one");
	CHECK_EQ_U64(p->n_function, 5, "five functions");
	for (size_t i = 0; i < 5 && i < p->n_location && i < p->n_function; i++) {
		const Perftools__Profiles__Location *l = p->location[i];
		const Perftools__Profiles__Function *fn = p->function[i];

		ok += l->id == i + 1 && l->address == addr[i] && l->n_line == 1 && l->line[0]->function_id == i + 1 &&
		      l->line[0]->line == 0 && fn->id == i + 1 && is(string(p, fn->name), name[i]) &&
		      fn->system_name == fn->name && is(string(p, fn->filename), "");
	}
	CHECK_EQ_U64(ok, 5, "each location: id, address, one line of its function, named by its address");
}

/* A sample's locations and values as expected. */
static bool sample_is(const Sample *sm, const uint64_t loc[3], const int64_t val[4])
{
	if (sm->n_location_id != 3 || sm->n_value != 4)
		return false;
	for (size_t k = 0; k < 3; k++)
		if (sm->location_id[k] != loc[k])
			return false;
	for (size_t k = 0; k < 4; k++)
		if (sm->value[k] != val[k])
			return false;
	return true;
}

static void samples(const Profile *p)
{
	static const uint64_t loc[3][3] = {{1, 2, 3}, {1, 2, 4}, {5, 2, 3}};
	static const int64_t val[3][4] = {{4096, 4, 1024, 8192}, {100, 1, -50, 100}, {64, 2, 0, 64}};
	const Sample *const *sm = (const Sample *const *)p->sample;

	CHECK_EQ_U64(p->n_sample, 3, "one sample a row");
	if (p->n_sample != 3)
		return;
	CHECK(sample_is(sm[0], loc[0], val[0]), "row 0: caller first, its bytes, count, growth and the kept peak");
	CHECK(sample_is(sm[1], loc[1], val[1]), "row 1: a negative growth; its peak its bytes, above the kept one");
	CHECK(sample_is(sm[2], loc[2], val[2]), "row 2: never kept, its peak its bytes");
	CHECK(sm[0]->n_label == 8 && is(label(p, sm[0], "layer"), "libc") &&
		  is(label(p, sm[0], "verdict"), "growing") && is(label(p, sm[0], "pid"), "#7"),
	      "row 0: layer, verdict and pid labels");
	CHECK(is(label(p, sm[0], "rank"), "3") && is(label(p, sm[0], "role"), "main") &&
		  is(label(p, sm[0], "comm"), "train"),
	      "row 0: its process's rank, role and comm");
	CHECK(is(label(p, sm[0], "bytes_per_s"), "#100") && is(label(p, sm[0], "bytes_per_step"), "#512") &&
		  !label(p, sm[0], "steps"),
	      "row 0: its growth per second and per step as numbers; no step count without a step clock");
	CHECK(is(label(p, sm[1], "bytes_per_s"), "#-3") && !label(p, sm[1], "bytes_per_step"),
	      "row 1: a negative rate, rounded; no per-step rate when its process has none");
	CHECK(sm[1]->n_label == 7 && is(label(p, sm[1], "layer"), "torch_cpu") &&
		  is(label(p, sm[1], "verdict"), "stable"),
	      "row 1: its own layer and verdict");
	CHECK(sm[2]->n_label == 4 && is(label(p, sm[2], "verdict"), "new") && is(label(p, sm[2], "pid"), "#8") &&
		  !label(p, sm[2], "rank"),
	      "row 2: a process not known has no fleet labels");
}

/* Process 7's profile alone: its two samples, and nothing of process 8's frames. */
static void one_process(const Profile *p)
{
	bool other = false;

	CHECK_EQ_U64(p->n_sample, 2, "one process: its two rows' samples");
	CHECK_EQ_U64(p->n_location, 4, "one process: its four frames' locations");
	for (size_t i = 0; i < p->n_string_table; i++)
		other |= !strcmp(p->string_table[i], "0x600") || !strcmp(p->string_table[i], "new");
	CHECK(!other, "one process: no string of the other's");
}

/* The table the ledger reads, as test_ledger.c makes it; NULL without root. */
static struct memleak_bpf *load(struct slots **out)
{
	struct memleak_bpf *skel = memleak_bpf__open();

	if (skel && !memleak_bpf__load(skel) && !slots__new(skel, ledger_table_slots(4096), out))
		return skel;
	memleak_bpf__destroy(skel);
	return NULL;
}

static void add_stack(struct stackstore *ss, uint64_t id, uint64_t a, uint64_t b)
{
	struct ml_stack st = {.id = id, .nr = 2, .ips = {a, b}};

	if (stackstore__add(ss, &st, ML_STACK_HDR + 16) < 0)
		CHECK(false, "a synthetic stack stored");
}

static struct ml_row row(uint32_t tgid, unsigned int layer, uint64_t stack, uint64_t caller, uint64_t bytes,
			 uint64_t count, int64_t growth)
{
	return (struct ml_row){.key = {.tgid = tgid, .layer = (uint8_t)layer, .stack_id = stack, .caller = caller},
			       .bytes = bytes,
			       .count = count,
			       .growth_bytes = growth};
}

/* The run's findings: rows 0 and 1 kept once, row 0 at its peak of 8,192 bytes, row 1 under its bytes now. */
static int findings(const struct ml_row *now, const struct ml_judgement *j, struct findings **out)
{
	struct ml_row rows[2] = {now[0], now[1]};
	struct ml_snapshot s = {.rows = rows, .nrows = 2};
	size_t order[2] = {0, 1};

	rows[0].bytes = 8192, rows[1].bytes = 50;
	if (findings__new(out))
		return -1;
	return findings__keep(*out, &s, j, order, 1);
}

int main(void)
{
	struct ml_row rows[3] = {row(7, ML_LAYER_LIBC, 1, 0x500, 4096, 4, 1024),
				 row(7, ML_LAYER_TORCH_CPU, 2, 0x500, 100, 1, -50),
				 row(8, ML_LAYER_LIBC, 1, 0x600, 64, 2, 0)};
	struct ml_judgement j[3] = {
	    {.verdict = ML_V_GROWING, .growth_bytes_per_s = 100.2, .steps = 10, .bytes_per_step = 512},
	    {.verdict = ML_V_STABLE, .growth_bytes_per_s = -2.5},
	    {.verdict = ML_V_NEW}};
	struct ml_snapshot s = {.rows = rows, .nrows = 3};
	struct slots *t = NULL;
	struct memleak_bpf *skel = load(&t);
	struct stackstore *ss = NULL;
	struct ledger *l = NULL;
	struct stackview *sv = NULL;
	struct findings *f = NULL;
	Profile *p;

	if (!skel) {
		printf("not ok - load BPF (needs root)\nunit pprof: 0 passed, 1 failed\n");
		return 1;
	}
	if (stackstore__new(&ss) || ledger__new(skel, &(struct ledger_opts){.slots = t, .stacks = ss}, &l) ||
	    stackview__new(l, lookup, NULL, &sv) || findings(rows, j, &f)) {
		CHECK(false, "set up: stacks, ledger, stack view, findings");
		goto out;
	}
	add_stack(ss, 1, 0x1000, 0x2000);
	add_stack(ss, 2, 0x1000, 0x3000);
	if ((p = encode(&s, j, sv, f, 0))) {
		sample_types(p);
		string_table(p);
		locations(p);
		samples(p);
		perftools__profiles__profile__free_unpacked(p, NULL);
	}
	if ((p = encode(&s, j, sv, f, 7))) {
		one_process(p);
		perftools__profiles__profile__free_unpacked(p, NULL);
	}
out:
	findings__free(f);
	stackview__free(sv);
	ledger__free(l);
	stackstore__free(ss);
	slots__free(t);
	memleak_bpf__destroy(skel);
	return SUMMARY("pprof");
}
