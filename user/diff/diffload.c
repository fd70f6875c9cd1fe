/* Open a diff's input and hand it to the reader of its format. */
#define _GNU_SOURCE
#include "diff/diffload.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "diff/pprofin.h"

/* JSON Lines begin with '{' (after blanks); anything else is read as a profile, gzipped or not. */
static bool looks_json(FILE *f)
{
	int c;

	while ((c = getc(f)) == ' ' || c == '\t' || c == '\r' || c == '\n')
		;
	rewind(f);
	return c == '{';
}

int diff__load(const char *path, enum diff_pick pick, struct diff_run **out, char **why)
{
	struct stat st;
	FILE *f = fopen(path, "re");
	bool json;
	int err;

	*out = NULL;
	*why = NULL;
	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return asprintf(why, "a directory: give one of its files") < 0 ? -ENOMEM : -EISDIR;
	}
	json = looks_json(f);
	err = diffrun__new(path, json ? "json" : "pprof", out);
	if (!err)
		err = json ? jsonin__read(f, pick, *out, why) : pprofin__read(f, *out, why);
	fclose(f);
	if (err) {
		diffrun__free(*out);
		*out = NULL;
	}
	return err;
}
