/* Probe plans: one object's, and a process's objects planned ahead on a thread (see planahead.h). */
#include "attach/planahead.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "lib/thread.h"

/* Two planners: libtorch_cpu's scan on one, libtorch_cuda's and the rest on the other, the BPF verifier between. */
#define PLANAHEAD_THREADS 2

/* A planner and the plans it made, put in the session's cache once every planner is done. */
struct planner {
	struct planahead *pa;
	pthread_t th;
	bool started;
	struct rowplan **fresh;
	size_t n, cap;
};

struct planahead {
	struct plan_opts o;
	struct ml_maps maps;
	struct todo {
		const struct ml_mapping *m; /* one mapping a file */
		uint64_t span;		    /* the span of its mappings: its image's size, to plan the largest first */
	} * todo;
	size_t ntodo;
	_Atomic size_t next;
	struct planner w[PLANAHEAD_THREADS];
	bool borrowed; /* maps is the caller's (planahead__now) */
};

bool planahead__as_libc(const char *path)
{
	return ml_heap_lib(path, NULL) != NULL;
}

/* Whether pid has exited (or is a zombie): its maps cannot be read, or list nothing. */
static bool process_gone(int pid)
{
	struct ml_maps maps = {};
	bool gone = ml_maps__read(pid, &maps) != 0 || maps.n == 0;

	ml_maps__clear(&maps);
	return gone;
}

/* The object's file as the process has mapped it. An fd, or a negative errno. */
static int open_object(int pid, const struct ml_mapping *m)
{
	int fd = ml_maps__open_file(pid, m);

	/*
	 * -ENOENT here is the mapping gone, not a missing symbol: when the process went with it (an exit leaves
	 * no mappings), say so, so that it is not taken for a C library without malloc/free. A living process
	 * changed that mapping since its maps were read (the dynamic loader maps a library in several steps,
	 * and a scan its report woke can land between them): -EAGAIN, try again later.
	 */
	if (fd == -ENOENT)
		return process_gone(pid) ? -ESRCH : -EAGAIN;
	return fd;
}

int planahead__plan(const struct plan_opts *o, const struct ml_mapping *m, bool as_libc, const struct rowplan **plan,
		    struct rowplan **fresh, struct elf_syms **syms)
{
	struct rowfind_opts fo = {
	    .path = m->path, .layers = o->layers, .as_libc = as_libc, .torch_raw = o->torch_raw, .step = o->step};
	struct rowkey key;
	int fd = open_object(o->pid, m), err;

	if (fd < 0)
		return fd;
	err = rowkey__of(fd, &fo, &key);
	if (!err && (*plan = rowcache__get(o->rows, &key)))
		goto out;
	err = err ? err : !(*fresh = rowplan__new(&key)) ? -ENOMEM : elf_syms__open_as(fd, ELF_SYMS_FUNCS, syms);
	if (err == -ENOEXEC && *fresh)
		(*fresh)->err = err, err = 0;
	else if (!err)
		err = rowplan__read(*syms, &fo, *fresh);
	if (err) {
		free(*fresh);
		*fresh = NULL;
	}
	*plan = *fresh;
out:
	close(fd);
	return err;
}

/* The next file no planner has taken, until none is left. */
static void *plan_files(void *arg)
{
	struct planner *w = arg;
	struct planahead *pa = w->pa;

	for (size_t i; (i = atomic_fetch_add(&pa->next, 1)) < pa->ntodo;) {
		const struct ml_mapping *m = pa->todo[i].m;
		const struct rowplan *plan = NULL;
		struct rowplan *fresh = NULL;
		struct elf_syms *syms = NULL;

		/* As probes__sync takes it; a static executable's plan as a C library is left to the attach. */
		if (!planahead__plan(&pa->o, m, planahead__as_libc(m->path), &plan, &fresh, &syms) && fresh) {
			if (ml_grow(&w->fresh, &w->cap, w->n + 1, sizeof(*w->fresh)))
				free(fresh);
			else
				w->fresh[w->n++] = fresh;
		}
		elf_syms__free(syms);
	}
	return NULL;
}

static bool same_file(const struct ml_mapping *a, const struct ml_mapping *b)
{
	return a->inode == b->inode && a->dev_major == b->dev_major && a->dev_minor == b->dev_minor;
}

static int by_span(const void *a, const void *b)
{
	const struct todo *x = a, *y = b;

	return x->span > y->span ? -1 : x->span < y->span;
}

/* One mapping of each file the process maps, the largest image first. 0 or -ENOMEM. */
static int list_files(struct planahead *pa)
{
	const struct ml_maps *maps = &pa->maps;

	pa->todo = calloc(maps->n ? maps->n : 1, sizeof(*pa->todo));
	if (!pa->todo)
		return -ENOMEM;
	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *m = &maps->v[i];
		size_t j = 0;

		if (!m->path || m->path[0] != '/' || !m->inode)
			continue;
		while (j < pa->ntodo && !same_file(pa->todo[j].m, m))
			j++;
		if (j == pa->ntodo)
			pa->todo[pa->ntodo++] = (struct todo){.m = m, .span = m->end - m->start};
		else /* maps are sorted by start: the file's image reaches this mapping's end */
			pa->todo[j].span = m->end - pa->todo[j].m->start;
	}
	qsort(pa->todo, pa->ntodo, sizeof(*pa->todo), by_span);
	return 0;
}

/* The planners started on pa->maps' files. 0 or a negative errno (-EAGAIN: no thread started). */
static int start_planners(struct planahead *pa)
{
	int err = list_files(pa), started = 0;

	for (int i = 0; i < PLANAHEAD_THREADS && !err; i++) {
		pa->w[i].pa = pa;
		pa->w[i].started = !ml_thread_start(&pa->w[i].th, plan_files, &pa->w[i]);
		started += pa->w[i].started;
	}
	return err ? err : started ? 0 : -EAGAIN;
}

int planahead__start(const struct plan_opts *o, struct planahead **out)
{
	struct planahead *pa = calloc(1, sizeof(*pa));
	int err;

	*out = NULL;
	if (!pa)
		return -ENOMEM;
	pa->o = *o;
	err = ml_maps__read(o->pid, &pa->maps);
	err = err ? err : start_planners(pa);
	if (err) {
		planahead__join(pa);
		return err;
	}
	*out = pa;
	return 0;
}

int planahead__now(const struct plan_opts *o, const struct ml_maps *maps)
{
	struct planahead *pa = calloc(1, sizeof(*pa));
	int err;

	if (!pa)
		return -ENOMEM;
	*pa = (struct planahead){.o = *o, .maps = *maps, .borrowed = true};
	err = start_planners(pa);
	planahead__join(pa);
	return err;
}

void planahead__join(struct planahead *pa)
{
	size_t planned = 0;

	if (!pa)
		return;
	for (int i = 0; i < PLANAHEAD_THREADS; i++) {
		struct planner *w = &pa->w[i];

		if (w->started)
			pthread_join(w->th, NULL);
		for (size_t k = 0; k < w->n; k++)
			(void)rowcache__put(pa->o.rows, w->fresh[k]); /* the cache owns it, or frees it */
		planned += w->n;
		free(w->fresh);
	}
	ml_dbg("%zu of %zu files planned ahead of the attach", planned, pa->ntodo);
	free(pa->todo);
	if (!pa->borrowed)
		ml_maps__clear(&pa->maps);
	free(pa);
}
