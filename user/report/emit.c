/* The figures the text and JSON formats derive alike from a report: the run's start, rows' ages, stacks, Python. */
#include "report/emit.h"
#include "python/pyframes.h"
#include "report/oomview.h"

uint64_t ml_run_start(const struct reporter *r, const struct ml_snapshot *s)
{
	return s->now_ns > r->duration_ns ? s->now_ns - r->duration_ns : 0;
}

double ml_row_age_s(const struct ml_snapshot *s, const struct ml_row *row)
{
	if (row->oldest_ts_ns == ~0ULL || row->oldest_ts_ns > s->now_ns)
		return 0;
	return (double)(s->now_ns - row->oldest_ts_ns) / 1e9;
}

size_t ml_cuda_oom_frames(struct reporter *r, const struct ml_frame *const **frames)
{
	struct ml_row row = {.key = {.layer = ML_LAYER_CUDA}};

	ml_oom_stack(r->cuda_oom, &row.key.tgid, &row.key.stack_id, &row.key.caller);
	return stackview__frames(r->sv, &row, frames, NULL);
}

struct ml_py_tally ml_python_tally(struct reporter *r, const struct ml_snapshot *s, const size_t *order, size_t shown)
{
	struct ml_py_tally t = {.unresolved = stackview__unresolved(r->sv, s, order, shown)};
	struct ml_resolver res;

	if (!stackview__proc(r->sv, r->o.pid, &res))
		pyframes__learn_stats(res.py, &t.learned, &t.learn_ns);
	return t;
}
