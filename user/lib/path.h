/* File paths as reports show them. */
#ifndef ML_PATH_H
#define ML_PATH_H

#include <string.h>

/* The last component of a path ("libc.so.6" of "/usr/lib/x86_64-linux-gnu/libc.so.6"); NULL stays NULL. */
static inline const char *ml_base_name(const char *path)
{
	const char *b = path ? strrchr(path, '/') : NULL;

	return b ? b + 1 : path;
}

#endif
