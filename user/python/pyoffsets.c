/*
 * CPython struct offsets for 3.11, 3.12 and 3.13 (x86_64, default builds), checked against each
 * version's headers and running library by tests/unit/pyoffsets_probe.c (3.11.2, 3.11.7, 3.12.1,
 * 3.13.0). Micro releases are assumed to keep them (3.11.2 and 3.11.7 agree); for 3.13+ the
 * target's own _Py_DebugOffsets confirms them at run time (ml_py_layout_check_debug).
 *
 * Current frame of a PyThreadState:
 *   3.11, 3.12  tstate->cframe->current_frame. cframe is the _PyCFrame of the innermost running
 *               _PyEval_EvalFrameDefault (on the C stack) or tstate->root_cframe; NULL frame when
 *               no Python code runs. Frames link through ->previous across C calls.
 *   3.13        tstate->current_frame.
 * Where C code entered the interpreter:
 *   3.11        no extra frame: the first frame each _PyEval_EvalFrameDefault runs has is_entry = 1.
 *   3.12, 3.13  _PyEval_EvalFrameDefault links a shim frame from its C stack below the first one,
 *               owner == FRAME_OWNED_BY_CSTACK (3). In 3.12 its f_code is a valid code object, the
 *               interpreter's "<interpreter trampoline>"; in 3.13 its f_executable is None. Its other
 *               fields (f_funcobj, globals...) are not set: skip it by owner before reading them.
 * 3.13 f_executable: a code object or None ("code object or None" in pycore_frame.h); None is seen
 *   only in the C-stack shim. Check ob_type == &PyCode_Type before using it. f_funcobj may be None.
 * Frames tracebacks leave out ("incomplete": not yet at their first RESUME): owner not a generator
 *   and instr < co_code_adaptive + _co_firsttraceable code units. 3.11 and 3.12 new frames briefly
 *   point one unit before their code; 3.13 runs a specialized `__init__` call under such a shim
 *   frame (a static code object named "__init__", owner THREAD, firsttraceable 4, instruction 0).
 * Instruction pointer of a frame in the middle of a CALL (the caller of a C function, or of a
 *   Python function the interpreter entered inline), as the probe sees it:
 *   3.11        prev_instr = the CALL opcode, or the PRECALL when a specialized PRECALL_* made the C
 *               call itself; for an inlined Python call, the CALL's last inline cache unit.
 *   3.12        prev_instr = the CALL opcode; for an inlined Python call, its last cache unit.
 *   3.13        instr_ptr = the CALL opcode in both cases (returns resume at instr_ptr + return_offset).
 *   Each of these lies inside the CALL's own entry of the location table (caches share their
 *   instruction's entry), so the traceback line is PyCode_Addr2Line(code, instr - co_code_adaptive)
 *   with no adjustment: instr_is_next = 0 everywhere. Stepping back a unit would land on the
 *   previous instruction, another line when a call spans lines.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "python/pyoffsets.h"

#define PY_VER(major, minor) (((unsigned int)(major) << 24) | ((unsigned int)(minor) << 16))

static const struct ml_py_layout layouts[] = {
    {
	.version = PY_VER(3, 11),
	.name = "3.11",
	.runtime_interpreters_head = 40,
	.interp_next = 0,
	.interp_threads_head = 16,
	.tstate_next = 8,
	.tstate_thread_id = 152,
	.tstate_native_thread_id = 160,
	.tstate_cframe = 56,
	.cframe_current_frame = 8,
	.tstate_current_frame = ML_PY_NONE,
	.frame_code = 32,
	.frame_previous = 48,
	.frame_func = 0,
	.frame_instr = 56,
	.frame_owner = 69,
	.frame_is_entry = 68,
	.frame_size = 72,
	.owner_cstack = 0xff,
	.instr_is_next = 0,
	.code_filename = 112,
	.code_name = 120,
	.code_qualname = 128,
	.code_linetable = 136,
	.code_firstlineno = 72,
	.code_adaptive = 184,
	.code_firsttraceable = 168,
	.func_code = 48,
	.unicode_length = 16,
	.unicode_state = 32,
	.unicode_ascii_size = 48,
	.unicode_compact_size = 72,
	.bytes_size = 16,
	.bytes_sval = 32,
	.ob_type = 8,
	.code_units = 2,
    },
    {
	.version = PY_VER(3, 12),
	.name = "3.12",
	.runtime_interpreters_head = 40,
	.interp_next = 0,
	.interp_threads_head = 72,
	.tstate_next = 8,
	.tstate_thread_id = 136,
	.tstate_native_thread_id = 144,
	.tstate_cframe = 56,
	.cframe_current_frame = 0,
	.tstate_current_frame = ML_PY_NONE,
	.frame_code = 0,
	.frame_previous = 8,
	.frame_func = 16,
	.frame_instr = 56,
	.frame_owner = 70,
	.frame_is_entry = ML_PY_NONE,
	.frame_size = 72,
	.owner_cstack = 3,
	.instr_is_next = 0,
	.code_filename = 112,
	.code_name = 120,
	.code_qualname = 128,
	.code_linetable = 136,
	.code_firstlineno = 68,
	.code_adaptive = 192,
	.code_firsttraceable = 176,
	.func_code = 48,
	.unicode_length = 16,
	.unicode_state = 32,
	.unicode_ascii_size = 40,
	.unicode_compact_size = 56,
	.bytes_size = 16,
	.bytes_sval = 32,
	.ob_type = 8,
	.code_units = 2,
    },
    {
	.version = PY_VER(3, 13),
	.name = "3.13",
	.runtime_interpreters_head = 632,
	.interp_next = 7264,
	.interp_threads_head = 7344,
	.tstate_next = 8,
	.tstate_thread_id = 152,
	.tstate_native_thread_id = 160,
	.tstate_cframe = ML_PY_NONE,
	.cframe_current_frame = ML_PY_NONE,
	.tstate_current_frame = 72,
	.frame_code = 0,
	.frame_previous = 8,
	.frame_func = 16,
	.frame_instr = 56,
	.frame_owner = 70,
	.frame_is_entry = ML_PY_NONE,
	.frame_size = 72,
	.owner_cstack = 3,
	.instr_is_next = 0,
	.code_filename = 112,
	.code_name = 120,
	.code_qualname = 128,
	.code_linetable = 136,
	.code_firstlineno = 68,
	.code_adaptive = 200,
	.code_firsttraceable = 184,
	.func_code = 48,
	.unicode_length = 16,
	.unicode_state = 32,
	.unicode_ascii_size = 40,
	.unicode_compact_size = 56,
	.bytes_size = 16,
	.bytes_sval = 32,
	.ob_type = 8,
	.code_units = 2,
    },
};

const struct ml_py_layout *ml_py_layout_find(unsigned int version_hex)
{
	size_t i;

	for (i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if ((version_hex & 0xffff0000u) == layouts[i].version)
			return &layouts[i];
	return NULL;
}

/* ---- _Py_DebugOffsets ---- */

#define DEBUG_COOKIE "xdebugpy"
#define DEBUG_COOKIE_LEN 8
#define DEBUG_VERSION_OFF 8
#define NO_FIELD 0xffff

/* One uint64_t of a _Py_DebugOffsets and the layout field it must equal. */
struct debug_field {
	const char *name;
	uint16_t off;	     /* in the _Py_DebugOffsets */
	uint16_t layout_off; /* offsetof(struct ml_py_layout, ...), or NO_FIELD: must be 0 */
};

#define LF(f) ((uint16_t)offsetof(struct ml_py_layout, f))

/*
 * 3.13 (Include/internal/pycore_runtime.h): 73 uint64_t, 584 bytes. Each group begins with the
 * size of its struct, which nothing here describes: interpreter_frame.size is
 * sizeof(_PyInterpreterFrame), one localsplus slot beyond frame_size.
 */
static const struct debug_field debug_fields_313[] = {
    {"free_threaded", 16, NO_FIELD},
    {"runtime_state.interpreters_head", 40, LF(runtime_interpreters_head)},
    {"interpreter_state.next", 64, LF(interp_next)},
    {"interpreter_state.threads_head", 72, LF(interp_threads_head)},
    {"thread_state.next", 168, LF(tstate_next)},
    {"thread_state.current_frame", 184, LF(tstate_current_frame)},
    {"thread_state.thread_id", 192, LF(tstate_thread_id)},
    {"thread_state.native_thread_id", 200, LF(tstate_native_thread_id)},
    {"interpreter_frame.previous", 232, LF(frame_previous)},
    {"interpreter_frame.executable", 240, LF(frame_code)},
    {"interpreter_frame.instr_ptr", 248, LF(frame_instr)},
    {"interpreter_frame.localsplus", 256, LF(frame_size)},
    {"interpreter_frame.owner", 264, LF(frame_owner)},
    {"code_object.filename", 280, LF(code_filename)},
    {"code_object.name", 288, LF(code_name)},
    {"code_object.qualname", 296, LF(code_qualname)},
    {"code_object.linetable", 304, LF(code_linetable)},
    {"code_object.firstlineno", 312, LF(code_firstlineno)},
    {"code_object.co_code_adaptive", 344, LF(code_adaptive)},
    {"pyobject.ob_type", 360, LF(ob_type)},
    {"bytes_object.ob_size", 520, LF(bytes_size)},
    {"bytes_object.ob_sval", 528, LF(bytes_sval)},
    {"unicode_object.state", 544, LF(unicode_state)},
    {"unicode_object.length", 552, LF(unicode_length)},
    {"unicode_object.asciiobject_size", 560, LF(unicode_ascii_size)},
};

struct debug_desc {
	unsigned int version;
	size_t size; /* sizeof(_Py_DebugOffsets) */
	const struct debug_field *fields;
	size_t n_fields;
};

static const struct debug_desc debug_descs[] = {
    {PY_VER(3, 13), 584, debug_fields_313, sizeof(debug_fields_313) / sizeof(debug_fields_313[0])},
};

static uint64_t get_u64(const void *buf, size_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)buf + off, sizeof(v));
	return v;
}

__attribute__((format(printf, 3, 4))) static void set_why(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (!why || !whylen)
		return;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
}

int ml_py_layout_check_debug(const struct ml_py_layout *l, const void *buf, size_t len, char *why, size_t whylen)
{
	const struct debug_desc *d = NULL;
	uint64_t version, got;
	unsigned int want;
	size_t i;

	set_why(why, whylen, "%s", "");
	if (!l)
		return -EINVAL;
	for (i = 0; i < sizeof(debug_descs) / sizeof(debug_descs[0]); i++)
		if (debug_descs[i].version == l->version)
			d = &debug_descs[i];
	if (!d) {
		set_why(why, whylen, "%s has no _Py_DebugOffsets", l->name);
		return -ENOENT;
	}
	if (!buf || len < DEBUG_VERSION_OFF + sizeof(uint64_t) || memcmp(buf, DEBUG_COOKIE, DEBUG_COOKIE_LEN)) {
		set_why(why, whylen, "not a _Py_DebugOffsets: no cookie or under 16 bytes");
		return -EINVAL;
	}
	version = get_u64(buf, DEBUG_VERSION_OFF);
	if ((version & ~(uint64_t)0xffff) != l->version) {
		set_why(why, whylen, "version %#" PRIx64 " is not %s", version, l->name);
		return -EINVAL;
	}
	if (len < d->size) {
		set_why(why, whylen, "%zu bytes of _Py_DebugOffsets, %s has %zu", len, l->name, d->size);
		return -EINVAL;
	}
	for (i = 0; i < d->n_fields; i++) {
		const struct debug_field *f = &d->fields[i];

		want = 0;
		if (f->layout_off != NO_FIELD) {
			uint16_t v;

			memcpy(&v, (const char *)l + f->layout_off, sizeof(v));
			if (v == ML_PY_NONE)
				continue;
			want = v;
		}
		got = get_u64(buf, f->off);
		if (got != want) {
			set_why(why, whylen, "%s: %u != %" PRIu64, f->name, want, got);
			return -EPROTO;
		}
	}
	return 0;
}
