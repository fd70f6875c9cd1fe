/* Parsing of /proc/PID/maps and opening the files behind a process's mappings. */
#ifndef MEMLEAK_AI_PROCMAPS_H
#define MEMLEAK_AI_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ml_mapping {
	uint64_t start, end, offset, inode;
	uint32_t dev_major, dev_minor;
	char perms[5]; /* "r-xp", NUL-terminated */
	char *path;    /* NULL for anonymous; as printed, " (deleted)" suffix removed */
	bool deleted;
};

/* Sorted by start. */
struct ml_maps {
	struct ml_mapping *v;
	size_t n;
};

/*
 * Parse the text of a maps file. *out is overwritten (not freed) and is left empty on error.
 * Returns 0, -EINVAL on any malformed line (the whole parse is rejected), -ENOMEM.
 */
int ml_maps__parse(const char *text, size_t len, struct ml_maps *out);

/* Read /proc/PID/maps fully (any size) and parse it. -ENOENT/-ESRCH if the process is gone. */
int ml_maps__read(int pid, struct ml_maps *out);

/*
 * Same, relative to an open /proc/PID directory. Holding that directory open pins the process
 * identity: once the process has exited, lookups in it fail even if the pid was reused.
 */
int ml_maps__read_at(int proc_pid_dirfd, struct ml_maps *out);

void ml_maps__clear(struct ml_maps *m);

/* Mapping containing addr, or NULL. */
const struct ml_mapping *ml_maps__find(const struct ml_maps *m, uint64_t addr);

/*
 * Open the file behind a mapping: fd (O_RDONLY|O_CLOEXEC) through /proc/PID/map_files/<start>-<end>
 * (works for deleted or replaced files), falling back to <path> resolved inside /proc/PID/root
 * (container mount namespaces). Only regular files are opened. Returns the fd or -errno.
 */
int ml_maps__open_file(int pid, const struct ml_mapping *mp);
/*
 * Open a regular file (only: a FIFO would block, a device could act) as process pid sees path, its absolute
 * symlinks and ".." kept inside its root; this machine's root when pid <= 0 or its root cannot be entered
 * (it has exited). An fd, or -errno (-ENOEXEC for a file that is not regular).
 */
int ml_open_in_root(int pid, const char *path);
int ml_maps__open_file_at(int proc_pid_dirfd, const struct ml_mapping *mp);

/*
 * A malloc'd path naming the mapping's file, suitable for a uprobe attach: the map_files one if it
 * opens, else /proc/PID/root/<path>. Returns 0 or -errno.
 */
int ml_maps__attach_path(int pid, const struct ml_mapping *mp, char **out);

/*
 * The same for the file (inode on device major:minor) that pid maps at offset 0 now: a path made before no
 * longer opens once its mapping is gone (under -c, the image before exec). 0, -ENOENT or another error.
 */
int ml_maps__attach_path_of(int pid, uint64_t inode, uint32_t major, uint32_t minor, char **out);

/* Whether mp maps the file pid runs (/proc/PID/exe); false when that cannot be told. */
bool ml_maps__is_exe(int pid, const struct ml_mapping *mp);

/* The fields of /proc/PID/stat memleak-ai uses. */
struct ml_proc_stat {
	int ppid;
	uint64_t utime, stime; /* clock ticks */
};

/* Read /proc/PID/stat. 0, -errno when the process is gone, -EINVAL when the line does not parse. */
int ml_proc_stat(int pid, struct ml_proc_stat *out);

/* /proc/PID/NAME opened read-only (mem, pagemap, ...): the fd, -ESRCH when the process is gone, or -errno. */
int ml_proc_open(int pid, const char *name);

/* A /proc/PID/pagemap entry's "present" bit (bit 62, swapped, is not resident). */
#define ML_PM_PRESENT (1ULL << 63)

#endif
