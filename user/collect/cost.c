/* The names of the --max-overhead budget's shed steps, as reports and diagnostics say them. */
#include "collect/cost.h"

const char *ml_shed_name(enum ml_shed step)
{
	static const char *const names[ML_SHED_N] = {
	    [ML_SHED_RSS_SAMPLING] = "rss sampling",  [ML_SHED_TORCH_CPU_SAMPLING] = "torch_cpu sampling",
	    [ML_SHED_TORCH_CPU] = "torch_cpu probes", [ML_SHED_TORCH_CUDA] = "torch_cuda probes",
	    [ML_SHED_RSS_FAULTS] = "rss faults",      [ML_SHED_STEP_SAMPLING] = "step clock sampling",
	};

	return step < ML_SHED_N ? names[step] : "nothing";
}
