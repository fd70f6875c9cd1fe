/*
 * Code objects decoded from the target's memory, read through /proc/PID/mem: file name, qualified name, first
 * line and line table. A code object must still have the line table the BPF walker recorded, and every object
 * must have the type it should (the type objects' addresses come from the runtime's symbols), so a freed and
 * reused address decodes to "unknown", never to another function. Everything read is untrusted: lengths are
 * bounded, strings converted and checked.
 */
#define _GNU_SOURCE
#include "python/pycode.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/hash.h"
#include "lib/procmaps.h"
#include "lib/u64map.h"
#include "python/pyoffsets.h"

#define STR_MAX 4096		/* longest file or function name taken from the target */
#define LINETABLE_MAX (1 << 20) /* longest co_linetable */

struct pycodes {
	int pid;
	int mem;	/* its /proc/PID/mem, opened at the first read; -1 until then */
	uint32_t epoch; /* reports so far: cached code objects are checked again once per report */
	const struct ml_py_layout *lay;
	uint64_t type_code, type_str, type_bytes; /* runtime addresses of the type objects */
	struct u64map codes;			  /* hash(code, check) -> struct py_code */
};

int pycodes__new(int pid, struct pycodes **out)
{
	struct pycodes *pc = calloc(1, sizeof(*pc));

	*out = pc;
	if (!pc)
		return -ENOMEM;
	pc->pid = pid;
	pc->mem = -1;
	return 0;
}

static void code_free(struct py_code *c)
{
	if (!c)
		return;
	free(c->filename);
	free(c->qualname);
	free(c->linetable);
}

/*
 * Exactly len bytes of the target's memory at addr, through /proc/PID/mem: process_vm_readv pins pages, and
 * pinning a code object's page that a fork still shares would copy it into a DataLoader worker. 0 or a
 * negative errno.
 */
int pycodes__peek(const struct pycodes *pc, uint64_t addr, void *buf, size_t len)
{
	struct pycodes *w = (struct pycodes *)pc; /* the fd is a cache, opened once */
	ssize_t n;
	int fd;

	if (!addr)
		return -EFAULT;
	if (w->mem < 0) {
		fd = ml_proc_open(pc->pid, "mem");
		if (fd < 0)
			return fd == -ENOENT ? -ESRCH : fd;
		w->mem = fd;
	}
	n = pread(pc->mem, buf, len, (off_t)addr);
	if (n < 0)
		return errno == EIO ? -EFAULT : -errno;
	/* An unmapped address fails with EIO; a read of nothing at all means the address space is gone. */
	if (n == 0 && len)
		return -ESRCH;
	return (size_t)n == len ? 0 : -EFAULT;
}

static uint64_t get_u64(const uint8_t *buf, uint16_t off)
{
	uint64_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
}

/*
 * A str object as UTF-8: compact strings only (code object names and file names always are). Characters
 * outside Unicode, and surrogates, become U+FFFD.
 */
static int read_str(const struct pycodes *pc, uint64_t addr, char **out)
{
	const struct ml_py_layout *l = pc->lay;
	uint8_t hdr[256];
	uint64_t len, data;
	uint32_t state, kind;
	uint8_t *raw = NULL;
	char *s, *o;

	if (l->unicode_compact_size > sizeof(hdr) || pycodes__peek(pc, addr, hdr, l->unicode_compact_size))
		return -EFAULT;
	if (get_u64(hdr, l->ob_type) != pc->type_str)
		return -EINVAL;
	len = get_u64(hdr, l->unicode_length);
	memcpy(&state, hdr + l->unicode_state, sizeof(state));
	kind = ML_PY_STATE_KIND(state);
	if (!ML_PY_STATE_COMPACT(state) || (kind != 1 && kind != 2 && kind != 4) || len > STR_MAX)
		return -EINVAL;
	data = addr + (ML_PY_STATE_ASCII(state) ? l->unicode_ascii_size : l->unicode_compact_size);
	raw = malloc(len * kind + 1);
	s = malloc(len * 4 + 1);
	if (!raw || !s) {
		free(raw);
		free(s);
		return -ENOMEM;
	}
	if (len && pycodes__peek(pc, data, raw, len * kind)) {
		free(raw);
		free(s);
		return -EFAULT;
	}
	o = s;
	for (uint64_t i = 0; i < len; i++) {
		uint32_t c;

		if (kind == 1) {
			c = raw[i];
		} else if (kind == 2) {
			uint16_t v;

			memcpy(&v, raw + 2 * i, 2);
			c = v;
		} else {
			memcpy(&c, raw + 4 * i, 4);
		}
		if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			c = 0xfffd;
		if (c < 0x80) {
			*o++ = (char)(c ? c : '?');
		} else if (c < 0x800) {
			*o++ = (char)(0xc0 | (c >> 6));
			*o++ = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			*o++ = (char)(0xe0 | (c >> 12));
			*o++ = (char)(0x80 | ((c >> 6) & 0x3f));
			*o++ = (char)(0x80 | (c & 0x3f));
		} else {
			*o++ = (char)(0xf0 | (c >> 18));
			*o++ = (char)(0x80 | ((c >> 12) & 0x3f));
			*o++ = (char)(0x80 | ((c >> 6) & 0x3f));
			*o++ = (char)(0x80 | (c & 0x3f));
		}
	}
	*o = '\0';
	free(raw);
	*out = s;
	return 0;
}

static int read_bytes(const struct pycodes *pc, uint64_t addr, uint8_t **out, size_t *outlen)
{
	const struct ml_py_layout *l = pc->lay;
	uint8_t hdr[64];
	uint64_t len;
	uint8_t *b;

	if (l->bytes_sval > sizeof(hdr) || pycodes__peek(pc, addr, hdr, l->bytes_sval))
		return -EFAULT;
	if (get_u64(hdr, l->ob_type) != pc->type_bytes)
		return -EINVAL;
	len = get_u64(hdr, l->bytes_size);
	if (len > LINETABLE_MAX)
		return -EINVAL;
	b = malloc(len ? len : 1);
	if (!b)
		return -ENOMEM;
	if (len && pycodes__peek(pc, addr + l->bytes_sval, b, len)) {
		free(b);
		return -EFAULT;
	}
	*out = b;
	*outlen = len;
	return 0;
}

/*
 * The header of the code object at code, if it still is the one the frame ran: a code object whose line
 * table is the one recorded then. 0; -EINVAL when that no longer holds; -ESRCH when the process is gone
 * (nothing can be checked any more); another negative errno from the read.
 */
static int code_header(const struct pycodes *pc, uint64_t code, uint64_t check, uint8_t *co, size_t cap,
		       uint64_t *ident)
{
	const struct ml_py_layout *l = pc->lay;
	uint16_t need = 0;
	int err;

	const uint16_t fields[] = {l->code_filename,	l->code_qualname,	l->code_linetable,
				   l->code_firstlineno, l->code_firsttraceable, l->ob_type};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (fields[i] + 8 > need)
			need = fields[i] + 8;
	if (need > cap)
		return -EINVAL;
	err = pycodes__peek(pc, code, co, need);
	/* check 0: a frame the walker did not check (beyond the innermost few): the type must do. */
	if (!err && (get_u64(co, l->ob_type) != pc->type_code || (check && get_u64(co, l->code_linetable) != check)))
		err = -EINVAL;
	if (err)
		return err;
	*ident = ml_hash_add(
	    ml_hash_add(ml_hash_add(ml_hash_add(3, get_u64(co, l->code_filename)), get_u64(co, l->code_qualname)),
			get_u64(co, l->code_linetable)),
	    get_u64(co, l->code_firstlineno));
	return 0;
}

/* Read a code object. -ENOMEM, or 0 with c->ok telling whether it decoded. */
static int decode_code(const struct pycodes *pc, struct py_code *c)
{
	const struct ml_py_layout *l = pc->lay;
	uint8_t co[256];
	int32_t first;
	int err;

	c->ok = false;
	c->epoch = pc->epoch;
	err = code_header(pc, c->code, c->check, co, sizeof(co), &c->ident);
	c->why = err == -ESRCH ? "process exited" : err == -EINVAL ? "code object gone or replaced" : "unreadable";
	if (err)
		return 0;
	memcpy(&first, co + l->code_firstlineno, sizeof(first));
	c->firstlineno = first;
	memcpy(&first, co + l->code_firsttraceable, sizeof(first));
	c->firsttraceable = first > 0 ? (uint32_t)first : 0;
	err = read_str(pc, get_u64(co, l->code_filename), &c->filename);
	if (!err)
		err = read_str(pc, get_u64(co, l->code_qualname), &c->qualname);
	if (!err)
		err = read_bytes(pc, get_u64(co, l->code_linetable), &c->linetable, &c->linetable_len);
	if (err == -ENOMEM)
		return err;
	c->ok = !err;
	c->why = err == -ESRCH ? "process exited" : err ? "names unreadable" : NULL;
	return 0;
}

/* The decoded code object, from the cache or read now; NULL only with *err = -ENOMEM. */
struct py_code *pycodes__get(struct pycodes *pc, uint64_t code, uint64_t check, int *err)
{
	uint64_t key = ml_hash_add(ml_hash_add(1, code), check);
	struct py_code *c = u64map__get(&pc->codes, key);

	*err = 0;
	if (c && c->code == code && c->check == check) {
		uint8_t co[256];
		uint64_t ident;
		int rc;

		/*
		 * Once a report, check that the address still holds the code object decoded then. One freed
		 * and replaced by another code object (along with its line table, at the same two addresses) is
		 * decoded again under a new generation, so its frames do not take the old names. One freed and
		 * not replaced keeps them: a running frame holds its code object, so every stack that names the
		 * address was taken while the old one lived (a script's main module is freed before its
		 * interpreter finalizes; the process may have exited).
		 */
		if (c->epoch == pc->epoch)
			return c;
		rc = code_header(pc, code, check, co, sizeof(co), &ident);
		if ((c->ok && (rc || ident == c->ident)) || (!c->ok && rc)) {
			c->epoch = pc->epoch;
			return c;
		}
		{
			uint32_t gen = c->gen + 1;

			code_free(c);
			memset(c, 0, sizeof(*c));
			c->gen = gen;
		}
	} else if (c) {
		/* Another identity with the same key: the newer one takes the place (frames own their strings). */
		code_free(c);
		memset(c, 0, sizeof(*c));
	} else {
		c = calloc(1, sizeof(*c));
		if (!c || u64map__put(&pc->codes, key, c)) {
			free(c);
			*err = -ENOMEM;
			return NULL;
		}
	}
	c->code = code;
	c->check = check;
	*err = decode_code(pc, c);
	return *err ? NULL : c;
}

bool pycodes__known(const struct pycodes *pc, uint64_t code, uint64_t check)
{
	const struct py_code *c = u64map__get(&pc->codes, ml_hash_add(ml_hash_add(1, code), check));

	return c && c->code == code && c->check == check;
}

void pycodes__use_layout(struct pycodes *pc, const struct ml_py_layout *lay, const uint64_t types[3])
{
	pc->lay = lay;
	pc->type_code = types[0];
	pc->type_str = types[1];
	pc->type_bytes = types[2];
}

const struct ml_py_layout *pycodes__layout(const struct pycodes *pc)
{
	return pc->lay;
}

void pycodes__next_report(struct pycodes *pc)
{
	pc->epoch++;
}

size_t pycodes__count(const struct pycodes *pc)
{
	return pc->codes.n;
}

void pycodes__clear(struct pycodes *pc)
{
	for (size_t i = 0; i < pc->codes.cap; i++)
		code_free(pc->codes.slots[i].val);
	u64map__free_values(&pc->codes);
}

void pycodes__free(struct pycodes *pc)
{
	if (!pc)
		return;
	pycodes__clear(pc);
	if (pc->mem >= 0)
		close(pc->mem);
	free(pc);
}
