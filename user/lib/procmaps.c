/* Parsing of /proc/PID/maps and opening the files behind a process's mappings. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/procmaps.h"

#define DELETED_SUFFIX " (deleted)"

/*
 * One unsigned number made only of digits of the base: strtoull alone would also take leading
 * blanks, a sign or a "0x" prefix, none of which the kernel prints.
 */
static int parse_num(const char **pp, int base, uint64_t *out)
{
	const char *p = *pp;
	unsigned long long v;
	char *end;
	size_t n = 0;

	while (base == 16 ? isxdigit((unsigned char)p[n]) : isdigit((unsigned char)p[n]))
		n++;
	if (!n)
		return -EINVAL;
	errno = 0;
	v = strtoull(p, &end, base);
	if (errno || end != p + n)
		return -EINVAL;
	*out = v;
	*pp = end;
	return 0;
}

static int expect(const char **pp, char c)
{
	if (**pp != c)
		return -EINVAL;
	(*pp)++;
	return 0;
}

/* line is NUL-terminated, without its newline. On success mp->path may hold a malloc'd string. */
static int parse_line(const char *line, struct ml_mapping *mp)
{
	static const char perm_chars[4][2] = {{'r', '-'}, {'w', '-'}, {'x', '-'}, {'p', 's'}};
	const char *p = line;
	uint64_t major, minor;
	size_t plen;
	int i;

	memset(mp, 0, sizeof(*mp));
	if (parse_num(&p, 16, &mp->start) || expect(&p, '-') || parse_num(&p, 16, &mp->end) || expect(&p, ' '))
		return -EINVAL;
	if (mp->start >= mp->end)
		return -EINVAL;
	for (i = 0; i < 4; i++) {
		if (p[i] != perm_chars[i][0] && p[i] != perm_chars[i][1])
			return -EINVAL;
		mp->perms[i] = p[i];
	}
	mp->perms[4] = '\0';
	p += 4;
	if (expect(&p, ' ') || parse_num(&p, 16, &mp->offset) || expect(&p, ' '))
		return -EINVAL;
	if (parse_num(&p, 16, &major) || expect(&p, ':') || parse_num(&p, 16, &minor))
		return -EINVAL;
	if (major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	mp->dev_major = (uint32_t)major;
	mp->dev_minor = (uint32_t)minor;
	if (expect(&p, ' ') || parse_num(&p, 10, &mp->inode))
		return -EINVAL;
	if (*p == '\0')
		return 0;
	/* The kernel pads with blanks up to the path column; anonymous lines end in one blank. */
	if (*p != ' ')
		return -EINVAL;
	while (*p == ' ')
		p++;
	plen = strlen(p);
	if (!plen)
		return 0;
	if (plen > strlen(DELETED_SUFFIX) && !strcmp(p + plen - strlen(DELETED_SUFFIX), DELETED_SUFFIX)) {
		plen -= strlen(DELETED_SUFFIX);
		mp->deleted = true;
	}
	mp->path = strndup(p, plen);
	if (!mp->path)
		return -ENOMEM;
	return 0;
}

static int cmp_mapping(const void *a, const void *b)
{
	const struct ml_mapping *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

void ml_maps__clear(struct ml_maps *m)
{
	size_t i;

	if (!m)
		return;
	for (i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

int ml_maps__parse(const char *text, size_t len, struct ml_maps *out)
{
	struct ml_maps m = {NULL, 0};
	size_t nlines = 1, i;
	char *buf, *line, *nl;
	bool sorted = true;
	int err = 0;

	out->v = NULL;
	out->n = 0;
	if (!len)
		return 0;
	if (len == SIZE_MAX)
		return -ENOMEM;
	/* A NUL inside the text would silently cut a line short. */
	if (memchr(text, '\0', len))
		return -EINVAL;
	buf = malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, text, len);
	buf[len] = '\0';
	for (i = 0; i < len; i++)
		nlines += buf[i] == '\n';
	m.v = calloc(nlines, sizeof(*m.v));
	if (!m.v) {
		free(buf);
		return -ENOMEM;
	}
	for (line = buf; *line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		else
			nl = line + strlen(line);
		err = parse_line(line, &m.v[m.n]);
		if (err) {
			free(m.v[m.n].path);
			break;
		}
		if (m.n && m.v[m.n].start < m.v[m.n - 1].start)
			sorted = false;
		m.n++;
	}
	free(buf);
	if (err) {
		ml_maps__clear(&m);
		return err;
	}
	if (!m.n) {
		free(m.v);
		return 0;
	}
	if (!sorted)
		qsort(m.v, m.n, sizeof(*m.v), cmp_mapping);
	*out = m;
	return 0;
}

static int read_all(int fd, char **out, size_t *out_len)
{
	size_t cap = 64 * 1024, len = 0;
	char *buf = malloc(cap), *nbuf;
	ssize_t r;
	int err;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (cap > SIZE_MAX / 2) {
				free(buf);
				return -ENOMEM;
			}
			nbuf = realloc(buf, cap * 2);
			if (!nbuf) {
				free(buf);
				return -ENOMEM;
			}
			buf = nbuf;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			free(buf);
			return err;
		}
		if (!r)
			break;
		len += (size_t)r;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

int ml_maps__read_at(int proc_pid_dirfd, struct ml_maps *out)
{
	char *text = NULL;
	size_t len = 0;
	int fd, err;

	out->v = NULL;
	out->n = 0;
	fd = openat(proc_pid_dirfd, "maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = read_all(fd, &text, &len);
	close(fd);
	if (err)
		return err;
	err = ml_maps__parse(text, len, out);
	free(text);
	return err;
}

bool ml_maps__is_exe(int pid, const struct ml_mapping *mp)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	return !stat(path, &st) && st.st_ino == mp->inode && major(st.st_dev) == mp->dev_major &&
	       minor(st.st_dev) == mp->dev_minor;
}

int ml_proc_open(int pid, const char *name)
{
	char path[64];
	int fd;

	if (snprintf(path, sizeof(path), "/proc/%d/%s", pid, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : errno == ENOENT ? -ESRCH : -errno;
}

static int open_proc_dir(int pid)
{
	char name[32];
	int fd;

	if (pid <= 0)
		return -EINVAL;
	/* Cannot truncate: "/proc/" and at most 11 characters of an int. */
	snprintf(name, sizeof(name), "/proc/%d", pid);
	fd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return fd;
}

int ml_maps__read(int pid, struct ml_maps *out)
{
	int dirfd, err;

	out->v = NULL;
	out->n = 0;
	dirfd = open_proc_dir(pid);
	if (dirfd < 0)
		return dirfd;
	err = ml_maps__read_at(dirfd, out);
	close(dirfd);
	return err;
}

const struct ml_mapping *ml_maps__find(const struct ml_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n, mid;

	/* Last mapping starting at or below addr. */
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= m->v[lo - 1].end)
		return NULL;
	return &m->v[lo - 1];
}

/*
 * Turn an O_PATH fd into a readable one, but only for a regular file: opening a FIFO would block
 * and opening a device node can have side effects, and the target chooses what its paths name.
 */
static int reopen_regular(int pathfd)
{
	char name[48];
	struct stat st;
	int fd;

	if (fstat(pathfd, &st)) {
		fd = -errno;
		close(pathfd);
		return fd;
	}
	if (!S_ISREG(st.st_mode)) {
		close(pathfd);
		return -ENOEXEC;
	}
	snprintf(name, sizeof(name), "/proc/self/fd/%d", pathfd);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = -errno;
	close(pathfd);
	return fd;
}

static void map_files_name(const struct ml_mapping *mp, char *buf, size_t size)
{
	snprintf(buf, size, "map_files/%" PRIx64 "-%" PRIx64, mp->start, mp->end);
}

static int open_map_files(int dirfd, const struct ml_mapping *mp)
{
	/* "map_files/" plus two 16-digit numbers and a dash: cannot truncate. */
	char name[64];
	int fd;

	map_files_name(mp, name, sizeof(name));
	fd = openat(dirfd, name, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return reopen_regular(fd);
}

/* Resolve path as the target sees it: absolute symlinks and ".." stay inside its root. */
static int open_in_root(int dirfd, const char *path)
{
	struct open_how how = {
	    .flags = O_PATH | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int rootfd, fd;

	while (*path == '/')
		path++;
	if (!*path)
		return -ENOENT;
	rootfd = openat(dirfd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	/* Kernels before 5.6: plain lookup, the best that can be had there. */
	if (fd < 0 && errno == ENOSYS)
		fd = openat(rootfd, path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		close(rootfd);
		return fd;
	}
	close(rootfd);
	return reopen_regular(fd);
}

int ml_open_in_root(int pid, const char *path)
{
	char dir[32];
	int dirfd, fd;

	if (pid > 0) {
		snprintf(dir, sizeof(dir), "/proc/%d", pid);
		dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dirfd >= 0 && !faccessat(dirfd, "root", X_OK, 0)) {
			fd = open_in_root(dirfd, path);
			close(dirfd);
			return fd;
		}
		if (dirfd >= 0)
			close(dirfd);
	}
	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return reopen_regular(fd);
}

/* The kernel prints a newline in a file name as "\012"; undo that. NULL if there is none. */
static char *unescape_newlines(const char *path)
{
	const char *p;
	char *s, *q;

	if (!strstr(path, "\\012"))
		return NULL;
	s = malloc(strlen(path) + 1);
	if (!s)
		return NULL;
	for (p = path, q = s; *p;) {
		if (!strncmp(p, "\\012", 4)) {
			*q++ = '\n';
			p += 4;
		} else {
			*q++ = *p++;
		}
	}
	*q = '\0';
	return s;
}

static int open_root_path(int dirfd, const char *path)
{
	char *alt;
	int fd;

	fd = open_in_root(dirfd, path);
	if (fd != -ENOENT)
		return fd;
	alt = unescape_newlines(path);
	if (!alt)
		return fd;
	fd = open_in_root(dirfd, alt);
	free(alt);
	return fd;
}

int ml_maps__open_file_at(int proc_pid_dirfd, const struct ml_mapping *mp)
{
	int fd;

	if (mp->start >= mp->end)
		return -EINVAL;
	fd = open_map_files(proc_pid_dirfd, mp);
	if (fd >= 0)
		return fd;
	if (!mp->path || mp->path[0] != '/')
		return fd;
	return open_root_path(proc_pid_dirfd, mp->path);
}

int ml_maps__open_file(int pid, const struct ml_mapping *mp)
{
	int dirfd, fd;

	dirfd = open_proc_dir(pid);
	if (dirfd < 0)
		return dirfd;
	fd = ml_maps__open_file_at(dirfd, mp);
	close(dirfd);
	return fd;
}

int ml_maps__attach_path_of(int pid, uint64_t inode, uint32_t major, uint32_t minor, char **out)
{
	struct ml_maps maps = {0};
	int err = ml_maps__read(pid, &maps);

	*out = NULL;
	for (size_t i = 0; !err && i < maps.n; i++) {
		const struct ml_mapping *mp = &maps.v[i];

		if (mp->inode == inode && mp->dev_major == major && mp->dev_minor == minor && !mp->offset && mp->path) {
			err = ml_maps__attach_path(pid, mp, out);
			ml_maps__clear(&maps);
			return err;
		}
	}
	ml_maps__clear(&maps);
	return err ? err : -ENOENT;
}

int ml_maps__attach_path(int pid, const struct ml_mapping *mp, char **out)
{
	char name[64];
	char *s, *alt;
	int dirfd, fd;

	*out = NULL;
	if (mp->start >= mp->end)
		return -EINVAL;
	dirfd = open_proc_dir(pid);
	if (dirfd < 0)
		return dirfd;
	fd = open_map_files(dirfd, mp);
	if (fd >= 0) {
		close(fd);
		close(dirfd);
		map_files_name(mp, name, sizeof(name));
		if (asprintf(&s, "/proc/%d/%s", pid, name) < 0)
			return -ENOMEM;
		*out = s;
		return 0;
	}
	if (!mp->path || mp->path[0] != '/') {
		close(dirfd);
		return fd;
	}
	/*
	 * The kernel resolves this string without RESOLVE_IN_ROOT; checking that it opens here only
	 * tells that the file exists, so map_files (an exact reference) is preferred above.
	 */
	alt = NULL;
	fd = open_in_root(dirfd, mp->path);
	if (fd == -ENOENT) {
		alt = unescape_newlines(mp->path);
		if (alt)
			fd = open_in_root(dirfd, alt);
	}
	close(dirfd);
	if (fd < 0) {
		free(alt);
		return fd;
	}
	close(fd);
	fd = asprintf(&s, "/proc/%d/root%s", pid, alt ? alt : mp->path);
	free(alt);
	if (fd < 0)
		return -ENOMEM;
	*out = s;
	return 0;
}

int ml_proc_stat(int pid, struct ml_proc_stat *out)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	FILE *f;
	int ppid;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	/* The command name may hold anything, ')' included: the fields after it follow the last ')'. State is
	 * field 3, the parent 4, utime and stime 14 and 15. */
	if (!p || !(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ppid, &ut, &st) != 3)
		return -EINVAL;
	out->ppid = ppid;
	out->utime = ut;
	out->stime = st;
	return 0;
}
