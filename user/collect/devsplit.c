/* CUDA memory per device, and the rows whose live blocks pin unallocated memory (see devsplit.h). */
#include "collect/devsplit.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/grow.h"

/* A CUDA segment or tensor block seen in this pass. */
struct gpu_block {
	struct ml_agg_key key; /* its row; key.tgid: blocks match segments of their own process only */
	uint64_t addr, size;
	uint64_t used; /* a range: the block bytes it holds (rounded as the caching allocator rounds) */
	int16_t device;
	bool handle; /* a cuMemCreate handle: memory with no address of its own */
};

struct devsplit {
	struct gpu_block *v;
	size_t n, cap;
	struct ml_pin *pins;
	size_t npins, cap_pins;
};

int devsplit__new(struct devsplit **out)
{
	*out = calloc(1, sizeof(struct devsplit));
	return *out ? 0 : -ENOMEM;
}

void devsplit__free(struct devsplit *d)
{
	if (!d)
		return;
	free(d->v);
	free(d->pins);
	free(d);
}

void devsplit__reset(struct devsplit *d)
{
	d->n = 0;
}

int devsplit__add(struct devsplit *d, const struct ml_agg_key *k, uint64_t addr, uint64_t size, int16_t device,
		  bool handle)
{
	if (ml_grow(&d->v, &d->cap, d->n + 1, sizeof(*d->v)))
		return -ENOMEM;
	d->v[d->n++] = (struct gpu_block){.key = *k, .addr = addr, .size = size, .device = device, .handle = handle};
	return 0;
}

/* Address ranges first (cuda segments and cuda_map ranges, by address), then handles and tensor blocks. */
static bool is_range(const struct gpu_block *b)
{
	return (b->key.layer == ML_LAYER_CUDA && !b->handle) || b->key.layer == ML_LAYER_CUDA_MAP;
}

static int cmp_gpu(const void *a, const void *b)
{
	const struct gpu_block *x = a, *y = b;

	if (is_range(x) != is_range(y))
		return is_range(x) ? -1 : 1;
	if (x->key.tgid != y->key.tgid)
		return x->key.tgid < y->key.tgid ? -1 : 1;
	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* The index of the range of process tgid holding addr (ranges sorted by process, then address), or nseg. */
static size_t range_of(const struct gpu_block *seg, size_t nseg, uint32_t tgid, uint64_t addr)
{
	size_t lo = 0, hi = nseg;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (seg[mid].key.tgid < tgid || (seg[mid].key.tgid == tgid && seg[mid].addr <= addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || seg[lo - 1].key.tgid != tgid || addr >= seg[lo - 1].addr + seg[lo - 1].size)
		return nseg;
	return lo - 1;
}

/*
 * Each tensor block's rounded bytes spread over the ranges it covers (with expandable segments a block can
 * span several mapped pages): fn(ctx, range, bytes) for each.
 */
static void over_ranges(struct devsplit *d, size_t nseg, const struct gpu_block *b,
			void (*fn)(struct devsplit *d, struct gpu_block *r, const struct gpu_block *b, uint64_t n))
{
	uint64_t end = b->addr + ml_cuda_block_size(b->size);

	for (size_t i = range_of(d->v, nseg, b->key.tgid, b->addr);
	     i < nseg && d->v[i].key.tgid == b->key.tgid && d->v[i].addr < end; i++) {
		struct gpu_block *r = &d->v[i];
		uint64_t lo = r->addr > b->addr ? r->addr : b->addr,
			 hi = r->addr + r->size < end ? r->addr + r->size : end;

		if (hi > lo)
			fn(d, r, b, hi - lo);
	}
}

static void add_used(struct devsplit *d, struct gpu_block *r, const struct gpu_block *b, uint64_t n)
{
	(void)d, (void)b;
	r->used += n;
}

static struct ml_pin *pin_of(struct devsplit *d, const struct ml_agg_key *k, int device)
{
	for (size_t i = d->npins; i > 0; i--)
		if (d->pins[i - 1].device == device && !memcmp(&d->pins[i - 1].key, k, sizeof(*k)))
			return &d->pins[i - 1];
	if (ml_grow(&d->pins, &d->cap_pins, d->npins + 1, sizeof(*d->pins)))
		return NULL;
	d->pins[d->npins] = (struct ml_pin){.key = *k, .device = device};
	return &d->pins[d->npins++];
}

/* A range's free bytes go to the rows of its blocks, in proportion to their bytes in it. */
static void add_pin(struct devsplit *d, struct gpu_block *r, const struct gpu_block *b, uint64_t n)
{
	struct ml_pin *p;

	if (r->used >= r->size || !(p = pin_of(d, &b->key, r->device)))
		return;
	p->bytes += (uint64_t)((double)(r->size - r->used) * (double)n / (double)r->used + 0.5);
}

static int cmp_pin(const void *a, const void *b)
{
	const struct ml_pin *x = a, *y = b;

	return (x->bytes < y->bytes) - (x->bytes > y->bytes);
}

/* Tensor blocks announced with their device lend it to the range that holds them; ranges lend theirs on. */
static void devices_of(struct devsplit *d, size_t nseg)
{
	for (size_t i = nseg; i < d->n; i++) {
		size_t r;

		if (d->v[i].key.layer != ML_LAYER_TORCH_CUDA)
			continue;
		r = range_of(d->v, nseg, d->v[i].key.tgid, d->v[i].addr);
		if (r < nseg && d->v[r].device < 0 && d->v[i].device >= 0)
			d->v[r].device = d->v[i].device;
	}
	for (size_t i = nseg; i < d->n; i++) {
		size_t r;

		if (d->v[i].key.layer != ML_LAYER_TORCH_CUDA || d->v[i].device >= 0)
			continue;
		r = range_of(d->v, nseg, d->v[i].key.tgid, d->v[i].addr);
		if (r < nseg)
			d->v[i].device = d->v[r].device;
	}
}

static struct ml_device_total *slot(struct ml_snapshot *s, int device)
{
	return &s->devices[device >= 0 && device < ML_MAX_DEVICES ? device + 1 : 0];
}

/*
 * Reserved is the cuda layer: cudaMalloc'd segments and cuMemCreate'd physical memory (whose device the call
 * names). cuda_map ranges only carry devices and pins: their memory is cuMemCreate's, counted once.
 */
int devsplit__run(struct devsplit *d, struct ml_snapshot *s)
{
	size_t nseg = 0;

	memset(s->devices, 0, sizeof(s->devices));
	d->npins = 0;
	if (d->n > 1)
		qsort(d->v, d->n, sizeof(*d->v), cmp_gpu);
	while (nseg < d->n && is_range(&d->v[nseg]))
		nseg++;
	devices_of(d, nseg);
	for (size_t i = 0; i < d->n; i++) {
		struct gpu_block *b = &d->v[i];

		if (b->key.layer == ML_LAYER_TORCH_CUDA)
			over_ranges(d, nseg, b, add_used);
		if (b->key.layer == ML_LAYER_CUDA_MAP)
			continue;
		slot(s, b->device)->seen = true;
		if (b->key.layer == ML_LAYER_CUDA)
			slot(s, b->device)->reserved += b->size;
		else
			slot(s, b->device)->allocated += b->size;
	}
	for (size_t i = 0; i < nseg; i++)
		if (d->v[i].used && d->v[i].used < d->v[i].size)
			slot(s, d->v[i].device)->pinned += d->v[i].size - d->v[i].used;
	for (size_t i = nseg; i < d->n; i++)
		if (d->v[i].key.layer == ML_LAYER_TORCH_CUDA)
			over_ranges(d, nseg, &d->v[i], add_pin);
	if (d->npins > 1)
		qsort(d->pins, d->npins, sizeof(*d->pins), cmp_pin);
	s->pins = d->pins;
	s->npins = d->npins;
	return 0;
}
