/*
 * Tensor sampling (ML_SHED_TORCH_CPU_SAMPLING): the allocation side of the torch_cpu layer (c10::alloc_cpu, the
 * posix_memalign it makes and that call's return) is attached for 1/2^n of every OVERHEAD_TENSOR_PERIOD_S and closed
 * for the rest, in every traced process at once; free_cpu stays on, so a recorded tensor is still released whenever
 * it goes. The records made from then on weigh 2^n (ledger__set_weight), then, once the on phases spanned enough
 * tensor releases, all the releases over those (ledger__add_scale): bytes, counts and the verdicts' series estimate
 * the whole. While a process's steps are short, whole steps are sampled (struct ml_steps: gate): an on phase's close
 * waits for the steps begun in it to end.
 */
#ifndef MEMLEAK_AI_TSAMPLE_H
#define MEMLEAK_AI_TSAMPLE_H

#include <stdint.h>

struct memleak_bpf;
struct probes;
struct followers;
struct ledger;
struct tsample;

/* Tensor releases a heap window or an on phase must span before they clock its records: fewer say too little. */
#define SAMPLE_MIN_TICKS 8

/* What a toggle acts on: the traced processes' probes (either may be NULL), and the ledger the records weigh in. */
struct tsample_env {
	struct probes *root;
	struct followers *followers;
	struct ledger *ledger;
};

/* Its timer made; sampling begins with tsample__more. 0 or a negative errno. */
int tsample__new(struct memleak_bpf *skel, struct tsample **out);
void tsample__free(struct tsample *t); /* NULL-safe; says what the toggles cost when there were any */
/* k more halvings of the time the allocation probes are on: their records weigh 2^k times as much. */
void tsample__more(struct tsample *t, const struct tsample_env *e, unsigned int k);
/* The layer was shed: nothing left to sample, the timer stops. */
void tsample__stop(struct tsample *t);
/* The timer (readable at each toggle), and what its expiry does: the probes on or off in every traced process. */
int tsample__timer_fd(const struct tsample *t);
void tsample__timer(struct tsample *t, const struct tsample_env *e);
/* When its records last changed (CLOCK_MONOTONIC ns): its last on phase's close, or before the first, when
 * sampling began; 0 when not sampling. */
uint64_t tsample__phase_ns(const struct tsample *t);

#endif
