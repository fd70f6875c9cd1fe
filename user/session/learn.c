/*
 * Python code objects decoded as their stacks arrive, in the stack store's reader thread, with the first
 * process's decoder: a module's body is freed once it ran, and a process may exit before its next report.
 */
#include <pthread.h>
#include "collect/stackstore.h"
#include "python/pyframes.h"
#include "session/state.h"

/*
 * The stack store's reader thread, at each new stack: its code objects decoded now, while they exist (a module's
 * body is freed once it ran), by the first process's decoder; its forks share its code objects.
 */
void session__learn_stack(void *ctx, const struct ml_stack *st)
{
	struct session *ss = ctx;
	struct ml_pyframe_raw py[ML_MAX_PYFRAMES];
	size_t n = ml_stack_pyframes(st, py);

	if (!n)
		return;
	pthread_mutex_lock(&ss->learn_lock);
	if (ss->learn_py)
		pyframes__learn(ss->learn_py, py, n);
	pthread_mutex_unlock(&ss->learn_lock);
}

/* The decoder new stacks are learned by from now on (NULL: none); the previous one is no longer used on return. */
void session__learn_with(struct session *ss, struct pyframes *py)
{
	pthread_mutex_lock(&ss->learn_lock);
	ss->learn_py = py;
	pthread_mutex_unlock(&ss->learn_lock);
}
