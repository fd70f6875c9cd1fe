/*
 * libFuzzer target: `memleak-ai diff` reads files a user hands it, which may be anything. The first byte picks the
 * reader (even: JSON Lines, odd: pprof, gzipped or not); the rest is the file. A file read is then compared with
 * itself and written in every format: any bytes must give a run or a refusal with its reason, never a crash.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "diff/compare.h"
#include "diff/diffview.h"
#include "diff/jsonin.h"
#include "diff/pprofin.h"

static void render(const struct diff_run *r)
{
	struct diff_opts o = {.min_bytes = 1, .min_rate = 1, .fail_over = 0, .fail_over_per_step = 0};
	struct diffview_opts vo = {.top = 3, .fail_over = 0, .fail_over_per_step = 0};
	struct diff_result res;
	FILE *f = fopen("/dev/null", "w");

	if (!f)
		return;
	if (!diff__compare(r, r, &o, &res)) {
		if (res.nitems || res.over) /* a run against itself: nothing changed, no layer over a gate of 0 */
			__builtin_trap();
		diffview__text(f, &res, &vo);
		diffview__json(f, &res, &vo);
		diffview__html(f, &res, &vo);
	}
	diff__result_free(&res);
	fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char blank[] = "\n"; /* fmemopen refuses an empty buffer: a file of one blank line instead */
	/* a profile's first bytes as diff__load hands them over, read already (up to 63 of them) */
	size_t pre = size && data[0] & 1 ? (size_t)(data[0] >> 2) : 0;
	struct diff_run *r = NULL;
	char *why = NULL;
	FILE *f;
	int err;

	if (size < 1)
		return 0;
	if (pre > size - 1)
		pre = size - 1;
	f = size - 1 - pre ? fmemopen((void *)(data + 1 + pre), size - 1 - pre, "r") : fmemopen(blank, 1, "r");
	if (!f)
		return 0;
	if (diffrun__new("fuzz", data[0] & 1 ? "pprof" : "json", &r)) {
		fclose(f);
		return 0;
	}
	if (data[0] & 1)
		err = pprofin__read(f, data + 1, pre, r, &why);
	else
		err = jsonin__read(f, data[0] & 2 ? DIFF_FIRST : DIFF_LAST, r, &why);
	if (err && err != -EINVAL && err != -ENOMEM)
		__builtin_trap();
	if (err == -EINVAL && !why)
		__builtin_trap(); /* a refusal always says why */
	if (!err)
		render(r);
	free(why);
	diffrun__free(r);
	fclose(f);
	return 0;
}
