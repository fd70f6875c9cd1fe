/* A second instance of the BPF object, loaded in the background (bgobj.h). */
#include "session/bgobj.h"
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "lib/log.h"
#include "lib/thread.h"
#include "session/overhead.h"
#include "memleak.skel.h"

struct bgobj {
	struct memleak_bpf *skel; /* the first instance, whose maps this one uses */
	bgobj_want_fn want;
	struct memleak_bpf *inst; /* loaded, or NULL */
	int err;
	pthread_t thread;
	bool running;	     /* the thread was started and has not been joined */
	struct overhead *ov; /* where the USDT programs' run time counts (bgobj__count_in) */
	bool got;	     /* bgobj__usdt_prog: loaded, counted, or its failure told */
};

static void *load(void *arg)
{
	struct bgobj *g = arg;
	struct memleak_bpf *s = memleak_bpf__open();
	struct bpf_program *prog;
	struct bpf_map *map;
	int err = 0;

	if (!s) {
		g->err = -errno;
		return NULL;
	}
	bpf_object__for_each_program(prog, s->obj) bpf_program__set_autoload(prog, g->want(s, prog));
	bpf_object__for_each_map(map, s->obj)
	{
		const struct bpf_map *mine = bpf_object__find_map_by_name(g->skel->obj, bpf_map__name(map));
		int fd = mine ? bpf_map__fd(mine) : -1;

		err = fd < 0 ? -ENOENT : bpf_map__reuse_fd(map, fd);
		if (err)
			break;
	}
	if (!err)
		err = memleak_bpf__load(s);
	if (err) {
		memleak_bpf__destroy(s);
		g->err = err;
		return NULL;
	}
	g->inst = s;
	return NULL;
}

struct bgobj *bgobj__start(struct memleak_bpf *skel, bgobj_want_fn want)
{
	struct bgobj *g = calloc(1, sizeof(*g));
	int err;

	if (!g)
		return NULL;
	g->skel = skel;
	g->want = want;
	err = ml_thread_start(&g->thread, load, g); /* (the thread sets g->err when the load fails) */
	g->running = !err;
	if (err)
		g->err = err;
	return g;
}

struct memleak_bpf *bgobj__get(struct bgobj *g, int *err)
{
	if (g->running) {
		pthread_join(g->thread, NULL);
		g->running = false;
	}
	*err = g->inst ? 0 : g->err;
	return g->inst;
}

void bgobj__free(struct bgobj *g)
{
	int err;

	if (!g)
		return;
	bgobj__get(g, &err);
	memleak_bpf__destroy(g->inst);
	free(g);
}

bool bgobj__usdt_progs(const struct memleak_bpf *s, const struct bpf_program *p)
{
	return p == s->progs.torch_malloc || p == s->progs.torch_free;
}

void bgobj__count_in(struct bgobj *g, struct overhead *ov)
{
	if (g)
		g->ov = ov;
}

struct bpf_program *bgobj__usdt_prog(void *arg, bool is_free)
{
	struct bgobj *g = arg;
	struct memleak_bpf *s;
	int err;

	if (!g)
		return NULL;
	s = bgobj__get(g, &err);
	if (!g->got) {
		g->got = true;
		if (!s)
			ml_notice("PyTorch's USDT probes cannot be traced: their programs did not load (%s)",
				  strerror(-err));
		else if (g->ov && (overhead__count_prog(g->ov, s->progs.torch_malloc) ||
				   overhead__count_prog(g->ov, s->progs.torch_free)))
			ml_notice("PyTorch's USDT probes' run time cannot be counted in the overhead figure");
	}
	return !s ? NULL : is_free ? s->progs.torch_free : s->progs.torch_malloc;
}
