/*
 * An array too large to allocate up front, held as equal BPF array maps (chunks) in an array of maps. A chunk
 * is created, mapped and published the first time an element in it is written, so the kernel memory and the
 * tool's RSS grow with the range in use instead of with the largest range allowed.
 */
#ifndef ML_BPFCHUNKS_H
#define ML_BPFCHUNKS_H

#include <stddef.h>
#include <stdint.h>

struct bpfchunks;

struct bpfchunks_opts {
	int outer_fd;	     /* the BPF_MAP_TYPE_ARRAY_OF_MAPS; its slot k holds chunk k */
	uint32_t value_size; /* an element's bytes; stored 8-byte aligned, as array maps store them */
	uint32_t chunk_bits; /* elements per chunk: 1 << chunk_bits, as the inner map's template says */
	uint32_t max_chunks; /* the outer map's max_entries */
};

int bpfchunks__new(const struct bpfchunks_opts *o, struct bpfchunks **out); /* 0 or -ENOMEM */
void bpfchunks__free(struct bpfchunks *c);				    /* NULL-safe */

/* Copies n elements from src to [start, start + n), creating the chunks it reaches. 0, -ENOSPC, -errno. */
int bpfchunks__write(struct bpfchunks *c, uint64_t start, const void *src, uint64_t n);

/* Element i as mapped, or NULL when its chunk was never written. */
const void *bpfchunks__at(const struct bpfchunks *c, uint64_t i);

/* Bytes of kernel memory the chunks created so far hold (each one mapped once in this process). */
uint64_t bpfchunks__bytes(const struct bpfchunks *c);

/*
 * One inner map: an array of entries elements of value_size bytes (BPF_F_MMAPABLE | flags, the flags of the
 * outer map's template), mapped here read-write (*bytes long, whole pages) and put at slot k of the array of
 * maps outer_fd. The mapping keeps the map alive: its fd is closed. The mapping, or NULL with errno set.
 */
void *ml_bpf_inner_array(int outer_fd, uint32_t k, uint32_t value_size, uint32_t entries, uint32_t flags,
			 size_t *bytes);

#endif
