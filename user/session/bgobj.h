/* A second instance of the BPF object, some of its programs verified in the background (heap_exit, PyTorch's USDT). */
#ifndef ML_BGOBJ_H
#define ML_BGOBJ_H

#include <stdbool.h>

struct memleak_bpf;
struct bpf_program;
struct overhead;
struct bgobj;

/* Which programs the instance loads: true for each one wanted. */
typedef bool (*bgobj_want_fn)(const struct memleak_bpf *s, const struct bpf_program *p);

/*
 * Open a second instance of the object whose maps are all skel's (bpf_map__reuse_fd: the same table, the same
 * read-only configuration) and load the programs `want` names, on a thread of its own that takes no signal:
 * the verifier's work for programs needed only later, or only in some processes, done beside the attaching.
 * NULL when out of memory.
 */
struct bgobj *bgobj__start(struct memleak_bpf *skel, bgobj_want_fn want);
/* PyTorch's USDT programs (torch_malloc, torch_free): a bgobj_want_fn. */
bool bgobj__usdt_progs(const struct memleak_bpf *s, const struct bpf_program *p);
/*
 * probes_opts.usdt_prog for an instance started with bgobj__usdt_progs (g): the release's program or the
 * allocation's, waiting for the load if it still runs, their run time counted in ov from then on; NULL
 * (said once on stderr) when they could not be loaded.
 */
struct bpf_program *bgobj__usdt_prog(void *g, bool is_free);
void bgobj__count_in(struct bgobj *g, struct overhead *ov);
/* The loaded instance, waiting for the thread if it still runs; NULL with *err set when it could not load. */
struct memleak_bpf *bgobj__get(struct bgobj *g, int *err);
void bgobj__free(struct bgobj *g); /* NULL-safe; waits for the thread */

#endif
