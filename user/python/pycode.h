/*
 * Code objects decoded from the target's memory, cached by address and checked again once a report. Not
 * thread-safe: pyframes.c calls it under its lock.
 */
#ifndef ML_PYCODE_H
#define ML_PYCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ml_py_layout;
struct pycodes;

/* A code object, known by its address and its line table's (the check the BPF side recorded). */
struct py_code {
	uint64_t code, check;
	uint64_t ident;	 /* the objects the code object refers to, as read: a replaced code object differs */
	uint32_t epoch;	 /* report in which ident was last checked */
	uint32_t gen;	 /* bumped when the address turned out to hold another code object */
	bool ok;	 /* false: could not be decoded (gone, replaced, or not a code object) */
	const char *why; /* when not ok: what stopped the decoding */
	char *filename, *qualname;
	int firstlineno;
	uint32_t firsttraceable; /* instructions before this one belong to no line: frame setup */
	uint8_t *linetable;
	size_t linetable_len;
};

int pycodes__new(int pid, struct pycodes **out);
void pycodes__free(struct pycodes *pc); /* NULL-safe */

/* Decode with this layout and these type objects' addresses (code, str, bytes); until then nothing decodes. */
void pycodes__use_layout(struct pycodes *pc, const struct ml_py_layout *lay, const uint64_t types[3]);
const struct ml_py_layout *pycodes__layout(const struct pycodes *pc); /* NULL before pycodes__use_layout */

/* Exactly len bytes of the target's memory at addr (/proc/PID/mem); 0, -ESRCH when it is gone, or -errno. */
int pycodes__peek(const struct pycodes *pc, uint64_t addr, void *buf, size_t len);

/*
 * The code object at code whose line table was check, from the cache or read now, and ok or not (why says
 * why); NULL only with *err = -ENOMEM. It lives until pycodes__clear or pycodes__free.
 */
struct py_code *pycodes__get(struct pycodes *pc, uint64_t code, uint64_t check, int *err);
/* Whether that code object is cached, without checking it again. */
bool pycodes__known(const struct pycodes *pc, uint64_t code, uint64_t check);

/* A new report: each cached code object is checked again at its next pycodes__get. */
void pycodes__next_report(struct pycodes *pc);
size_t pycodes__count(const struct pycodes *pc);
void pycodes__clear(struct pycodes *pc); /* drops every cached code object */

#endif
