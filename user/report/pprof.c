/* pprof output: the final report as a gzipped profile.proto, for go tool pprof, Pyroscope and Parca. */
#include "report/pprof.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include "attach/allocators.h"
#include "collect/ledger.h"
#include "judge/verdict.h"
#include "lib/grow.h"
#include "lib/hash.h"
#include "profile.pb-c.h"
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

static int64_t str(struct builder *b, const char *s)
{
	return intern(&b->strings, s ? s : "", 0, NULL);
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

int ml_pprof_write(FILE *out, const struct ml_snapshot *s, const struct ml_judgement *j, struct stackview *sv,
		   uint64_t duration_ns, int tgid)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[3], *vtp[3];
	Perftools__Profiles__Sample **samples = calloc(s->nrows ? s->nrows : 1, sizeof(*samples));
	struct builder b = {};
	const struct ml_frame *const *frames;
	struct timespec now;
	uint8_t *buf = NULL;
	size_t nsamples = 0, len;
	int err = -ENOMEM;
	static const char *const types[3][2] = {
	    {"inuse_space", "bytes"}, {"inuse_objects", "count"}, {"growth_space", "bytes"}};

	if (!samples)
		return -ENOMEM;
	str(&b, ""); /* string 0 is the empty string */
	for (int i = 0; i < 3; i++) {
		perftools__profiles__value_type__init(&vt[i]);
		vt[i].type = str(&b, types[i][0]);
		vt[i].unit = str(&b, types[i][1]);
		vtp[i] = &vt[i];
	}
	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *row = &s->rows[i];
		struct ml_resolver res;
		size_t n, nlab = 3;
		Perftools__Profiles__Sample *sm;
		Perftools__Profiles__Label *lab;

		if (tgid && (int)row->key.tgid != tgid)
			continue;
		n = stackview__frames(sv, row, &frames, NULL);
		sm = calloc(1, sizeof(*sm));
		lab = calloc(6, sizeof(*lab));

		if (!sm || !lab)
			goto out;
		perftools__profiles__sample__init(sm);
		sm->location_id = calloc(n ? n : 1, sizeof(uint64_t));
		sm->value = calloc(3, sizeof(int64_t));
		sm->label = calloc(6, sizeof(*sm->label));
		if (!sm->location_id || !sm->value || !sm->label)
			goto out;
		for (size_t k = 0; k < n; k++) {
			int64_t id = location(&b, frames[k]);

			if (id < 0)
				goto out;
			sm->location_id[sm->n_location_id++] = (uint64_t)id;
		}
		sm->n_value = 3;
		sm->value[0] = (int64_t)row->bytes;
		sm->value[1] = (int64_t)row->count;
		sm->value[2] = row->growth_bytes;
		for (int k = 0; k < 6; k++) {
			perftools__profiles__label__init(&lab[k]);
			sm->label[k] = &lab[k];
		}
		lab[0].key = str(&b, "layer");
		lab[0].str = str(&b, ml_layer_name(row->key.layer));
		lab[1].key = str(&b, "verdict");
		lab[1].str = str(&b, ml_verdict_name(j[i].verdict));
		lab[2].key = str(&b, "pid");
		lab[2].num = row->key.tgid;
		if (!stackview__proc(sv, row->key.tgid, &res) && res.labels) {
			const char *kv[3][2] = {
			    {"rank", res.labels->rank}, {"role", res.role}, {"comm", res.labels->comm}};

			for (int k = 0; k < 3; k++)
				if (kv[k][1]) {
					lab[nlab].key = str(&b, kv[k][0]);
					lab[nlab++].str = str(&b, kv[k][1]);
				}
		}
		sm->n_label = nlab;
		samples[nsamples++] = sm;
	}
	prof.n_sample_type = 3;
	prof.sample_type = vtp;
	prof.n_sample = nsamples;
	prof.sample = samples;
	prof.n_function = b.nfn;
	prof.function = b.fn;
	prof.n_location = b.nloc;
	prof.location = b.loc;
	prof.n_string_table = b.strings.n;
	prof.string_table = b.strings.keys;
	clock_gettime(CLOCK_REALTIME, &now);
	prof.time_nanos = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - (int64_t)duration_ns;
	prof.duration_nanos = (int64_t)duration_ns;
	prof.default_sample_type = vt[0].type;
	len = perftools__profiles__profile__get_packed_size(&prof);
	buf = malloc(len ? len : 1);
	if (!buf)
		goto out;
	perftools__profiles__profile__pack(&prof, buf);
	err = gzip_write(out, buf, len);
out:
	free(buf);
	for (size_t i = 0; i < nsamples; i++) {
		free(samples[i]->location_id);
		free(samples[i]->value);
		if (samples[i]->label)
			free(samples[i]->label[0]);
		free(samples[i]->label);
		free(samples[i]);
	}
	free(samples);
	for (size_t i = 0; i < b.nfn; i++)
		free(b.fn[i]);
	for (size_t i = 0; i < b.nloc; i++) {
		free(b.loc[i]->line[0]);
		free(b.loc[i]->line);
		free(b.loc[i]);
	}
	free(b.fn);
	free(b.loc);
	intern_free(&b.strings);
	intern_free(&b.funcs);
	intern_free(&b.locs);
	return err;
}
