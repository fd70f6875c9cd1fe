/* The JSON Lines reader of `memleak-ai diff`: the stacks, layers and step clock of one report. */
#define _GNU_SOURCE
#include "diff/jsonin.h"
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* A number field, 0 when absent or not a number: the schema only grows, and missing means none. */
static double num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *text(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* bytes, count, per_s and per_step of a stack or a layer total. */
static struct diff_figs figs_of(const json_t *o, const char *per_s_key)
{
	const json_t *ps = json_object_get(o, "per_step"), *peak = json_object_get(o, "peak_bytes");
	struct diff_figs f = {.bytes = num(o, "bytes"), .count = num(o, "count")};

	f.peak_bytes = json_is_number(peak) ? json_number_value(peak) : f.bytes;
	f.per_s = per_s_key ? num(o, per_s_key) : 0;
	f.stepped = json_is_object(ps);
	f.per_step = f.stepped ? num(ps, "bytes") : 0;
	return f;
}

static int read_stack(struct diff_run *r, const json_t *st, size_t k, char **why)
{
	const json_t *frames = json_object_get(st, "frames"), *fr;
	const char *layer = text(st, "layer");
	struct diff_frame *v;
	struct diff_figs f;
	size_t i;
	int err;

	if (!layer || !json_is_array(frames))
		return diff__fail(why, "report %llu: stack %zu has no layer or frames", (unsigned long long)r->seq,
				  k + 1);
	v = calloc(json_array_size(frames) + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	json_array_foreach(frames, i, fr)
	{
		const json_t *line = json_object_get(fr, "line");
		const char *kind = text(fr, "kind");

		v[i] = (struct diff_frame){.python = kind && !strcmp(kind, "python"),
					   .func = text(fr, "func"),
					   .file = text(fr, "file"),
					   .line = json_is_integer(line) ? json_integer_value(line) : -1};
	}
	f = figs_of(st, "growth_bytes_per_s");
	err = diffrun__add(r, layer, v, json_array_size(frames), &f);
	free(v);
	if (!err && (!r->smallest || f.bytes < r->smallest))
		r->smallest = f.bytes;
	return err;
}

static int read_report(const json_t *rep, struct diff_run *r, char **why)
{
	const json_t *stacks = json_object_get(rep, "stacks"), *totals = json_object_get(rep, "totals");
	const json_t *steps = json_object_get(rep, "steps"), *stats = json_object_get(rep, "stats"), *v;
	const char *key;
	size_t i;
	int64_t seq;
	int err = 0;

	seq = diff_i64(num(rep, "seq"));
	r->seq = seq > 0 ? (uint64_t)seq : 0;
	if (!json_is_array(stacks))
		return diff__fail(why, "report %llu has no stacks", (unsigned long long)r->seq);
	r->stepped = json_is_object(steps);
	r->steps = num(steps, "most");
	r->partial = num(stats, "stacks_shown") < num(stats, "stacks_total");
	json_array_foreach(stacks, i, v)
	{
		if ((err = read_stack(r, v, i, why)))
			return err;
	}
	json_object_foreach((json_t *)totals, key, v)
	{
		struct diff_figs f = figs_of(v, NULL);

		if ((err = diffrun__add_layer(r, key, &f)))
			return err;
	}
	return 0;
}

static bool is_report(const json_t *o)
{
	const char *type = text(o, "type");

	return json_is_object(o) && type && !strcmp(type, "report");
}

/* The report to read, parsed: the first, or the last complete one; NULL with *why set when there is none. */
static json_t *pick_report(FILE *f, enum diff_pick pick, char **why, int *err)
{
	json_t *keep = NULL;
	char *line = NULL;
	size_t cap = 0, lineno = 0;
	ssize_t len;

	while ((len = getline(&line, &cap, f)) > 0) {
		json_error_t je;
		json_t *o;

		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		o = json_loadb(line, (size_t)len, 0, &je);
		if (!o && line[len - 1] != '\n' && keep)
			break; /* the last line, cut short */
		if (!o) {
			*err = diff__fail(why, "line %zu is not JSON: %s", lineno, je.text);
			break;
		}
		if (!is_report(o)) {
			json_decref(o);
			continue;
		}
		json_decref(keep);
		keep = o;
		if (pick == DIFF_FIRST)
			break;
	}
	free(line);
	if (*err || (!keep && (*err = diff__fail(why, "no report in it (memleak-ai's --json or -f json output)")))) {
		json_decref(keep);
		return NULL;
	}
	return keep;
}

int jsonin__read(FILE *f, enum diff_pick pick, struct diff_run *r, char **why)
{
	int err = 0;
	json_t *rep = pick_report(f, pick, why, &err);

	if (!rep)
		return err;
	if (ferror(f))
		err = diff__fail(why, "%s", strerror(errno));
	else
		err = read_report(rep, r, why);
	json_decref(rep);
	return err;
}
