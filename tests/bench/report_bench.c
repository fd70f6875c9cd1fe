/* Benchmark: time to aggregate and rank a report over 1,000,000 outstanding allocations in the real BPF table. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
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
