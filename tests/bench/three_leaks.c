/* Benchmark target for the peers benchmark (scripts/bench.py peers): a loop whose steps free everything they
 * allocate but what three named functions keep, at steady rates (1 KiB a step, 4 KiB every 2nd, 16 KiB every
 * 4th: 7 KiB a step on average), with 200 malloc/free pairs of churn and a 1 ms sleep
 * a step. Usage: three_leaks wait|run [EVERY]: "wait" prints "ready PID" and waits for a byte on stdin; with EVERY,
 * the mean ms a step of each EVERY steps is printed. SIGINT or SIGTERM ends it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct node {
	struct node *next;
	char payload[];
};

static struct node *sessions, *tokens, *frames; /* every list only grows: the leaks */
void *volatile sink;
static volatile sig_atomic_t stop;

/* Each leaking function calls malloc itself, so that every tool's innermost frame above the allocator is the leak. */
#define KEEP(head, size)                                                                                               \
	do {                                                                                                           \
		struct node *n = malloc(sizeof(*n) + (size));                                                          \
		if (n) {                                                                                               \
			memset(n->payload, 1, (size));                                                                 \
			n->next = (head);                                                                              \
			(head) = n;                                                                                    \
		}                                                                                                      \
	} while (0)

NOINLINE void leak_session(void)
{
	KEEP(sessions, 1024);
}

NOINLINE void leak_token(void)
{
	KEEP(tokens, 4096);
}

NOINLINE void leak_frame(void)
{
	KEEP(frames, 16384);
}

NOINLINE void churn(unsigned int step)
{
	for (int i = 0; i < 200; i++) {
		void *p = malloc(32 + (size_t)((i + step) % 64) * 16);

		sink = p;
		free(p);
	}
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	int every = argc > 2 ? atoi(argv[2]) : 0;
	struct timespec nap = {0, 1000000};
	double t0;

	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	if (argc > 1 && strcmp(argv[1], "wait") == 0) {
		char c;

		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (read(0, &c, 1) != 1)
			return 1;
	}
	t0 = now_ms();
	for (unsigned int step = 1; !stop; step++) {
		churn(step);
		leak_session();
		if (step % 2 == 0)
			leak_token();
		if (step % 4 == 0)
			leak_frame();
		nanosleep(&nap, NULL);
		if (every && step % (unsigned int)every == 0) {
			double t1 = now_ms();

			printf("%.4f\n", (t1 - t0) / every);
			fflush(stdout);
			t0 = t1;
		}
	}
	return 0;
}
