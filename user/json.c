/* A small streaming JSON writer: keys, nesting and string escaping, straight to a FILE. */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include "json.h"

void jw_init(struct jw *w, FILE *f)
{
	w->f = f;
	w->depth = 0;
	w->has_items = 0;
	w->err = 0;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when the bytes there are not valid UTF-8. */
static int utf8_len(const unsigned char *p)
{
	int n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

void jw_escape(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	while (*p) {
		int n;

		switch (*p) {
		case '"': fputs("\\\"", f); p++; continue;
		case '\\': fputs("\\\\", f); p++; continue;
		case '\n': fputs("\\n", f); p++; continue;
		case '\r': fputs("\\r", f); p++; continue;
		case '\t': fputs("\\t", f); p++; continue;
		}
		/*
		 * Names come from an untrusted target: control bytes are escaped, invalid UTF-8 becomes U+FFFD,
		 * and < > & too, so that JSON placed in an HTML <script> cannot end it.
		 */
		if (*p < 0x20 || *p == 0x7f || *p == '<' || *p == '>' || *p == '&') {
			fprintf(f, "\\u%04x", *p++);
			continue;
		}
		n = utf8_len(p);
		if (!n) {
			fputs("\\ufffd", f);
			p++;
			continue;
		}
		fwrite(p, 1, (size_t)n, f);
		p += n;
	}
	fputc('"', f);
}

static void item(struct jw *w, const char *key)
{
	uint64_t bit = 1ULL << (w->depth & 63);

	if (w->has_items & bit)
		fputc(',', w->f);
	w->has_items |= bit;
	if (key) {
		jw_escape(w->f, key);
		fputc(':', w->f);
	}
}

static void open_(struct jw *w, const char *key, char c)
{
	item(w, key);
	fputc(c, w->f);
	if (w->depth + 1 >= JW_MAX_DEPTH) {
		w->err = -EOVERFLOW;
		return;
	}
	w->depth++;
	w->has_items &= ~(1ULL << w->depth);
}

static void close_(struct jw *w, char c)
{
	if (w->depth > 0)
		w->depth--;
	fputc(c, w->f);
	if (w->depth == 0)
		w->has_items = 0;
}

void jw_obj_begin(struct jw *w, const char *key) { open_(w, key, '{'); }
void jw_obj_end(struct jw *w) { close_(w, '}'); }
void jw_arr_begin(struct jw *w, const char *key) { open_(w, key, '['); }
void jw_arr_end(struct jw *w) { close_(w, ']'); }

void jw_str(struct jw *w, const char *key, const char *val)
{
	item(w, key);
	if (val)
		jw_escape(w->f, val);
	else
		fputs("null", w->f);
}

void jw_u64(struct jw *w, const char *key, uint64_t val)
{
	item(w, key);
	fprintf(w->f, "%" PRIu64, val);
}

void jw_i64(struct jw *w, const char *key, int64_t val)
{
	item(w, key);
	fprintf(w->f, "%" PRId64, val);
}

void jw_double(struct jw *w, const char *key, double val)
{
	item(w, key);
	if (isfinite(val))
		fprintf(w->f, "%.15g", val);
	else
		fputs("null", w->f);
}

void jw_bool(struct jw *w, const char *key, bool val)
{
	item(w, key);
	fputs(val ? "true" : "false", w->f);
}

void jw_null(struct jw *w, const char *key)
{
	item(w, key);
	fputs("null", w->f);
}
