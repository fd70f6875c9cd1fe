/* Unit tests: option parsing, command splitting, number parsing, JSON escaping, byte formatting. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "report/format.h"
#include "report/json.h"
#include "report/report.h"
#include "session/opts.h"
#include "session/target.h"

static int parse(const char *const *args, struct ml_opts *o)
{
	char *argv[32];
	int argc = 0;

	argv[argc++] = "memleak-ai";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	return ml_opts__parse(argc, argv, o);
}

static char *json_of(void (*fn)(struct jw *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct jw w;

	jw_init(&w, f);
	fn(&w);
	jw_finish(&w);
	fclose(f);
	return buf;
}

static void doc1(struct jw *w)
{
	jw_obj_begin(w, NULL);
	jw_str(w, "a", "x\"y\\z\n\x01\xc3\xa9\xff");
	jw_arr_begin(w, "b");
	jw_u64(w, NULL, 1);
	jw_i64(w, NULL, -2);
	jw_obj_begin(w, NULL);
	jw_obj_end(w);
	jw_arr_end(w);
	jw_bool(w, "c", true);
	jw_null(w, "d");
	jw_str(w, "e", NULL);
	jw_double(w, "f", 0.5);
	jw_obj_end(w);
}

/* The kernel minimum, 5.17 (bpf_loop, bpf_find_vma): older releases refused, a string that does not parse left
 * to the load. */
static void kernel_release(void)
{
	unsigned int major, minor;

	CHECK(!ml_kernel_release_ok("5.16.20-generic", &major, &minor) && major == 5 && minor == 16,
	      "kernel: 5.16 refused, its version read");
	CHECK(ml_kernel_release_ok("5.17.0", &major, &minor), "kernel: 5.17 accepted");
	CHECK(ml_kernel_release_ok("6.1.0-18-amd64", &major, &minor), "kernel: 6.1 accepted");
	CHECK(!ml_kernel_release_ok("4.19.0", &major, &minor), "kernel: 4.19 refused");
	CHECK(ml_kernel_release_ok("x", &major, &minor), "kernel: a release that does not parse passes to the load");
	CHECK(ML_KERNEL_MAJOR == 5 && ML_KERNEL_MINOR == 17, "kernel: the minimum is 5.17");
}

int main(void)
{
	kernel_release();
	struct ml_opts o;
	char **w = NULL;
	uint64_t v;
	double d;
	char buf[32], *js;

	{
		const char *a[] = {"-p",  "42",		"2.5", "3",	     "-T", "7",	 "--min-age",
				   "1.5", "--min-size", "1K",  "--max-size", "2M", "-o", "/tmp/x",
				   "-f",  "json",	"-v",  "-v",	     NULL};
		CHECK_EQ_INT(parse(a, &o), 0, "full option set parses");
		CHECK(o.pid == 42 && o.interval_s == 2.5 && o.count == 3 && o.top == 7, "pid interval count top");
		CHECK(o.min_age_s == 1.5 && o.min_size == 1024 && o.max_size == 2U << 20, "age and size filters");
		CHECK(o.format == ML_FMT_JSON && o.verbose == 2 && !strcmp(o.output, "/tmp/x"),
		      "format verbose output");
		ml_opts__free(&o);
	}
	{
		const char *a[] = {"-p",	   "42",     "--json",	    "/tmp/r.json", "--pprof",
				   "/tmp/r.pb.gz", "--html", "/tmp/r.html", "--native",	   NULL};
		CHECK_EQ_INT(parse(a, &o), 0, "extra outputs parse");
		CHECK(!strcmp(o.json, "/tmp/r.json") && !strcmp(o.pprof, "/tmp/r.pb.gz") &&
			  !strcmp(o.html, "/tmp/r.html"),
		      "--json, --pprof and --html files");
		CHECK(o.native && o.format == ML_FMT_TEXT && !o.output,
		      "--native; the main output stays text on stdout");
		ml_opts__free(&o);
	}
	{
		const char *a[] = {"-p", "42", "--pprof", "", NULL};
		CHECK_EQ_INT(parse(a, &o), -EINVAL, "an empty --pprof file name is refused");
		ml_opts__free(&o);
	}
	{
		const char *a[] = {"-p", "42", NULL};
		CHECK(parse(a, &o) == 0 && o.interval_s == 5.0 && o.count == 0 && o.top == 10, "defaults");
		CHECK(o.max_allocs == 1048576 && o.max_stacks == 65536, "default table sizes");
	}
	{
		const char *a[] = {"-p",
				   "1",
				   "--max-overhead",
				   "5%",
				   "--unwind-mem",
				   "64K",
				   "--max-allocs",
				   "16",
				   "--no-python",
				   "--no-follow",
				   "--pprof-dir",
				   "/tmp/p",
				   "--pprof-keep",
				   "7",
				   "--pprof-max-age",
				   "60",
				   NULL};
		CHECK(parse(a, &o) == 0 && o.max_overhead == 5 && o.unwind_mem == 1U << 16 && o.max_allocs == 16,
		      "--max-overhead with %, --unwind-mem and --max-allocs at their minimum");
		CHECK(!o.python && !o.follow && o.pprof_keep == 7 && o.pprof_max_age_s == 60 &&
			  !strcmp(o.pprof_dir, "/tmp/p"),
		      "--no-python, --no-follow and the --pprof-dir options");
		ml_opts__free(&o);
	}
	{
		const char *bad[][4] = {{"--unwind-mem", "63K"},
					{"--unwind-mem", "5G"},
					{"--max-overhead", "0.05"},
					{"--max-overhead", "5x"},
					{"--max-stacks", "15"},
					{"--min-age", "-1"},
					{"-o", ""},
					{NULL}};

		for (int i = 0; bad[i][0]; i++) {
			const char *a[] = {"-p", "1", bad[i][0], bad[i][1], NULL};
			char name[96];

			snprintf(name, sizeof(name), "out of range rejected: %s '%s'", bad[i][0], bad[i][1]);
			CHECK(parse(a, &o) == -EINVAL, name);
			ml_opts__free(&o);
		}
	}
	{
		const char *a[] = {"-c", "python3 train.py --lr 3e-4", NULL};
		CHECK(parse(a, &o) == 0 && o.cmd_argv && !strcmp(o.cmd_argv[0], "python3") &&
			  !strcmp(o.cmd_argv[3], "3e-4") && !o.cmd_argv[4],
		      "-c splits words");
		ml_opts__free(&o);
	}
	{
		const char *bad[][4] = {{"-p", "x", NULL},     {"-p", "-5", NULL},     {"-p", "1", "0", NULL},
					{"-p", "1", "1", "0"}, {"-T", "0", "-p", "1"}, {NULL}};

		for (int i = 0; bad[i][0]; i++) {
			const char *a[6] = {bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL};
			char name[96];

			snprintf(name, sizeof(name), "bad options rejected: %s %s%s%s%s%s", a[0], a[1], a[2] ? " " : "",
				 a[2] ? a[2] : "", a[3] ? " " : "", a[3] ? a[3] : "");
			CHECK_EQ_INT(parse(a, &o), -EINVAL, name);
			ml_opts__free(&o);
		}
	}
	CHECK(ml_split_words("a 'b c' \"d \\\" e\" f\\ g ''", &w) == 0 && !strcmp(w[0], "a") && !strcmp(w[1], "b c") &&
		  !strcmp(w[2], "d \" e") && !strcmp(w[3], "f g") && !strcmp(w[4], "") && !w[5],
	      "quoting and escapes");
	ml_free_words(w);
	CHECK_EQ_INT(ml_split_words("a 'b", &w), -EINVAL, "unbalanced quote rejected");
	CHECK_EQ_INT(ml_split_words("   ", &w), -EINVAL, "empty command rejected");
	CHECK(ml_parse_u64("18446744073709551615", 0, UINT64_MAX, &v) == 0 && v == UINT64_MAX, "u64 max");
	CHECK_EQ_INT(ml_parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -EINVAL, "u64 overflow rejected");
	CHECK(ml_parse_u64("12x", 0, 100, &v) == -EINVAL && ml_parse_u64("", 0, 100, &v) == -EINVAL, "junk rejected");
	CHECK(ml_parse_size("16G", &v) == 0 && v == 16ULL << 30, "size suffix");
	CHECK(ml_parse_size("3KiB", &v) == 0 && v == 3072, "KiB suffix");
	CHECK_EQ_INT(ml_parse_size("99999999999999999G", &v), -EINVAL, "size overflow rejected");
	CHECK(ml_parse_seconds("nan", 0, 10, &d) == -EINVAL && ml_parse_seconds("inf", 0, 10, &d) == -EINVAL,
	      "nan/inf seconds rejected");
	js = json_of(doc1);
	CHECK_EQ_STR(js,
		     "{\"a\":\"x\\\"y\\\\z\\n\\u0001\xc3\xa9\\ufffd\",\"b\":[1,-2,{}],\"c\":true,\"d\":null,"
		     "\"e\":null,\"f\":0.5}",
		     "json writer output and escaping");
	free(js);
	ml_fmt_bytes(buf, sizeof(buf), 1536);
	CHECK_EQ_STR(buf, "1.5 KiB", "fmt 1.5 KiB");
	ml_fmt_bytes(buf, sizeof(buf), -1048576);
	CHECK_EQ_STR(buf, "-1.0 MiB", "fmt negative MiB");
	ml_fmt_bytes(buf, sizeof(buf), 12);
	CHECK_EQ_STR(buf, "12 B", "fmt bytes");
	return SUMMARY("opts");
}
