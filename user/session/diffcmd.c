/* The diff command: its options, its inputs, its output and its exit status (see diffcmd.h). */
#include "session/diffcmd.h"
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "diff/compare.h"
#include "diff/diffload.h"
#include "diff/diffview.h"
#include "lib/log.h"
#include "report/report.h"
#include "session/opts.h"

enum diff_format { DIFF_TEXT, DIFF_JSON, DIFF_HTML };

struct diffcmd {
	const char *path[2], *output;
	enum diff_format format;
	struct diff_opts d;
	struct diffview_opts v;
};

static const char usage[] =
    "Usage: memleak-ai diff [OPTIONS] A [B]\n"
    "\n"
    "What changed between two reports of memleak-ai: the stacks that grew, appeared, vanished or shrank\n"
    "from A to B, matched by their Python lines (native frames for stacks without Python). A and B are\n"
    "JSON Lines (--json, -f json: the last report of each) or pprof profiles (--pprof, --pprof-dir, a\n"
    "store's download). With A alone: its first report against its last.\n"
    "\n"
    "  -f, --format FMT        text (default), json (one object) or html (one self-contained page)\n"
    "  -o, --output FILE       write to FILE instead of stdout (created 0600)\n"
    "  -T, --top N             stacks shown per change in text and html (default 10)\n"
    "      --min-bytes BYTES   the smallest change of bytes held that is named (default 1M)\n"
    "      --min-growth BYTES  the smallest change of growth per step (or per second) named (default 1K)\n"
    "      --fail-over BYTES   exit 1 when a layer's bytes held grew by more than BYTES\n"
    "      --fail-over-per-step BYTES  exit 1 when a layer's growth per step rose by more than BYTES\n"
    "  -h, --help              this help\n"
    "\n"
    "Exit status: 0, 1 when a stack is over a --fail-over gate, 2 on a usage error or a bad input.\n";

static int bad(const char *opt, const char *val, const char *want)
{
	ml_err("diff: invalid %s '%s': expected %s (see memleak-ai diff --help)", opt, val, want);
	return -EINVAL;
}

static int size_opt(const char *opt, const char *arg, double *out)
{
	uint64_t v;

	if (ml_parse_size(arg, &v))
		return bad(opt, arg, "a size in bytes (K, M, G suffixes)");
	*out = (double)v;
	return 0;
}

static int parse_one(int c, const char *arg, struct diffcmd *dc)
{
	uint64_t n;

	switch (c) {
	case 'f':
		if (!strcmp(arg, "text") || !strcmp(arg, "json") || !strcmp(arg, "html")) {
			dc->format = arg[0] == 't' ? DIFF_TEXT : arg[0] == 'j' ? DIFF_JSON : DIFF_HTML;
			return 0;
		}
		return bad("--format", arg, "text, json or html");
	case 'o': dc->output = arg; return 0;
	case 'T':
		if (ml_parse_u64(arg, 1, 1000000, &n))
			return bad("--top", arg, "a number from 1 to 1000000");
		dc->v.top = (size_t)n;
		return 0;
	case 'b': return size_opt("--min-bytes", arg, &dc->d.min_bytes);
	case 'g': return size_opt("--min-growth", arg, &dc->d.min_rate);
	case 'F': return size_opt("--fail-over", arg, &dc->d.fail_over);
	case 'S': return size_opt("--fail-over-per-step", arg, &dc->d.fail_over_per_step);
	}
	return -EINVAL;
}

/* 0, 1 after --help, or -EINVAL after saying why. */
static int parse(int argc, char **argv, struct diffcmd *dc)
{
	static const struct option longopts[] = {{"format", required_argument, NULL, 'f'},
						 {"output", required_argument, NULL, 'o'},
						 {"top", required_argument, NULL, 'T'},
						 {"min-bytes", required_argument, NULL, 'b'},
						 {"min-growth", required_argument, NULL, 'g'},
						 {"fail-over", required_argument, NULL, 'F'},
						 {"fail-over-per-step", required_argument, NULL, 'S'},
						 {"help", no_argument, NULL, 'h'},
						 {NULL, 0, NULL, 0}};
	int c;

	*dc = (struct diffcmd){
	    .d = {.min_bytes = 1 << 20, .min_rate = 1 << 10, .fail_over = -1, .fail_over_per_step = -1},
	    .v = {.top = 10}};
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:o:T:h", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(usage, stdout);
			return 1;
		}
		if (c == '?' || c == ':') {
			ml_err("diff: %s option '%s' (see memleak-ai diff --help)",
			       c == ':' ? "missing value for" : "unknown", argv[optind - 1]);
			return -EINVAL;
		}
		if (parse_one(c, optarg, dc))
			return -EINVAL;
	}
	if (argc - optind < 1 || argc - optind > 2) {
		ml_err("diff: expected one or two files, got %d (see memleak-ai diff --help)", argc - optind);
		return -EINVAL;
	}
	dc->path[0] = argv[optind];
	dc->path[1] = argc - optind == 2 ? argv[optind + 1] : NULL;
	dc->d.same_run = !dc->path[1];
	dc->v.fail_over = dc->d.fail_over;
	dc->v.fail_over_per_step = dc->d.fail_over_per_step;
	return 0;
}

static int load(const char *path, enum diff_pick pick, struct diff_run **out)
{
	char *why = NULL;
	int err = diff__load(path, pick, out, &why);

	if (err == -ENOMEM)
		ml_err("diff: out of memory reading %s", path);
	else if (err && why)
		ml_err("diff: %s: %s", path, why);
	else if (err)
		ml_err("diff: cannot read %s: %s", path, strerror(-err));
	free(why);
	return err;
}

static int write_out(const struct diffcmd *dc, const struct diff_result *res)
{
	FILE *f;
	int err = ml_open_output(dc->output, &f);

	if (err) {
		ml_err("diff: cannot create %s: %s", dc->output, strerror(-err));
		return err;
	}
	err = dc->format == DIFF_JSON	? diffview__json(f, res, &dc->v)
	      : dc->format == DIFF_HTML ? diffview__html(f, res, &dc->v)
					: diffview__text(f, res, &dc->v);
	if ((f != stdout ? fclose(f) : fflush(f)) && !err)
		err = -EIO;
	if (err)
		ml_err("diff: cannot write %s: %s", dc->output ? dc->output : "the output", strerror(-err));
	return err;
}

/* The runs can be compared as asked: two reports, and step counts for a per-step gate. */
static int check_runs(const struct diffcmd *dc, struct diff_run *const run[2])
{
	if (!dc->path[1] && !strcmp(run[0]->format, "pprof")) {
		ml_err("diff: %s: a profile holds one report: give two files", dc->path[0]);
		return -EINVAL;
	}
	for (int k = 0; k < 2; k++)
		if (dc->d.fail_over_per_step >= 0 && !run[k]->stepped) {
			ml_err("diff: --fail-over-per-step: %s has no step counts (it ran with --step none, or its "
			       "profile was written before step counts were); use --fail-over",
			       run[k]->path);
			return -EINVAL;
		}
	return 0;
}

static int compare(const struct diffcmd *dc, struct diff_run *const run[2])
{
	struct diff_result res;
	int err = check_runs(dc, run);

	if (err)
		return err;
	err = diff__compare(run[0], run[1], &dc->d, &res);
	if (err)
		ml_err("diff: out of memory comparing the runs");
	else
		err = write_out(dc, &res);
	if (!err && res.over)
		err = 1;
	diff__result_free(&res);
	return err;
}

int diffcmd__main(int argc, char **argv)
{
	struct diff_run *run[2] = {};
	struct diffcmd dc;
	int err = parse(argc, argv, &dc);

	if (err)
		return err > 0 ? 0 : 2;
	err = load(dc.path[0], dc.path[1] ? DIFF_LAST : DIFF_FIRST, &run[0]);
	if (!err && dc.path[1])
		err = load(dc.path[1], DIFF_LAST, &run[1]);
	else if (!err && strcmp(run[0]->format, "pprof"))
		err = load(dc.path[0], DIFF_LAST, &run[1]);
	else if (!err)
		run[1] = run[0];
	if (!err)
		err = compare(&dc, run);
	diffrun__free(run[0]);
	if (run[1] != run[0])
		diffrun__free(run[1]);
	return err == 1 ? 1 : err ? 2 : 0;
}
