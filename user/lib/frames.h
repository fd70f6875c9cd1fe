/*
 * Frames, the one vocabulary every stage shares: a stack as captured (native words, raw Python frames) and
 * a frame as resolved (function, module, file, line).
 */
#ifndef ML_FRAMES_H
#define ML_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "memleak.h"

enum ml_frame_kind {
	ML_FRAME_NATIVE = 0,
	ML_FRAME_PYTHON = 1, /* func: qualified name, file: co_filename, addr: code object, offset: instruction index */
};

/* All strings are owned by the symbolizer (or the Python frame decoder) and live until it is freed. */
struct ml_frame {
	enum ml_frame_kind kind;
	uint64_t addr;
	char *func;		      /* demangled C++ name, or symbol name without "@VERSION", or NULL when unknown */
	char *module;		      /* mapping path as in maps (" (deleted)" removed), or NULL */
	uint64_t offset;	      /* addr - function start; if func is NULL: file offset in module (addr if none) */
	char *file;		      /* DWARF source file or NULL */
	int line;		      /* 0 when unknown */
	bool inlined;		      /* a function inlined into outer at this address (DWARF inline information) */
	const struct ml_frame *outer; /* next frame out at the same address: what this one is inlined into */
	const char *unresolved;	      /* Python, func NULL: why it could not be decoded (a static string) */
};

/* A Python frame as captured: decoded by user/python/pyframes.c. */
#define ML_PYFRAME_NO_INSTR UINT32_MAX
struct ml_pyframe_raw {
	uint64_t code;	/* code object address */
	uint64_t check; /* the code object's co_linetable pointer when the frame ran */
	uint32_t instr; /* instruction index in code units, or ML_PYFRAME_NO_INSTR */
	bool entry;	/* outermost frame of its call of the eval loop */
};

/* The captured stack of a row. */
struct ml_rawstack {
	size_t nr; /* native frames, the caller first */
	uint64_t ips[ML_MAX_FRAMES + 1];
	size_t nr_py; /* Python frames, innermost first */
	struct ml_pyframe_raw py[ML_MAX_PYFRAMES];
	unsigned int flags; /* ML_STACK_* */
};

/* A captured stack's Python frames (two words each after its native ones), bounded; returns how many. */
static inline size_t ml_stack_pyframes(const struct ml_stack *st, struct ml_pyframe_raw py[ML_MAX_PYFRAMES])
{
	size_t n = 0;

	/* The counts come from the kernel map, which the target cannot write; bound them all the same. */
	for (size_t i = 0; i < st->nr_py && i < ML_MAX_PYFRAMES && st->nr + 2 * i + 1 < ML_STACK_WORDS; i++) {
		uint64_t w0 = st->ips[st->nr + 2 * i];

		py[i].code = ml_py_code(w0);
		py[i].instr = ml_py_instr(w0) == ML_PY_INSTR_UNKNOWN ? ML_PYFRAME_NO_INSTR : (uint32_t)ml_py_instr(w0);
		py[i].entry = !!(w0 & ML_PY_ENTRY);
		py[i].check = st->ips[st->nr + 2 * i + 1];
		n = i + 1;
	}
	return n;
}

#endif
