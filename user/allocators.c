/* The allocator table: every probed function as one data row (library, name, argument roles, layer). */
#include <errno.h>
#include <string.h>
#include "allocators.h"

#define ALLOC(sz, cnt) { .kind = ML_KIND_ALLOC, .ret = ML_RET_PTR, .size_arg = sz, .count_arg = cnt }
#define ALLOC_OUT(out, sz) { .kind = ML_KIND_ALLOC, .ret = ML_RET_ERR0, .out_arg = out, .size_arg = sz }
#define REALLOC(p, sz, cnt) { .kind = ML_KIND_REALLOC, .ret = ML_RET_PTR, .free_arg = p, .size_arg = sz, .count_arg = cnt }
#define FREE(p) { .kind = ML_KIND_FREE, .free_arg = p }

/* Argument numbers are 1-based. Sizes are the bytes asked for, not what the allocator rounded them to. */
const struct ml_allocator ml_allocators[] = {
	{ "malloc", ML_LIB_LIBC, true, ALLOC(1, 0) },
	{ "calloc", ML_LIB_LIBC, false, ALLOC(2, 1) },
	{ "realloc", ML_LIB_LIBC, false, REALLOC(1, 2, 0) },
	{ "reallocarray", ML_LIB_LIBC, false, REALLOC(1, 3, 2) },
	{ "free", ML_LIB_LIBC, true, FREE(1) },
	{ "posix_memalign", ML_LIB_LIBC, false, ALLOC_OUT(1, 3) },
	{ "aligned_alloc", ML_LIB_LIBC, false, ALLOC(2, 0) },
	{ "memalign", ML_LIB_LIBC, false, ALLOC(2, 0) },
	{ "valloc", ML_LIB_LIBC, false, ALLOC(1, 0) },
	{ "pvalloc", ML_LIB_LIBC, false, ALLOC(1, 0) },
};

const unsigned int ml_allocators_n = sizeof(ml_allocators) / sizeof(ml_allocators[0]);

_Static_assert(sizeof(ml_allocators) / sizeof(ml_allocators[0]) <= ML_MAX_SPECS, "allocator table too long");

static const char *const layer_names[ML_LAYER_MAX] = {
	[ML_LAYER_LIBC] = "libc",
};

const char *ml_layer_name(unsigned int layer)
{
	if (layer < ML_LAYER_MAX && layer_names[layer])
		return layer_names[layer];
	return "unknown";
}

int ml_layer_from_name(const char *name)
{
	for (unsigned int i = 0; i < ML_LAYER_MAX; i++)
		if (layer_names[i] && !strcmp(layer_names[i], name))
			return (int)i;
	return -EINVAL;
}
