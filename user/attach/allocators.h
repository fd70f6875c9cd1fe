/* The allocator table: every probed function as one data row (library, name, argument roles, layer). */
#ifndef ML_ALLOCATORS_H
#define ML_ALLOCATORS_H

#include <stdbool.h>
#include "memleak.h"

/* Which mapped objects a row applies to. */
enum ml_lib {
	ML_LIB_LIBC, /* the target's C library (or a static executable that defines the function) */
	ML_LIB_ANY,  /* any mapped object that defines the function (cudart in a wheel, linked statically, ...) */
	ML_LIB_PLT,  /* the PLT stub through which the object defining `host` calls the function */
};

/* How the row's name is matched against an object's symbols. */
enum ml_match {
	ML_MATCH_SYMBOL,    /* the symbol name, any version suffix ignored */
	ML_MATCH_DEMANGLED, /* the demangled C++ name, in full: never a hard-coded mangling or offset */
};

struct ml_allocator {
	const char *func;
	enum ml_lib lib;
	enum ml_match match;
	bool required; /* the object is not usable for its layer without it (malloc, free) */
	struct ml_spec spec;
	const char *host; /* ML_LIB_PLT: demangled name of a function the calling object defines */
	bool optin;	  /* a return probe on C++ code: only with --torch-raw-alloc (see user/attach/allocators.c) */
};

/*
 * The C heap allocator a library file is, by its name ("glibc", "jemalloc", ...), or NULL; *replaces (may
 * be NULL) says whether it takes over from the C library's malloc when a process maps it.
 */
const char *ml_heap_lib(const char *path, bool *replaces);

extern const struct ml_allocator ml_allocators[];
extern const unsigned int ml_allocators_n;

/*
 * The step clock's default function: the autograd engine's backward pass, once per loss.backward() (and per
 * torch.autograd.grad). --step names another.
 */
#define ML_STEP_DEFAULT                                                                                                \
	"torch::autograd::Engine::execute(std::vector<torch::autograd::Edge, std::allocator<torch::autograd::Edge> > " \
	"const&, std::vector<at::Tensor, std::allocator<at::Tensor> > const&, bool, bool, bool, "                      \
	"std::vector<torch::autograd::Edge, std::allocator<torch::autograd::Edge> > const&)"
/* How a step function named by --step is looked for: a C++ signature ("ns::f(int)") demangled, else by symbol. */
static inline enum ml_match ml_step_match(const char *func)
{
	for (; *func; func++)
		if (*func == '(')
			return ML_MATCH_DEMANGLED;
	return ML_MATCH_SYMBOL;
}

/* USDT probes, attached in any object that carries them. */
struct ml_usdt {
	const char *provider, *name;
	unsigned int layer;
	bool is_free;
};

extern const struct ml_usdt ml_usdts[];
extern const unsigned int ml_usdts_n;

const char *ml_layer_name(unsigned int layer);
int ml_layer_from_name(const char *name); /* layer id or -EINVAL */
/* Parse "libc,cuda,..." into a bit mask of layers; -EINVAL naming nothing known. */
int ml_layers_parse(const char *list, unsigned int *mask);

#endif
