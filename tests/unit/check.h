/* Minimal unit-test helpers: CHECK records a result, SUMMARY prints the closing "N passed, N failed" line. */
#ifndef ML_CHECK_H
#define ML_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, name)                                                                                              \
	do {                                                                                                           \
		if (cond) {                                                                                            \
			check_passed++;                                                                                \
			printf("ok - %s\n", name);                                                                     \
		} else {                                                                                               \
			check_failed++;                                                                                \
			printf("not ok - %s (%s:%d: %s)\n", name, __FILE__, __LINE__, #cond);                          \
		}                                                                                                      \
	} while (0)

#define SUMMARY(suite)                                                                                                 \
	(printf("unit %s: %d passed, %d failed\n", suite, check_passed, check_failed), check_failed ? 1 : 0)

#endif
