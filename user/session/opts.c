/* Command-line options: parsing, validation and the option struct every module is configured from. */
#include "session/opts.h"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attach/allocators.h"
#include "lib/log.h"

#ifndef ML_VERSION
#define ML_VERSION "0.1.0"
#endif

static const char usage[] =
    "Usage: memleak-ai [OPTIONS] -p PID [INTERVAL [COUNT]]\n"
    "       memleak-ai [OPTIONS] -c \"COMMAND [ARGS...]\" [INTERVAL [COUNT]]\n"
    "       memleak-ai [OPTIONS] {--match REGEX | --cgroup PATH | --all-python} [INTERVAL [COUNT]]\n"
    "\n"
    "Report outstanding (allocated, not yet freed) memory of a running process, grouped by allocation\n"
    "stack, every INTERVAL seconds (default 5). The target is never stopped or changed.\n"
    "\n"
    "  -p, --pid PID          attach to a running process\n"
    "  -c, --command CMD      start CMD (words split like a shell, no shell run) and trace it from the start\n"
    "      --match REGEX      every process whose command line (words joined by spaces) matches the\n"
    "                         extended regular expression, now and as they start, each with its children\n"
    "      --cgroup PATH      every process in the cgroup and below (a container, a pod; v1 or v2): a\n"
    "                         directory (/sys/fs/cgroup/unified/kubepods/pod1) or a path as\n"
    "                         /proc/PID/cgroup shows it (/kubepods/pod1), now and later; beside\n"
    "                         --match or --all-python, only those of their processes it holds\n"
    "      --all-python       every CPython 3.11-3.13 process on the machine, now and as they start\n"
    "  -T, --top N            stacks per report (default 10)\n"
    "      --min-age SECS     only count allocations at least SECS old (default 0)\n"
    "      --min-size BYTES   only track allocations of at least BYTES (K/M/G suffixes)\n"
    "      --max-size BYTES   only track allocations of at most BYTES\n"
    "  -o, --output FILE      write reports to FILE instead of stdout (created 0600)\n"
    "  -f, --format FMT       text (default), json (JSON Lines, one object per report) or folded\n"
    "                         (one line per stack, frames root-first joined by ';', weight in bytes:\n"
    "                         for flamegraph.pl, speedscope, inferno; only the final report) or pprof\n"
    "                         (the final report as a gzipped profile.proto; needs -o FILE)\n"
    "      --json FILE        also write every report to FILE as JSON Lines (created 0600)\n"
    "      --pprof FILE       also write the final report to FILE as a gzipped profile.proto (0600)\n"
    "      --html FILE        also write the final report as one self-contained HTML page (timeline,\n"
    "                         flame graph, leak table; opens offline), created 0600\n"
    "  -s, --sort KEY         leak (default: growing stacks first, by leak score, then largest) or bytes\n"
    "  -l, --layers LIST      layers to trace, comma-separated (default all): libc, cuda, cuda_host,\n"
    "                         cuda_map, torch_cuda, torch_cpu, torch_host (cuda brings cuda_map, its\n"
    "                         cuMemMap'd ranges), rss (anonymous pages made resident or copied on\n"
    "                         write, by the faulting stack)\n"
    "      --torch-raw-alloc  also trace NativeCachingAllocator::raw_alloc(_with_stream) and the pinned host\n"
    "                         caching allocator (torch_host) with return probes; UNSAFE when the job catches\n"
    "                         out-of-memory exceptions: one thrown through a return probe ends the process\n"
    "      --step FUNCTION    the step clock: count the job's training steps at FUNCTION's entry (a symbol,\n"
    "                         or a C++ signature as nm -C prints it; default: the autograd engine's\n"
    "                         backward pass, torch::autograd::Engine::execute); none: no step clock\n"
    "      --no-python        native frames only: no CPython frames (file, function, line) in stacks\n"
    "      --native           text reports show every native frame of a Python stack (default: the\n"
    "                         interpreter's own and unresolved frames fold into one line a run)\n"
    "      --max-overhead PCT budget for tracing's cost, in % of the traced processes' time (default\n"
    "                         2): over it, the C heap is followed through its system calls instead of\n"
    "                         malloc/free probes (heap-growth mode); 100 keeps every probe on\n"
    "      --unwind MODE      native stacks: tables (default: .eh_frame/.debug_frame unwinding tables,\n"
    "                         frame pointers where none covers a pc) or fp (frame pointers only)\n"
    "      --unwind-mem BYTES kernel memory for the unwinding tables (default 128M, K/M/G suffixes)\n"
    "      --debug-dir DIR    where separate debug files are found (default /usr/lib/debug)\n"
    "      --no-follow        trace only the process itself, not its children (DataLoader workers, ...)\n"
    "      --max-allocs N     outstanding allocations tracked at once (default 1048576)\n"
    "      --max-stacks N     stacks the kernel remembers as handed over (default 65536; distinct stacks\n"
    "                         are not limited: one evicted from this cache is handed over again)\n"
    "      --metrics-listen HOST:PORT  serve Prometheus metrics on http://HOST:PORT/metrics (:PORT for\n"
    "                         every address), summed by rank, role and layer\n"
    "      --push URL         send each process's profile (pprof) every interval to a Pyroscope-style\n"
    "                         /ingest endpoint at URL (http or https); MEMLEAK_AI_PUSH_TOKEN (bearer) or\n"
    "                         MEMLEAK_AI_PUSH_USER and MEMLEAK_AI_PUSH_PASSWORD (basic) authenticate\n"
    "      --push-tenant ID   X-Scope-OrgID header of the pushes\n"
    "      --push-service NAME  the application name of pushed profiles (default memleak-ai)\n"
    "      --pprof-dir DIR    write each process's profile every interval into DIR\n"
    "      --pprof-keep N     profiles kept in --pprof-dir, the oldest removed first (default 100)\n"
    "      --pprof-max-age SECS  also remove profiles older than SECS from --pprof-dir\n"
    "  -v, --verbose          more diagnostics on stderr (-vv: libbpf debug output)\n"
    "  -h, --help             this help\n"
    "  -V, --version          print the version\n"
    "\n"
    "Reports go to stdout (or FILE), diagnostics to stderr. Ctrl-C, SIGTERM, SIGHUP or the target's exit\n"
    "print a final report and exit 0. See docs/usage.md.\n";

enum {
	OPT_MIN_AGE = 256,
	OPT_MIN_SIZE,
	OPT_MAX_SIZE,
	OPT_MAX_ALLOCS,
	OPT_MAX_STACKS,
	OPT_TORCH_RAW,
	OPT_HTML,
	OPT_JSON,
	OPT_PPROF,
	OPT_NO_PYTHON,
	OPT_NATIVE,
	OPT_NO_FOLLOW,
	OPT_MAX_OVERHEAD,
	OPT_UNWIND,
	OPT_UNWIND_MEM,
	OPT_DEBUG_DIR,
	OPT_MATCH,
	OPT_CGROUP,
	OPT_ALL_PYTHON,
	OPT_METRICS,
	OPT_PUSH,
	OPT_PUSH_TENANT,
	OPT_PUSH_SERVICE,
	OPT_PPROF_DIR,
	OPT_PPROF_KEEP,
	OPT_PPROF_MAX_AGE,
	OPT_STEP
};

static const struct option long_opts[] = {
    {"pid", required_argument, NULL, 'p'},
    {"command", required_argument, NULL, 'c'},
    {"top", required_argument, NULL, 'T'},
    {"min-age", required_argument, NULL, OPT_MIN_AGE},
    {"min-size", required_argument, NULL, OPT_MIN_SIZE},
    {"max-size", required_argument, NULL, OPT_MAX_SIZE},
    {"output", required_argument, NULL, 'o'},
    {"format", required_argument, NULL, 'f'},
    {"layers", required_argument, NULL, 'l'},
    {"sort", required_argument, NULL, 's'},
    {"max-allocs", required_argument, NULL, OPT_MAX_ALLOCS},
    {"torch-raw-alloc", no_argument, NULL, OPT_TORCH_RAW},
    {"step", required_argument, NULL, OPT_STEP},
    {"no-python", no_argument, NULL, OPT_NO_PYTHON},
    {"native", no_argument, NULL, OPT_NATIVE},
    {"no-follow", no_argument, NULL, OPT_NO_FOLLOW},
    {"max-overhead", required_argument, NULL, OPT_MAX_OVERHEAD},
    {"unwind", required_argument, NULL, OPT_UNWIND},
    {"unwind-mem", required_argument, NULL, OPT_UNWIND_MEM},
    {"debug-dir", required_argument, NULL, OPT_DEBUG_DIR},
    {"html", required_argument, NULL, OPT_HTML},
    {"json", required_argument, NULL, OPT_JSON},
    {"pprof", required_argument, NULL, OPT_PPROF},
    {"max-stacks", required_argument, NULL, OPT_MAX_STACKS},
    {"match", required_argument, NULL, OPT_MATCH},
    {"cgroup", required_argument, NULL, OPT_CGROUP},
    {"all-python", no_argument, NULL, OPT_ALL_PYTHON},
    {"metrics-listen", required_argument, NULL, OPT_METRICS},
    {"push", required_argument, NULL, OPT_PUSH},
    {"push-tenant", required_argument, NULL, OPT_PUSH_TENANT},
    {"push-service", required_argument, NULL, OPT_PUSH_SERVICE},
    {"pprof-dir", required_argument, NULL, OPT_PPROF_DIR},
    {"pprof-keep", required_argument, NULL, OPT_PPROF_KEEP},
    {"pprof-max-age", required_argument, NULL, OPT_PPROF_MAX_AGE},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {},
};

int ml_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int ml_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	uint64_t mul = 1;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end) {
		switch (*end) {
		case 'k':
		case 'K': mul = 1ULL << 10; break;
		case 'm':
		case 'M': mul = 1ULL << 20; break;
		case 'g':
		case 'G': mul = 1ULL << 30; break;
		default: return -EINVAL;
		}
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul;
	return 0;
}

int ml_parse_seconds(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !*s || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

void ml_free_words(char **w)
{
	if (!w)
		return;
	for (char **p = w; *p; p++)
		free(*p);
	free(w);
}

int ml_split_words(const char *s, char ***out)
{
	size_t n = 0, cap = 4, len = strlen(s), cl = 0;
	char **words = calloc(cap + 1, sizeof(*words));
	char *cur = NULL;
	char quote = 0;

	if (!words)
		return -ENOMEM;
	for (size_t i = 0;; i++) {
		char c = s[i];

		if (!quote && (c == 0 || c == ' ' || c == '\t' || c == '\n')) {
			if (cur) {
				if (n == cap) {
					char **nw = realloc(words, ((cap *= 2) + 1) * sizeof(*words));

					if (!nw)
						goto oom;
					words = nw;
				}
				words[n++] = cur;
				words[n] = NULL;
				cur = NULL;
				cl = 0;
			}
			if (c == 0)
				break;
			continue;
		}
		if (c == 0) { /* unbalanced quote */
			free(cur);
			ml_free_words(words);
			return -EINVAL;
		}
		if (!cur && !(cur = calloc(1, len + 1)))
			goto oom;
		if (quote) {
			if (c == quote) {
				quote = 0;
				continue;
			}
			if (c == '\\' && quote == '"' && (s[i + 1] == '"' || s[i + 1] == '\\'))
				c = s[++i];
		} else if (c == '\'' || c == '"') {
			quote = c;
			continue;
		} else if (c == '\\' && s[i + 1]) {
			c = s[++i];
		}
		cur[cl++] = c;
	}
	if (n == 0) {
		ml_free_words(words);
		return -EINVAL;
	}
	*out = words;
	return 0;
oom:
	free(cur);
	ml_free_words(words);
	return -ENOMEM;
}

static int bad(const char *opt, const char *val, const char *want)
{
	ml_err("invalid %s '%s': expected %s (see --help)", opt, val, want);
	return -EINVAL;
}

/* What an option not given is. */
static const struct ml_opts defaults = {
    .interval_s = 5.0,
    .top = 10,
    .max_size = UINT64_MAX,
    .max_allocs = 1048576,
    .max_stacks = 65536,
    .python = true,
    .follow = true,
    .max_overhead = 2,
    .layers = ~0U,
    .unwind_tables = true,
    .unwind_mem = 128ULL << 20, /* PyPI's torch 2.15 (CUDA build) needs 78 MiB */
    .pprof_keep = 100,
};

/* How a table option's value is read, and the type of the field it goes to. */
enum arg_kind {
	ARG_INT,     /* a whole number in range, to an int */
	ARG_U32,     /* ... to a uint32_t */
	ARG_SIZE,    /* a byte count with K/M/G suffixes in range, to a uint64_t */
	ARG_SECONDS, /* seconds in range, to a double */
	ARG_PERCENT, /* a percentage in range, '%' allowed after it, to a double */
	ARG_NAME,    /* a non-empty string (a file, a directory), to a const char * */
	ARG_ON,	     /* no value: the bool field set */
	ARG_OFF,     /* no value: the bool field cleared */
};

/* An option whose value is checked and stored the same way as others': a row, not a case of the switch. */
struct arg_rule {
	int id;		  /* getopt_long's value */
	const char *name; /* in the error message */
	enum arg_kind kind;
	size_t field; /* offsetof(struct ml_opts, ...) */
	union {
		struct {
			uint64_t min, max;
		} u; /* ARG_INT, ARG_U32, ARG_SIZE */
		struct {
			double min, max;
		} d; /* ARG_SECONDS, ARG_PERCENT */
	} range;
	const char *want; /* what the error message says was expected */
};

#define FIELD(f) offsetof(struct ml_opts, f)

static const struct arg_rule arg_rules[] = {
    {'p', "pid", ARG_INT, FIELD(pid), .range.u = {1, 0x3fffffff}, "a positive process id"},
    {'T', "--top", ARG_U32, FIELD(top), .range.u = {1, 1000000}, "a number from 1 to 1000000"},
    {OPT_MIN_AGE, "--min-age", ARG_SECONDS, FIELD(min_age_s), .range.d = {0, 1e9}, "seconds (>= 0)"},
    {OPT_MIN_SIZE, "--min-size", ARG_SIZE, FIELD(min_size), .range.u = {0, UINT64_MAX}, "a byte count like 4096 or 1M"},
    {OPT_MAX_SIZE, "--max-size", ARG_SIZE, FIELD(max_size), .range.u = {0, UINT64_MAX}, "a byte count like 4096 or 1M"},
    {OPT_MAX_OVERHEAD, "--max-overhead", ARG_PERCENT, FIELD(max_overhead), .range.d = {0.1, 100},
     "a percentage from 0.1 to 100"},
    /* at least one page of each array; at most 4 GiB of rows */
    {OPT_UNWIND_MEM, "--unwind-mem", ARG_SIZE, FIELD(unwind_mem), .range.u = {1U << 16, 4ULL << 30},
     "a byte count from 64K to 4G, like 64M"},
    {OPT_PPROF_KEEP, "--pprof-keep", ARG_U32, FIELD(pprof_keep), .range.u = {1, 1000000}, "a number from 1 to 1000000"},
    {OPT_PPROF_MAX_AGE, "--pprof-max-age", ARG_SECONDS, FIELD(pprof_max_age_s), .range.d = {1, 1e9},
     "seconds, at least 1"},
    /* 2^24 allocations: a 1.5 GiB table of pinned kernel memory, the most worth allowing */
    {OPT_MAX_ALLOCS, "--max-allocs", ARG_U32, FIELD(max_allocs), .range.u = {16, 1U << 24},
     "a number from 16 to 16777216"},
    {OPT_MAX_STACKS, "--max-stacks", ARG_U32, FIELD(max_stacks), .range.u = {16, 1U << 24},
     "a number from 16 to 16777216"},
    {'o', "--output", ARG_NAME, FIELD(output), .want = "a file name"},
    /* The extra outputs: a file each, besides the main output (-f, -o). */
    {OPT_HTML, "--html", ARG_NAME, FIELD(html), .want = "a file name"},
    {OPT_JSON, "--json", ARG_NAME, FIELD(json), .want = "a file name"},
    {OPT_PPROF, "--pprof", ARG_NAME, FIELD(pprof), .want = "a file name"},
    {OPT_CGROUP, "--cgroup", ARG_NAME, FIELD(cgroup), .want = "a cgroup directory"},
    {OPT_PPROF_DIR, "--pprof-dir", ARG_NAME, FIELD(pprof_dir), .want = "a directory"},
    {OPT_NO_PYTHON, "--no-python", ARG_OFF, FIELD(python)},
    {OPT_NATIVE, "--native", ARG_ON, FIELD(native)},
    {OPT_NO_FOLLOW, "--no-follow", ARG_OFF, FIELD(follow)},
    {OPT_TORCH_RAW, "--torch-raw-alloc", ARG_ON, FIELD(torch_raw)},
    {OPT_ALL_PYTHON, "--all-python", ARG_ON, FIELD(all_python)},
    {OPT_STEP, "--step", ARG_NAME, FIELD(step), .want = "a function name, or none"},
};

/* A percentage, "5" or "5%", in range: 0 or -EINVAL. */
static int parse_percent(const char *s, double min, double max, double *out)
{
	char *end = NULL;
	double v = strtod(s, &end);

	if (!end || end == s || (*end && strcmp(end, "%")) || !(v >= min && v <= max))
		return -EINVAL;
	*out = v;
	return 0;
}

/* A whole number or a byte count, in the rule's range: 0 or -EINVAL. */
static int parse_count(const struct arg_rule *r, const char *arg, uint64_t *v)
{
	if (r->kind != ARG_SIZE)
		return ml_parse_u64(arg, r->range.u.min, r->range.u.max, v);
	if (ml_parse_size(arg, v) || *v < r->range.u.min || *v > r->range.u.max)
		return -EINVAL;
	return 0;
}

const char *ml_opts_step(const struct ml_opts *o)
{
	if (!o->step)
		return ML_STEP_DEFAULT;
	return strcmp(o->step, "none") ? o->step : NULL;
}

/* Check a table option's value and store it; the field is left as it was when the value is refused. */
static int apply_rule(const struct arg_rule *r, const char *arg, struct ml_opts *o)
{
	void *f = (char *)o + r->field;
	uint64_t v;
	double d;

	switch (r->kind) {
	case ARG_INT:
	case ARG_U32:
	case ARG_SIZE:
		if (parse_count(r, arg, &v))
			return bad(r->name, arg, r->want);
		if (r->kind == ARG_INT)
			*(int *)f = (int)v;
		else if (r->kind == ARG_U32)
			*(uint32_t *)f = (uint32_t)v;
		else
			*(uint64_t *)f = v;
		return 0;
	case ARG_SECONDS:
	case ARG_PERCENT:
		if ((r->kind == ARG_SECONDS ? ml_parse_seconds : parse_percent)(arg, r->range.d.min, r->range.d.max,
										&d))
			return bad(r->name, arg, r->want);
		*(double *)f = d;
		return 0;
	case ARG_NAME:
		if (!*arg)
			return bad(r->name, arg, r->want);
		*(const char **)f = arg;
		return 0;
	case ARG_ON:
	case ARG_OFF: *(bool *)f = r->kind == ARG_ON; return 0;
	}
	return -EINVAL;
}

/* -c: the command's words, replacing an earlier -c's. */
static int set_command(struct ml_opts *o, const char *arg)
{
	int err;

	ml_free_words(o->cmd_argv);
	o->cmd_argv = NULL;
	err = ml_split_words(arg, &o->cmd_argv);
	if (err == -ENOMEM) {
		ml_err("out of memory");
		return err;
	}
	if (err)
		return bad("command", arg, "a command line with balanced quotes");
	return 0;
}

static int set_format(struct ml_opts *o, const char *arg)
{
	char *names = NULL;
	size_t len = 0;
	const char *name;
	FILE *f;
	int err;

	for (unsigned int i = 0; (name = ml_format_name(i)); i++)
		if (!strcmp(arg, name)) {
			o->format = (enum ml_format)i;
			return 0;
		}
	f = open_memstream(&names, &len); /* the names as report.c's table has them, for the error */
	for (unsigned int i = 0; f && (name = ml_format_name(i)); i++)
		fprintf(f, "%s%s", i ? ", " : "one of ", name);
	if (!f || fclose(f)) {
		free(names);
		return bad("--format", arg, "a format of --help");
	}
	err = bad("--format", arg, names);
	free(names);
	return err;
}

/* --match: compiled here, so that a bad expression is refused with the command line. */
static int set_match(struct ml_opts *o, const char *arg)
{
	char msg[128];
	int err;

	if (o->match)
		regfree(&o->match_re);
	o->match = NULL;
	err = regcomp(&o->match_re, arg, REG_EXTENDED | REG_NOSUB);
	if (err) {
		regerror(err, &o->match_re, msg, sizeof(msg));
		return bad("--match", arg, msg);
	}
	o->match = arg;
	return 0;
}

/* --push-tenant, --push-service: they go into HTTP headers and URLs as they are. */
static int set_push_name(struct ml_opts *o, int c, const char *arg)
{
	bool ok = *arg && strlen(arg) <= 200;

	for (const char *p = arg; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		     strchr("._-", *p);
	if (!ok)
		return bad(c == OPT_PUSH_TENANT ? "--push-tenant" : "--push-service", arg,
			   "1 to 200 letters, digits, '.', '_' or '-'");
	*(c == OPT_PUSH_TENANT ? &o->push_tenant : &o->push_service) = arg;
	return 0;
}

/* One option getopt_long returned: 0, 1 after --help or --version, or -EINVAL with its usage error printed. */
static int parse_option(int c, char **argv, struct ml_opts *o)
{
	for (size_t i = 0; i < sizeof(arg_rules) / sizeof(arg_rules[0]); i++)
		if (arg_rules[i].id == c)
			return apply_rule(&arg_rules[i], optarg, o);
	switch (c) {
	case 'c': return set_command(o, optarg);
	case 'f': return set_format(o, optarg);
	case 's':
		if (strcmp(optarg, "leak") && strcmp(optarg, "bytes"))
			return bad("--sort", optarg, "leak or bytes");
		o->sort_bytes = !strcmp(optarg, "bytes");
		return 0;
	case 'l':
		if (ml_layers_parse(optarg, &o->layers))
			return bad("--layers", optarg,
				   "a comma-separated list of libc, cuda, cuda_host, cuda_map, torch_cuda, torch_cpu, "
				   "torch_host");
		return 0;
	case OPT_UNWIND:
		if (strcmp(optarg, "tables") && strcmp(optarg, "fp"))
			return bad("--unwind", optarg, "tables or fp");
		o->unwind_tables = !strcmp(optarg, "tables");
		return 0;
	case OPT_DEBUG_DIR:
		if (!*optarg || optarg[0] != '/')
			return bad("--debug-dir", optarg, "an absolute directory name");
		o->debug_dir = optarg;
		return 0;
	case OPT_MATCH: return set_match(o, optarg);
	case OPT_METRICS:
		if (!*optarg || !strchr(optarg, ':'))
			return bad("--metrics-listen", optarg, "HOST:PORT, [IPV6]:PORT or :PORT");
		o->metrics_listen = optarg;
		return 0;
	case OPT_PUSH:
		if (strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8))
			return bad("--push", optarg, "an http:// or https:// URL");
		o->push_url = optarg;
		return 0;
	case OPT_PUSH_TENANT:
	case OPT_PUSH_SERVICE: return set_push_name(o, c, optarg);
	case 'v': o->verbose++; return 0;
	case 'h': fputs(usage, stdout); return 1;
	case 'V': printf("memleak-ai %s\n", ML_VERSION); return 1;
	case ':': ml_err("option '%s' needs a value (see --help)", argv[optind - 1]); return -EINVAL;
	default:
		if (optopt)
			ml_err("unknown option '-%c' (see --help)", optopt);
		else
			ml_err("unknown option '%s' (see --help)", argv[optind - 1]);
		return -EINVAL;
	}
}

/* [INTERVAL [COUNT]] after the options. */
static int parse_positional(int argc, char **argv, struct ml_opts *o)
{
	if (optind < argc) {
		if (ml_parse_seconds(argv[optind], 0.05, 86400, &o->interval_s))
			return bad("interval", argv[optind], "seconds between reports, 0.05 to 86400");
		optind++;
	}
	if (optind < argc) {
		if (ml_parse_u64(argv[optind], 1, UINT64_MAX, &o->count))
			return bad("count", argv[optind], "a number of reports >= 1");
		optind++;
	}
	if (optind < argc) {
		ml_err("unexpected argument '%s' (see --help)", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* Options that need or exclude each other. */
static int check_together(const struct ml_opts *o)
{
	/* --cgroup alone selects its members; beside --match or --all-python it narrows them to its members. */
	int narrows = o->cgroup && (o->match || o->all_python);

	if (!!o->pid + !!o->cmd_argv + !!o->match + !!o->cgroup - narrows + o->all_python != 1) {
		ml_err(
		    "%s",
		    o->pid || o->cmd_argv || o->match || o->cgroup || o->all_python
			? "give one of -p PID, -c COMMAND, --match, --cgroup or --all-python, not several "
			  "(--cgroup may narrow --match or --all-python)"
			: "nothing to trace: give -p PID, -c COMMAND, --match, --cgroup or --all-python (see --help)");
		return -EINVAL;
	}
	if ((o->pprof_keep != 100 || o->pprof_max_age_s) && !o->pprof_dir) {
		ml_err("--pprof-keep and --pprof-max-age go with --pprof-dir DIR");
		return -EINVAL;
	}
	if ((o->push_tenant || o->push_service) && !o->push_url) {
		ml_err("--push-tenant and --push-service go with --push URL");
		return -EINVAL;
	}
	if (o->format == ML_FMT_PPROF && !o->output) {
		ml_err("--format pprof writes a binary file: give it with -o FILE");
		return -EINVAL;
	}
	if (o->min_size > o->max_size) {
		ml_err("--min-size is larger than --max-size");
		return -EINVAL;
	}
	return 0;
}

int ml_opts__parse(int argc, char **argv, struct ml_opts *o)
{
	int c, err;

	*o = defaults;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":p:c:T:o:f:l:s:vhV", long_opts, NULL)) != -1) {
		err = parse_option(c, argv, o);
		if (err)
			return err;
	}
	err = parse_positional(argc, argv, o);
	return err ? err : check_together(o);
}

void ml_opts__free(struct ml_opts *o)
{
	if (o->match)
		regfree(&o->match_re);
	o->match = NULL;
	ml_free_words(o->cmd_argv);
	o->cmd_argv = NULL;
}
