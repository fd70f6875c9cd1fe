/*
 * Building libbpf-tools memleak (the peers' and default benchmarks' reference, from a bcc checkout) against Debian's
 * libbpf 1.1: its bpf_tracing.h predates the BPF_UPROBE and BPF_URETPROBE macros, which name the same thing as
 * BPF_KPROBE and BPF_KRETPROBE on a uprobe.
 */
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <vmlinux.h> /* bpf_tracing.h needs the kernel's types first */
#ifndef BPF_UPROBE
#define BPF_UPROBE(name, args...) BPF_KPROBE(name, ##args)
#define BPF_URETPROBE(name, args...) BPF_KRETPROBE(name, ##args)
#endif
