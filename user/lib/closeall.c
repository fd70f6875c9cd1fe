/* Closing several BPF links at once (closeall.h). */
#include "lib/closeall.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "lib/thread.h"

static void *close_one(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

/* Start closing fds[0..n) on threads of their own (*th, *started; the caller joins); those that cannot start
 * are closed in turn here. */
static void close_started(const int *fds, size_t n, pthread_t **th, bool **started)
{
	*th = n ? calloc(n, sizeof(**th)) : NULL;
	*started = n ? calloc(n, sizeof(**started)) : NULL;
	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (*th && *started && !ml_thread_start(&(*th)[i], close_one, (void *)(intptr_t)fds[i])) {
			(*started)[i] = true;
			continue;
		}
		close(fds[i]);
	}
}

void ml_close_staggered(const int *first, size_t n1, unsigned int delay_us, const int *then, size_t n2)
{
	pthread_t *th;
	bool *started;

	close_started(first, n1, &th, &started);
	if (n1 && n2)
		usleep(delay_us);
	ml_close_all(then, n2);
	for (size_t i = 0; i < n1 && started; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	free(th);
	free(started);
}

void ml_close_all(const int *fds, size_t n)
{
	pthread_t *th = n > 1 ? calloc(n, sizeof(*th)) : NULL;
	bool *started = n > 1 ? calloc(n, sizeof(*started)) : NULL;

	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		/* The last one on this thread; the rest on their own, or in turn when none can start. */
		if (i + 1 < n && th && started && !ml_thread_start(&th[i], close_one, (void *)(intptr_t)fds[i])) {
			started[i] = true;
			continue;
		}
		close(fds[i]);
	}
	for (size_t i = 0; i < n && started; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	free(th);
	free(started);
}
