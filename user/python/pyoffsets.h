/* Per-version CPython struct offsets (x86_64, default non-free-threaded builds) for walking interpreter frames. */
#ifndef MEMLEAK_AI_PYOFFSETS_H
#define MEMLEAK_AI_PYOFFSETS_H

#include <stddef.h>
#include <stdint.h>

#define ML_PY_NONE 0xffff /* field absent in this version */

/*
 * PyASCIIObject.state, a 32-bit bitfield, identical in 3.11, 3.12 and 3.13: interned bits 0-1,
 * kind bits 2-4 (1, 2 or 4 bytes a character), compact bit 5, ascii bit 6. Compact ASCII
 * characters start at unicode_ascii_size, other compact ones at unicode_compact_size; a string
 * that is not compact keeps them behind a pointer (subclasses of str only).
 */
#define ML_PY_STATE_KIND(s) (((s) >> 2) & 7)
#define ML_PY_STATE_COMPACT(s) (((s) >> 5) & 1)
#define ML_PY_STATE_ASCII(s) (((s) >> 6) & 1)

/* Frame owners (enum _frameowner), the same numbers in 3.11 to 3.13. */
#define ML_PY_OWNED_BY_THREAD 0
#define ML_PY_OWNED_BY_GENERATOR 1
#define ML_PY_OWNED_BY_FRAME_OBJECT 2

struct ml_py_layout {
	unsigned int version; /* major/minor as PY_VERSION_HEX with micro/level zeroed: 0x030b0000 */
	const char *name;     /* "3.11" */
	/* _PyRuntimeState */
	uint16_t runtime_interpreters_head; /* interpreters.head */
	/* PyInterpreterState */
	uint16_t interp_next, interp_threads_head;
	/* PyThreadState */
	uint16_t tstate_next, tstate_thread_id /* pthread_self() value */, tstate_native_thread_id;
	uint16_t tstate_cframe;	       /* 3.11/3.12 `_PyCFrame *cframe`; ML_PY_NONE in 3.13 */
	uint16_t cframe_current_frame; /* _PyCFrame.current_frame; ML_PY_NONE in 3.13 */
	uint16_t tstate_current_frame; /* 3.13 `current_frame`; ML_PY_NONE before */
	/* _PyInterpreterFrame */
	uint16_t frame_code; /* f_code (3.11, 3.12) / f_executable (3.13) */
	uint16_t frame_previous;
	uint16_t frame_func;	 /* f_func (3.11) / f_funcobj */
	uint16_t frame_instr;	 /* prev_instr (3.11, 3.12) / instr_ptr (3.13) */
	uint16_t frame_owner;	 /* the `owner` char */
	uint16_t frame_is_entry; /* 3.11 `is_entry`; ML_PY_NONE after */
	uint16_t frame_size;	 /* offsetof(localsplus): bytes covering every field above */
	uint8_t owner_cstack;	 /* value of FRAME_OWNED_BY_CSTACK (3.12+), 0xff when the version has none */
	uint8_t instr_is_next;	 /* 1 if frame_instr points to the next instruction rather than the current one */
	/* PyCodeObject */
	uint16_t code_filename, code_name, code_qualname, code_linetable, code_firstlineno;
	uint16_t code_adaptive;	      /* co_code_adaptive */
	uint16_t code_firsttraceable; /* int _co_firsttraceable, a count of code units: see pyoffsets.c */
	/* PyFunctionObject */
	uint16_t func_code;
	/* str (PyASCIIObject / PyCompactUnicodeObject) */
	uint16_t unicode_length, unicode_state;
	uint16_t unicode_ascii_size;   /* sizeof(PyASCIIObject) */
	uint16_t unicode_compact_size; /* sizeof(PyCompactUnicodeObject) */
	/* bytes */
	uint16_t bytes_size /* ob_size */, bytes_sval;
	uint16_t ob_type;
	uint16_t code_units; /* sizeof(_Py_CODEUNIT) = 2 */
};

/* The layout for a version (any micro), or NULL when unknown. */
const struct ml_py_layout *ml_py_layout_find(unsigned int version_hex);

/*
 * Cross-check a layout against a copy of the target's _Py_DebugOffsets (the first len bytes of its
 * _PyRuntime). 0 when every field both describe agrees; -EINVAL when buf is not a _Py_DebugOffsets
 * (too short, no cookie) or describes another major.minor; -EPROTO on a disagreement (a
 * free-threaded target included), naming the first disagreeing field in why as
 * "<field>: <table value> != <target value>", e.g. "interpreter_frame.previous: 8 != 16". For
 * versions without _Py_DebugOffsets (3.11, 3.12), -ENOENT. Everything in buf is untrusted; why
 * may be NULL.
 */
int ml_py_layout_check_debug(const struct ml_py_layout *l, const void *buf, size_t len, char *why, size_t whylen);

#endif
