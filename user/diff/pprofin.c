/* The pprof reader of `memleak-ai diff`: a profile.proto, gzipped or not, checked before it is trusted. */
#define _GNU_SOURCE
#include "diff/pprofin.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "lib/grow.h"
#include "profile.pb-c.h"

/* What a profile may take unpacked: a run's profile is megabytes; this stops a bomb, not a real one. */
#define PPROF_MAX ((size_t)1 << 30)

typedef Perftools__Profiles__Profile Profile;

static int slurp(FILE *f, const uint8_t *pre, size_t npre, uint8_t **buf, size_t *len, char **why)
{
	size_t cap = 0, n;

	*len = 0;
	if (npre > PPROF_MAX)
		return diff__fail(why, "larger than 1 GiB");
	if (npre && ml_grow(buf, &cap, npre, 1))
		return -ENOMEM;
	if (npre)
		memcpy(*buf, pre, npre);
	*len = npre;
	do {
		if (*len == PPROF_MAX)
			return diff__fail(why, "larger than 1 GiB");
		if (ml_grow(buf, &cap, *len + 65536 < PPROF_MAX ? *len + 65536 : PPROF_MAX, 1))
			return -ENOMEM;
		n = fread(*buf + *len, 1, cap - *len < PPROF_MAX - *len ? cap - *len : PPROF_MAX - *len, f);
		*len += n;
	} while (n);
	return ferror(f) ? diff__fail(why, "%s", strerror(errno)) : 0;
}

/* Unpack a gzip stream into *out, at most PPROF_MAX bytes. */
static int gunzip(const uint8_t *in, size_t inlen, uint8_t **out, size_t *outlen, char **why)
{
	z_stream z = {.next_in = (uint8_t *)in, .avail_in = (uInt)inlen};
	size_t cap = 0;
	int zr = Z_OK, err = 0;

	if (inlen > UINT32_MAX || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return diff__fail(why, "cannot unpack it");
	*outlen = 0;
	while (zr == Z_OK) {
		if (*outlen == PPROF_MAX) {
			err = diff__fail(why, "unpacks to more than 1 GiB");
			break;
		}
		if (ml_grow(out, &cap, *outlen + 65536 < PPROF_MAX ? *outlen + 65536 : PPROF_MAX, 1)) {
			err = -ENOMEM;
			break;
		}
		z.next_out = *out + *outlen;
		z.avail_out = (uInt)((cap < PPROF_MAX ? cap : PPROF_MAX) - *outlen);
		zr = inflate(&z, Z_NO_FLUSH);
		*outlen = (size_t)z.total_out;
	}
	inflateEnd(&z);
	if (!err && zr != Z_STREAM_END)
		err = diff__fail(why, "its gzip stream is damaged (%s)", z.msg ? z.msg : "cut short");
	return err;
}

static const char *strat(const Profile *p, int64_t i)
{
	return i >= 0 && (uint64_t)i < p->n_string_table ? p->string_table[i] : NULL;
}

static int by_loc_id(const void *a, const void *b)
{
	uint64_t x = (*(Perftools__Profiles__Location *const *)a)->id,
		 y = (*(Perftools__Profiles__Location *const *)b)->id;

	return x < y ? -1 : x > y;
}

static int by_fn_id(const void *a, const void *b)
{
	uint64_t x = (*(Perftools__Profiles__Function *const *)a)->id,
		 y = (*(Perftools__Profiles__Function *const *)b)->id;

	return x < y ? -1 : x > y;
}

static const Perftools__Profiles__Location *find_loc(const Profile *p, uint64_t id)
{
	Perftools__Profiles__Location key = {.id = id}, *kp = &key, **hit;

	hit = p->n_location ? bsearch(&kp, p->location, p->n_location, sizeof(*p->location), by_loc_id) : NULL;
	return hit ? *hit : NULL;
}

static const Perftools__Profiles__Function *find_fn(const Profile *p, uint64_t id)
{
	Perftools__Profiles__Function key = {.id = id}, *kp = &key, **hit;

	hit = p->n_function ? bsearch(&kp, p->function, p->n_function, sizeof(*p->function), by_fn_id) : NULL;
	return hit ? *hit : NULL;
}

/* The index of the sample value named type, or -1. */
static int value_of(const Profile *p, const char *type)
{
	for (size_t i = 0; i < p->n_sample_type; i++) {
		const char *t = strat(p, p->sample_type[i]->type);

		if (t && !strcmp(t, type))
			return (int)i;
	}
	return -1;
}

/* A native frame memleak-ai could not name is written as its address: unknown, as in JSON. */
static const char *native_name(const char *name)
{
	return !name || !*name || (name[0] == '0' && name[1] == 'x' && !name[2 + strspn(name + 2, "0123456789abcdef")])
		   ? NULL
		   : name;
}

/* A location's frames, innermost first (its inlined lines, then the function they were inlined into). */
static int loc_frames(const Profile *p, const Perftools__Profiles__Location *l, struct diff_frame **v, size_t *n,
		      size_t *cap, char **why)
{
	for (size_t k = 0; k < l->n_line; k++) {
		const Perftools__Profiles__Function *fn = find_fn(p, l->line[k]->function_id);
		const char *name = fn ? strat(p, fn->name) : NULL, *file = fn ? strat(p, fn->filename) : NULL;

		if (!fn)
			return diff__fail(why, "location %llu names no function", (unsigned long long)l->id);
		if (ml_grow(v, cap, *n + 1, sizeof(**v)))
			return -ENOMEM;
		/* memleak-ai writes a Python frame with no address, and its file and line */
		(*v)[(*n)++] = (struct diff_frame){.python = !l->address && file && *file && l->line[k]->line > 0,
						   .func = name,
						   .file = file,
						   .line = l->line[k]->line > 0 ? l->line[k]->line : -1};
		if (!(*v)[*n - 1].python)
			(*v)[*n - 1].func = native_name(name);
	}
	return 0;
}

/* A sample's layer and rates from its labels; the run's steps from the largest "steps" label. */
static void sample_labels(const Profile *p, const Perftools__Profiles__Sample *s, struct diff_run *r,
			  const char **layer, struct diff_figs *f)
{
	*layer = "-";
	for (size_t k = 0; k < s->n_label; k++) {
		const char *key = strat(p, s->label[k]->key);

		if (!key)
			continue;
		if (!strcmp(key, "layer") && strat(p, s->label[k]->str) && *strat(p, s->label[k]->str))
			*layer = strat(p, s->label[k]->str);
		else if (!strcmp(key, "bytes_per_s"))
			f->per_s = (double)s->label[k]->num;
		else if (!strcmp(key, "bytes_per_step")) {
			f->per_step = (double)s->label[k]->num;
			f->stepped = true;
		} else if (!strcmp(key, "steps")) {
			r->stepped = true;
			if ((double)s->label[k]->num > r->steps)
				r->steps = (double)s->label[k]->num;
		}
	}
}

static int read_sample(const Profile *p, const Perftools__Profiles__Sample *s, int vb, int vc, int vpeak,
		       struct diff_run *r, struct diff_frame **v, size_t *cap, char **why)
{
	struct diff_figs f = {};
	const char *layer;
	size_t n = 0;
	int err;

	if (s->n_value != p->n_sample_type)
		return diff__fail(why, "a sample has %zu values for %zu types", s->n_value, p->n_sample_type);
	for (size_t k = 0; k < s->n_location_id; k++) {
		const Perftools__Profiles__Location *l = find_loc(p, s->location_id[k]);

		if (!l)
			return diff__fail(why, "a sample names location %llu, which is not in it",
					  (unsigned long long)s->location_id[k]);
		if ((err = loc_frames(p, l, v, &n, cap, why)))
			return err;
	}
	f.bytes = (double)s->value[vb];
	f.count = vc >= 0 ? (double)s->value[vc] : 0;
	f.peak_bytes = vpeak >= 0 ? (double)s->value[vpeak] : f.bytes;
	sample_labels(p, s, r, &layer, &f);
	if ((err = diffrun__add(r, layer, *v, n, &f)) || (err = diffrun__add_layer(r, layer, &f)))
		return err;
	if (!r->smallest || f.bytes < r->smallest)
		r->smallest = f.bytes;
	return 0;
}

static int read_profile(Profile *p, struct diff_run *r, char **why)
{
	int vb = value_of(p, "inuse_space"), vc = value_of(p, "inuse_objects"), vpeak = value_of(p, "peak_space");
	struct diff_frame *v = NULL;
	size_t cap = 0;
	int err = 0;

	if (vb < 0)
		return diff__fail(why, "a profile without inuse_space values (not a memory profile)");
	if (p->n_location) /* neither array may be NULL, even empty */
		qsort(p->location, p->n_location, sizeof(*p->location), by_loc_id);
	if (p->n_function)
		qsort(p->function, p->n_function, sizeof(*p->function), by_fn_id);
	for (size_t i = 0; i < p->n_sample && !err; i++)
		err = read_sample(p, p->sample[i], vb, vc, vpeak, r, &v, &cap, why);
	free(v);
	return err;
}

int pprofin__read(FILE *f, const uint8_t *pre, size_t npre, struct diff_run *r, char **why)
{
	uint8_t *raw = NULL, *un = NULL;
	size_t len = 0, unlen = 0;
	Profile *p = NULL;
	int err = slurp(f, pre, npre, &raw, &len, why);

	if (!err && len >= 2 && raw[0] == 0x1f && raw[1] == 0x8b)
		err = gunzip(raw, len, &un, &unlen, why);
	if (!err && !(p = perftools__profiles__profile__unpack(NULL, un ? unlen : len, un ? un : raw)))
		err = diff__fail(why, "neither JSON Lines nor a pprof profile");
	if (!err)
		err = read_profile(p, r, why);
	if (p)
		perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	free(un);
	return err;
}
