/* A traced process's fleet labels, read once from /proc/PID/{environ,cgroup,comm}. */
#define _GNU_SOURCE
#include "lib/proclabels.h"
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOB_MAX 256 /* a job id longer than this is left out */
#define RANK_MAX 10 /* digits */
#define CONTAINER_ID 64

void ml_labels__clear(struct ml_labels *l)
{
	free(l->rank);
	free(l->local_rank);
	free(l->world_size);
	free(l->job);
	free(l->container);
	free(l->comm);
	*l = (struct ml_labels){};
}

static int set(char **dst, const char *v, size_t n)
{
	char *s = strndup(v, n);

	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

static bool all_digits(const char *v, size_t n)
{
	if (!n || n > RANK_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)v[i]))
			return false;
	return true;
}

/* A job id is any text up to JOB_MAX bytes: it is data, escaped by each output as its names are. */
static bool job_id(const char *v, size_t n)
{
	return n && n <= JOB_MAX;
}

/* One NAME=VALUE entry of the environment; only the four names are looked at. */
static int env_entry(const char *e, size_t len, struct ml_labels *out)
{
	static const struct {
		const char *name;
		size_t off;
		bool numeric;
	} vars[] = {
	    {"RANK=", offsetof(struct ml_labels, rank), true},
	    {"LOCAL_RANK=", offsetof(struct ml_labels, local_rank), true},
	    {"WORLD_SIZE=", offsetof(struct ml_labels, world_size), true},
	    {"TORCHELASTIC_RUN_ID=", offsetof(struct ml_labels, job), false},
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		size_t nl = strlen(vars[i].name);
		const char *v = e + nl;
		size_t n = len - nl;
		char **dst = (char **)((char *)out + vars[i].off);

		if (len < nl || memcmp(e, vars[i].name, nl))
			continue;
		if (vars[i].numeric ? all_digits(v, n) : job_id(v, n))
			return set(dst, v, n);
		free(*dst); /* the last definition counts, as getenv would see it */
		*dst = NULL;
		return 0;
	}
	return 0;
}

int ml_labels__parse_environ(const char *buf, size_t len, struct ml_labels *out)
{
	size_t i = 0;

	while (i < len) {
		const char *end = memchr(buf + i, '\0', len - i);
		size_t n = end ? (size_t)(end - (buf + i)) : len - i;
		int err = env_entry(buf + i, n, out);

		if (err)
			return err;
		i += n + 1;
	}
	return 0;
}

/* The last run of exactly 64 hex digits in a cgroup path: Docker, containerd and CRI-O name scopes by it. */
static int container_in(const char *path, size_t len, struct ml_labels *out)
{
	const char *found = NULL;
	size_t i = 0;

	while (i < len) {
		size_t j = i;

		while (j < len && isxdigit((unsigned char)path[j]) && !isupper((unsigned char)path[j]))
			j++;
		if (j - i == CONTAINER_ID)
			found = path + i;
		i = j > i ? j : i + 1;
	}
	return found ? set(&out->container, found, CONTAINER_ID) : 0;
}

int ml_labels__parse_cgroup(const char *text, struct ml_labels *out)
{
	const char *line = text;

	/* "ID:CONTROLLERS:PATH" per line; the v2 line (0::) or any v1 one names the container alike. */
	while (*line) {
		const char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line);
		const char *c1 = memchr(line, ':', (size_t)(end - line));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;

		if (c2) {
			int err = container_in(c2 + 1, (size_t)(end - c2 - 1), out);

			if (err || out->container)
				return err;
		}
		if (!nl)
			break;
		line = nl + 1;
	}
	return 0;
}

static FILE *open_proc(int pid, const char *what)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	return fopen(path, "re");
}

/* The environment, one entry at a time: memory bounded by the kernel's limit on one string. */
static int read_environ(int pid, struct ml_labels *out)
{
	FILE *f = open_proc(pid, "environ");
	char *e = NULL;
	size_t cap = 0;
	ssize_t n;
	int err = 0;

	if (!f)
		return -errno;
	while (!err && (n = getdelim(&e, &cap, '\0', f)) > 0)
		err = env_entry(e, e[n - 1] ? (size_t)n : (size_t)n - 1, out);
	if (!err && ferror(f))
		err = -EIO;
	free(e);
	fclose(f);
	return err;
}

static int read_small(int pid, const char *what, char **out)
{
	FILE *f = open_proc(pid, what);
	size_t cap = 0;
	ssize_t n;

	*out = NULL;
	if (!f)
		return -errno;
	n = getdelim(out, &cap, '\0', f);
	fclose(f);
	if (n < 0) {
		free(*out);
		*out = strdup("");
	}
	return *out ? 0 : -ENOMEM;
}

int ml_labels__read(int pid, struct ml_labels *out)
{
	char *text = NULL;
	int err;

	*out = (struct ml_labels){};
	err = read_small(pid, "comm", &out->comm);
	if (err)
		goto fail;
	if (*out->comm && out->comm[strlen(out->comm) - 1] == '\n') /* the kernel's; a name may hold more */
		out->comm[strlen(out->comm) - 1] = '\0';
	/* Another user's process without the right to read its environment: labels from what can be read. */
	err = read_environ(pid, out);
	if (err && err != -EACCES && err != -EPERM)
		goto fail;
	err = read_small(pid, "cgroup", &text);
	if (!err)
		err = ml_labels__parse_cgroup(text, out);
	free(text);
	if (err && err != -EACCES && err != -EPERM)
		goto fail;
	return 0;
fail:
	ml_labels__clear(out);
	return err == -ENOENT ? -ESRCH : err;
}
