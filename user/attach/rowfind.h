/*
 * Which of the allocator table's rows one object defines, and where: by symbol, by demangled C++ name, as a
 * PLT stub of a library that calls them. Reads the object's symbols only; attaching is probes.c's.
 */
#ifndef ML_ROWFIND_H
#define ML_ROWFIND_H

#include <stdbool.h>
#include <stdint.h>

struct elf_syms;

/* Where each row was found in the object being probed. */
struct found {
	bool ok;
	uint64_t vaddr;
};

struct rowfind_opts {
	const char *path;    /* the object, for messages */
	unsigned int layers; /* bit mask of the layers traced: rows of others are not looked for */
	bool as_libc;	     /* a C library (or static executable): its libc rows, and only those */
	bool torch_raw;	     /* --torch-raw-alloc: the opt-in rows too */
	const char *step;    /* the step clock's function (--step), NULL: no step clock */
};

/*
 * Fill found[0 .. ml_allocators_n - 1]: one row per function (an alias keeps its first row). 0, or -ENOENT
 * when the object lacks a required function (a C library without malloc/free).
 */
int ml_rows_find(const struct elf_syms *syms, const struct rowfind_opts *o, struct found *found);

#endif
