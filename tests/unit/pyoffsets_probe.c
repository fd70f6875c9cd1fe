/*
 * Checks user/python/pyoffsets.c against one CPython: its real headers (offsetof, sizeof, enum values)
 * and its running library (frames walked by the table from inside a call, compared with what
 * CPython itself reports; _Py_DebugOffsets for 3.13+). test_pyoffsets.c builds it per interpreter:
 *   cc -DPy_BUILD_CORE -I<include/python3.X> -Iuser tests/unit/pyoffsets_probe.c user/python/pyoffsets.c \
 *      -L<libdir> -lpython3.X
 * Prints "ok - ..." / "not ok - ..." lines ("# ..." for diagnostics); exits 1 on any failure.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"

#include "check.h"
#include "python/pyoffsets.h"

#define MEMBER_SIZE(type, member) sizeof(((type *)0)->member)

static const struct ml_py_layout *l;
static char ver[16]; /* "3.12" */

static void expect_uint(const char *what, unsigned long long got, unsigned long long want)
{
	char name[200];

	snprintf(name, sizeof(name), "%s %s: %llu (headers/runtime: %llu)", ver, what, got, want);
	CHECK_EQ_U64(got, want, name);
}

static void expect_true(bool ok, const char *what)
{
	char name[200];

	snprintf(name, sizeof(name), "%s %s", ver, what);
	CHECK(ok, name);
}

#define OFF(field, type, member)                                                                                       \
	expect_uint(#field " = offsetof(" #type ", " #member ")", l->field, offsetof(type, member))
#define ABSENT(field) expect_uint(#field " absent", l->field, ML_PY_NONE)

/* ---- the table against the headers ---- */

static void check_headers(void)
{
	OFF(runtime_interpreters_head, _PyRuntimeState, interpreters.head);
	OFF(interp_next, PyInterpreterState, next);
	OFF(interp_threads_head, PyInterpreterState, threads.head);
	OFF(tstate_next, PyThreadState, next);
	OFF(tstate_thread_id, PyThreadState, thread_id);
	OFF(tstate_native_thread_id, PyThreadState, native_thread_id);
#if PY_VERSION_HEX < 0x030d0000
	OFF(tstate_cframe, PyThreadState, cframe);
	OFF(cframe_current_frame, _PyCFrame, current_frame);
	ABSENT(tstate_current_frame);
	OFF(frame_code, _PyInterpreterFrame, f_code);
	OFF(frame_instr, _PyInterpreterFrame, prev_instr);
#else
	ABSENT(tstate_cframe);
	ABSENT(cframe_current_frame);
	OFF(tstate_current_frame, PyThreadState, current_frame);
	OFF(frame_code, _PyInterpreterFrame, f_executable);
	OFF(frame_instr, _PyInterpreterFrame, instr_ptr);
#endif
	OFF(frame_previous, _PyInterpreterFrame, previous);
#if PY_VERSION_HEX < 0x030c0000
	OFF(frame_func, _PyInterpreterFrame, f_func);
	OFF(frame_is_entry, _PyInterpreterFrame, is_entry);
	expect_uint("sizeof(is_entry)", MEMBER_SIZE(_PyInterpreterFrame, is_entry), 1);
	expect_uint("owner_cstack (no FRAME_OWNED_BY_CSTACK)", l->owner_cstack, 0xff);
#else
	OFF(frame_func, _PyInterpreterFrame, f_funcobj);
	ABSENT(frame_is_entry);
	expect_uint("owner_cstack = FRAME_OWNED_BY_CSTACK", l->owner_cstack, FRAME_OWNED_BY_CSTACK);
#endif
	OFF(frame_owner, _PyInterpreterFrame, owner);
	expect_uint("sizeof(owner)", MEMBER_SIZE(_PyInterpreterFrame, owner), 1);
	OFF(frame_size, _PyInterpreterFrame, localsplus);
	expect_uint("ML_PY_OWNED_BY_THREAD", ML_PY_OWNED_BY_THREAD, FRAME_OWNED_BY_THREAD);
	expect_uint("ML_PY_OWNED_BY_GENERATOR", ML_PY_OWNED_BY_GENERATOR, FRAME_OWNED_BY_GENERATOR);
	expect_uint("ML_PY_OWNED_BY_FRAME_OBJECT", ML_PY_OWNED_BY_FRAME_OBJECT, FRAME_OWNED_BY_FRAME_OBJECT);

	OFF(code_filename, PyCodeObject, co_filename);
	OFF(code_name, PyCodeObject, co_name);
	OFF(code_qualname, PyCodeObject, co_qualname);
	OFF(code_linetable, PyCodeObject, co_linetable);
	OFF(code_firstlineno, PyCodeObject, co_firstlineno);
	expect_uint("sizeof(co_firstlineno)", MEMBER_SIZE(PyCodeObject, co_firstlineno), 4);
	OFF(code_adaptive, PyCodeObject, co_code_adaptive);
	OFF(code_firsttraceable, PyCodeObject, _co_firsttraceable);
	expect_uint("sizeof(_co_firsttraceable)", MEMBER_SIZE(PyCodeObject, _co_firsttraceable), 4);
	OFF(func_code, PyFunctionObject, func_code);

	OFF(unicode_length, PyASCIIObject, length);
	OFF(unicode_state, PyASCIIObject, state);
	expect_uint("sizeof(state)", MEMBER_SIZE(PyASCIIObject, state), 4);
	expect_uint("unicode_ascii_size = sizeof(PyASCIIObject)", l->unicode_ascii_size, sizeof(PyASCIIObject));
	expect_uint("unicode_compact_size = sizeof(PyCompactUnicodeObject)", l->unicode_compact_size,
		    sizeof(PyCompactUnicodeObject));
	OFF(bytes_size, PyBytesObject, ob_base.ob_size);
	OFF(bytes_sval, PyBytesObject, ob_sval);
	OFF(ob_type, PyObject, ob_type);
	expect_uint("code_units = sizeof(_Py_CODEUNIT)", l->code_units, sizeof(_Py_CODEUNIT));

	/* pointer-sized fields the walker dereferences */
	expect_uint("sizeof(thread_id)", MEMBER_SIZE(PyThreadState, thread_id), sizeof(unsigned long));
	expect_uint("sizeof(native_thread_id)", MEMBER_SIZE(PyThreadState, native_thread_id), sizeof(unsigned long));
	expect_uint("sizeof(length)", MEMBER_SIZE(PyASCIIObject, length), 8);
}

/* The bit positions of the state bitfield, as this compiler lays it out for these headers. */
static void check_state_bits(void)
{
	PyASCIIObject o;
	uint32_t raw;

	memset(&o, 0, sizeof(o));
	o.state.kind = PyUnicode_4BYTE_KIND;
	memcpy(&raw, (char *)&o + l->unicode_state, sizeof(raw));
	expect_true(raw == 4u << 2 && ML_PY_STATE_KIND(raw) == 4, "state.kind is bits 2-4");
	memset(&o, 0, sizeof(o));
	o.state.compact = 1;
	memcpy(&raw, (char *)&o + l->unicode_state, sizeof(raw));
	expect_true(raw == 1u << 5 && ML_PY_STATE_COMPACT(raw), "state.compact is bit 5");
	memset(&o, 0, sizeof(o));
	o.state.ascii = 1;
	memcpy(&raw, (char *)&o + l->unicode_state, sizeof(raw));
	expect_true(raw == 1u << 6 && ML_PY_STATE_ASCII(raw), "state.ascii is bit 6");
	memset(&o, 0, sizeof(o));
	o.state.interned = 3;
	memcpy(&raw, (char *)&o + l->unicode_state, sizeof(raw));
	expect_true(raw == 3, "state.interned is bits 0-1");
}

/* ---- reading live objects through the table ---- */

static void *rd_ptr(const void *base, uint16_t off)
{
	void *p;

	memcpy(&p, (const char *)base + off, sizeof(p));
	return p;
}

static uint64_t rd_u64(const void *base, uint16_t off)
{
	uint64_t v;

	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

static uint32_t rd_u32(const void *base, uint16_t off)
{
	uint32_t v;

	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

static uint8_t rd_u8(const void *base, uint16_t off)
{
	return *((const uint8_t *)base + off);
}

/* A str read through the table into buf as UTF-32 code points; returns the length or -1. */
static long read_str(PyObject *s, uint32_t *buf, size_t n)
{
	uint32_t state = rd_u32(s, l->unicode_state);
	uint64_t len = rd_u64(s, l->unicode_length);
	unsigned int kind = ML_PY_STATE_KIND(state);
	const char *data;
	uint64_t i;

	if (!ML_PY_STATE_COMPACT(state) || len > n || (kind != 1 && kind != 2 && kind != 4))
		return -1;
	data = (const char *)s + (ML_PY_STATE_ASCII(state) ? l->unicode_ascii_size : l->unicode_compact_size);
	for (i = 0; i < len; i++) {
		if (kind == 1)
			buf[i] = (uint8_t)data[i];
		else if (kind == 2)
			buf[i] = ((const uint16_t *)data)[i];
		else
			buf[i] = ((const uint32_t *)data)[i];
	}
	return (long)len;
}

static bool str_matches(PyObject *s)
{
	uint32_t buf[64];
	long n = read_str(s, buf, 64), i;

	if (n < 0 || n != PyUnicode_GET_LENGTH(s))
		return false;
	for (i = 0; i < n; i++)
		if (buf[i] != PyUnicode_READ_CHAR(s, i))
			return false;
	return true;
}

static void check_objects(void)
{
	static const char *const strs[] = {"probe",
					   "pr\xc3\xb6"
					   "be",
					   "euro \xe2\x82\xac", "smile \xf0\x9f\x98\x80", ""};
	static const unsigned int kinds[] = {1, 1, 2, 4, 1};
	PyObject *b;
	size_t i;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		PyObject *s = PyUnicode_FromString(strs[i]);
		char what[80];

		snprintf(what, sizeof(what), "str #%zu (kind %u) read through the table", i, kinds[i]);
		expect_true(s && ML_PY_STATE_KIND(rd_u32(s, l->unicode_state)) == kinds[i] && str_matches(s), what);
		Py_XDECREF(s);
	}
	b = PyBytes_FromStringAndSize("ab\0cd", 5);
	expect_true(b && rd_u64(b, l->bytes_size) == 5 && !memcmp((char *)b + l->bytes_sval, "ab\0cd", 6),
		    "bytes read through the table");
	expect_true(b && rd_ptr(b, l->ob_type) == (void *)&PyBytes_Type, "ob_type read through the table");
	Py_XDECREF(b);
}

static void check_thread_state(void)
{
	PyThreadState *ts = PyGILState_GetThisThreadState();
	PyInterpreterState *interp = PyInterpreterState_Get();
	void *p;
	int n = 0;
	bool found = false;

	expect_true(rd_ptr(&_PyRuntime, l->runtime_interpreters_head) == interp, "_PyRuntime interpreters.head");
	expect_true(rd_ptr(interp, l->interp_next) == NULL, "interp.next of the only interpreter");
	for (p = rd_ptr(interp, l->interp_threads_head); p && n < 100; p = rd_ptr(p, l->tstate_next), n++)
		if (p == ts)
			found = true;
	expect_true(found, "this thread's state on interp.threads.head/next");
	expect_uint("tstate thread_id = pthread_self()", rd_u64(ts, l->tstate_thread_id), (uint64_t)pthread_self());
	expect_uint("tstate native_thread_id = gettid()", rd_u64(ts, l->tstate_native_thread_id),
		    (uint64_t)syscall(SYS_gettid));
}

/* ---- frames walked by the table from inside a C call, against CPython's own view ---- */

#define MAX_FRAMES 64

struct frame_view {
	void *code;
	int line;
};

static int walks, walk_failures, cstack_frames, cstack_bad, entry_frames, incomplete_frames;
static char walk_failure[300];

__attribute__((format(printf, 1, 2))) static void walk_fail(const char *fmt, ...)
{
	va_list ap;

	if (walk_failures++)
		return;
	va_start(ap, fmt);
	vsnprintf(walk_failure, sizeof(walk_failure), fmt, ap);
	va_end(ap);
}

static const char *code_name(void *code)
{
	PyObject *name = rd_ptr(code, l->code_name);

	return PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : "?";
}

static void *current_frame(void *ts)
{
	if (l->tstate_current_frame != ML_PY_NONE)
		return rd_ptr(ts, l->tstate_current_frame);
	return rd_ptr(rd_ptr(ts, l->tstate_cframe), l->cframe_current_frame);
}

/* Python frames as tracebacks show them, walked through the table. */
static int walk_table(struct frame_view *v, bool trace)
{
	void *f = current_frame(PyGILState_GetThisThreadState());
	int n = 0, depth;

	for (depth = 0; f && depth < 1000; f = rd_ptr(f, l->frame_previous), depth++) {
		uint8_t owner = rd_u8(f, l->frame_owner);
		PyObject *code = rd_ptr(f, l->frame_code), *func = rd_ptr(f, l->frame_func);
		const char *instr = rd_ptr(f, l->frame_instr), *start;
		int firsttraceable, line, off;

		if (l->frame_is_entry != ML_PY_NONE && rd_u8(f, l->frame_is_entry))
			entry_frames++;
		if (l->owner_cstack != 0xff && owner == l->owner_cstack) {
			cstack_frames++;
			/* 3.12: the interpreter's trampoline code object; 3.13: None */
			if (PY_VERSION_HEX >= 0x030d0000 ? code != Py_None : !PyCode_Check(code))
				cstack_bad++;
			if (trace)
				printf("#   [%d] C-stack shim frame, code %s %s\n", depth, Py_TYPE(code)->tp_name,
				       PyCode_Check(code) ? code_name(code) : "");
			continue;
		}
		if (rd_ptr(code, l->ob_type) != (void *)&PyCode_Type) {
			walk_fail("frame %d: a %s as executable", depth, Py_TYPE(code)->tp_name);
			continue;
		}
		start = (const char *)code + l->code_adaptive;
		firsttraceable = (int)rd_u32(code, l->code_firsttraceable);
		off = (int)(instr - start);
		if (owner != ML_PY_OWNED_BY_GENERATOR && off < firsttraceable * l->code_units) {
			incomplete_frames++;
			if (trace)
				printf("#   [%d] incomplete frame %s, owner %u, instr unit %d < first traceable %d\n",
				       depth, code_name(code), owner, off / l->code_units, firsttraceable);
			continue;
		}
		if (func && PyFunction_Check(func) && rd_ptr(func, l->func_code) != code)
			walk_fail("func_code of %s's function is another code object", code_name(code));
		if (l->instr_is_next)
			off -= l->code_units;
		line = PyCode_Addr2Line((PyCodeObject *)code, off);
		if (trace) {
			uint16_t unit;

			memcpy(&unit, instr, sizeof(unit));
			printf("#   [%d] %s owner %u%s instr unit %d (opcode %u arg %u) line %d\n", depth,
			       code_name(code), owner,
			       l->frame_is_entry != ML_PY_NONE && rd_u8(f, l->frame_is_entry) ? " is_entry" : "",
			       off / l->code_units, unit & 0xff, unit >> 8, line);
		}
		if (n < MAX_FRAMES)
			v[n++] = (struct frame_view){code, line};
	}
	return n;
}

/* The same, through the C API: the frames PyFrame_GetBack gives, lines as tracebacks show them. */
static int walk_api(struct frame_view *v)
{
	PyFrameObject *f = PyEval_GetFrame();
	int n = 0;

	Py_XINCREF(f);
	while (f && n < MAX_FRAMES) {
		PyFrameObject *back = PyFrame_GetBack(f);
		PyCodeObject *code = PyFrame_GetCode(f);

		v[n++] = (struct frame_view){code, PyFrame_GetLineNumber(f)};
		Py_DECREF(code);
		Py_DECREF(f);
		f = back;
	}
	Py_XDECREF(f);
	return n;
}

static PyObject *probe_walk(PyObject *self, PyObject *trace)
{
	struct frame_view mine[MAX_FRAMES], ref[MAX_FRAMES];
	static bool traced;
	bool tr = !traced && PyObject_IsTrue(trace) == 1;
	int n_mine, n_ref, i;

	if (tr) {
		printf("# %s frames seen from a C call:\n", ver);
		traced = true;
	}
	n_mine = walk_table(mine, tr);
	n_ref = walk_api(ref);
	walks++;
	if (n_mine != n_ref)
		walk_fail("%d frames through the table, %d through the C API", n_mine, n_ref);
	for (i = 0; i < n_mine && i < n_ref; i++) {
		if (mine[i].code != ref[i].code)
			walk_fail("frame %d: %s, C API: %s", i, code_name(mine[i].code), code_name(ref[i].code));
		else if (mine[i].line != ref[i].line)
			walk_fail("frame %s: line %d, C API line %d", code_name(mine[i].code), mine[i].line,
				  ref[i].line);
	}
	return PyLong_FromLong(n_mine);
}

static PyMethodDef probe_walk_def = {"walk", probe_walk, METH_O, NULL};

/*
 * Python-to-Python calls (inlined in the same C frame), calls spread over two lines so that the
 * instruction before each CALL has another line than the CALL, a class instantiation
 * (3.13 runs __init__ under a shim frame once specialized), a generator resumed from C (list()),
 * a callback from C (sorted's key) and a second thread; repeated so the specializing interpreter
 * has rewritten the calls.
 */
static const char script[] = "import threading\n"
			     "TRACE = False\n"
			     "def leaf(n):\n"
			     "    return walk(\n"
			     "        TRACE)\n"
			     "def middle(n):\n"
			     "    r = leaf(\n"
			     "        n)\n"
			     "    return r\n"
			     "class K:\n"
			     "    def __init__(self):\n"
			     "        self.r = middle(1)\n"
			     "def gen():\n"
			     "    yield K().r\n"
			     "    yield sorted([2, 1], key=lambda x: middle(x))[0]\n"
			     "def top():\n"
			     "    return list(gen())\n"
			     "for i in range(200):\n"
			     "    top()\n"
			     "t = threading.Thread(target=top)\n"
			     "t.start()\n"
			     "t.join()\n"
			     "TRACE = True\n"
			     "top()\n";

static void check_walk(void)
{
	PyObject *globals = PyDict_New(), *fn = PyCFunction_New(&probe_walk_def, NULL), *code = NULL, *res = NULL;

	if (globals && fn && !PyDict_SetItemString(globals, "walk", fn) &&
	    !PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()))
		code = Py_CompileString(script, "<pyoffsets_probe>", Py_file_input);
	if (code)
		res = PyEval_EvalCode(code, globals, globals);
	if (!res)
		PyErr_Print();
	expect_true(res != NULL, "probe script ran");
	expect_true(walks > 0 && walk_failures == 0,
		    "frames walked through the table match the C API's, lines included");
	if (walk_failures)
		printf("# %d mismatches, first: %s\n", walk_failures, walk_failure);
	if (PY_VERSION_HEX < 0x030c0000)
		expect_true(entry_frames > 0, "is_entry frames seen");
	else
		expect_true(cstack_frames > 0 && !cstack_bad,
			    PY_VERSION_HEX < 0x030d0000 ? "C-stack shim frames seen, each with a code object"
							: "C-stack shim frames seen, each with f_executable None");
	printf("# %d walks, %d C-stack frames, %d is_entry frames, %d incomplete frames\n", walks, cstack_frames,
	       entry_frames, incomplete_frames);
	Py_XDECREF(res);
	Py_XDECREF(code);
	Py_XDECREF(fn);
	Py_XDECREF(globals);
}

/* ---- _Py_DebugOffsets ---- */

#if PY_VERSION_HEX >= 0x030d0000
struct debug_case {
	const char *name;
	size_t off;
};

#define DBG(group, field)                                                                                              \
	{                                                                                                              \
#group "." #field, offsetof(_Py_DebugOffsets, group.field)                                             \
	}

static const struct debug_case debug_cases[] = {
    {"free_threaded", offsetof(_Py_DebugOffsets, free_threaded)},
    DBG(runtime_state, interpreters_head),
    DBG(interpreter_state, next),
    DBG(interpreter_state, threads_head),
    DBG(thread_state, next),
    DBG(thread_state, current_frame),
    DBG(thread_state, thread_id),
    DBG(thread_state, native_thread_id),
    DBG(interpreter_frame, previous),
    DBG(interpreter_frame, executable),
    DBG(interpreter_frame, instr_ptr),
    DBG(interpreter_frame, localsplus),
    DBG(interpreter_frame, owner),
    DBG(code_object, filename),
    DBG(code_object, name),
    DBG(code_object, qualname),
    DBG(code_object, linetable),
    DBG(code_object, firstlineno),
    DBG(code_object, co_code_adaptive),
    DBG(pyobject, ob_type),
    DBG(bytes_object, ob_size),
    DBG(bytes_object, ob_sval),
    DBG(unicode_object, state),
    DBG(unicode_object, length),
    DBG(unicode_object, asciiobject_size),
};

static void check_debug_offsets(void)
{
	const _Py_DebugOffsets *real = &_PyRuntime.debug_offsets;
	_Py_DebugOffsets copy;
	char why[160], what[400];
	uint64_t v;
	size_t i;
	int err;

	expect_true(offsetof(_PyRuntimeState, debug_offsets) == 0, "_Py_DebugOffsets opens _PyRuntime");
	err = ml_py_layout_check_debug(l, real, sizeof(*real), why, sizeof(why));
	snprintf(what, sizeof(what), "check_debug on the live _PyRuntime: %d (%s)", err, why);
	expect_true(err == 0, what);
	err = ml_py_layout_check_debug(l, &_PyRuntime, sizeof(_PyRuntime), why, sizeof(why));
	expect_true(err == 0, "check_debug on all of _PyRuntime");

	/* every field compared, at the offset the header gives it */
	for (i = 0; i < sizeof(debug_cases) / sizeof(debug_cases[0]); i++) {
		memcpy(&copy, real, sizeof(copy));
		memcpy(&v, (char *)&copy + debug_cases[i].off, sizeof(v));
		v += 8;
		memcpy((char *)&copy + debug_cases[i].off, &v, sizeof(v));
		err = ml_py_layout_check_debug(l, &copy, sizeof(copy), why, sizeof(why));
		snprintf(what, sizeof(what), "check_debug with %s changed: -EPROTO naming it (%d, \"%s\")",
			 debug_cases[i].name, err, why);
		expect_true(err == -EPROTO && !strncmp(why, debug_cases[i].name, strlen(debug_cases[i].name)) &&
				why[strlen(debug_cases[i].name)] == ':',
			    what);
	}
	/* fields nothing describes may change */
	memcpy(&copy, real, sizeof(copy));
	copy.interpreter_frame.size += 8;
	copy.gc.collecting += 8;
	copy.type_object.tp_name += 8;
	expect_true(ml_py_layout_check_debug(l, &copy, sizeof(copy), why, sizeof(why)) == 0,
		    "check_debug ignores fields the table does not describe");

	memcpy(&copy, real, sizeof(copy));
	copy.cookie[0] = 'X';
	expect_true(ml_py_layout_check_debug(l, &copy, sizeof(copy), why, sizeof(why)) == -EINVAL,
		    "check_debug with a broken cookie: -EINVAL");
	memcpy(&copy, real, sizeof(copy));
	copy.version = 0x030e00f0;
	expect_true(ml_py_layout_check_debug(l, &copy, sizeof(copy), why, sizeof(why)) == -EINVAL,
		    "check_debug with version 3.14: -EINVAL");
	copy.version = 0x030c01f0;
	expect_true(ml_py_layout_check_debug(l, &copy, sizeof(copy), why, sizeof(why)) == -EINVAL,
		    "check_debug with version 3.12: -EINVAL");
	copy.version = (PY_VERSION_HEX & 0xffff0000) | 0x0905c1;
	expect_true(ml_py_layout_check_debug(l, &copy, sizeof(copy), why, sizeof(why)) == 0,
		    "check_debug with another micro release: 0");
	copy.version = ((uint64_t)1 << 32) | PY_VERSION_HEX;
	expect_true(ml_py_layout_check_debug(l, &copy, sizeof(copy), why, sizeof(why)) == -EINVAL,
		    "check_debug with junk above the 32-bit version: -EINVAL");
	memcpy(&copy, real, sizeof(copy));
	expect_true(ml_py_layout_check_debug(l, &copy, sizeof(copy) - 1, why, sizeof(why)) == -EINVAL,
		    "check_debug truncated by a byte: -EINVAL");
	expect_true(ml_py_layout_check_debug(l, &copy, 12, why, sizeof(why)) == -EINVAL,
		    "check_debug truncated inside the version: -EINVAL");
	expect_true(ml_py_layout_check_debug(l, &copy, 0, NULL, 0) == -EINVAL, "check_debug on 0 bytes: -EINVAL");
	expect_true(ml_py_layout_check_debug(ml_py_layout_find(0x030c0000), real, sizeof(*real), why, sizeof(why)) ==
			-ENOENT,
		    "check_debug for the 3.12 layout: -ENOENT");
}
#else
static void check_debug_offsets(void)
{
	char why[160];

	expect_true(ml_py_layout_check_debug(l, &_PyRuntime, sizeof(_PyRuntime), why, sizeof(why)) == -ENOENT,
		    "no _Py_DebugOffsets: check_debug gives -ENOENT");
}
#endif

int main(void)
{
	snprintf(ver, sizeof(ver), "%d.%d", PY_MAJOR_VERSION, PY_MINOR_VERSION);
	l = ml_py_layout_find(PY_VERSION_HEX);
	expect_true(l != NULL, "ml_py_layout_find(PY_VERSION_HEX)");
	if (!l)
		return SUMMARY("pyoffsets_probe");
	expect_uint("version", l->version, PY_VERSION_HEX & 0xffff0000);
	expect_true(!strcmp(l->name, ver), "name");
	check_headers();
	check_state_bits();

	Py_InitializeEx(0);
	expect_true(!strncmp(Py_GetVersion(), PY_VERSION, strlen(PY_VERSION)) &&
			Py_GetVersion()[strlen(PY_VERSION)] == ' ',
		    "the library loaded is the one the headers describe (" PY_VERSION ")");
	check_objects();
	check_thread_state();
	check_walk();
	check_debug_offsets();
	if (Py_FinalizeEx() < 0)
		expect_true(false, "Py_FinalizeEx");
	return SUMMARY("pyoffsets_probe");
}
