/*
 * Minimal unit-test helpers: CHECK records a result, SKIP one that could not run, SUMMARY prints the closing
 * "N passed, N failed, N skipped" line.
 * CHECK_EQ_INT, CHECK_EQ_U64 and CHECK_EQ_STR compare two values and, when they differ, print both: the
 * expected one (the second argument) and the actual one (the first). Each argument is evaluated once.
 */
#ifndef ML_CHECK_H
#define ML_CHECK_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int check_passed, check_failed, check_skipped;

/* A check that could not run here (what it needs is missing): counted and printed as a skip, never as a pass. */
#define SKIP(name, why)                                                                                                \
	do {                                                                                                           \
		check_skipped++;                                                                                       \
		printf("skip - %s: %s\n", name, why);                                                                  \
	} while (0)

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

/* An integer (char, bool, enum or integer type), never a pointer or a floating-point value: the comparisons
 * below convert to 64 bits, which would round a double and hide a pointer's type. */
#define CHECK_IS_INTEGER(x) (__builtin_classify_type(x) >= 1 && __builtin_classify_type(x) <= 4)

static inline void check_result(bool ok, const char *name, const char *file, int line, const char *expr)
{
	if (ok) {
		check_passed++;
		printf("ok - %s\n", name);
	} else {
		check_failed++;
		printf("not ok - %s (%s:%d: %s)\n", name, file, line, expr);
	}
}

/* Signed integers, compared as int64: ok when actual == expected. */
#define CHECK_EQ_INT(actual, expected, name)                                                                           \
	do {                                                                                                           \
		_Static_assert(CHECK_IS_INTEGER(actual) && CHECK_IS_INTEGER(expected), "CHECK_EQ_INT: integers");      \
		long long check_a_ = (long long)(actual), check_e_ = (long long)(expected);                            \
		check_result(check_a_ == check_e_, name, __FILE__, __LINE__, #actual " == " #expected);                \
		if (check_a_ != check_e_)                                                                              \
			printf("#   expected %lld, got %lld\n", check_e_, check_a_);                                   \
	} while (0)

/* Unsigned integers (sizes, counts, addresses), compared as uint64: ok when actual == expected. */
#define CHECK_EQ_U64(actual, expected, name)                                                                           \
	do {                                                                                                           \
		_Static_assert(CHECK_IS_INTEGER(actual) && CHECK_IS_INTEGER(expected), "CHECK_EQ_U64: integers");      \
		unsigned long long check_a_ = (unsigned long long)(actual), check_e_ = (unsigned long long)(expected); \
		check_result(check_a_ == check_e_, name, __FILE__, __LINE__, #actual " == " #expected);                \
		if (check_a_ != check_e_)                                                                              \
			printf("#   expected %llu (0x%llx), got %llu (0x%llx)\n", check_e_, check_e_, check_a_,        \
			       check_a_);                                                                              \
	} while (0)

/* Strings: ok when both are there and equal; a NULL actual fails (and prints as NULL). */
#define CHECK_EQ_STR(actual, expected, name)                                                                           \
	do {                                                                                                           \
		const char *check_a_ = (actual), *check_e_ = (expected);                                               \
		bool check_ok_ = check_a_ && check_e_ && !strcmp(check_a_, check_e_);                                  \
		check_result(check_ok_, name, __FILE__, __LINE__, #actual " == " #expected);                           \
		if (!check_ok_)                                                                                        \
			printf("#   expected %s%s%s, got %s%s%s\n", check_e_ ? "\"" : "",                              \
			       check_e_ ? check_e_ : "NULL", check_e_ ? "\"" : "", check_a_ ? "\"" : "",               \
			       check_a_ ? check_a_ : "NULL", check_a_ ? "\"" : "");                                    \
	} while (0)

#define SUMMARY(suite)                                                                                                 \
	(printf("unit %s: %d passed, %d failed, %d skipped\n", suite, check_passed, check_failed, check_skipped),      \
	 check_failed ? 1 : 0)

#endif
