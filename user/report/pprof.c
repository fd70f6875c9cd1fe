/* pprof output: the final report as a gzipped profile.proto, for go tool pprof, Pyroscope and Parca. */
#include "report/pprof.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include "attach/allocators.h"
#include "collect/ledger.h"
#include "collect/steps.h"
#include "judge/findings.h"
#include "judge/verdict.h"
#include "lib/grow.h"
#include "lib/hash.h"
#include "profile.pb-c.h"
#include "report/emit.h"
#include "report/format.h"
#include "report/stackview.h"

/* An interning table: strings, functions (name+file) or locations (address) to 0-based ids, hashed. */
struct intern {
	char **keys;
	uint64_t *nums;
	size_t n, cap;
	uint32_t *slots; /* id + 1, 0 = empty; power-of-two size, at most half full */
	size_t nslots;
};

static uint64_t ihash(const char *key, uint64_t num)
{
	return ml_hash_str(key, num);
}

static bool same(const struct intern *t, size_t i, const char *key, uint64_t num)
{
	return t->nums[i] == num && ((!key && !t->keys[i]) || (key && t->keys[i] && !strcmp(t->keys[i], key)));
}

static int rehash(struct intern *t, size_t nslots)
{
	uint32_t *sl = calloc(nslots, sizeof(*sl));

	if (!sl)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		size_t h = ihash(t->keys[i], t->nums[i]) & (nslots - 1);

		while (sl[h])
			h = (h + 1) & (nslots - 1);
		sl[h] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = sl;
	t->nslots = nslots;
	return 0;
}

static int64_t intern(struct intern *t, const char *key, uint64_t num, bool *added)
{
	size_t h;

	if ((t->n + 1) * 2 > t->nslots && rehash(t, t->nslots ? t->nslots * 2 : 256))
		return -ENOMEM;
	h = ihash(key, num) & (t->nslots - 1);
	while (t->slots[h]) {
		if (same(t, t->slots[h] - 1, key, num))
			return (int64_t)t->slots[h] - 1;
		h = (h + 1) & (t->nslots - 1);
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		char **k = realloc(t->keys, cap * sizeof(*k));
		uint64_t *nn;

		if (!k)
			return -ENOMEM;
		t->keys = k;
		nn = realloc(t->nums, cap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		t->nums = nn;
		t->cap = cap;
	}
	t->keys[t->n] = key ? strdup(key) : NULL;
	if (key && !t->keys[t->n])
		return -ENOMEM;
	t->nums[t->n] = num;
	t->slots[h] = (uint32_t)t->n + 1;
	if (added)
		*added = true;
	return (int64_t)t->n++;
}

static void intern_free(struct intern *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->nums);
	free(t->slots);
}

struct builder {
	struct intern strings, funcs, locs;
	Perftools__Profiles__Function **fn;
	Perftools__Profiles__Location **loc;
	size_t nfn, nloc, capfn, caploc;
};

/* A string's index in the table; profile.proto's strings are UTF-8, and a name from the target may not be. */
static int64_t str(struct builder *b, const char *s)
{
	char *fixed;
	int64_t id;

	if (!s || ml_utf8_valid(s))
		return intern(&b->strings, s ? s : "", 0, NULL);
	fixed = ml_utf8_dup(s);
	if (!fixed)
		return -ENOMEM;
	id = intern(&b->strings, fixed, 0, NULL);
	free(fixed);
	return id;
}

/*
 * The location id of a frame, creating its function and location on first sight. Native frames are known
 * by address; a Python frame by its decoded frame (one per code object, function and instruction), whose
 * address lies in this process: bit 63 keeps it apart from the target's code addresses.
 */
static int64_t location(struct builder *b, const struct ml_frame *fr)
{
	bool added = false, py = fr->kind == ML_FRAME_PYTHON;
	uint64_t key = py ? (uint64_t)(uintptr_t)fr | (1ULL << 63) : fr->addr;
	int64_t li = intern(&b->locs, NULL, key, &added), fi;
	char name[32];

	if (li < 0 || !added)
		return li < 0 ? li : li + 1;
	snprintf(name, sizeof(name), py ? "[python]" : "0x%llx", (unsigned long long)fr->addr);
	{
		const char *fname = fr->func ? fr->func : name, *file = fr->file ? fr->file : "";
		char *key = malloc(strlen(fname) + strlen(file) + 2);
		bool fadded = false;

		if (!key)
			return -ENOMEM;
		sprintf(key, "%s\n%s", fname, file);
		fi = intern(&b->funcs, key, 0, &fadded);
		free(key);
		if (fi < 0)
			return fi;
		if (fadded) {
			Perftools__Profiles__Function *f;

			if (ml_grow(&b->fn, &b->capfn, b->nfn + 1, sizeof(*b->fn)) || !(f = calloc(1, sizeof(*f))))
				return -ENOMEM;
			perftools__profiles__function__init(f);
			f->id = (uint64_t)fi + 1;
			f->name = f->system_name = str(b, fname);
			f->filename = str(b, file);
			b->fn[b->nfn++] = f;
		}
	}
	{
		Perftools__Profiles__Location *l;
		Perftools__Profiles__Line *line;

		if (ml_grow(&b->loc, &b->caploc, b->nloc + 1, sizeof(*b->loc)))
			return -ENOMEM;
		l = calloc(1, sizeof(*l));
		line = calloc(1, sizeof(*line));
		if (!l || !line) {
			free(l);
			free(line);
			return -ENOMEM;
		}
		perftools__profiles__location__init(l);
		perftools__profiles__line__init(line);
		line->function_id = (uint64_t)fi + 1;
		line->line = fr->line > 0 ? fr->line : 0;
		l->id = (uint64_t)li + 1;
		l->address = py ? 0 : fr->addr;
		l->n_line = 1;
		l->line = malloc(sizeof(*l->line));
		if (!l->line)
			return -ENOMEM;
		l->line[0] = line;
		b->loc[b->nloc++] = l;
	}
	return li + 1;
}

static int gzip_write(FILE *out, const uint8_t *buf, size_t len)
{
	z_stream z = {};
	uint8_t chunk[65536];
	int zr;

	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (uint8_t *)buf;
	z.avail_in = (uInt)len;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = deflate(&z, Z_FINISH);
		if (fwrite(chunk, 1, sizeof(chunk) - z.avail_out, out) != sizeof(chunk) - z.avail_out) {
			deflateEnd(&z);
			return -EIO;
		}
	} while (zr == Z_OK);
	deflateEnd(&z);
	return zr == Z_STREAM_END ? 0 : -EIO;
}

/* Labels a sample carries at most: layer, verdict, pid, the fleet's rank, role and comm, and its rates and steps. */
#define SAMPLE_LABELS 9

/* NULL-safe; also frees a sample that was never filled in. */
static void sample_free(Perftools__Profiles__Sample *sm)
{
	if (!sm)
		return;
	free(sm->location_id);
	free(sm->value);
	if (sm->label)
		free(sm->label[0]); /* the labels' one array */
	free(sm->label);
	free(sm);
}

#define SAMPLE_VALUES 4 /* inuse_space, inuse_objects, growth_space, peak_space */

/* An empty sample with room for n locations, every value and every label; NULL when out of memory. */
static Perftools__Profiles__Sample *sample_new(size_t n)
{
	Perftools__Profiles__Sample *sm = calloc(1, sizeof(*sm));
	Perftools__Profiles__Label *lab = calloc(SAMPLE_LABELS, sizeof(*lab));

	if (!sm || !lab)
		goto fail;
	perftools__profiles__sample__init(sm);
	sm->label = calloc(SAMPLE_LABELS, sizeof(*sm->label));
	if (!sm->label)
		goto fail;
	for (int k = 0; k < SAMPLE_LABELS; k++) {
		perftools__profiles__label__init(&lab[k]);
		sm->label[k] = &lab[k];
	}
	lab = NULL; /* the sample owns it now */
	sm->location_id = calloc(n ? n : 1, sizeof(uint64_t));
	sm->value = calloc(SAMPLE_VALUES, sizeof(int64_t));
	if (!sm->location_id || !sm->value)
		goto fail;
	return sm;
fail:
	free(lab);
	sample_free(sm);
	return NULL;
}

/* A numeric label, in unit when not NULL. */
static void num_label(struct builder *b, Perftools__Profiles__Label *lab, const char *key, int64_t num,
		      const char *unit)
{
	lab->key = str(b, key);
	lab->num = num;
	if (unit)
		lab->num_unit = str(b, unit);
}

/*
 * A sample's labels: its layer, verdict and pid, the process's fleet labels where it has them, and what
 * `memleak-ai diff` compares: the row's growth per second, and per step with its process's steps when it steps.
 */
static void sample_labels(struct builder *b, struct stackview *sv, const struct steps *st,
			  Perftools__Profiles__Sample *sm, const struct ml_row *row, const struct ml_judgement *j)
{
	Perftools__Profiles__Label *lab = sm->label[0];
	const struct step_count *c = steps__of(st, (int)row->key.tgid);
	struct ml_resolver res;
	size_t nlab = 3;

	lab[0].key = str(b, "layer");
	lab[0].str = str(b, ml_layer_name(row->key.layer));
	lab[1].key = str(b, "verdict");
	lab[1].str = str(b, ml_verdict_name(j->verdict));
	num_label(b, &lab[2], "pid", row->key.tgid, NULL);
	if (!stackview__proc(sv, row->key.tgid, &res) && res.labels) {
		const char *kv[3][2] = {{"rank", res.labels->rank}, {"role", res.role}, {"comm", res.labels->comm}};

		for (int k = 0; k < 3; k++)
			if (kv[k][1]) {
				lab[nlab].key = str(b, kv[k][0]);
				lab[nlab++].str = str(b, kv[k][1]);
			}
	}
	num_label(b, &lab[nlab++], "bytes_per_s", llround(j->growth_bytes_per_s), "bytes");
	if (j->steps)
		num_label(b, &lab[nlab++], "bytes_per_step", llround(j->bytes_per_step), "bytes");
	if (c)
		num_label(b, &lab[nlab++], "steps", (int64_t)c->count, NULL);
	sm->n_label = nlab;
}

/* A row as a sample: its frames' locations, its outstanding bytes, count, growth and peak, and its labels. */
static int row_sample(struct builder *b, struct stackview *sv, const struct steps *st, const struct findings *f,
		      const struct ml_row *row, const struct ml_judgement *j, Perftools__Profiles__Sample **out)
{
	struct ml_high peak = {.bytes = row->bytes};
	uint64_t freed;
	const struct ml_frame *const *frames;
	size_t n = stackview__frames(sv, row, &frames, NULL);
	Perftools__Profiles__Sample *sm = sample_new(n);

	if (!sm)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		int64_t id = location(b, frames[k]);

		if (id < 0) {
			sample_free(sm);
			return (int)id;
		}
		sm->location_id[sm->n_location_id++] = (uint64_t)id;
	}
	if (!findings__row(f, &row->key, &peak, &freed) || peak.bytes < row->bytes)
		peak.bytes = row->bytes;
	sm->n_value = SAMPLE_VALUES;
	sm->value[0] = (int64_t)row->bytes;
	sm->value[1] = (int64_t)row->count;
	sm->value[2] = row->growth_bytes;
	sm->value[3] = (int64_t)peak.bytes;
	sample_labels(b, sv, st, sm, row, j);
	*out = sm;
	return 0;
}

static void builder_free(struct builder *b)
{
	for (size_t i = 0; i < b->nfn; i++)
		free(b->fn[i]);
	for (size_t i = 0; i < b->nloc; i++) {
		free(b->loc[i]->line[0]);
		free(b->loc[i]->line);
		free(b->loc[i]);
	}
	free(b->fn);
	free(b->loc);
	intern_free(&b->strings);
	intern_free(&b->funcs);
	intern_free(&b->locs);
}

/* The profile of the samples, packed and gzipped to out; it ends now and covers duration_ns. */
static int pack(FILE *out, struct builder *b, Perftools__Profiles__ValueType **vtp, Perftools__Profiles__Sample **sm,
		size_t nsamples, uint64_t duration_ns)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	struct timespec now;
	uint8_t *buf;
	size_t len;
	int err;

	prof.n_sample_type = SAMPLE_VALUES;
	prof.sample_type = vtp;
	prof.n_sample = nsamples;
	prof.sample = sm;
	prof.n_function = b->nfn;
	prof.function = b->fn;
	prof.n_location = b->nloc;
	prof.location = b->loc;
	prof.n_string_table = b->strings.n;
	prof.string_table = b->strings.keys;
	clock_gettime(CLOCK_REALTIME, &now);
	prof.time_nanos = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - (int64_t)duration_ns;
	prof.duration_nanos = (int64_t)duration_ns;
	prof.default_sample_type = vtp[0]->type;
	len = perftools__profiles__profile__get_packed_size(&prof);
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	perftools__profiles__profile__pack(&prof, buf);
	err = gzip_write(out, buf, len);
	free(buf);
	return err;
}

int ml_pprof_write(FILE *out, const struct ml_snapshot *s, const struct ml_judgement *j, struct stackview *sv,
		   const struct steps *st, const struct findings *f, uint64_t duration_ns, int tgid)
{
	Perftools__Profiles__ValueType vt[SAMPLE_VALUES], *vtp[SAMPLE_VALUES];
	Perftools__Profiles__Sample **samples = calloc(s->nrows ? s->nrows : 1, sizeof(*samples));
	struct builder b = {};
	size_t nsamples = 0;
	int err = 0;
	static const char *const types[SAMPLE_VALUES][2] = {
	    {"inuse_space", "bytes"}, {"inuse_objects", "count"}, {"growth_space", "bytes"}, {"peak_space", "bytes"}};

	if (!samples)
		return -ENOMEM;
	str(&b, ""); /* string 0 is the empty string */
	for (int i = 0; i < SAMPLE_VALUES; i++) {
		perftools__profiles__value_type__init(&vt[i]);
		vt[i].type = str(&b, types[i][0]);
		vt[i].unit = str(&b, types[i][1]);
		vtp[i] = &vt[i];
	}
	for (size_t i = 0; i < s->nrows && !err; i++) {
		if (tgid && (int)s->rows[i].key.tgid != tgid)
			continue;
		err = row_sample(&b, sv, st, f, &s->rows[i], &j[i], &samples[nsamples]);
		if (!err)
			nsamples++;
	}
	if (!err)
		err = pack(out, &b, vtp, samples, nsamples, duration_ns);
	for (size_t i = 0; i < nsamples; i++)
		sample_free(samples[i]);
	free(samples);
	builder_free(&b);
	return err;
}

/* The final report as a profile.proto, gzipped; the others write nothing in this format. */
int ml_emit_pprof(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		  uint64_t seq, bool final)
{
	return final ? ml_pprof_write(r->out, s, jv, r->sv, r->steps, r->findings, r->duration_ns, 0) : 0;
}
