/* The allocator table: every probed function as one data row (library, name, argument roles, layer). */
#ifndef ML_ALLOCATORS_H
#define ML_ALLOCATORS_H

#include <stdbool.h>
#include "../bpf/memleak.h"

/* Which mapped objects a row applies to. */
enum ml_lib {
	ML_LIB_LIBC, /* the target's C library (or a static executable that defines the function) */
};

struct ml_allocator {
	const char *func;
	enum ml_lib lib;
	bool required;     /* attach fails without it (malloc, free) */
	struct ml_spec spec;
};

extern const struct ml_allocator ml_allocators[];
extern const unsigned int ml_allocators_n;

const char *ml_layer_name(unsigned int layer);
int ml_layer_from_name(const char *name); /* layer id or -EINVAL */

#endif
