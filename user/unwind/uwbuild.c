/*
 * The builder thread of unwinding tables (uwbuild.h), with its own state: the thread, its wake-up, the stop
 * flag and whether it got SCHED_IDLE. What to build and where a table goes are the unwinder's, asked through
 * its ops under its lock.
 */
#define _GNU_SOURCE
#include "unwind/uwbuild.h"
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include "lib/log.h"
#include "lib/thread.h"

struct uwbuild {
	pthread_mutex_t *lock; /* the unwinder's: the queue and the tables */
	const char *debug_dir;
	struct uwbuild_ops ops;
	pthread_cond_t wake; /* a file queued, or stop */
	pthread_t thread;
	bool stop;
	bool idle; /* it runs at SCHED_IDLE when it holds no lock */
};

/* 0, or an errno: the policy (SCHED_IDLE or SCHED_OTHER) thread t runs under from now. */
static int set_policy(pthread_t t, int policy)
{
	return pthread_setschedparam(t, policy, &(struct sched_param){0});
}

/*
 * The builder takes the lock at normal priority and parses at idle priority: the report loop waits on the
 * lock, and an idle thread holding it on a busy machine stalled the reports for 2.3 s (priority inversion).
 */
static void builder_lock(struct uwbuild *b)
{
	if (__atomic_load_n(&b->idle, __ATOMIC_RELAXED))
		set_policy(pthread_self(), SCHED_OTHER);
	pthread_mutex_lock(b->lock);
}

static void builder_unlock(struct uwbuild *b)
{
	pthread_mutex_unlock(b->lock);
	if (__atomic_load_n(&b->idle, __ATOMIC_RELAXED))
		set_policy(pthread_self(), SCHED_IDLE);
}

/*
 * The builder thread: parses outside the lock, places under it. At idle priority: on 2 vCPUs its seconds of
 * parsing at full weight delayed the first reports' census and heap walks, and three verdict tests failed.
 * Tables that wait 5 s raise it to normal priority (uwbuild__hurry).
 */
static void *builder(void *arg)
{
	struct uwbuild *b = arg;

	__atomic_store_n(&b->idle, !set_policy(pthread_self(), SCHED_IDLE), __ATOMIC_RELAXED);
	if (!__atomic_load_n(&b->idle, __ATOMIC_RELAXED))
		ml_info("unwinding tables: the builder thread keeps normal priority");
	builder_lock(b);
	while (!b->stop) {
		struct uwbuild_job j;
		struct uw_parsed p;
		int err;

		if (!b->ops.take(b->ops.ctx, &j)) {
			pthread_cond_wait(&b->wake, b->lock);
			continue;
		}
		builder_unlock(b);
		err = j.path ? uw_parse(b->debug_dir, j.pid, j.fd, j.path, &b->stop, &p) : -ENOMEM;
		close(j.fd);
		free(j.path);
		j.path = NULL;
		builder_lock(b);
		if (err != -ECANCELED)
			b->ops.built(b->ops.ctx, &j, err, &p);
		if (!err)
			free(p.conv);
	}
	builder_unlock(b);
	return NULL;
}

int uwbuild__new(pthread_mutex_t *lock, const char *debug_dir, const struct uwbuild_ops *ops, struct uwbuild **out)
{
	struct uwbuild *b = calloc(1, sizeof(*b));
	int err;

	*out = NULL;
	if (!b)
		return -ENOMEM;
	*b = (struct uwbuild){.lock = lock, .debug_dir = debug_dir, .ops = *ops};
	pthread_cond_init(&b->wake, NULL);
	err = ml_thread_start(&b->thread, builder, b);
	if (err) {
		pthread_cond_destroy(&b->wake);
		free(b);
		return err;
	}
	*out = b;
	return 0;
}

void uwbuild__free(struct uwbuild *b)
{
	if (!b)
		return;
	pthread_mutex_lock(b->lock);
	__atomic_store_n(&b->stop, true, __ATOMIC_RELAXED); /* the parse polls it without the lock */
	pthread_cond_signal(&b->wake);
	pthread_mutex_unlock(b->lock);
	if (__atomic_load_n(&b->idle, __ATOMIC_RELAXED)) /* what is left (a sort) is not starved by a busy machine */
		set_policy(b->thread, SCHED_OTHER);
	pthread_join(b->thread, NULL);
	pthread_cond_destroy(&b->wake);
	free(b);
}

void uwbuild__hurry(struct uwbuild *b, uint64_t waited_ns)
{
	if (waited_ns < UWBUILD_IDLE_MAX_NS)
		return;
	/* Every time, not once: the thread may have set itself idle again just before the first call. */
	if (__atomic_exchange_n(&b->idle, false, __ATOMIC_RELAXED))
		ml_info("unwinding tables: still loading after %.1f s: the builder thread runs at normal priority",
			(double)waited_ns / 1e9);
	set_policy(b->thread, SCHED_OTHER);
}

void uwbuild__kick(struct uwbuild *b)
{
	pthread_cond_signal(&b->wake);
}
