/*
 * Benchmark: time to aggregate and rank a report over 1,000,000 outstanding allocations in the real BPF table,
 * their stacks in the user-space stack store; then the store's size and speed with 1,000,000 distinct stacks.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include "collect/ledger.h"
#include "collect/slots.h"
#include "collect/stackstore.h"
#include "judge/verdict.h"
#include "memleak.skel.h"

/* A 30-frame stack i: a few outer frames shared by all, the inner ones drawn from a pool of 100,000 frames. */
static void make_stack(struct ml_stack *st, uint64_t i)
{
	st->id = i * 0x9e3779b97f4a7c15ULL | 1;
	st->nr = 30;
	st->nr_py = 0;
	st->flags = 0;
	for (int k = 0; k < 30; k++)
		st->ips[k] = k < 20 ? 0x7f0000000000ULL + ((i * 31 + (uint64_t)k * 7919) % 100000) * 16
				    : 0x400000 + (uint64_t)k * 64;
}

static double now(void);

/* The store alone: 1,000,000 distinct stacks added, then looked up. */
static void store_bench(void)
{
	struct stackstore *ss;
	struct ml_stack *st = malloc(sizeof(*st));
	struct stackstore_stats stats;
	const uint64_t n = 1000000;
	double t0, add, get;

	if (stackstore__new(&ss)) {
		fprintf(stderr, "report_bench: out of memory\n");
		exit(1);
	}
	t0 = now();
	for (uint64_t i = 0; i < n; i++) {
		make_stack(st, i);
		if (stackstore__add(ss, st, ML_STACK_HDR + 8 * 30) != 0) {
			fprintf(stderr, "report_bench: stack %llu not added\n", (unsigned long long)i);
			exit(1);
		}
	}
	add = now() - t0;
	t0 = now();
	for (uint64_t i = 0; i < n; i++)
		if (stackstore__get(ss, i * 0x9e3779b97f4a7c15ULL | 1, st)) {
			fprintf(stderr, "report_bench: stack %llu lost\n", (unsigned long long)i);
			exit(1);
		}
	get = now() - t0;
	stackstore__stats(ss, &stats);
	printf("stack store: %llu distinct stacks of 30 frames (%llu distinct frames): %.1f bytes a stack "
	       "(%.1f MiB), add %.0f ns, look up %.0f ns a stack\n",
	       (unsigned long long)stats.stacks, (unsigned long long)stats.frames, (double)stats.bytes / (double)n,
	       (double)stats.bytes / (1 << 20), add / (double)n * 1e9, get / (double)n * 1e9);
	free(st);
	stackstore__free(ss);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	uint32_t nallocs = argc > 1 ? (uint32_t)atoi(argv[1]) : 1000000;
	uint32_t nstacks = argc > 2 ? (uint32_t)atoi(argv[2]) : 100000;
	const struct ml_snapshot *s;
	struct memleak_bpf *skel;
	struct ledger *l;
	double t0, best = 1e9, worst = 0;

	struct slots *t;

	skel = memleak_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "report_bench: cannot load BPF (root?)\n");
		return 1;
	}
	/* Fill the table's levels as the BPF side does, a level added whenever a run's watch would add one. */
	if (slots__new(skel, ledger_table_slots(nallocs), &t)) {
		fprintf(stderr, "report_bench: cannot make the table\n");
		return 1;
	}
	for (uint32_t i = 0; i < nallocs; i++) {
		uint64_t addr = 0x100000ULL + (uint64_t)i * 64;
		struct ml_slot *sl = slots__claim(t, 1, ML_LAYER_LIBC, addr);

		if (!sl || (i % 4096 == 0 && slots__fill(t) >= ML_TABLE_FILL && slots__grow(t) == -ENOMEM)) {
			fprintf(stderr, "report_bench: allocation %u not recorded\n", i);
			return 1;
		}
		*sl = (struct ml_slot){.addr = addr,
				       .ts_ns = 1 + i,
				       .size = 64 + i % 512,
				       .caller = 0x400000 + i % nstacks,
				       .stack_id = 1 + i % nstacks,
				       .tgid = 1};
	}
	struct stackstore *ss;
	struct ml_stack *st = malloc(sizeof(*st));

	if (argc > 3) {
		store_bench();
		return 0;
	}
	if (stackstore__new(&ss)) {
		fprintf(stderr, "report_bench: out of memory\n");
		return 1;
	}
	for (uint32_t i = 0; i < nstacks; i++) {
		make_stack(st, i);
		st->id = 1 + i;
		stackstore__add(ss, st, ML_STACK_HDR + 8 * 30);
	}
	free(st);
	struct verdicts *v;
	const struct ml_judgement *j;
	const size_t *order;
	size_t heap0 = mallinfo2().uordblks, heap1 = 0;

	if (ledger__new(skel, &(struct ledger_opts){.slots = t, .tgid = 1, .stacks = ss}, &l) || verdicts__new(&v)) {
		fprintf(stderr, "report_bench: cannot set up the ledger\n");
		return 1;
	}

	/* The whole report computation: table pass, sums, growth, ranking, then the verdicts over the history.
	 * 20 reports, so the history is full (16 samples a stack) before the last ones are timed. */
	for (int r = 0; r < 20; r++) {
		t0 = now();
		if (ledger__collect(l, &s) || verdicts__update(v, s, false, 0, &j, &order))
			return 1;
		t0 = now() - t0;
		if (r >= 15) {
			best = t0 < best ? t0 : best;
			worst = t0 > worst ? t0 : worst;
		}
	}
	heap1 = mallinfo2().uordblks;
	printf(
	    "report over %u allocations in %zu stacks, verdicts included: best %.1f ms, worst %.1f ms "
	    "(last 5 of 20 reports); verdict history %.1f MiB (%.0f bytes a stack), report buffers included %.1f MiB\n",
	    nallocs, s->nrows, best * 1e3, worst * 1e3, (double)verdicts__memory(v) / (1 << 20),
	    (double)verdicts__memory(v) / (double)s->nrows, (double)(heap1 - heap0) / (1 << 20));
	verdicts__free(v);
	ledger__free(l);
	stackstore__free(ss);
	memleak_bpf__destroy(skel);
	return 0;
}
