/* Benchmark floor: attaches empty uprobes (and uretprobes) to the same libc functions memleak-ai probes. */
#include <bpf/libbpf.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "empty.skel.h"
#include "lib/elfsym.h"
#include "lib/procmaps.h"

int main(int argc, char **argv)
{
	struct empty_bpf *skel;
	struct ml_maps maps = {};
	int pid, n = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: floor PID\n");
		return 2;
	}
	pid = atoi(argv[1]);
	skel = empty_bpf__open_and_load();
	if (!skel || ml_maps__read(pid, &maps)) {
		fprintf(stderr, "floor: cannot load or read maps\n");
		return 1;
	}
	for (size_t i = 0; i < maps.n; i++) {
		const struct ml_mapping *m = &maps.v[i];
		struct elf_syms *syms;
		char *path;
		int fd;

		if (!m->path || !strstr(m->path, "/libc.so"))
			continue;
		fd = ml_maps__open_file(pid, m);
		if (fd < 0 || elf_syms__open(fd, &syms) || ml_maps__attach_path(pid, m, &path))
			return 1;
		close(fd);
		for (unsigned int row = 0; row < ml_allocators_n; row++) {
			uint64_t va, sz, off;
			LIBBPF_OPTS(bpf_uprobe_opts, uo);

			if (elf_syms__find(syms, ml_allocators[row].func, &va, &sz) ||
			    elf_syms__vaddr_to_offset(syms, va, &off))
				continue;
			if (!bpf_program__attach_uprobe_opts(skel->progs.empty_enter, pid, path, off, &uo))
				return 1;
			n++;
			if (ml_allocators[row].spec.kind != ML_KIND_FREE) {
				uo.retprobe = true;
				if (!bpf_program__attach_uprobe_opts(skel->progs.empty_exit, pid, path, off, &uo))
					return 1;
				n++;
			}
		}
		free(path);
		elf_syms__free(syms);
		break;
	}
	printf("floor: attached %d empty probes\n", n);
	fflush(stdout);
	pause(); /* until killed; the links go with the process */
	return 0;
}
