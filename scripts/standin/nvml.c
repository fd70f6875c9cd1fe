/*
 * A stand-in for NVML (libnvidia-ml.so.1), which PyTorch's caching allocator opens next to the driver and then
 * calls without a check when expandable segments map memory: every entry point it looks up, with no fabric,
 * no NVLink and no processes to list.
 */
#include <string.h>

#define API __attribute__((visibility("default")))
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3

typedef struct nvml_device *nvmlDevice_t;

static int the_device;

API int nvmlInit_v2(void)
{
	return NVML_SUCCESS;
}

API int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *device)
{
	(void)bus;
	*device = (nvmlDevice_t)&the_device;
	return NVML_SUCCESS;
}

/* nvmlGpuFabricInfoV_t: its version word (the caller's), then status, clique and state all 0: not supported. */
API int nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *info)
{
	(void)device;
	memset((char *)info + 4, 0, 32);
	return NVML_SUCCESS;
}

API int nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *count, void *infos)
{
	(void)device, (void)infos;
	*count = 0;
	return NVML_SUCCESS;
}

API int nvmlSystemGetCudaDriverVersion_v2(int *version)
{
	*version = 13000;
	return NVML_SUCCESS;
}

API int nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link, int *type)
{
	(void)device, (void)link, (void)type;
	return NVML_ERROR_NOT_SUPPORTED;
}

API int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, void *pci)
{
	(void)device, (void)link, (void)pci;
	return NVML_ERROR_NOT_SUPPORTED;
}
