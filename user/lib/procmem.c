/* /proc/PID/smaps_rollup: Rss, Anonymous, Private_Dirty and Pss of a process. */
#define _GNU_SOURCE
#include "lib/procmem.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROLLUP_MAX 4096 /* the file is about 700 bytes: anything larger is not one */

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

int ml_procmem__read(int pid, struct ml_procmem *out)
{
	char path[64], buf[ROLLUP_MAX + 1];
	ssize_t n, len = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	while (len < ROLLUP_MAX && (n = read(fd, buf + len, (size_t)(ROLLUP_MAX - len))) > 0)
		len += n;
	close(fd);
	if (len >= ROLLUP_MAX)
		return -EINVAL;
	buf[len] = '\0';
	/* A process that exited (a zombie) has no mappings: its rollup is empty. */
	return len ? ml_procmem__parse(buf, out) : -ESRCH;
}
