/* C++ symbol names as people read them (libstdc++'s demangler). */
#include "lib/demangle.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * Longest name handed to the demangler. libstdc++ bounds its own recursion; this bounds the time
 * and memory a hostile symbol table can make us spend. Longer names are shown raw.
 */
#define DEMANGLE_MAX (64 * 1024)

char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *ml_demangle(const char *raw)
{
	size_t len = strcspn(raw, "@");
	int status = 0;
	char *name, *d;

	if (len < 3 || raw[0] != '_' || raw[1] != 'Z' || len > DEMANGLE_MAX) {
		errno = EINVAL;
		return NULL;
	}
	name = strndup(raw, len);
	if (!name) {
		errno = ENOMEM;
		return NULL;
	}
	d = __cxa_demangle(name, NULL, NULL, &status);
	free(name);
	if (!d || status) {
		free(d);
		errno = status == -1 ? ENOMEM : EINVAL;
		return NULL;
	}
	return d;
}
