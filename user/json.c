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

void jw_escape(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', f);
	for (; *p; p++) {
		switch (*p) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			/* Names come from an untrusted target: control bytes and non-ASCII are escaped, never passed raw. */
			if (*p < 0x20 || *p >= 0x7f)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
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
		fprintf(w->f, "%.6g", val);
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
