/* Benchmark: time to aggregate and rank a report over 1,000,000 outstanding allocations in the real BPF table. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "ledger.h"
#include "verdict.h"
#include <malloc.h>
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
	const struct ml_snapshot *s;
	struct memleak_bpf *skel;
	struct ledger *l;
	double t0, best = 1e9, worst = 0;

	skel = memleak_bpf__open();
	skel->rodata->table_mask = ledger_table_slots(nallocs) - 1;
	bpf_map__set_max_entries(skel->maps.table, ledger_table_slots(nallocs));
	bpf_map__set_max_entries(skel->maps.stacks, nstacks * 2);
	if (memleak_bpf__load(skel)) {
		fprintf(stderr, "report_bench: cannot load BPF (root?)\n");
		return 1;
	}
	/* Fill the table through a writable mapping, probing as the BPF side does. */
	{
		uint32_t mask = skel->rodata->table_mask;
		size_t bytes = ((size_t)mask + 1) * sizeof(struct ml_slot);
		struct ml_slot *t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(skel->maps.table), 0);

		if (t == MAP_FAILED) {
			fprintf(stderr, "report_bench: cannot map the table\n");
			return 1;
		}
		for (uint32_t i = 0; i < nallocs; i++) {
			uint64_t addr = 0x100000ULL + (uint64_t)i * 64;
			uint32_t h = (uint32_t)ml_slot_hash(1, ML_LAYER_LIBC, addr);

			while (t[h & mask].addr)
				h++;
			t[h & mask] = (struct ml_slot){ .addr = addr, .ts_ns = 1 + i, .size = 64 + i % 512,
							.caller = 0x400000 + i % nstacks, .stack_id = 1 + i % nstacks, .tgid = 1 };
		}
		munmap(t, bytes);
	}
	l = ledger__new(skel, &(struct ledger_opts){ .tgid = 1, .max_stacks = nstacks * 2 });
	struct verdicts *v = verdicts__new();
	const struct ml_judgement *j;
	const size_t *order;
	size_t heap0 = mallinfo2().uordblks, heap1 = 0;

	/* The whole report computation: table pass, sums, growth, ranking, then the verdicts over the history.
	 * 20 reports, so the history is full (16 samples a stack) before the last ones are timed. */
	for (int r = 0; r < 20; r++) {
		t0 = now();
		if (ledger__collect(l, &s) || verdicts__update(v, s, false, &j, &order))
			return 1;
		t0 = now() - t0;
		if (r >= 15) {
			best = t0 < best ? t0 : best;
			worst = t0 > worst ? t0 : worst;
		}
	}
	heap1 = mallinfo2().uordblks;
	printf("report over %u allocations in %zu stacks, verdicts included: best %.1f ms, worst %.1f ms "
	       "(last 5 of 20 reports); verdict history %.1f MiB (%.0f bytes a stack), report buffers included %.1f MiB\n",
	       nallocs, s->nrows, best * 1e3, worst * 1e3, (double)verdicts__memory(v) / (1 << 20),
	       (double)verdicts__memory(v) / (double)s->nrows, (double)(heap1 - heap0) / (1 << 20));
	verdicts__free(v);
	ledger__free(l);
	memleak_bpf__destroy(skel);
	return 0;
}
