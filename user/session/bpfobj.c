/* The BPF object as a run's options want it: configured before load, then loaded. */
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>
#include "attach/allocators.h"
#include "attach/uprobe_multi.h"
#include "lib/log.h"
#include "session/session.h"
#include "memleak.skel.h"

void session__configure_bpf(struct memleak_bpf *skel, const struct ml_opts *o, bool multi)
{
	for (unsigned int i = 0; i < ml_allocators_n; i++)
		memcpy((void *)&skel->rodata->specs[i], &ml_allocators[i].spec, sizeof(struct ml_spec));
	skel->rodata->min_size = o->min_size;
	skel->rodata->max_size = o->max_size;
	bpf_map__set_max_entries(skel->maps.stacks_sent, o->max_stacks);
	/* The ring is mapped whole into this process: its size is most of the tool's RSS on a small target. */
	bpf_map__set_max_entries(skel->maps.stack_events,
				 o->max_overhead >= 100 ? ML_STACK_RING_BYTES : ML_STACK_RING_BUDGET);
	skel->rodata->unwind_tables = o->unwind_tables;
	/*
	 * Heap-growth mode's program is loaded in the background when the budget may need it (budget.c); so are
	 * PyTorch's USDT programs (session.c), which few processes have: neither holds up the attaching.
	 */
	bpf_program__set_autoload(skel->progs.heap_exit, false);
	bpf_program__set_autoload(skel->progs.torch_malloc, false);
	bpf_program__set_autoload(skel->progs.torch_free, false);
	if (!(o->layers & (1U << ML_LAYER_RSS))) {
		bpf_program__set_autoload(skel->progs.rss_fault_user, false);
		bpf_program__set_autoload(skel->progs.rss_fault_kernel, false);
		bpf_program__set_autoload(skel->progs.rss_page_alloc, false);
		bpf_program__set_autoload(skel->progs.rss_exit, false);
	}
	if (multi) {
		bpf_program__set_expected_attach_type(skel->progs.alloc_enter, ML_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.alloc_exit, ML_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.free_enter, ML_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.free_exit, ML_BPF_TRACE_UPROBE_MULTI);
	}
}

int session__load_bpf(const struct ml_opts *o, bool multi, struct memleak_bpf **out)
{
	struct memleak_bpf *skel;
	int err;

	skel = memleak_bpf__open();
	if (!skel) {
		err = -errno;
		ml_err("cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	session__configure_bpf(skel, o, multi);
	err = memleak_bpf__load(skel);
	if (err) {
		ml_err("cannot load the BPF programs: %s (run with -v for the verifier's log)", strerror(-err));
		memleak_bpf__destroy(skel);
		return err;
	}
	*out = skel;
	return 0;
}
