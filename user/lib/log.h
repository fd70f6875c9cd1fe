/* Diagnostics to stderr, tiered by verbosity; data never goes through here. */
#ifndef ML_LOG_H
#define ML_LOG_H

#include <stdio.h>

extern int ml_log_level; /* 0: errors and notices, 1: -v, 2: -vv (libbpf debug) */

#define ml_err(fmt, ...) fprintf(stderr, "memleak-ai: " fmt "\n", ##__VA_ARGS__)
#define ml_notice(fmt, ...) fprintf(stderr, "memleak-ai: " fmt "\n", ##__VA_ARGS__)
#define ml_info(fmt, ...)                                                                                              \
	do {                                                                                                           \
		if (ml_log_level >= 1)                                                                                 \
			fprintf(stderr, "memleak-ai: " fmt "\n", ##__VA_ARGS__);                                       \
	} while (0)
#define ml_dbg(fmt, ...)                                                                                               \
	do {                                                                                                           \
		if (ml_log_level >= 2)                                                                                 \
			fprintf(stderr, "memleak-ai: " fmt "\n", ##__VA_ARGS__);                                       \
	} while (0)

#endif
