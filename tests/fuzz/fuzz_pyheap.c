/*
 * libFuzzer target: pymalloc's pools, their free lists, every object's ob_type and the type objects it leads to
 * are the target's bytes. The census walks them from /proc/PID/mem and /proc/PID/pagemap; here two memfds stand
 * in for those files, holding the image at a fixed address, so any image must be walked or refused within its
 * bounds. The input: 8 bytes of pages that are not resident (bit i: page i), then the mapping's bytes from a
 * pool's start. An 8-byte word 0xa5000000_XXXXXXXX there is a pointer to offset XXXXXXXX of that mapping
 * (a real pool's links, ob_type and tp_name words, relocated).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "collect/census.h"
#include "collect/pyheap.h"
#include "lib/procmaps.h"
#include "lib/procmem.h"

#define BASE 0x40000000ULL /* a pool boundary: the mapping's start */
#define PAGE 4096ULL
#define MAP_MIN (5 * PAGE) /* a pool and a page of type objects at least */
#define HDR 8

static int mem_fd = -1, pagemap_fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ml_mapping m = {.start = BASE, .perms = "rw-p"};
	struct ml_maps maps = {.v = &m, .n = 1};
	struct pyheap_stats st;
	struct census *c = NULL;
	uint64_t absent, len, w, *pm;
	uint8_t *img;
	int err;

	if (size < HDR ||
	    (mem_fd < 0 && ((mem_fd = memfd_create("mem", 0)) < 0 || (pagemap_fd = memfd_create("pagemap", 0)) < 0)))
		return 0;
	memcpy(&absent, data, 8);
	len = size - HDR > MAP_MIN ? (size - HDR + PAGE - 1) & ~(PAGE - 1) : MAP_MIN;
	m.end = BASE + len;
	img = calloc(1, len);
	pm = calloc(len / PAGE, 8);
	if (!img || !pm || census__new(getpid(), &c))
		abort();
	memcpy(img, data + HDR, size - HDR);
	for (uint64_t i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, img + i, 8);
		if (w >> 32 == 0xa5000000)
			w = BASE + (w & 0xffffffff) % len;
		memcpy(img + i, &w, 8);
	}
	for (uint64_t i = 0; i < len / PAGE; i++)
		pm[i] = i < 64 && absent >> i & 1 ? 0 : ML_PM_PRESENT;
	if (ftruncate(mem_fd, 0) || ftruncate(pagemap_fd, 0) || pwrite(mem_fd, img, len, (off_t)BASE) != (ssize_t)len ||
	    pwrite(pagemap_fd, pm, len / PAGE * 8, (off_t)(BASE / PAGE * 8)) != (ssize_t)(len / PAGE * 8))
		abort();
	census__begin(c);
	err = pyheap__walk(getpid(), mem_fd, pagemap_fd, &maps, c, &st);
	if (err || st.typed > st.objects || st.pools > len / 16384)
		abort();
	census__end(c, 1);
	census__free(c);
	free(img);
	free(pm);
	return 0;
}
