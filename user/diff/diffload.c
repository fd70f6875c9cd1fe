/* Open a diff's input and hand it to the reader of its format. */
#define _GNU_SOURCE
#include "diff/diffload.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "diff/pprofin.h"
#include "lib/grow.h"

/*
 * The bytes up to the first that is not blank, and that one (EOF at the end): JSON Lines begin with '{', anything else
 * is read as a profile. Kept, not rewound: a pipe (`<(zcat run.jsonl.gz)`) cannot be, and a raw profile's first
 * byte is often 0x0a, a newline.
 */
static int peek(FILE *f, uint8_t **pre, size_t *n, int *first)
{
	size_t cap = 0;
	int c;

	*n = 0;
	do {
		c = getc(f);
		if (c == EOF)
			break;
		if (ml_grow(pre, &cap, *n + 1, 1))
			return -ENOMEM;
		(*pre)[(*n)++] = (uint8_t)c;
	} while (c == ' ' || c == '\t' || c == '\r' || c == '\n');
	*first = c;
	return 0;
}

int diff__load(const char *path, enum diff_pick pick, struct diff_run **out, char **why)
{
	struct stat st;
	FILE *f = fopen(path, "re");
	uint8_t *pre = NULL;
	size_t npre = 0;
	int first, err;

	*out = NULL;
	*why = NULL;
	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return asprintf(why, "a directory: give one of its files") < 0 ? -ENOMEM : -EISDIR;
	}
	err = peek(f, &pre, &npre, &first);
	if (!err)
		err = diffrun__new(path, first == '{' ? "json" : "pprof", out);
	if (!err && first == '{') /* the blanks before it are nothing to JSON */
		err = ungetc(first, f) == EOF ? -EIO : jsonin__read(f, pick, *out, why);
	else if (!err)
		err = pprofin__read(f, pre, npre, *out, why);
	free(pre);
	fclose(f);
	if (err) {
		diffrun__free(*out);
		*out = NULL;
	}
	return err;
}
