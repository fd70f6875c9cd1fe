/*
 * A stand-in for the CUDA runtime (libcudart.so.13) under PyTorch's real libraries on a machine with no GPU:
 * one device whose memory is host memory (STANDIN_GPU_MEMORY bytes of it), so that PyTorch's own caching
 * allocator runs as on a GPU. Allocation, copies, streams, events and the properties PyTorch reads are
 * implemented; kernel launches are accepted and do nothing (results are not computed). The entry points
 * PyTorch imports and this file does not define come from stubs.c (made by scripts/standin-gpu), which
 * succeed and do nothing.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "device.h"

#define API __attribute__((visibility("default"), noinline))

static __thread cudaError_t last_error;

static cudaError_t fail(cudaError_t e)
{
	last_error = e;
	return e;
}

/* A block of "device memory": a fresh mapping (never touched until written), its size before it. */
static void *take_block(size_t size)
{
	size_t *p;

	if (standin_take(size))
		return NULL;
	p = mmap(NULL, size + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		standin_give(size);
		return NULL;
	}
	*p = size;
	return (char *)p + 4096;
}

API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	*devPtr = size ? take_block(size) : NULL;
	return size && !*devPtr ? fail(cudaErrorMemoryAllocation) : cudaSuccess;
}

API cudaError_t cudaFree(void *devPtr)
{
	size_t *p = devPtr ? (size_t *)((char *)devPtr - 4096) : NULL;

	if (p) {
		standin_give(*p);
		munmap(p, *p + 4096);
	}
	return cudaSuccess;
}

API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t s)
{
	(void)s;
	return cudaMalloc(devPtr, size);
}

API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t s)
{
	(void)s;
	return cudaFree(devPtr);
}

API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	(void)flags;
	return cudaMalloc(devPtr, size);
}

/* Pinned host memory: host memory. */
API cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags)
{
	(void)flags;
	*p = malloc(size ? size : 1);
	return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

API cudaError_t cudaMallocHost(void **p, size_t size)
{
	return cudaHostAlloc(p, size, 0);
}

API cudaError_t cudaFreeHost(void *p)
{
	free(p);
	return cudaSuccess;
}

API cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
	*total = standin_total();
	*free_b = *total - standin_used();
	return cudaSuccess;
}

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	(void)kind;
	memmove(dst, src, count);
	return cudaSuccess;
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s)
{
	(void)s;
	return cudaMemcpy(dst, src, count, kind);
}

API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	memset(devPtr, value, count);
	return cudaSuccess;
}

API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t s)
{
	(void)s;
	return cudaMemset(devPtr, value, count);
}

API cudaError_t cudaGetDeviceCount(int *count)
{
	*count = 1;
	return cudaSuccess;
}

static int current;

API cudaError_t cudaGetDevice(int *device)
{
	*device = current;
	return cudaSuccess;
}

API cudaError_t cudaSetDevice(int device)
{
	return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

API cudaError_t cudaDriverGetVersion(int *v)
{
	*v = CUDART_VERSION;
	return cudaSuccess;
}

API cudaError_t cudaRuntimeGetVersion(int *v)
{
	*v = CUDART_VERSION;
	return cudaSuccess;
}

API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (device)
		return fail(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	strcpy(prop->name, "memleak-ai stand-in GPU (host memory)");
	prop->totalGlobalMem = standin_total();
	prop->major = 9;
	prop->minor = 0;
	prop->multiProcessorCount = 132;
	prop->warpSize = 32;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsPerMultiProcessor = 2048;
	prop->sharedMemPerBlock = 48 << 10;
	prop->sharedMemPerBlockOptin = 227 << 10;
	prop->sharedMemPerMultiprocessor = 228 << 10;
	prop->regsPerBlock = 65536;
	prop->regsPerMultiprocessor = 65536;
	prop->l2CacheSize = 50 << 20;
	prop->memoryBusWidth = 5120;
	prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
	prop->unifiedAddressing = 1;
	prop->integrated = 0;
	prop->concurrentKernels = 1;
	return cudaSuccess;
}

API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
	struct cudaDeviceProp p;

	cudaGetDeviceProperties(&p, device);
	switch (attr) {
	case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
	case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
	case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
	case cudaDevAttrWarpSize: *value = 32; break;
	case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
	case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
	case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
	default: *value = 1; break; /* the flags a caller asks (supported) and counts that must not be 0 */
	}
	return cudaSuccess;
}

API cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int device)
{
	(void)device;
	strncpy(id, "0000:00:00.0", (size_t)len);
	return len > 0 ? (id[len - 1] = 0, cudaSuccess) : fail(cudaErrorInvalidValue);
}

API cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest)
{
	if (least)
		*least = 0;
	if (greatest)
		*greatest = -5;
	return cudaSuccess;
}

API cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer)
{
	(void)device, (void)peer;
	*can = 0;
	return cudaSuccess;
}

/* Streams, events and memory pools: distinct handles, all work done at once. */
static void *handle(void)
{
	void *h = calloc(1, 64);

	return h;
}

API cudaError_t cudaStreamCreate(cudaStream_t *s)
{
	*s = handle();
	return cudaSuccess;
}

API cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
	(void)flags;
	return cudaStreamCreate(s);
}

API cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority)
{
	(void)flags, (void)priority;
	return cudaStreamCreate(s);
}

API cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority)
{
	(void)s;
	*priority = 0;
	return cudaSuccess;
}

API cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
	(void)s;
	*status = cudaStreamCaptureStatusNone;
	return cudaSuccess;
}

API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *status, unsigned long long *id,
					 cudaGraph_t *graph, const cudaGraphNode_t **deps,
					 const cudaGraphEdgeData **edges, size_t *n)
{
	(void)s;
	if (status)
		*status = cudaStreamCaptureStatusNone;
	if (id)
		*id = 0;
	if (graph)
		*graph = NULL;
	if (deps)
		*deps = NULL;
	if (edges)
		*edges = NULL;
	if (n)
		*n = 0;
	return cudaSuccess;
}

API cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode)
{
	static __thread enum cudaStreamCaptureMode m = cudaStreamCaptureModeGlobal;
	enum cudaStreamCaptureMode old = m;

	m = *mode;
	*mode = old;
	return cudaSuccess;
}

API cudaError_t cudaEventCreate(cudaEvent_t *e)
{
	*e = handle();
	return cudaSuccess;
}

API cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
	(void)flags;
	return cudaEventCreate(e);
}

API cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
	(void)a, (void)b;
	*ms = 0;
	return cudaSuccess;
}

API cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
	(void)device;
	*pool = handle();
	return cudaSuccess;
}

API cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value)
{
	(void)pool, (void)attr;
	memset(value, 0, sizeof(uint64_t));
	return cudaSuccess;
}

API cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *ptr)
{
	memset(a, 0, sizeof(*a));
	a->type = cudaMemoryTypeDevice;
	a->device = 0;
	a->devicePointer = (void *)ptr;
	return cudaSuccess;
}

API cudaError_t cudaGetLastError(void)
{
	cudaError_t e = last_error;

	last_error = cudaSuccess;
	return e;
}

API cudaError_t cudaPeekAtLastError(void)
{
	return last_error;
}

API const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess			? "no error"
	       : e == cudaErrorMemoryAllocation ? "out of memory"
						: "stand-in device error";
}

API const char *cudaGetErrorName(cudaError_t e)
{
	return e == cudaSuccess			? "cudaSuccess"
	       : e == cudaErrorMemoryAllocation ? "cudaErrorMemoryAllocation"
						: "cudaErrorUnknown";
}

API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *a, const void *func)
{
	(void)func;
	memset(a, 0, sizeof(*a));
	a->maxThreadsPerBlock = 1024;
	a->numRegs = 32;
	return cudaSuccess;
}

API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t smem)
{
	(void)func, (void)block, (void)smem;
	*n = 1;
	return cudaSuccess;
}

API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int block, size_t smem,
								       unsigned int flags)
{
	(void)flags;
	return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, func, block, smem);
}

API cudaError_t cudaGetSymbolAddress(void **p, const void *symbol)
{
	*p = (void *)symbol;
	return cudaSuccess;
}

/* Driver entry points: the driver stand-in's own functions by name (so probes on them fire), else a no-op. */
API cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
						 unsigned long long flags, enum cudaDriverEntryPointQueryResult *status)
{
	static void *drv;

	(void)version, (void)flags;
	if (!drv)
		drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	*fn = drv ? dlsym(drv, symbol) : NULL;
	if (!*fn)
		*fn = drv ? dlsym(drv, "standin_noop") : NULL;
	if (status)
		*status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
	return *fn ? cudaSuccess : fail(cudaErrorSymbolNotFound);
}

/* Kernels: registered and launched as no-ops. */
static void *fatbin_handle[4];

API void **__cudaRegisterFatBinary(void *fatCubin)
{
	(void)fatCubin;
	return fatbin_handle;
}

API unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, void *stream)
{
	(void)grid, (void)block, (void)smem, (void)stream;
	return 0;
}

API cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream)
{
	*grid = *block = (dim3){1, 1, 1};
	*smem = 0;
	*(void **)stream = NULL;
	return cudaSuccess;
}

API cudaError_t cudaLibraryLoadData(cudaLibrary_t *lib, const void *code, enum cudaJitOption *jo, void **jv,
				    unsigned int nj, enum cudaLibraryOption *lo, void **lv, unsigned int nl)
{
	(void)code, (void)jo, (void)jv, (void)nj, (void)lo, (void)lv, (void)nl;
	*lib = handle();
	return cudaSuccess;
}

API cudaError_t cudaLibraryGetKernel(cudaKernel_t *k, cudaLibrary_t lib, const char *name)
{
	(void)lib, (void)name;
	*k = handle();
	return cudaSuccess;
}
