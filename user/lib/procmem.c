/* /proc/PID/smaps_rollup and statm: Rss, Anonymous, Private_Dirty and Pss of a process. */
#define _GNU_SOURCE
#include "lib/procmem.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROLLUP_MAX 4096 /* the file is about 700 bytes: anything larger is not one */
#define STATM_MAX 256	/* seven numbers */

int ml_procmem__parse(const char *text, struct ml_procmem *out)
{
	static const struct {
		const char *name;
		size_t off;
	} fields[] = {
	    {"Rss:", offsetof(struct ml_procmem, rss)},
	    {"Anonymous:", offsetof(struct ml_procmem, anon)},
	    {"Private_Dirty:", offsetof(struct ml_procmem, private_dirty)},
	    {"Pss:", offsetof(struct ml_procmem, pss)},
	};
	unsigned int seen = 0;

	*out = (struct ml_procmem){};
	for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			size_t n = strlen(fields[i].name);
			unsigned long long kb;
			char *end;

			if (strncmp(line, fields[i].name, n))
				continue;
			errno = 0;
			kb = strtoull(line + n, &end, 10);
			while (*end == ' ')
				end++;
			if (errno || end == line + n || strncmp(end, "kB", 2) || kb > UINT64_MAX / 1024)
				return -EINVAL;
			*(uint64_t *)((char *)out + fields[i].off) = (uint64_t)kb * 1024;
			seen |= 1U << i;
		}
	}
	return seen == (1U << (sizeof(fields) / sizeof(fields[0]))) - 1 ? 0 : -EINVAL;
}

/*
 * /proc/PID/NAME into buf (max bytes, then a NUL), at most max - 1 of it read: *len gets how many. 0, -ESRCH
 * when the process is gone, -EINVAL when the file fills buf (larger than any it could be), -errno.
 */
static int read_proc_text(int pid, const char *name, char *buf, size_t max, size_t *len)
{
	char path[64];
	ssize_t n;
	int fd;

	*len = 0;
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	while (*len < max - 1 && (n = read(fd, buf + *len, max - 1 - *len)) > 0)
		*len += (size_t)n;
	close(fd);
	buf[*len] = '\0';
	return *len >= max - 1 ? -EINVAL : 0;
}

int ml_procmem__read(int pid, struct ml_procmem *out)
{
	char buf[ROLLUP_MAX + 1];
	size_t len;
	int err = read_proc_text(pid, "smaps_rollup", buf, sizeof(buf), &len);

	if (err)
		return err;
	/* A process that exited (a zombie) has no mappings: its rollup is empty. */
	return len ? ml_procmem__parse(buf, out) : -ESRCH;
}

int ml_procmem__parse_statm(const char *text, uint64_t page, struct ml_procmem *out)
{
	unsigned long long size, resident, shared;
	int used = 0;

	/* size resident shared text lib data dt, in pages; resident counts anonymous, file and shared pages. */
	if (sscanf(text, "%llu %llu %llu %*u %*u %*u %*u%n", &size, &resident, &shared, &used) != 3 || !used ||
	    (text[used] && text[used] != '\n') || shared > resident || resident > UINT64_MAX / page)
		return -EINVAL;
	out->rss = (uint64_t)resident * page;
	out->anon = (uint64_t)(resident - shared) * page;
	return 0;
}

int ml_procmem__read_statm(int pid, struct ml_procmem *out)
{
	char buf[STATM_MAX + 1];
	size_t len;
	int err = read_proc_text(pid, "statm", buf, sizeof(buf), &len);

	if (err)
		return err;
	/* A zombie's counters are all zero: its memory is gone, as an empty rollup says. */
	if (!strncmp(buf, "0 0 ", 4))
		return -ESRCH;
	return ml_procmem__parse_statm(buf, (uint64_t)sysconf(_SC_PAGESIZE), out);
}

#define STATUS_MAX 8192 /* /proc/PID/status is about 1.5 KiB */

int ml_proc_hwm(int pid, uint64_t *out)
{
	char buf[STATUS_MAX + 1], *p;
	unsigned long long kb;
	size_t len;
	int err = read_proc_text(pid, "status", buf, sizeof(buf), &len);

	if (err)
		return err;
	/* A zombie's status has no Vm lines: its memory is gone. */
	p = strstr(buf, "\nVmHWM:");
	if (!p)
		return -ESRCH;
	if (sscanf(p + 7, " %llu kB", &kb) != 1)
		return -EINVAL;
	*out = (uint64_t)kb * 1024;
	return 0;
}

/* The first field of a task's schedstat: its time on a CPU, in ns. */
static int task_cpu_ns(int dfd, const char *tid, uint64_t *ns)
{
	char path[NAME_MAX + 16], buf[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/schedstat", tid);
	fd = openat(dfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = 0;
	return sscanf(buf, "%" SCNu64, ns) == 1 ? 0 : -EINVAL;
}

int ml_proc_cpu_ns(int pid, uint64_t *out)
{
	char path[64];
	struct dirent *e;
	uint64_t ns;
	DIR *d;

	*out = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && !task_cpu_ns(dirfd(d), e->d_name, &ns))
			*out += ns;
	closedir(d);
	return 0;
}
