/* A process's resident memory as the kernel counts it (/proc/PID/smaps_rollup), and its CPU time. */
#ifndef ML_PROCMEM_H
#define ML_PROCMEM_H

#include <stdint.h>

struct ml_procmem {
	uint64_t rss, anon, private_dirty, pss; /* bytes */
};

/* Parse smaps_rollup's text. 0, or -EINVAL when a field is missing or malformed. */
int ml_procmem__parse(const char *text, struct ml_procmem *out);
/* Read and parse /proc/PID/smaps_rollup. 0, -ESRCH when the process is gone, -errno. */
int ml_procmem__read(int pid, struct ml_procmem *out);
/*
 * Parse statm's text into rss and anon (resident less file and shared memory: RssAnon), page bytes a page; the
 * other fields are left as they are. 0, or -EINVAL.
 */
int ml_procmem__parse_statm(const char *text, uint64_t page, struct ml_procmem *out);
/*
 * rss and anon from /proc/PID/statm: the kernel's counters, where smaps_rollup walks every page table (12 ms for
 * a PyTorch job). 0, -ESRCH when the process is gone, -errno.
 */
int ml_procmem__read_statm(int pid, struct ml_procmem *out);

/* Its resident memory's high-water mark (VmHWM of /proc/PID/status), bytes. 0, -ESRCH when gone, -errno. */
int ml_proc_hwm(int pid, uint64_t *out);

/* CPU time of every thread of pid now (their schedstat), in ns. 0, -ESRCH when it is gone, -errno. */
int ml_proc_cpu_ns(int pid, uint64_t *out);

#endif
