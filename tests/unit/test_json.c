/* Unit tests of the JSON writer: commas and nesting stay right at any depth (deep flame-graph trees). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "report/format.h"
#include "report/json.h"

/* The writer's output for a tree nested depth levels deep, each level an object with a name and children. */
static char *nested(int depth)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct jw w;

	jw_init(&w, f);
	for (int d = 0; d < depth; d++) {
		jw_obj_begin(&w, NULL);
		jw_str(&w, "name", "f");
		jw_u64(&w, "value", (uint64_t)d);
		jw_arr_begin(&w, "children");
	}
	for (int d = 0; d < depth; d++) {
		jw_arr_end(&w);
		jw_obj_end(&w);
	}
	CHECK_EQ_INT(jw_finish(&w), 0, "no error");
	fclose(f);
	return buf;
}

/* What nested(depth) must read. */
static char *expected(int depth)
{
	size_t cap = (size_t)depth * 64 + 1, n = 0;
	char *s = malloc(cap);

	for (int d = 0; d < depth; d++)
		n += (size_t)snprintf(s + n, cap - n, "{\"name\":\"f\",\"value\":%d,\"children\":[", d);
	for (int d = 0; d < depth; d++)
		n += (size_t)snprintf(s + n, cap - n, "]}");
	return s;
}

/* Names from the target in text and in profile strings: what a terminal would act on is escaped. */
static void names_in_text(void)
{
	char *out = NULL, *fixed;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	ml_put_safe(f, "a\x1b[2J\\\xff\xc2\x9b\xc3\xa9\n");
	fclose(f);
	CHECK_EQ_STR(out, "a\\x1b[2J\\x5c\\xff\\xc2\\x9b\xc3\xa9\\x0a",
		     "text: ESC, backslash, a stray byte, C1's CSI and newline as \\xNN; UTF-8 kept");
	free(out);
	fixed = ml_utf8_dup("a\xff\xe2\x82"
			    "b\xc3\xa9");
	CHECK_EQ_STR(fixed,
		     "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
		     "b\xc3\xa9",
		     "utf8_dup: each byte that is not UTF-8 as U+FFFD");
	CHECK(!ml_utf8_valid("a\xff") && ml_utf8_valid("\xc3\xa9") && ml_utf8_valid(""), "utf8_valid");
	free(fixed);
}

int main(void)
{
	names_in_text();
	int depths[] = {1, 63, 64, 65, 200, 1000};

	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		char *got = nested(depths[i]), *want = expected(depths[i]);
		char what[64];

		snprintf(what, sizeof(what), "a tree %d levels deep reads right", depths[i]);
		CHECK_EQ_STR(got, want, what);
		free(got);
		free(want);
	}
	/* siblings at depth: a comma between them, none before the first */
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		struct jw w;

		jw_init(&w, f);
		jw_arr_begin(&w, NULL);
		for (int d = 0; d < 70; d++)
			jw_arr_begin(&w, NULL);
		jw_u64(&w, NULL, 1);
		jw_u64(&w, NULL, 2);
		jw_obj_begin(&w, NULL);
		jw_obj_end(&w);
		for (int d = 0; d < 70; d++)
			jw_arr_end(&w);
		jw_u64(&w, NULL, 3);
		jw_arr_end(&w);
		jw_obj_begin(&w, NULL); /* a second document (JSON Lines) starts without a comma */
		jw_obj_end(&w);
		CHECK_EQ_INT(jw_finish(&w), 0, "siblings: no error");
		fclose(f);
		{
			char want[512];
			size_t n = 0;

			n += (size_t)snprintf(want + n, sizeof(want) - n, "[");
			for (int d = 0; d < 70; d++)
				n += (size_t)snprintf(want + n, sizeof(want) - n, "[");
			n += (size_t)snprintf(want + n, sizeof(want) - n, "1,2,{}");
			for (int d = 0; d < 70; d++)
				n += (size_t)snprintf(want + n, sizeof(want) - n, "]");
			snprintf(want + n, sizeof(want) - n, ",3]{}");
			CHECK_EQ_STR(buf, want, "siblings 71 levels deep: commas only between them");
		}
		free(buf);
	}
	return SUMMARY("json");
}
