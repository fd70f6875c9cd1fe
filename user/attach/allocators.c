/* The allocator table: every probed function as one data row (library, name, argument roles, layer). */
#include "attach/allocators.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/path.h"

/* Argument numbers are 1-based (member functions count `this` as 1). Sizes are the bytes asked for. */
#define ALLOC_(l, g, sz, cnt)                                                                                          \
	{                                                                                                              \
		.kind = ML_KIND_ALLOC, .ret = ML_RET_PTR, .layer = l, .group = g, .size_arg = sz, .count_arg = cnt     \
	}
#define ALLOC_OUT_(l, g, out, sz)                                                                                      \
	{                                                                                                              \
		.kind = ML_KIND_ALLOC, .ret = ML_RET_ERR0, .layer = l, .group = g, .out_arg = out, .size_arg = sz      \
	}
#define REALLOC_(l, g, p, sz, cnt)                                                                                     \
	{                                                                                                              \
		.kind = ML_KIND_REALLOC, .ret = ML_RET_PTR, .layer = l, .group = g, .free_arg = p, .size_arg = sz,     \
		.count_arg = cnt                                                                                       \
	}
#define FREE_(l, g, p)                                                                                                 \
	{                                                                                                              \
		.kind = ML_KIND_FREE, .layer = l, .group = g, .free_arg = p, .track_free = l != ML_LAYER_LIBC          \
	}

/* The layer argument is a pair (layer, group): expand it before the row macro counts its arguments. */
#define ALLOC(...) ALLOC_(__VA_ARGS__)
#define ALLOC_OUT(...) ALLOC_OUT_(__VA_ARGS__)
#define REALLOC(...) REALLOC_(__VA_ARGS__)
#define FREE(...) FREE_(__VA_ARGS__)
#define PITCH(...) PITCH_(__VA_ARGS__)

#define LIBC ML_LAYER_LIBC, ML_GROUP_HEAP
#define CUDA ML_LAYER_CUDA, ML_GROUP_CUDA
#define CMAP ML_LAYER_CUDA_MAP, ML_GROUP_CUDA
#define HOST ML_LAYER_CUDA_HOST, ML_GROUP_CUDA_HOST
#define TCUDA ML_LAYER_TORCH_CUDA, ML_GROUP_TORCH_CUDA
#define TCPU ML_LAYER_TORCH_CPU, ML_GROUP_HEAP

/* Pitched allocations: bytes = *pitch (read at return) x height. */
#define PITCH_(l, g, out, pitch, height)                                                                               \
	{                                                                                                              \
		.kind = ML_KIND_ALLOC, .ret = ML_RET_ERR0, .layer = l, .group = g, .out_arg = out,                     \
		.size_out_arg = pitch, .count_arg = height                                                             \
	}

const struct ml_allocator ml_allocators[] = {
    /* C library */
    {"malloc", ML_LIB_LIBC, ML_MATCH_SYMBOL, true, ALLOC(LIBC, 1, 0)},
    {"calloc", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 2, 1)},
    {"realloc", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, REALLOC(LIBC, 1, 2, 0)},
    {"reallocarray", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, REALLOC(LIBC, 1, 3, 2)},
    {"free", ML_LIB_LIBC, ML_MATCH_SYMBOL, true, FREE(LIBC, 1)},
    {"posix_memalign", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC_OUT(LIBC, 1, 3)},
    {"aligned_alloc", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 2, 0)},
    {"memalign", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 2, 0)},
    {"valloc", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    {"pvalloc", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    /*
     * C++'s operators, where the heap allocator defines them itself instead of leaving them to libstdc++
     * (which calls malloc): tcmalloc and jemalloc. Standard Itanium names; glibc has none of them. In
     * tcmalloc several are one function (free is operator delete): a function is probed once, as its
     * first row here. operator new throws only when memory runs out.
     */
    {"_Znwm", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)}, /* new(size_t) */
    {"_Znam", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)}, /* new[](size_t) */
    {"_ZnwmRKSt9nothrow_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    {"_ZnamRKSt9nothrow_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    {"_ZnwmSt11align_val_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    {"_ZnamSt11align_val_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, ALLOC(LIBC, 1, 0)},
    {"_ZdlPv", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},  /* delete(void *) */
    {"_ZdaPv", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},  /* delete[](void *) */
    {"_ZdlPvm", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)}, /* sized delete */
    {"_ZdaPvm", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},
    {"_ZdlPvRKSt9nothrow_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},
    {"_ZdaPvRKSt9nothrow_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},
    {"_ZdlPvSt11align_val_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},
    {"_ZdaPvSt11align_val_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},
    {"_ZdlPvmSt11align_val_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},
    {"_ZdaPvmSt11align_val_t", ML_LIB_LIBC, ML_MATCH_SYMBOL, false, FREE(LIBC, 1)},

    /* CUDA runtime: cudaError_t f(...), 0 = cudaSuccess */
    {"cudaMalloc", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(CUDA, 1, 2)},
    {"cudaMallocAsync", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(CUDA, 1, 2)},
    {"cudaMallocFromPoolAsync", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(CUDA, 1, 2)},
    {"cudaMallocManaged", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(CUDA, 1, 2)},
    {"cudaMallocPitch", ML_LIB_ANY, ML_MATCH_SYMBOL, false, PITCH(CUDA, 1, 2, 4)},
    /* cudaMalloc3D(cudaPitchedPtr *p, cudaExtent e): ptr at p+0, pitch at p+8; e = {width, height, depth} on the stack
     */
    {"cudaMalloc3D",
     ML_LIB_ANY,
     ML_MATCH_SYMBOL,
     false,
     {.kind = ML_KIND_ALLOC,
      .ret = ML_RET_ERR0,
      .layer = ML_LAYER_CUDA,
      .group = ML_GROUP_CUDA,
      .out_arg = 1,
      .size_out_arg = 1,
      .size_out_off = 8,
      .count_arg = ML_ARG_STACK2,
      .count2_arg = ML_ARG_STACK3}},
    {"cudaFree", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(CUDA, 1)},
    {"cudaFreeAsync", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(CUDA, 1)},
    /* CUDA driver: CUresult f(...), 0 = CUDA_SUCCESS; CUdeviceptr is 64-bit */
    {"cuMemAlloc_v2", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(CUDA, 1, 2)},
    {"cuMemAllocAsync", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(CUDA, 1, 2)},
    {"cuMemAllocManaged", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(CUDA, 1, 2)},
    {"cuMemAllocPitch_v2", ML_LIB_ANY, ML_MATCH_SYMBOL, false, PITCH(CUDA, 1, 2, 4)},
    {"cuMemFree_v2", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(CUDA, 1)},
    {"cuMemFreeAsync", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(CUDA, 1)},
    /* Virtual memory management (expandable segments): physical memory by handle, mappings by address */
    /* cuMemCreate(handle *, size, const CUmemAllocationProp *prop, flags): prop->location.id (offset 12) is the device
     */
    {"cuMemCreate",
     ML_LIB_ANY,
     ML_MATCH_SYMBOL,
     false,
     {.kind = ML_KIND_ALLOC,
      .ret = ML_RET_ERR0,
      .layer = ML_LAYER_CUDA,
      .group = ML_GROUP_CUDA,
      .out_arg = 1,
      .size_arg = 2,
      .device_arg = 3,
      .device_off = 12,
      .handle = 1}},
    {"cuMemRelease", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(CUDA, 1)},
    {"cuMemMap",
     ML_LIB_ANY,
     ML_MATCH_SYMBOL,
     false,
     {.kind = ML_KIND_ALLOC,
      .ret = ML_RET_ERR0,
      .layer = ML_LAYER_CUDA_MAP,
      .group = ML_GROUP_CUDA,
      .addr_arg = 1,
      .size_arg = 2}},
    {"cuMemUnmap", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(CMAP, 1)},

    /* Pinned host memory */
    {"cudaMallocHost", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(HOST, 1, 2)},
    {"cudaHostAlloc", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(HOST, 1, 2)},
    {"cudaFreeHost", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(HOST, 1)},
    {"cuMemAllocHost_v2", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(HOST, 1, 2)},
    {"cuMemHostAlloc", ML_LIB_ANY, ML_MATCH_SYMBOL, false, ALLOC_OUT(HOST, 1, 2)},
    {"cuMemFreeHost", ML_LIB_ANY, ML_MATCH_SYMBOL, false, FREE(HOST, 1)},

    /*
     * PyTorch's CUDA caching allocator, paths its USDT probes do not see (hidden symbols: .symtab only).
     * raw_alloc can throw (out of memory, which callers catch), and a C++ exception cannot unwind through
     * the kernel's return-probe trampoline: the target would terminate. So the two allocating rows need
     * --torch-raw-alloc; raw_delete has no return probe and is always safe.
     */
    {"c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::raw_alloc(unsigned long)", ML_LIB_ANY,
     ML_MATCH_DEMANGLED, false, ALLOC(TCUDA, 2, 0), .optin = true},
    {"c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::raw_alloc_with_stream(unsigned long, "
     "CUstream_st*)",
     ML_LIB_ANY, ML_MATCH_DEMANGLED, false, ALLOC(TCUDA, 2, 0), .optin = true},
    {"c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::raw_delete(void*)",
     ML_LIB_ANY,
     ML_MATCH_DEMANGLED,
     false,
     {.kind = ML_KIND_FREE, .layer = ML_LAYER_TORCH_CUDA, .group = ML_GROUP_TORCH_CUDA, .free_arg = 2}},
    /*
     * The caching allocator's out-of-memory error, made before it is thrown: entry only. A raise by
     * set_per_process_memory_fraction has no failed call behind it. torch before 2.15 inlines
     * OutOfMemoryError's constructor, so its base's is probed, and the BPF side keeps only messages that
     * start "CUDA out of memory". The message is argument 2 (`this` is 1; the 24-byte SourceLocation goes
     * on the stack, the std::string by reference).
     */
    {"c10::Error::Error(c10::SourceLocation, std::__cxx11::basic_string<char, "
     "std::char_traits<char>, std::allocator<char> >)",
     ML_LIB_ANY,
     ML_MATCH_DEMANGLED,
     false,
     {.kind = ML_KIND_RAISE, .layer = ML_LAYER_TORCH_CUDA, .group = ML_GROUP_TORCH_CUDA, .size_arg = 2}},

    /*
     * PyTorch's pinned host caching allocator (pin_memory(), a DataLoader's pin_memory=True), hidden symbols:
     * allocate(size) returns {ptr, block} in rax:rdx, and free(block) gets the block back. allocate throws when
     * cudaHostAlloc fails, so its return probe needs --torch-raw-alloc, as raw_alloc's does.
     */
    {"at::CachingHostAllocatorImpl<c10::cuda::CUDAStream, std::unique_ptr<c10::cuda::CUDAEvent, "
     "std::function<void (c10::cuda::CUDAEvent*)> >, at::HostBlock<c10::cuda::CUDAStream> >::allocate(unsigned long)",
     ML_LIB_ANY,
     ML_MATCH_DEMANGLED,
     false,
     {.kind = ML_KIND_ALLOC,
      .ret = ML_RET_PAIR,
      .layer = ML_LAYER_TORCH_HOST,
      .group = ML_GROUP_TORCH_CUDA,
      .size_arg = 2},
     .optin = true},
    {"at::CachingHostAllocatorImpl<c10::cuda::CUDAStream, std::unique_ptr<c10::cuda::CUDAEvent, "
     "std::function<void (c10::cuda::CUDAEvent*)> >, at::HostBlock<c10::cuda::CUDAStream> >::free(void*)",
     ML_LIB_ANY,
     ML_MATCH_DEMANGLED,
     false,
     {.kind = ML_KIND_FREE, .layer = ML_LAYER_TORCH_HOST, .group = ML_GROUP_TORCH_CUDA, .free_arg = 2},
     .optin = true},

    /*
     * PyTorch CPU tensors. c10::alloc_cpu throws when memory runs out, so it gets no return probe: its
     * entry remembers the caller, and the allocation is taken at the C call it makes, posix_memalign
     * through libc10's own PLT stub (C code, no exception passes there). free_cpu: entry only.
     */
    {"c10::alloc_cpu(unsigned long)",
     ML_LIB_ANY,
     ML_MATCH_DEMANGLED,
     false,
     {.kind = ML_KIND_WRAP, .layer = ML_LAYER_TORCH_CPU, .group = ML_GROUP_HEAP}},
    {"posix_memalign",
     ML_LIB_PLT,
     ML_MATCH_SYMBOL,
     false,
     {.kind = ML_KIND_ALLOC,
      .ret = ML_RET_ERR0,
      .layer = ML_LAYER_TORCH_CPU,
      .group = ML_GROUP_HEAP,
      .out_arg = 1,
      .size_arg = 3,
      .use_wrap = 1},
     .host = "c10::alloc_cpu(unsigned long)"},
    {"c10::free_cpu(void*)",
     ML_LIB_ANY,
     ML_MATCH_DEMANGLED,
     false,
     {.kind = ML_KIND_FREE, .layer = ML_LAYER_TORCH_CPU, .group = ML_GROUP_HEAP, .free_arg = 1}},

    /*
     * The step clock, no layer: entry only, counted per process (bpf/probes.bpf.c step_enter). The row's name is
     * the default; --step looks for another in its place (rowfind.c).
     */
    {ML_STEP_DEFAULT, ML_LIB_ANY, ML_MATCH_DEMANGLED, false, {.kind = ML_KIND_STEP}},
};

const unsigned int ml_allocators_n = sizeof(ml_allocators) / sizeof(ml_allocators[0]);

/* The last spec index is reserved for allocations recorded by USDT programs. */
_Static_assert(sizeof(ml_allocators) / sizeof(ml_allocators[0]) < ML_MAX_SPECS, "allocator table too long");

const struct ml_usdt ml_usdts[] = {
    {"pytorch", "malloc", ML_LAYER_TORCH_CUDA, false},
    {"pytorch", "free", ML_LAYER_TORCH_CUDA, true},
};

const unsigned int ml_usdts_n = sizeof(ml_usdts) / sizeof(ml_usdts[0]);

/*
 * C heap allocators, by file name: the C library's own, or one that replaces its malloc family when
 * preloaded or linked. Their malloc/free rows (ML_LIB_LIBC) are probed in each of them.
 */
static const struct {
	const char *prefix, *name;
	bool replaces; /* takes over from the C library's malloc when mapped */
} heap_libs[] = {
    {"libc.so", "glibc", false},       {"libc-2.", "glibc", false},	     {"ld-musl-", "musl", false},
    {"libc.musl-", "musl", false},     {"libjemalloc.so", "jemalloc", true}, {"libtcmalloc", "tcmalloc", true},
    {"libmimalloc", "mimalloc", true},
};

const char *ml_heap_lib(const char *path, bool *replaces)
{
	const char *base = ml_base_name(path);

	for (size_t i = 0; base && i < sizeof(heap_libs) / sizeof(heap_libs[0]); i++) {
		if (!strncmp(base, heap_libs[i].prefix, strlen(heap_libs[i].prefix))) {
			if (replaces)
				*replaces = heap_libs[i].replaces;
			return heap_libs[i].name;
		}
	}
	return NULL;
}

static const char *const layer_names[ML_LAYER_MAX] = {
    [ML_LAYER_LIBC] = "libc",
    [ML_LAYER_CUDA] = "cuda",
    [ML_LAYER_CUDA_HOST] = "cuda_host",
    [ML_LAYER_TORCH_CUDA] = "torch_cuda",
    [ML_LAYER_TORCH_CPU] = "torch_cpu",
    [ML_LAYER_CUDA_MAP] = "cuda_map",
    [ML_LAYER_RSS] = "rss",
    [ML_LAYER_TORCH_HOST] = "torch_host",
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

int ml_layers_parse(const char *list, unsigned int *mask)
{
	char *copy = strdup(list), *save = NULL, *tok;
	unsigned int m = 0;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int l = ml_layer_from_name(tok);

		if (l < 0) {
			err = -EINVAL;
			break;
		}
		m |= 1U << l;
		if (l == ML_LAYER_CUDA)
			m |= 1U << ML_LAYER_CUDA_MAP; /* the mappings of cuda's physical memory go with it */
	}
	free(copy);
	if (!err && !m)
		err = -EINVAL;
	if (!err)
		*mask = m;
	return err;
}
