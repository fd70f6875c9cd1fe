/* Benchmark: time to aggregate and rank a report over 1,000,000 outstanding allocations in the real BPF tables. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "ledger.h"
#include "memleak.skel.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	uint32_t nallocs = argc > 1 ? (uint32_t)atoi(argv[1]) : 1000000;
	uint32_t nstacks = argc > 2 ? (uint32_t)atoi(argv[2]) : 10000;
	uint32_t batch = 4096;
	struct ml_alloc_key *keys = calloc(batch, sizeof(*keys));
	struct ml_alloc *vals = calloc(batch, sizeof(*vals));
	const struct ml_snapshot *s;
	struct memleak_bpf *skel;
	struct ledger *l;
	double t0, best = 1e9, worst = 0;

	skel = memleak_bpf__open();
	bpf_map__set_max_entries(skel->maps.allocs, nallocs + 1024);
	bpf_map__set_max_entries(skel->maps.stacks, nstacks * 2);
	bpf_map__set_max_entries(skel->maps.aggs, nstacks * 2 + ML_LAYER_MAX);
	if (memleak_bpf__load(skel)) {
		fprintf(stderr, "report_bench: cannot load BPF (root?)\n");
		return 1;
	}
	for (uint32_t i = 0; i < nallocs; i += batch) {
		uint32_t n = nallocs - i < batch ? nallocs - i : batch;

		for (uint32_t j = 0; j < n; j++) {
			keys[j] = (struct ml_alloc_key){ .tgid = 1, .addr = 0x100000ULL + (uint64_t)(i + j) * 64 };
			vals[j] = (struct ml_alloc){ .size = 64 + (i + j) % 512, .ts_ns = 1 + i + j,
						     .caller = 0x400000 + (i + j) % nstacks, .stack_id = 1 + (i + j) % nstacks };
		}
		LIBBPF_OPTS(bpf_map_batch_opts, bo);
		if (bpf_map_update_batch(bpf_map__fd(skel->maps.allocs), keys, vals, &n, &bo)) {
			fprintf(stderr, "report_bench: filling the table failed\n");
			return 1;
		}
	}
	l = ledger__new(skel, &(struct ledger_opts){ .tgid = 1, .max_stacks = nstacks * 2 });
	for (int r = 0; r < 5; r++) {
		t0 = now();
		if (ledger__collect(l, &s))
			return 1;
		t0 = now() - t0;
		best = t0 < best ? t0 : best;
		worst = t0 > worst ? t0 : worst;
	}
	printf("report over %u allocations in %zu stacks: best %.1f ms, worst %.1f ms (5 runs)\n", nallocs, s->nrows,
	       best * 1e3, worst * 1e3);
	ledger__free(l);
	memleak_bpf__destroy(skel);
	return 0;
}
