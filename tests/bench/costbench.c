/*
 * Benchmark target for the cost figure: malloc/free pairs with WORK rounds of arithmetic between them, timed from
 * inside. Each byte on stdin runs ITERS pairs and prints "WALL CPU": ns per pair, elapsed and the process's CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void *volatile sink;
volatile unsigned long acc;

static double clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 100000, work = argc > 2 ? atol(argv[2]) : 0;
	char c;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready %d\n", getpid());
	while (read(0, &c, 1) == 1) {
		double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);

		for (long i = 0; i < iters; i++) {
			void *p = malloc(64 + (size_t)(i & 63));

			sink = p;
			free(p);
			for (long w = 0; w < work; w++)
				acc += (unsigned long)w;
		}
		printf("%.1f %.1f\n", (clock_s(CLOCK_MONOTONIC) - w0) * 1e9 / (double)iters,
		       (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e9 / (double)iters);
	}
	return 0;
}
