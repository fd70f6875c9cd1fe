/* A small streaming JSON writer: keys, nesting and string escaping, straight to a FILE. */
#ifndef ML_JSON_H
#define ML_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 64

struct jw {
	FILE *f;
	int depth;
	uint64_t has_items; /* bit d: the container at depth d already holds an item (needs a comma) */
	int err;            /* first error (-EOVERFLOW on nesting too deep) */
};

void jw_init(struct jw *w, FILE *f);
void jw_obj_begin(struct jw *w, const char *key);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w, const char *key);
void jw_arr_end(struct jw *w);
void jw_str(struct jw *w, const char *key, const char *val); /* NULL val writes null */
void jw_u64(struct jw *w, const char *key, uint64_t val);
void jw_i64(struct jw *w, const char *key, int64_t val);
void jw_double(struct jw *w, const char *key, double val);
void jw_bool(struct jw *w, const char *key, bool val);
void jw_null(struct jw *w, const char *key);
void jw_escape(FILE *f, const char *s);

#endif
