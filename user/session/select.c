/* Whole-node targets: the processes of the machine that --match, --cgroup or --all-python select. */
#define _GNU_SOURCE
#include "session/select.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/grow.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/procmaps.h"

#define CGROUP_DEPTH 32 /* nested cgroups walked below --cgroup (a pod's containers, their children) */

/* A process as last looked at: exec changes its comm, so (start time, comm) tells a new image. */
struct seen {
	int pid;
	uint64_t start, comm;
	bool matched; /* it matched (and was offered) when last looked at */
};

struct selector {
	struct selector_opts o;
	struct seen *prev, *cur;
	size_t nprev, ncur, cap_prev, cap_cur;
	int *members; /* --cgroup: the pids listed in it */
	size_t nmembers, cap_members;
	bool cgroup_dir; /* --cgroup names a directory of the cgroup file system, not a path of /proc/PID/cgroup */
};

int selector__new(const struct selector_opts *o, struct selector **out)
{
	struct selector *s = calloc(1, sizeof(*s));
	struct stat st;
	char path[PATH_MAX];
	int err = 0;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->o = *o;
	if (o->cgroup) {
		/*
		 * A directory of the cgroup file system (/sys/fs/cgroup/...): its members are listed in cgroup.procs.
		 * Otherwise a cgroup as /proc/PID/cgroup names it (/kubepods/pod1234, /system.slice/x.service): a
		 * process belongs when one of its hierarchies puts it there or below.
		 */
		errno = 0;
		if (snprintf(path, sizeof(path), "%s/cgroup.procs", o->cgroup) >= (int)sizeof(path)) {
			err = -ENAMETOOLONG;
		} else if (!stat(path, &st)) {
			s->cgroup_dir = true;
		} else if (o->cgroup[0] != '/' || !strncmp(o->cgroup, "/sys/fs/cgroup", 14) || errno != ENOENT) {
			err = errno ? -errno : -EINVAL;
			ml_dbg("--cgroup: stat %s: %s", path, strerror(-err));
		}
		if (err) {
			free(s);
			return err;
		}
	}
	*out = s;
	return 0;
}

void selector__free(struct selector *s)
{
	if (!s)
		return;
	free(s->prev);
	free(s->cur);
	free(s->members);
	free(s);
}

/* A whole small /proc file, NUL-terminated; its length in *len. NULL with errno set. */
static char *read_proc(int pid, const char *what, size_t *len)
{
	char path[64], *buf = NULL;
	size_t cap = 0, n = 0;
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (;;) {
		if (ml_grow(&buf, &cap, n + 4097, 1)) {
			errno = ENOMEM;
			break;
		}
		r = read(fd, buf + n, 4096);
		if (r <= 0) {
			if (r == 0) {
				buf[n] = '\0';
				*len = n;
				close(fd);
				return buf;
			}
			break;
		}
		n += (size_t)r;
	}
	close(fd);
	free(buf);
	return NULL;
}

/* Start time (clock ticks since boot) and a hash of comm, from /proc/PID/stat. 0 or -errno. */
static int stat_of(int pid, struct seen *out)
{
	size_t len;
	char *buf = read_proc(pid, "stat", &len), *open_paren, *close_paren, *p;
	int field = 2; /* the field p is in: comm, the second, ends at its ")" */
	int err = -EINVAL;

	if (!buf)
		return -errno;
	/* "PID (COMM) S PPID ...": comm may hold spaces and parentheses, so it ends at the last ')'. */
	open_paren = strchr(buf, '(');
	close_paren = strrchr(buf, ')');
	if (open_paren && close_paren && close_paren > open_paren) {
		out->pid = pid;
		*close_paren = '\0';
		out->comm = ml_hash_str(open_paren + 1, 0);
		for (p = close_paren + 1; *p && field < 22; p++)
			if (*p == ' ')
				field++;
		if (field == 22 && sscanf(p, "%" SCNu64, &out->start) == 1)
			err = 0;
	}
	free(buf);
	return err;
}

static bool is_python_exe(const char *path)
{
	const char *b = strrchr(path, '/');
	size_t n;

	b = b ? b + 1 : path;
	n = strlen(b);
	if (n >= 10 && !strcmp(b + n - 10, " (deleted)"))
		n -= 10;
	/* python3.11, python3.12, python3.13 and their debug builds (python3.13d) */
	return (n == 10 || (n == 11 && b[10] == 'd')) && !strncmp(b, "python3.1", 9) && b[9] >= '1' && b[9] <= '3';
}

/* CPython 3.11-3.13: the executable, or a libpython3.1x it maps (an embedding program). */
static bool python_process(int pid)
{
	char path[64], exe[PATH_MAX];
	struct ml_maps maps = {};
	ssize_t n;
	bool yes = false;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return false; /* a kernel thread, or gone */
	exe[n] = '\0';
	if (is_python_exe(exe))
		return true;
	if (ml_maps__read(pid, &maps))
		return false;
	for (size_t i = 0; i < maps.n && !yes; i++) {
		const char *b = maps.v[i].path ? strrchr(maps.v[i].path, '/') : NULL;

		yes = b && !strncmp(b + 1, "libpython3.1", 12) && b[13] >= '1' && b[13] <= '3' && b[14] == '.';
	}
	ml_maps__clear(&maps);
	return yes;
}

static bool command_matches(const regex_t *re, int pid)
{
	size_t len;
	char *cmd = read_proc(pid, "cmdline", &len);
	bool yes;

	if (!cmd)
		return false;
	if (!len) {
		free(cmd);
		return false; /* a kernel thread or a zombie: nothing to trace */
	}
	/* Words joined by spaces, as a person reads the command line. */
	for (size_t i = 0; i + 1 < len; i++)
		if (!cmd[i])
			cmd[i] = ' ';
	yes = !regexec(re, cmd, 0, NULL, 0);
	free(cmd);
	return yes;
}

/* Whether /proc/PID/cgroup puts the process in cg or below it, in any hierarchy (v1 or v2). */
static bool in_cgroup(const char *cg, int pid)
{
	size_t len, n = strlen(cg);
	char *text = read_proc(pid, "cgroup", &len), *line, *save = NULL;
	bool yes = false;

	while (n > 1 && cg[n - 1] == '/')
		n--;
	for (line = text ? strtok_r(text, "\n", &save) : NULL; line && !yes; line = strtok_r(NULL, "\n", &save)) {
		const char *c = strchr(line, ':');
		const char *p = c ? strchr(c + 1, ':') : NULL;

		yes = p && !strncmp(p + 1, cg, n) && (p[1 + n] == '\0' || p[1 + n] == '/' || n == 1);
	}
	free(text);
	return yes;
}

/* --cgroup alone, or narrowing --match or --all-python to its members (a directory's are the only candidates). */
static bool matches(struct selector *s, int pid)
{
	if (pid == s->o.self)
		return false;
	if (s->o.cgroup && !s->cgroup_dir && !in_cgroup(s->o.cgroup, pid))
		return false;
	if (s->o.match)
		return command_matches(s->o.match, pid);
	return !s->o.all_python || python_process(pid);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Every pid listed in dir/cgroup.procs and in the cgroups below it. */
static int cgroup_members(struct selector *s, const char *dir, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	FILE *f;
	DIR *d;
	int pid, err = 0;

	if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "re");
	if (!f)
		return depth ? 0 : -errno; /* a child cgroup removed meanwhile */
	while (fscanf(f, "%d", &pid) == 1) {
		if (ml_grow(&s->members, &s->cap_members, s->nmembers + 1, sizeof(int))) {
			fclose(f);
			return -ENOMEM;
		}
		s->members[s->nmembers++] = pid;
	}
	fclose(f);
	if (depth >= CGROUP_DEPTH || !(d = opendir(dir)))
		return 0;
	while (!err && (de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		err = cgroup_members(s, path, depth + 1);
	}
	closedir(d);
	return err;
}

/* The candidates of this scan, ascending: the cgroup's members, or every process. */
static int candidates(struct selector *s)
{
	struct dirent *de;
	DIR *d;
	int err;

	s->nmembers = 0;
	if (s->cgroup_dir) {
		err = cgroup_members(s, s->o.cgroup, 0);
		if (err)
			return err;
	} else {
		d = opendir("/proc");
		if (!d)
			return -errno;
		while ((de = readdir(d))) {
			char *end;
			long pid = strtol(de->d_name, &end, 10);

			if (*end || pid <= 0 || pid > INT32_MAX)
				continue;
			if (ml_grow(&s->members, &s->cap_members, s->nmembers + 1, sizeof(int))) {
				closedir(d);
				return -ENOMEM;
			}
			s->members[s->nmembers++] = (int)pid;
		}
		closedir(d);
	}
	qsort(s->members, s->nmembers, sizeof(int), cmp_int);
	return 0;
}

static const struct seen *find_prev(const struct selector *s, int pid)
{
	size_t lo = 0, hi = s->nprev;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->prev[mid].pid == pid)
			return &s->prev[mid];
		if (s->prev[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int selector__scan(struct selector *s, int (*add)(void *ctx, int pid), void *ctx)
{
	int offered = 0, err = candidates(s);

	if (err)
		return err;
	s->ncur = 0;
	for (size_t i = 0; i < s->nmembers; i++) {
		const struct seen *old;
		struct seen now = {};

		if ((i && s->members[i] == s->members[i - 1]) || stat_of(s->members[i], &now))
			continue; /* listed twice, or gone */
		if (ml_grow(&s->cur, &s->cap_cur, s->ncur + 1, sizeof(*s->cur)))
			return -ENOMEM;
		old = find_prev(s, now.pid);
		/* Looked at already, same image: once offered, or (a cgroup path) unless it may have moved in. */
		if (old && old->start == now.start && old->comm == now.comm &&
		    (old->matched || !s->o.cgroup || s->cgroup_dir)) {
			now.matched = old->matched;
		} else if (matches(s, now.pid)) {
			now.matched = true;
			if (add(ctx, now.pid) == 0)
				offered++;
		}
		s->cur[s->ncur++] = now;
	}
	/* This scan's view becomes the one the next scan compares with. */
	{
		struct seen *t = s->prev;
		size_t c = s->cap_prev;

		s->prev = s->cur;
		s->nprev = s->ncur;
		s->cap_prev = s->cap_cur;
		s->cur = t;
		s->cap_cur = c;
	}
	return offered;
}
