/* Benchmark target: a tight malloc/free loop timed from inside, started on a byte from stdin. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void *volatile sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long iters = argc > 1 ? atol(argv[1]) : 1000000;
	char c;

	setvbuf(stdout, NULL, _IONBF, 0);
	printf("ready %d\n", getpid());
	while (read(0, &c, 1) == 1) {
		double t0 = now();

		for (long i = 0; i < iters; i++) {
			void *p = malloc(64 + (size_t)(i & 63));

			sink = p;
			free(p);
		}
		printf("%.1f\n", (now() - t0) * 1e9 / (double)iters); /* ns per malloc+free pair */
	}
	return 0;
}
