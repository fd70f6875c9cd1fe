/*
 * The symbolizer's strings: symbol names as shown (demangled, version suffix cut) and libdw's source file
 * names, each copied once and keyed by the pointer libelf or libdw hands out, which lives as long as its file.
 */
#define _GNU_SOURCE
#include "symbolize/symnames.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/demangle.h"

int symnames__src(struct symnames *nm, const char *src, char **out)
{
	char *copy = u64map__get(&nm->srcs, (uintptr_t)src);

	if (!copy) {
		copy = strdup(src);
		if (!copy)
			return -ENOMEM;
		if (u64map__put(&nm->srcs, (uintptr_t)src, copy)) {
			free(copy);
			return -ENOMEM;
		}
	}
	*out = copy;
	return 0;
}

int symnames__display(struct symnames *nm, const char *raw, char **out)
{
	char *d = u64map__get(&nm->names, (uintptr_t)raw);
	size_t len;

	if (d) {
		*out = d;
		return 0;
	}
	d = ml_demangle(raw);
	if (!d) {
		if (errno == ENOMEM)
			return -ENOMEM;
		len = strcspn(raw, "@");
		d = strndup(raw, len ? len : strlen(raw));
		if (!d)
			return -ENOMEM;
	}
	if (u64map__put(&nm->names, (uintptr_t)raw, d)) {
		free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

void symnames__clear(struct symnames *nm)
{
	u64map__free_values(&nm->names);
	u64map__free_values(&nm->srcs);
}
