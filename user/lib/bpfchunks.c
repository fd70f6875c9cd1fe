/* An array held as BPF array maps created on first write (see bpfchunks.h). */
#include "lib/bpfchunks.h"
#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct bpfchunks {
	struct bpfchunks_opts o;
	uint32_t stride; /* bytes between elements */
	size_t chunk_bytes;
	uint8_t **at; /* max_chunks mappings, NULL where not created */
	uint32_t created;
};

int bpfchunks__new(const struct bpfchunks_opts *o, struct bpfchunks **out)
{
	struct bpfchunks *c = calloc(1, sizeof(*c));
	long page = sysconf(_SC_PAGESIZE);

	*out = NULL;
	if (!c || !(c->at = calloc(o->max_chunks ? o->max_chunks : 1, sizeof(*c->at)))) {
		free(c);
		return -ENOMEM;
	}
	c->o = *o;
	c->stride = (o->value_size + 7) & ~7u;
	c->chunk_bytes = ((size_t)c->stride << o->chunk_bits) + (size_t)page - 1;
	c->chunk_bytes &= ~((size_t)page - 1);
	*out = c;
	return 0;
}

void bpfchunks__free(struct bpfchunks *c)
{
	if (!c)
		return;
	for (uint32_t k = 0; k < c->o.max_chunks; k++)
		if (c->at[k])
			munmap(c->at[k], c->chunk_bytes);
	free(c->at);
	free(c);
}

void *ml_bpf_inner_array(int outer_fd, uint32_t k, uint32_t value_size, uint32_t entries, uint32_t flags, size_t *bytes)
{
	LIBBPF_OPTS(bpf_map_create_opts, mo, .map_flags = BPF_F_MMAPABLE | flags);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p;
	int fd, err = 0;

	*bytes = ((size_t)((value_size + 7) & ~7u) * entries + page - 1) / page * page;
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "ml_inner", 4, value_size, entries, &mo);
	if (fd < 0)
		return NULL;
	p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		err = errno;
		p = NULL;
	} else if (bpf_map_update_elem(outer_fd, &k, &fd, BPF_ANY)) {
		err = errno;
		munmap(p, *bytes);
		p = NULL;
	}
	close(fd);
	errno = err;
	return p;
}

/* Chunk k created, mapped and put in the outer map. */
static int create(struct bpfchunks *c, uint32_t k)
{
	size_t bytes;

	c->at[k] = ml_bpf_inner_array(c->o.outer_fd, k, c->o.value_size, 1U << c->o.chunk_bits, 0, &bytes);
	if (!c->at[k])
		return -errno;
	c->created++;
	return 0;
}

int bpfchunks__write(struct bpfchunks *c, uint64_t start, const void *src, uint64_t n)
{
	const uint8_t *s = src;
	uint64_t mask = (1ULL << c->o.chunk_bits) - 1;

	if (start + n > ((uint64_t)c->o.max_chunks << c->o.chunk_bits))
		return -ENOSPC;
	for (uint64_t i = start; i < start + n; i++) {
		uint32_t k = (uint32_t)(i >> c->o.chunk_bits);
		int err;

		if (!c->at[k] && (err = create(c, k)))
			return err;
		memcpy(c->at[k] + (i & mask) * c->stride, s, c->o.value_size);
		s += c->o.value_size;
	}
	return 0;
}

const void *bpfchunks__at(const struct bpfchunks *c, uint64_t i)
{
	uint64_t k = i >> c->o.chunk_bits;

	if (k >= c->o.max_chunks || !c->at[k])
		return NULL;
	return c->at[k] + (i & ((1ULL << c->o.chunk_bits) - 1)) * c->stride;
}

uint64_t bpfchunks__bytes(const struct bpfchunks *c)
{
	return (uint64_t)c->created * c->chunk_bytes;
}
