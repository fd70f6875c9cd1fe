/* The symbolizer's strings: symbol names as shown, and source file names, each copied once. */
#ifndef ML_SYMNAMES_H
#define ML_SYMNAMES_H

#include "lib/u64map.h"

/* Zeroed is empty; the strings handed out live until symnames__clear. */
struct symnames {
	struct u64map names; /* raw symbol name pointer -> display name */
	struct u64map srcs;  /* libdw file name pointer -> our copy */
};

/* raw (a symbol table's name) as shown: demangled, else up to its "@" version suffix. 0 or -ENOMEM. */
int symnames__display(struct symnames *nm, const char *raw, char **out);
/* Our copy of a libdw source file name (libdw's lives as long as its Dwarf; ours as long as nm). 0 or -ENOMEM. */
int symnames__src(struct symnames *nm, const char *src, char **out);
void symnames__clear(struct symnames *nm);

#endif
