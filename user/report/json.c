/* A small streaming JSON writer: keys, nesting and string escaping, straight to a FILE. */
#define _GNU_SOURCE
#include "report/json.h"
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include "lib/grow.h"
#include "report/format.h"

void jw_init(struct jw *w, FILE *f)
{
	*w = (struct jw){.f = f};
	/* depth 0, the top level, holds one value */
	if (ml_grow(&w->has_items, &w->cap, 1, 1))
		w->err = -ENOMEM;
	else
		w->has_items[0] = 0;
}

int jw_finish(struct jw *w)
{
	free(w->has_items);
	w->has_items = NULL;
	w->cap = 0;
	return w->err;
}

void jw_escape(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putc_unlocked('"', f);
	while (*p) {
		const unsigned char *run = p;
		int n;

		/* A run of printable ASCII needing no escape goes out in one write. */
		while (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\' && *p != '<' && *p != '>' && *p != '&')
			p++;
		if (p > run)
			fwrite_unlocked(run, 1, (size_t)(p - run), f);
		if (!*p)
			break;
		switch (*p) {
		case '"':
			fputs_unlocked("\\\"", f);
			p++;
			continue;
		case '\\':
			fputs_unlocked("\\\\", f);
			p++;
			continue;
		case '\n':
			fputs_unlocked("\\n", f);
			p++;
			continue;
		case '\r':
			fputs_unlocked("\\r", f);
			p++;
			continue;
		case '\t':
			fputs_unlocked("\\t", f);
			p++;
			continue;
		}
		/*
		 * Names come from an untrusted target: control bytes are escaped, invalid UTF-8 becomes U+FFFD,
		 * and < > & too, so that JSON placed in an HTML <script> cannot end it.
		 */
		if (*p < 0x20 || *p == 0x7f || *p == '<' || *p == '>' || *p == '&') {
			fprintf(f, "\\u%04x", *p++);
			continue;
		}
		n = ml_utf8_len(p);
		if (!n) {
			fputs_unlocked("\\ufffd", f);
			p++;
			continue;
		}
		fwrite_unlocked(p, 1, (size_t)n, f);
		p += n;
	}
	putc_unlocked('"', f);
}

/* Starts a value at the current depth: false when the writer stopped (nothing is written). */
static bool item(struct jw *w, const char *key)
{
	if (w->err)
		return false;
	if (w->has_items[w->depth])
		putc_unlocked(',', w->f);
	w->has_items[w->depth] = 1;
	if (key) {
		jw_escape(w->f, key);
		putc_unlocked(':', w->f);
	}
	return true;
}

static void open_(struct jw *w, const char *key, char c)
{
	if (w->err)
		return;
	if (ml_grow(&w->has_items, &w->cap, w->depth + 2, 1)) {
		w->err = -ENOMEM;
		return;
	}
	item(w, key);
	putc_unlocked(c, w->f);
	w->has_items[++w->depth] = 0;
}

static void close_(struct jw *w, char c)
{
	if (w->err || !w->depth)
		return;
	w->depth--;
	putc_unlocked(c, w->f);
	if (!w->depth)
		w->has_items[0] = 0; /* the next document (JSON Lines) starts afresh */
}

void jw_obj_begin(struct jw *w, const char *key)
{
	open_(w, key, '{');
}
void jw_obj_end(struct jw *w)
{
	close_(w, '}');
}
void jw_arr_begin(struct jw *w, const char *key)
{
	open_(w, key, '[');
}
void jw_arr_end(struct jw *w)
{
	close_(w, ']');
}

void jw_str(struct jw *w, const char *key, const char *val)
{
	if (!item(w, key))
		return;
	if (val)
		jw_escape(w->f, val);
	else
		fputs_unlocked("null", w->f);
}

void jw_u64(struct jw *w, const char *key, uint64_t val)
{
	if (item(w, key))
		fprintf(w->f, "%" PRIu64, val);
}

void jw_i64(struct jw *w, const char *key, int64_t val)
{
	if (item(w, key))
		fprintf(w->f, "%" PRId64, val);
}

void jw_double(struct jw *w, const char *key, double val)
{
	if (!item(w, key))
		return;
	if (isfinite(val))
		fprintf(w->f, "%.15g", val);
	else
		fputs_unlocked("null", w->f);
}

void jw_bool(struct jw *w, const char *key, bool val)
{
	if (item(w, key))
		fputs_unlocked(val ? "true" : "false", w->f);
}

void jw_null(struct jw *w, const char *key)
{
	if (item(w, key))
		fputs_unlocked("null", w->f);
}
