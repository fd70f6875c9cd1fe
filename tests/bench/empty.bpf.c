// SPDX-License-Identifier: GPL-2.0
/* Benchmark floor: empty uprobe programs, attached where memleak-ai attaches, to measure the bare trap cost. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("uprobe")
int empty_enter(struct pt_regs *ctx)
{
	return 0;
}

SEC("uretprobe")
int empty_exit(struct pt_regs *ctx)
{
	return 0;
}
