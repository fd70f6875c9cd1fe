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
