/* The rows of one side of a diff, merged by layer and frames (see diffrun.h). */
#define _GNU_SOURCE
#include "diff/diffrun.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/frameclass.h"
#include "lib/grow.h"
#include "lib/hash.h"

int diffrun__new(const char *path, const char *format, struct diff_run **out)
{
	struct diff_run *r = calloc(1, sizeof(*r));

	if (!r || !(r->path = strdup(path))) {
		free(r);
		return -ENOMEM;
	}
	r->format = format;
	*out = r;
	return 0;
}

void diffrun__free(struct diff_run *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nrows; i++) {
		free(r->rows[i].key);
		free(r->rows[i].text);
		free(r->rows[i].frames);
	}
	for (size_t i = 0; i < r->nlayers; i++)
		free(r->layers[i].name);
	free(r->rows);
	free(r->slots);
	free(r->layers);
	free(r->path);
	free(r);
}

static void figs_add(struct diff_figs *to, const struct diff_figs *f)
{
	to->bytes += f->bytes;
	to->count += f->count;
	to->peak_bytes += f->peak_bytes;
	to->per_s += f->per_s;
	to->per_step += f->per_step;
	to->stepped |= f->stepped;
}

/* A frame as it is matched and shown: Python "FILE:LINE in FUNC"; native, its function or "?". */
static char *frame_text(const struct diff_frame *fr)
{
	char *s = NULL;
	int n;

	if (!fr->python)
		return strdup(fr->func ? fr->func : "?");
	if (fr->line >= 0)
		n = asprintf(&s, "%s:%lld in %s", fr->file ? fr->file : "?", (long long)fr->line,
			     fr->func ? fr->func : "?");
	else
		n = asprintf(&s, "%s:? in %s", fr->file ? fr->file : "?", fr->func ? fr->func : "?");
	return n < 0 ? NULL : s;
}

/* The index, among the stack's Python frames, of the innermost of the job's own code; 0 when none is. */
static size_t user_site(const struct diff_frame *fr, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		struct ml_frame mf = {.kind = ML_FRAME_PYTHON, .func = (char *)fr[i].func, .file = (char *)fr[i].file};

		if (!fr[i].python)
			continue;
		if (ml_frame_is_user_code(&mf))
			return k;
		k++;
	}
	return 0;
}

/* The key of a stack: its layer, then its Python frames when it has any, else its native ones, a line each. */
static char *make_key(const char *layer, const struct diff_frame *fr, size_t n, bool *python)
{
	char *key = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&key, &len);
	bool err = !f;

	*python = false;
	for (size_t i = 0; i < n; i++)
		*python |= fr[i].python;
	for (const char *p = layer; f && *p; p++)
		fputc(*p == '\n' ? ' ' : *p, f);
	for (size_t i = 0; f && i < n; i++) {
		char *t;

		if (fr[i].python != *python)
			continue;
		t = frame_text(&fr[i]);
		err |= !t;
		for (char *p = t; p && (p = strchr(p, '\n'));)
			*p = ' '; /* a frame is one line of the key: a newline in a name must not forge another */
		if (t)
			fprintf(f, "\n%s", t);
		free(t);
	}
	if (!f || fclose(f) || err) {
		free(key);
		return NULL;
	}
	return key;
}

/* Cut a copy of the new row's key into its layer and frames. */
static int split_key(struct diff_row *row)
{
	size_t n = 0;

	for (const char *p = row->key; (p = strchr(p, '\n')); p++)
		n++;
	row->text = strdup(row->key);
	row->frames = calloc(n ? n : 1, sizeof(*row->frames));
	if (!row->text || !row->frames)
		return -ENOMEM;
	row->layer = row->text;
	for (char *p = row->text; (p = strchr(p, '\n'));) {
		*p++ = '\0';
		row->frames[row->nframes++] = p;
	}
	return 0;
}

/* The slot of key: where its row is, or the empty slot where it would go. */
static size_t slot_of(const struct diff_run *r, const char *key)
{
	size_t h = ml_hash_str(key, 0) & (r->nslots - 1);

	while (r->slots[h] && strcmp(r->rows[r->slots[h] - 1].key, key))
		h = (h + 1) & (r->nslots - 1);
	return h;
}

static int rehash(struct diff_run *r)
{
	size_t nslots = r->nslots ? r->nslots * 2 : 256;
	uint32_t *sl = calloc(nslots, sizeof(*sl));

	if (!sl)
		return -ENOMEM;
	free(r->slots);
	r->slots = sl;
	r->nslots = nslots;
	for (size_t i = 0; i < r->nrows; i++)
		r->slots[slot_of(r, r->rows[i].key)] = (uint32_t)i + 1;
	return 0;
}

const struct diff_row *diffrun__find(const struct diff_run *r, const char *key)
{
	size_t h;

	if (!r->nslots)
		return NULL;
	h = slot_of(r, key);
	return r->slots[h] ? &r->rows[r->slots[h] - 1] : NULL;
}

int diffrun__add(struct diff_run *r, const char *layer, const struct diff_frame *fr, size_t n,
		 const struct diff_figs *f)
{
	struct diff_row *row;
	bool python;
	char *key = make_key(layer, fr, n, &python);
	size_t h;

	if (!key)
		return -ENOMEM;
	if ((r->nrows + 1) * 2 > r->nslots && rehash(r))
		goto nomem;
	h = slot_of(r, key);
	if (r->slots[h]) {
		free(key);
		figs_add(&r->rows[r->slots[h] - 1].f, f);
		return 0;
	}
	if (r->nrows >= UINT32_MAX - 1 || ml_grow(&r->rows, &r->caprows, r->nrows + 1, sizeof(*r->rows)))
		goto nomem;
	row = &r->rows[r->nrows];
	*row = (struct diff_row){.key = key, .python = python, .site = python ? user_site(fr, n) : 0, .f = *f};
	if (split_key(row)) {
		free(row->text);
		free(row->frames);
		goto nomem;
	}
	r->slots[h] = (uint32_t)++r->nrows;
	return 0;
nomem:
	free(key);
	return -ENOMEM;
}

const struct diff_layer *diffrun__layer(const struct diff_run *r, const char *name)
{
	for (size_t i = 0; i < r->nlayers; i++)
		if (!strcmp(r->layers[i].name, name))
			return &r->layers[i];
	return NULL;
}

int diffrun__add_layer(struct diff_run *r, const char *layer, const struct diff_figs *f)
{
	struct diff_layer *l = (struct diff_layer *)diffrun__layer(r, layer);

	if (!l) {
		if (ml_grow(&r->layers, &r->caplayers, r->nlayers + 1, sizeof(*r->layers)))
			return -ENOMEM;
		l = &r->layers[r->nlayers];
		*l = (struct diff_layer){.name = strdup(layer)};
		if (!l->name)
			return -ENOMEM;
		r->nlayers++;
	}
	figs_add(&l->f, f);
	return 0;
}

int diff__fail(char **why, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(why, fmt, ap) < 0)
		*why = NULL;
	va_end(ap);
	return -EINVAL;
}
