/*
 * Unwinding benchmark target: every iteration is one malloc(64) + free 30 calls deep (deep_1 -> ... -> deep_30
 * -> malloc). Built twice: -fomit-frame-pointer (as distributions ship) and -fno-omit-frame-pointer (what a
 * frame-pointer walk needs). On stdin: 'g' runs the loop and prints ns per iteration, 'a' the same through
 * top_a and top_b alternately (31 deep, the chains differ in their outermost frame only), 'b' through deep_1
 * and deepb_1 alternately (two chains into deep_30 that differ from its caller on), 'k' makes one
 * allocation that is kept (its stack shows the depth captured), 'q' or EOF ends.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int sink;
static void *kept;

#define LAST(k)                                                                                                        \
	__attribute__((noinline)) void *deep_##k(size_t n, int keep)                                                   \
	{                                                                                                              \
		void *p = malloc(n);                                                                                   \
		if (!keep)                                                                                             \
			free(p);                                                                                       \
		sink++;                                                                                                \
		return p;                                                                                              \
	}
/* Function k of a chain (deep or deepb) calls the chain's function next. */
#define CHAIN_STEP(chain, k, next)                                                                                     \
	__attribute__((noinline)) void *chain##_##k(size_t n, int keep)                                                \
	{                                                                                                              \
		void *p = chain##_##next(n, keep);                                                                     \
		sink++;                                                                                                \
		return p;                                                                                              \
	}
#define STEP(k, next) CHAIN_STEP(deep, k, next)
/* A run of macro calls without semicolons, which clang-format 14 reflows differently on every pass. */
// clang-format off
LAST(30)
STEP(29, 30) STEP(28, 29) STEP(27, 28) STEP(26, 27) STEP(25, 26) STEP(24, 25) STEP(23, 24) STEP(22, 23)
STEP(21, 22) STEP(20, 21) STEP(19, 20) STEP(18, 19) STEP(17, 18) STEP(16, 17) STEP(15, 16) STEP(14, 15)
STEP(13, 14) STEP(12, 13) STEP(11, 12) STEP(10, 11) STEP(9, 10) STEP(8, 9) STEP(7, 8) STEP(6, 7)
STEP(5, 6) STEP(4, 5) STEP(3, 4) STEP(2, 3) STEP(1, 2)

/* A second chain into the same leaf (deep_30): called alternately with the first, the walks differ at once. */
#define STEPB(k, next) CHAIN_STEP(deepb, k, next)
__attribute__((noinline)) void *deepb_29(size_t n, int keep)
{
	void *p = deep_30(n, keep);
	sink++;
	return p;
}
STEPB(28, 29) STEPB(27, 28) STEPB(26, 27) STEPB(25, 26) STEPB(24, 25) STEPB(23, 24) STEPB(22, 23)
STEPB(21, 22) STEPB(20, 21) STEPB(19, 20) STEPB(18, 19) STEPB(17, 18) STEPB(16, 17) STEPB(15, 16) STEPB(14, 15)
STEPB(13, 14) STEPB(12, 13) STEPB(11, 12) STEPB(10, 11) STEPB(9, 10) STEPB(8, 9) STEPB(7, 8) STEPB(6, 7)
STEPB(5, 6) STEPB(4, 5) STEPB(3, 4) STEPB(2, 3) STEPB(1, 2)
    // clang-format on

    /* Two tops for the same 30-deep chain: called alternately, the walks differ only in their outermost words. */
    __attribute__((noinline)) void *top_a(size_t n, int keep)
{
	void *p = deep_1(n, keep);
	sink++;
	return p;
}

__attribute__((noinline)) void *top_b(size_t n, int keep)
{
	void *p = deep_1(n, keep);
	sink++;
	return p;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 100000;
	struct timespec a, b;
	char c;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready\n");
	while (read(0, &c, 1) == 1 && c != 'q') {
		if (c == 'k') {
			kept = deep_1(64, 1);
			printf("kept\n");
			continue;
		}
		if (c != 'g' && c != 'a' && c != 'b')
			continue;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < iters; i++) {
			if (c == 'g')
				deep_1(64, 0);
			else if (c == 'a')
				(i & 1 ? top_b : top_a)(64, 0);
			else
				(i & 1 ? deepb_1 : deep_1)(64, 0);
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / iters);
	}
	return 0;
}
