/* Reading what the kernel counts for memleak-ai: see bpfstats.h. */
#include "lib/bpfstats.h"
#include <bpf/bpf.h>
#include <errno.h>
#include <string.h>

int ml_stats_sum(int map_fd, int ncpu, uint64_t *pcpu, uint64_t *out)
{
	__u32 zero = 0;

	if (bpf_map_lookup_elem(map_fd, &zero, pcpu))
		return -errno;
	memset(out, 0, ML_STAT_SLOTS * sizeof(*out));
	for (int c = 0; c < ncpu; c++)
		for (int i = 0; i < ML_STAT_SLOTS; i++)
			out[i] += pcpu[(size_t)c * ML_STAT_SLOTS + i];
	return 0;
}

uint64_t ml_prog_run_ns(int prog_fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	if (prog_fd < 0 || bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return 0;
	return info.run_time_ns;
}
