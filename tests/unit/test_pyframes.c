/*
 * Decoding Python frames from hostile memory. The "target" is this process: fake function, code, str and
 * bytes objects laid out with the 3.12 layout are read back through process_vm_readv, exactly as from a
 * traced job. Well-formed objects must decode to the exact name, file and line; malformed ones to an
 * unknown frame (func NULL), never to a crash, a huge allocation or another function's name.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "python/pyframes.h"
#include "python/pyoffsets.h"

static const struct ml_py_layout *L;
static uint64_t types[3];
#define T_CODE types[0]
#define T_STR types[1]
#define T_BYTES types[2]

/* Stand-ins for the type objects: only their addresses matter. */
static char type_objs[3][16];

struct obj {
	_Alignas(16) uint8_t b[512];
};

static void put64(struct obj *o, uint16_t off, uint64_t v)
{
	memcpy(o->b + off, &v, 8);
}

static void put32(struct obj *o, uint16_t off, uint32_t v)
{
	memcpy(o->b + off, &v, 4);
}

/* A compact str of `len` characters of `kind` bytes each (ascii: 1-byte data after PyASCIIObject). */
static void make_str(struct obj *o, const void *chars, uint64_t len, unsigned int kind, int ascii, int compact)
{
	uint32_t state = (kind << 2) | ((uint32_t)compact << 5) | ((uint32_t)ascii << 6);

	memset(o, 0, sizeof(*o));
	put64(o, L->ob_type, (uint64_t)(uintptr_t)T_STR);
	put64(o, L->unicode_length, len);
	put32(o, L->unicode_state, state);
	if (len * kind <= sizeof(o->b) - L->unicode_compact_size)
		memcpy(o->b + (ascii ? L->unicode_ascii_size : L->unicode_compact_size), chars, len * kind);
}

static void make_bytes(struct obj *o, const uint8_t *data, uint64_t len)
{
	memset(o, 0, sizeof(*o));
	put64(o, L->ob_type, T_BYTES);
	put64(o, L->bytes_size, len);
	if (len <= sizeof(o->b) - L->bytes_sval)
		memcpy(o->b + L->bytes_sval, data, len);
}

static struct obj code, fname, qname, ltab, other;
static const char padded[64] = "train.py"; /* room for 8 characters of any kind */

static void make_valid(void)
{
	/* One location entry: code 13 (line only), 8 code units, line delta +2 from co_firstlineno 10. */
	static const uint8_t table[] = {0x80 | (13 << 3) | 7, 0x04};

	memset(&code, 0, sizeof(code));
	put64(&code, L->ob_type, T_CODE);
	put64(&code, L->code_filename, (uint64_t)(uintptr_t)&fname);
	put64(&code, L->code_qualname, (uint64_t)(uintptr_t)&qname);
	put64(&code, L->code_linetable, (uint64_t)(uintptr_t)&ltab);
	put32(&code, L->code_firstlineno, 10);
	put32(&code, L->code_firsttraceable, 1);
	make_str(&fname, "train.py", 8, 1, 1, 1);
	make_str(&qname, "Model.train_step", 16, 1, 1, 1);
	make_bytes(&ltab, table, sizeof(table));
}

static struct ml_pyframe_raw raw_at(uint32_t instr)
{
	return (struct ml_pyframe_raw){
	    .code = (uint64_t)(uintptr_t)&code, .check = (uint64_t)(uintptr_t)&ltab, .instr = instr};
}

/* Decode in a fresh decoder (no cache carried over). rc, and *out's fields. */
static int decode(struct ml_pyframe_raw raw, const struct ml_frame **out)
{
	static struct pyframes *p;

	pyframes__free(p);
	if (pyframes__new(NULL, getpid(), &p))
		return -ENOMEM;
	pyframes__use_layout(p, L, types);
	return pyframes__resolve(p, &raw, out);
}

static int unknown(void)
{
	const struct ml_frame *f = NULL;
	int rc = decode(raw_at(3), &f);

	return rc == 0 && f && f->kind == ML_FRAME_PYTHON && !f->func && !f->file;
}

/* A decoder of this process with the test's layout, the frame decoded once before the test changes anything. */
static struct pyframes *decoded(struct ml_pyframe_raw *r, const struct ml_frame **first)
{
	struct pyframes *p = NULL;

	CHECK_EQ_INT(pyframes__new(NULL, getpid(), &p), 0, "pyframes: new");
	if (p) {
		pyframes__use_layout(p, L, types);
		pyframes__resolve(p, r, first);
	}
	return p;
}

int main(void)
{
	const struct ml_frame *f = NULL;
	int rc;

	for (int i = 0; i < 3; i++)
		types[i] = (uint64_t)(uintptr_t)type_objs[i];
	L = ml_py_layout_find(0x030c01f0);
	CHECK(L != NULL, "3.12 layout");
	if (!L)
		return SUMMARY("pyframes");

	make_valid();
	rc = decode(raw_at(3), &f);
	CHECK(rc == 0 && f && f->func && !strcmp(f->func, "Model.train_step"), "qualified name");
	CHECK(f && f->file && !strcmp(f->file, "train.py"), "file name");
	CHECK(f && f->line == 12, "line from the location table");
	CHECK(f && f->kind == ML_FRAME_PYTHON && f->addr == (uint64_t)(uintptr_t)&code, "kind and code address");
	rc = decode(raw_at(0), &f);
	CHECK(rc == 1 && f == NULL, "a frame before its first traceable instruction is left out");
	rc = decode((struct ml_pyframe_raw){.code = (uint64_t)(uintptr_t)&code,
					    .check = (uint64_t)(uintptr_t)&ltab,
					    .instr = ML_PYFRAME_NO_INSTR},
		    &f);
	CHECK(rc == 1 && f == NULL, "a frame not started is left out");
	rc = decode(raw_at(9), &f);
	CHECK(rc == 0 && f && f->func && f->line == 0, "past the table: name kept, line unknown");

	/* The check: the code object must still have the line table it had, and types must be right. */
	make_valid();
	put64(&code, L->code_linetable, (uint64_t)(uintptr_t)&other);
	CHECK(unknown(), "another code object at the address (another line table): unknown, not its name");
	make_valid();
	put64(&code, L->ob_type, T_STR);
	CHECK(unknown(), "code object of the wrong type");
	make_valid();
	rc = decode((struct ml_pyframe_raw){.code = 0x10, .check = (uint64_t)(uintptr_t)&ltab, .instr = 3}, &f);
	CHECK(rc == 0 && f && !f->func, "code address unmapped");
	rc = decode((struct ml_pyframe_raw){.code = 0x7ffffffff000ULL, .check = 0, .instr = 3}, &f);
	CHECK(rc == 0 && f && !f->func, "code address at the top of user space");
	make_valid();
	put64(&code, L->code_filename, 0x18);
	CHECK(unknown(), "file name pointer unmapped");

	/* Strings. */
	make_valid();
	make_str(&fname, padded, 1ULL << 40, 1, 1, 1);
	CHECK(unknown(), "file name of 2^40 characters");
	make_valid();
	make_str(&fname, "train.py", 8, 1, 1, 0);
	CHECK(unknown(), "a str that is not compact");
	make_valid();
	make_str(&fname, padded, 8, 3, 0, 1);
	CHECK(unknown(), "a str of kind 3");
	make_valid();
	make_str(&fname, padded, 8, 0, 1, 1);
	CHECK(unknown(), "a str of kind 0");
	make_valid();
	put64(&fname, L->ob_type, T_BYTES);
	CHECK(unknown(), "file name is not a str");
	make_valid();
	{
		const uint8_t latin1[] = {'c', 'a', 'f', 0xe9};

		make_str(&fname, latin1, 4, 1, 0, 1);
		rc = decode(raw_at(3), &f);
		CHECK(rc == 0 && f && f->file && !strcmp(f->file, "caf\xc3\xa9"), "latin-1 str to UTF-8");
	}
	make_valid();
	{
		const uint16_t ucs2[] = {0x4e2d, 0xd800, 'x'};

		make_str(&qname, ucs2, 3, 2, 0, 1);
		rc = decode(raw_at(3), &f);
		CHECK(rc == 0 && f && f->func && !strcmp(f->func, "\xe4\xb8\xad\xef\xbf\xbdx"),
		      "UCS-2 str to UTF-8, a lone surrogate replaced");
	}
	make_valid();
	{
		const uint32_t ucs4[] = {0x1f600, 0x110000, 0};

		make_str(&qname, ucs4, 3, 4, 0, 1);
		rc = decode(raw_at(3), &f);
		CHECK(rc == 0 && f && f->func && !strcmp(f->func, "\xf0\x9f\x98\x80\xef\xbf\xbd?"),
		      "UCS-4 str: beyond U+10FFFF replaced, NUL shown as ?");
	}

	/* Line tables. */
	make_valid();
	make_bytes(&ltab, (const uint8_t *)"", 1ULL << 40);
	CHECK(unknown(), "line table of 2^40 bytes");
	make_valid();
	{
		const uint8_t bad[] = {0x05, 0x04}; /* no entry-start bit */

		make_bytes(&ltab, bad, sizeof(bad));
		rc = decode(raw_at(3), &f);
		CHECK(rc == 0 && f && f->func && f->line == 0, "malformed line table: name kept, line unknown");
	}
	make_valid();
	put64(&ltab, L->ob_type, T_STR);
	CHECK(unknown(), "line table is not bytes");

	/* A cached code object replaced at the same address is decoded again after the next report. */
	make_valid();
	{
		struct ml_pyframe_raw r = raw_at(3);
		const struct ml_frame *a = NULL, *b = NULL;
		struct pyframes *p = decoded(&r, &a);

		make_str(&qname, "other_function", 14, 1, 1, 1);
		put64(&code, L->code_qualname, (uint64_t)(uintptr_t)&other);
		memcpy(&other, &qname, sizeof(other));
		pyframes__resolve(p, &r, &b);
		CHECK(a && b && a == b && !strcmp(b->func, "Model.train_step"), "within a report: cached");
		pyframes__trim(p);
		pyframes__resolve(p, &r, &b);
		CHECK(b && b->func && !strcmp(b->func, "other_function"), "next report: replaced code decoded again");
		pyframes__free(p);
	}
	/* One freed and not replaced (no longer a code object) keeps its names: the stacks naming it ran it. */
	make_valid();
	{
		struct ml_pyframe_raw r = raw_at(3);
		const struct ml_frame *a = NULL, *b = NULL;
		struct pyframes *p = decoded(&r, &a);

		CHECK(a && a->func && !strcmp(a->func, "Model.train_step"), "decoded while it lives");
		put64(&code, L->ob_type, T_STR);
		pyframes__trim(p);
		pyframes__resolve(p, &r, &b);
		CHECK(b && b->func && !strcmp(b->func, "Model.train_step") && b->line == a->line,
		      "next report, the code object freed: its names and line kept");
		pyframes__free(p);
	}
	decode(raw_at(3), &f); /* frees the last decoder's state */
	return SUMMARY("pyframes");
}
