/* Closing several BPF links at once (closeall.h). */
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "lib/closeall.h"

static void *close_one(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

void ml_close_all(const int *fds, size_t n)
{
	pthread_t *th = n > 1 ? calloc(n, sizeof(*th)) : NULL;
	bool *started = n > 1 ? calloc(n, sizeof(*started)) : NULL;
	sigset_t all, old;

	/* The threads take no signal: those are the event loop's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		/* The last one on this thread; the rest on their own, or in turn when none can start. */
		if (i + 1 < n && th && started &&
		    !pthread_create(&th[i], NULL, close_one, (void *)(intptr_t)fds[i])) {
			started[i] = true;
			continue;
		}
		close(fds[i]);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (size_t i = 0; i < n && started; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	free(th);
	free(started);
}
