/* Command-line options: parsing, validation and the option struct every module is configured from. */
#ifndef ML_OPTS_H
#define ML_OPTS_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include "report/report.h"

struct ml_opts {
	int pid;	    /* -p; 0 when -c is used */
	char **cmd_argv;    /* -c, split into words (NULL-terminated); NULL when -p is used */
	double interval_s;  /* seconds between reports */
	uint64_t count;	    /* number of reports, 0 = until the target exits or a signal */
	uint32_t top;	    /* stacks per report */
	double min_age_s;   /* only allocations at least this old */
	uint64_t min_size;  /* only allocations of at least this many bytes */
	uint64_t max_size;  /* ... and at most this many */
	const char *output; /* -o FILE, NULL = stdout */
	const char *html;   /* --html FILE: the final report as a page */
	const char *json;   /* --json FILE: every report as JSON Lines, besides the main output */
	const char *pprof;  /* --pprof FILE: the final report as a profile, besides the main output */
	enum ml_format format;
	int verbose;
	uint32_t max_allocs;   /* outstanding-allocation table size */
	uint32_t max_stacks;   /* size of the kernel's cache of stacks handed over */
	unsigned int layers;   /* bit mask of enum ml_layer to trace (--layers) */
	bool torch_raw;	       /* --torch-raw-alloc: return probes on the caching allocator's raw_alloc */
	const char *step;      /* --step FUNCTION: the step clock's function; "none": no step clock; NULL: default */
	bool sort_bytes;       /* --sort bytes: plain outstanding-bytes ranking, no leak candidates first */
	bool python;	       /* Python frames in stacks (--no-python turns them off) */
	bool native;	       /* --native: text shows every native frame of Python stacks */
	bool follow;	       /* children and exec followed (--no-follow turns it off) */
	double max_overhead;   /* --max-overhead, percent of the traced processes' CPU time */
	bool unwind_tables;    /* --unwind tables (default) or fp */
	uint64_t unwind_mem;   /* --unwind-mem bytes */
	const char *debug_dir; /* --debug-dir, NULL: /usr/lib/debug */
	/* Whole-node selectors, instead of -p or -c: every matching process, now and as they start. */
	const char *match; /* --match REGEX (compiled in match_re) */
	regex_t match_re;
	const char *cgroup;	    /* --cgroup PATH */
	bool all_python;	    /* --all-python */
	const char *metrics_listen; /* --metrics-listen HOST:PORT */
	const char *push_url;	    /* --push URL */
	const char *push_tenant;    /* --push-tenant */
	const char *push_service;   /* --push-service, NULL: "memleak-ai" */
	const char *pprof_dir;	    /* --pprof-dir */
	uint32_t pprof_keep;	    /* --pprof-keep */
	double pprof_max_age_s;	    /* --pprof-max-age, 0: no age limit */
};

/* Whether the options select processes across the node (--match, --cgroup, --all-python). */
static inline bool ml_opts_node(const struct ml_opts *o)
{
	return o->match || o->cgroup || o->all_python;
}

/* The step clock's function: --step's, ML_STEP_DEFAULT without it, NULL for --step none. */
const char *ml_opts_step(const struct ml_opts *o);

/* 0 on success, 1 when --help/--version was handled (exit 0), -EINVAL after printing a one-line error. */
int ml_opts__parse(int argc, char **argv, struct ml_opts *o);
void ml_opts__free(struct ml_opts *o);

/* Split a command line into words, honouring '...' and "..." quoting and backslash escapes; no shell. */
int ml_split_words(const char *s, char ***out);
void ml_free_words(char **w);

/* Strict number parsing: the whole string, in range. 0 or -EINVAL. */
int ml_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int ml_parse_size(const char *s, uint64_t *out); /* accepts K, M, G suffixes (powers of 1024) */
int ml_parse_seconds(const char *s, double min, double max, double *out);

#endif
