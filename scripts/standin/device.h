/* The stand-in device's memory, shared by the runtime and driver stand-ins (scripts/standin-gpu). */
#ifndef STANDIN_DEVICE_H
#define STANDIN_DEVICE_H

#include <stddef.h>

/* Take size bytes of "device memory" (counted against STANDIN_GPU_MEMORY): 0, or -1 when it does not fit. */
int standin_take(size_t size);
void standin_give(size_t size);
size_t standin_total(void);
size_t standin_used(void);

#endif
