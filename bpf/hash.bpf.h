/* SPDX-License-Identifier: GPL-2.0 */
/* Hashes of the stack being built, shared by the native (stack.bpf.c) and Python (python.bpf.c) walks. */
#ifndef MEMLEAK_AI_HASH_BPF_H
#define MEMLEAK_AI_HASH_BPF_H

/* Stack hashes are built as the words are written (FNV-1a over the words): no second pass over them. */
#define ML_FNV_BASIS 0xcbf29ce484222325ULL
#define ML_FNV_PRIME 0x100000001b3ULL

/* The final mix of a stack's hash into its id (the murmur3 finalizer's first half, as ml_slot_hash). */
static __always_inline __u64 ml_hash_mix(__u64 h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

#endif
