/* Helper threads: none of them takes a signal. */
#ifndef ML_THREAD_H
#define ML_THREAD_H

#include <pthread.h>
#include <signal.h>

/*
 * Start fn(arg) on a thread with every signal blocked: SIGINT and SIGTERM are the event loop's (its
 * signalfd), never delivered to a helper and never a default death. 0 or a negative errno.
 */
static inline int ml_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

#endif
