/*
 * libFuzzer target: a Python frame's code object, and the str and bytes objects it points at, are the target's
 * bytes. The decoder reads them from this process (process_vm_readv), as from a traced job, so any image must
 * decode to a frame with valid UTF-8 names, or to an unknown frame, within its bounds. The input: a layout
 * byte (CPython 3.11, 3.12, 3.13), the frame's instruction (4 bytes), its line-table check (8 bytes), then the
 * memory the code object starts. An 8-byte word 0xa5000000_0000XXXX there is a pointer to offset XXXX of that
 * memory, 0xa6000000_000000TT the type object TT (0 code, 1 str, 2 bytes): real objects' pointers, relocated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "python/pyframes.h"
#include "python/pyoffsets.h"
#include "report/format.h"

#define MEM (64 * 1024)
#define HDR 13

static _Alignas(64) uint8_t mem[MEM + 8];
static char type_objs[3][16];

static uint64_t relocate(uint64_t w)
{
	if (w >> 32 == 0xa5000000)
		return (uint64_t)(uintptr_t)(mem + (w & 0xffff) % MEM);
	if (w >> 32 == 0xa6000000)
		return (uint64_t)(uintptr_t)type_objs[(w & 0xff) % 3];
	return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned int versions[] = {0x030b07f0, 0x030c01f0, 0x030d00f0};
	uint64_t types[3], w;
	const struct ml_py_layout *L;
	struct ml_pyframe_raw raw;
	const struct ml_frame *f = NULL;
	struct pyframes *p = NULL;
	size_t n;
	int rc;

	if (size < HDR)
		return 0;
	L = ml_py_layout_find(versions[data[0] % 3]);
	if (!L)
		abort();
	memset(mem, 0, sizeof(mem));
	n = size - HDR < MEM ? size - HDR : MEM;
	memcpy(mem, data + HDR, n);
	for (size_t i = 0; i + 8 <= n; i += 8) {
		memcpy(&w, mem + i, 8);
		w = relocate(w);
		memcpy(mem + i, &w, 8);
	}
	for (int i = 0; i < 3; i++)
		types[i] = (uint64_t)(uintptr_t)type_objs[i];
	memcpy(&raw.instr, data + 1, 4);
	memcpy(&w, data + 5, 8);
	raw.check = relocate(w);
	raw.code = (uint64_t)(uintptr_t)mem;
	if (pyframes__new(NULL, getpid(), &p))
		return 0;
	pyframes__use_layout(p, L, types);
	rc = pyframes__resolve(p, &raw, &f);
	if (rc < 0 || rc > 1 || (rc == 0 && (!f || f->kind != ML_FRAME_PYTHON)) || (rc == 1 && f))
		abort();
	if (f && ((f->func && (!ml_utf8_valid(f->func) || strlen(f->func) > 1 << 20)) ||
		  (f->file && (!ml_utf8_valid(f->file) || strlen(f->file) > 1 << 20))))
		abort();
	pyframes__free(p);
	return 0;
}
