/*
 * A small streaming JSON writer: keys, nesting and string escaping, straight to a FILE. Nesting has no fixed
 * limit (a flame graph's tree is as deep as its deepest stack); a writer that could not keep track (out of
 * memory) writes nothing more and says so in jw_finish, so it never emits a document that reads wrong.
 */
#ifndef ML_JSON_H
#define ML_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct jw {
	FILE *f;
	size_t depth;
	uint8_t *has_items; /* [d]: the container at depth d already holds an item (the next needs a comma) */
	size_t cap;
	int err; /* first error: -ENOMEM, and nothing more is written */
};

void jw_init(struct jw *w, FILE *f);
/* Free the writer's state; 0, or the first error (the document is then incomplete). */
int jw_finish(struct jw *w);
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
