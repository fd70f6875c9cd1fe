/* Batched uprobes: one BPF link for many offsets in one file, made with the raw syscall (libbpf 1.1 has no API). */
#ifndef ML_UPROBE_MULTI_H
#define ML_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>

#define ML_BPF_TRACE_UPROBE_MULTI 48 /* enum bpf_attach_type, kernel 6.6 on */

/* Whether this kernel takes uprobe_multi links (loads a two-instruction program to find out). */
bool ml_uprobe_multi_supported(void);

/* A link attaching prog_fd at every offset of path, each with its cookie. Link fd, or -errno. */
int ml_uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies,
			   uint32_t cnt, bool retprobe, int pid);

#endif
