/* --max-overhead's actions: the C heap's switch to heap-growth mode, then the shed order (enum ml_shed). */
#ifndef ML_BUDGET_H
#define ML_BUDGET_H

#include <stdint.h>
#include "session/overhead.h"

struct memleak_bpf;
struct probes;
struct followers;
struct ledger;
struct bpf_link;

/* What the actions change: the session's parts. */
struct budget_env {
	struct memleak_bpf *skel;
	int root_pid;               /* the first process (0: none, node-wide) */
	struct probes *root;        /* its probes (NULL: none) */
	struct followers *followers; /* NULL: none */
	struct ledger *ledger;
	struct overhead *ov;
	unsigned int *layers;       /* the layers traced: what is shed goes from it */
	struct bpf_link **heap_link; /* heap-growth mode's tracepoint, once on */
};

/* Do what overhead__sample asked (nothing for OVERHEAD_OK), before report number next_report. */
void budget__act(const struct budget_env *e, enum overhead_action act, uint64_t next_report);

#endif
