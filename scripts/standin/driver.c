/*
 * A stand-in for the CUDA driver (libcuda.so.1) under PyTorch's real libraries, for machines with no GPU: the
 * virtual-memory calls that expandable segments make (cuMemAddressReserve, cuMemCreate, cuMemMap, ...) on host
 * memory, and the device accounting the runtime stand-in shares. Every other entry point the runtime hands out
 * through cudaGetDriverEntryPointByVersion succeeds and does nothing (standin_noop).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "device.h"

#define API __attribute__((visibility("default"), noinline))
#define GRANULE (2ULL << 20)

static size_t total_bytes, used_bytes;

/* STANDIN_GPU_MEMORY: bytes, or with a K, M or G suffix; 16G by default. */
API size_t standin_total(void)
{
	if (!total_bytes) {
		const char *s = getenv("STANDIN_GPU_MEMORY");
		char *end = NULL;
		unsigned long long v = s ? strtoull(s, &end, 10) : 0;

		if (v && end && *end)
			v <<= *end == 'K' || *end == 'k'   ? 10
			      : *end == 'M' || *end == 'm' ? 20
			      : *end == 'G' || *end == 'g' ? 30
							   : 0;
		total_bytes = v ? (size_t)v : 16ULL << 30;
	}
	return total_bytes;
}

API size_t standin_used(void)
{
	return __atomic_load_n(&used_bytes, __ATOMIC_RELAXED);
}

API int standin_take(size_t size)
{
	size_t cur = __atomic_load_n(&used_bytes, __ATOMIC_RELAXED);

	do {
		if (cur + size > standin_total() || cur + size < cur)
			return -1;
	} while (
	    !__atomic_compare_exchange_n(&used_bytes, &cur, cur + size, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
	return 0;
}

API void standin_give(size_t size)
{
	__atomic_fetch_sub(&used_bytes, size, __ATOMIC_SEQ_CST);
}

API CUresult standin_noop(void)
{
	return CUDA_SUCCESS;
}

API CUresult cuInit(unsigned int flags)
{
	(void)flags;
	return CUDA_SUCCESS;
}

API CUresult cuDriverGetVersion(int *v)
{
	*v = CUDA_VERSION;
	return CUDA_SUCCESS;
}

API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
				 unsigned long long flags)
{
	void *p = mmap((void *)(uintptr_t)addr, size + GRANULE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);

	(void)alignment, (void)flags;
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*ptr = ((CUdeviceptr)(uintptr_t)p + GRANULE - 1) & ~(GRANULE - 1);
	return CUDA_SUCCESS;
}

API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	munmap((void *)(uintptr_t)ptr, size);
	return CUDA_SUCCESS;
}

/* A handle is its size, kept in a small block of its own. */
API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
			 unsigned long long flags)
{
	size_t *h;

	(void)prop, (void)flags;
	if (standin_take(size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	h = malloc(sizeof(*h));
	if (!h) {
		standin_give(size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*h = size;
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)h;
	return CUDA_SUCCESS;
}

API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	size_t *h = (size_t *)(uintptr_t)handle;

	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	standin_give(*h);
	free(h);
	return CUDA_SUCCESS;
}

API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
		      unsigned long long flags)
{
	void *p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);

	(void)offset, (void)handle, (void)flags;
	return p == MAP_FAILED ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	void *p = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		       -1, 0);

	return p == MAP_FAILED ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	(void)ptr, (void)size, (void)desc, (void)count;
	return CUDA_SUCCESS;
}

API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
					   CUmemAllocationGranularity_flags option)
{
	(void)prop, (void)option;
	*granularity = GRANULE;
	return CUDA_SUCCESS;
}

API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream s)
{
	(void)s;
	for (size_t i = 0; i < n; i++)
		((unsigned int *)(uintptr_t)dst)[i] = value;
	return CUDA_SUCCESS;
}

API CUresult cuGetErrorString(CUresult error, const char **str)
{
	*str = error ? "stand-in device error" : "no error";
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	*device = ordinal;
	return ordinal ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

/* What PyTorch asks: virtual memory management yes (expandable segments), fabric handles and the rest no. */
API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	(void)dev;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
	case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: *pi = 1; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
	default: *pi = 0; break;
	}
	return CUDA_SUCCESS;
}

API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	static int ctx;

	*pctx = (CUcontext)&ctx;
	return CUDA_SUCCESS;
}

API CUresult cuDeviceGetCount(int *count)
{
	*count = 1;
	return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	(void)dev;
	*flags = 0;
	*active = 1;
	return CUDA_SUCCESS;
}

API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	(void)dev;
	return cuCtxGetCurrent(pctx);
}
