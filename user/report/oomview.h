/* The out-of-memory burst a report is written at: the failed CUDA call, the error raised, or both. */
#ifndef ML_OOMVIEW_H
#define ML_OOMVIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "memleak.h"

struct jw;

struct ml_cuda_oom {
	bool failed, raised;		 /* which of the two the burst had before its report */
	struct ml_cuda_fail_event fail;	 /* the first failed cuda-layer allocation */
	struct ml_oom_raise_event raise; /* the first c10::OutOfMemoryError made */
};

/* The process, the stack to show (the raise's, else the failed call's) and its caller. */
void ml_oom_stack(const struct ml_cuda_oom *o, __u32 *tgid, __u64 *stack_id, __u64 *caller);
/* "CUDA out of memory: pid N, device D: cudaMalloc of 20.0 MiB failed (error 2)" and the raised message. */
void ml_text_cuda_oom(FILE *f, const struct ml_cuda_oom *o);
/* The "cuda_oom" object's fields but its frames. */
void ml_json_cuda_oom(struct jw *w, const struct ml_cuda_oom *o);

#endif
