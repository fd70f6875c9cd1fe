/* libFuzzer target: /proc/PID/maps text is read from the target, so any bytes must parse or be rejected cleanly. */
#include <stddef.h>
#include <stdint.h>
#include "lib/procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ml_maps maps = {};

	if (ml_maps__parse((const char *)data, size, &maps) == 0) {
		for (size_t i = 0; i < maps.n; i++)
			(void)ml_maps__find(&maps, maps.v[i].start);
		ml_maps__clear(&maps);
	}
	return 0;
}
