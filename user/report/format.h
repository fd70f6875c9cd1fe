/*
 * Text formatting shared by the report's views: sizes, counts and names from the target. It includes nothing
 * else from report/, so every view may use it without a cycle.
 */
#ifndef ML_FORMAT_H
#define ML_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "12.0 KiB" style, for text. */
void ml_fmt_bytes(char *buf, size_t len, double bytes);
/* A count with thousands separators ("1,706"), with its sign always when sign, else only when negative. */
void ml_fmt_count(char *buf, size_t len, int64_t n, bool sign);
/* A name from the target in text: control bytes (C1 too), backslashes and bytes that are not UTF-8 as \xNN. */
void ml_put_safe(FILE *f, const char *s);
/* Length of the valid UTF-8 sequence at p (1-4), or 0 when the bytes there are not valid UTF-8. */
int ml_utf8_len(const unsigned char *p);
/* Whether s is valid UTF-8; a copy of s with each byte that is not as U+FFFD (NULL when out of memory). */
bool ml_utf8_valid(const char *s);
char *ml_utf8_dup(const char *s);

#endif
