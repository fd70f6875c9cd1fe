/*
 * --follow: the traced process's children. The BPF side sees every fork of a traced process (a tracepoint,
 * so nothing is missed between two scans) and marks the child traced; user space then attaches the same
 * probes to it, filtered by its pid, with its own symbolizer and Python decoder, since after exec it can
 * be any program. Exits are seen through a pidfd per follower, which also pins its identity.
 */
#define _GNU_SOURCE
#include "session/follow.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "python/pyframes.h"
#include "symbolize/symbolizer.h"
#include "unwind/unwind.h"
#include "memleak.skel.h"

struct followers {
	struct memleak_bpf *skel;
	struct follow_opts o;
	struct tracee_env env;
	bool heap_mode;	      /* the C heap is followed through system calls ... */
	bool heap_windows;    /* ... with its probes on in sampling windows only (else not at all) */
	unsigned int dropped; /* layers shed by --max-overhead: not probed in any follower */
	unsigned int paused;  /* layers whose allocation side is paused now (tensor sampling) */
	bool step_off;	      /* the step clock's links closed now (its sampling) */
	unsigned int closed;  /* layers whose links are all closed now (the C heap between windows) */
	struct tracee *v;
	size_t n, cap, skipped;
};

int followers__new(struct memleak_bpf *skel, const struct follow_opts *o, struct followers **out)
{
	struct followers *f = calloc(1, sizeof(*f));

	*out = f;
	if (!f)
		return -ENOMEM;
	f->skel = skel;
	f->o = *o;
	f->env = (struct tracee_env){.skel = skel, .uw = o->uw, .python = o->python, .debug_dir = o->debug_dir};
	return 0;
}

static void untrace(struct followers *f, int pid)
{
	__u32 key = (__u32)pid;

	bpf_map_delete_elem(bpf_map__fd(f->skel->maps.traced), &key);
	bpf_map_delete_elem(bpf_map__fd(f->skel->maps.heap_procs), &key);
}

static void follower_release(struct followers *f, struct tracee *t)
{
	tracee__release(t, &f->env);
	untrace(f, t->pid);
}

void followers__free(struct followers *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		follower_release(f, &f->v[i]);
	free(f->v);
	free(f);
}

static struct tracee *find(struct followers *f, int pid)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].pid == pid)
			return &f->v[i];
	return NULL;
}

/* (Re)attach: probes on every object the process maps, and its Python interpreter if any. */
/* The probes options of a follower: as the first process's, less the C heap in heap-growth mode. */
static struct probes_opts follower_opts(struct followers *f, int pid)
{
	struct probes_opts po = f->o.probes;

	po.pid = pid;
	po.layers &= ~f->dropped;
	if (f->heap_mode) {
		if (!f->heap_windows)
			po.layers &= ~(1U << ML_LAYER_LIBC);
		ml_heap_track(f->skel, pid); /* a new image's program break starts over too */
	}
	return po;
}

/* Attach: probes on every object it maps, its Python interpreter if any, its symbolizer. */
static int attach(struct followers *f, struct tracee *t)
{
	struct probes_opts po = follower_opts(f, t->pid);
	int n = tracee__attach(t, &f->env, &po);

	if (n < 0)
		return n;
	if (f->paused)
		probes__pause(t->probes, f->paused, true);
	if (f->closed)
		probes__window(t->probes, f->closed, false);
	if (f->step_off)
		probes__step(t->probes, false);
	tracee__watch_loader(t);
	return tracee__symbolize(t, &f->env);
}

int followers__add(struct followers *f, int pid, int parent)
{
	struct tracee *t;
	int err;

	if (find(f, pid))
		return -EEXIST;
	if (f->n >= f->o.max) {
		f->skipped++;
		untrace(f, pid);
		if (f->skipped == 1)
			ml_notice("not following pid %d (child of %d): %zu processes followed already (the limit)", pid,
				  parent, f->n);
		return -ENOSPC;
	}
	if (ml_grow(&f->v, &f->cap, f->n + 1, sizeof(*f->v)))
		return -ENOMEM;
	t = &f->v[f->n];
	memset(t, 0, sizeof(*t));
	t->pid = pid;
	t->parent = parent;
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0) {
		err = -errno;
		untrace(f, pid);
		return err == -ESRCH ? -ESRCH : err;
	}
	{
		__u32 key = (__u32)pid, one = 1;

		bpf_map_update_elem(bpf_map__fd(f->skel->maps.traced), &key, &one, BPF_ANY);
	}
	err = attach(f, t);
	if (err) {
		follower_release(f, t);
		if (err != -ESRCH && err != -ENOENT)
			ml_notice("cannot follow pid %d (child of %d): %s", pid, parent, strerror(-err));
		return err == -ENOENT ? -ESRCH : err;
	}
	{
		const struct tracee *p = !parent				 ? NULL
					 : f->o.root && f->o.root->pid == parent ? f->o.root
										 : find(f, parent);
		unsigned int nfuncs, nobj = probes__n_probed(t->probes, &nfuncs);

		tracee__label(t, p);
		f->n++;
		if (parent)
			ml_notice("following pid %d (child of %d): %u probes in %u objects", pid, parent, nfuncs, nobj);
		else
			ml_notice("tracing pid %d (%s%s%s): %u probes in %u objects", pid, t->labels.comm,
				  t->labels.rank ? ", rank " : "", t->labels.rank ? t->labels.rank : "", nfuncs, nobj);
	}
	return 0;
}

int followers__exec(struct followers *f, int pid)
{
	struct tracee *t = find(f, pid);
	struct probes_opts po;
	int err;

	if (!t)
		return -ENOENT;
	po = follower_opts(f, t->pid);
	err = tracee__reprobe(t, &f->env, &po);
	if (err && err != -ESRCH && err != -ENOENT)
		ml_notice("pid %d ran exec; probing its new image failed: %s", pid, strerror(-err));
	else if (!err)
		ml_info("pid %d ran exec: its new image is probed", pid);
	return err;
}

void followers__sync(struct followers *f, bool full, void (*gone)(void *ctx, int pid), void *ctx)
{
	for (size_t i = 0; i < f->n;) {
		struct tracee *t = &f->v[i];

		if (tracee__exited(t)) {
			ml_info("followed pid %d exited", t->pid);
			if (gone)
				gone(ctx, t->pid);
			follower_release(f, t);
			f->v[i] = f->v[--f->n];
			continue;
		}
		if (tracee__needs_scan(t, full))
			tracee__sync(t, &f->env);
		i++;
	}
}

void followers__heap_mode(struct followers *f, bool windows)
{
	f->heap_mode = true;
	f->heap_windows = windows;
	if (windows)
		f->closed |= 1U << ML_LAYER_LIBC;
	for (size_t i = 0; i < f->n; i++) {
		if (f->v[i].probes && windows)
			probes__window(f->v[i].probes, 1U << ML_LAYER_LIBC, false);
		else if (f->v[i].probes)
			probes__drop_layers(f->v[i].probes, 1U << ML_LAYER_LIBC);
		ml_heap_track(f->skel, f->v[i].pid);
	}
}

void followers__drop_layers(struct followers *f, unsigned int mask)
{
	f->dropped |= mask;
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].probes)
			probes__drop_layers(f->v[i].probes, mask);
}

void followers__window(struct followers *f, unsigned int mask, bool open)
{
	f->closed = open ? f->closed & ~mask : f->closed | mask;
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].probes)
			probes__window(f->v[i].probes, mask, open);
}

void followers__pause(struct followers *f, unsigned int mask, bool pause)
{
	f->paused = pause ? f->paused | mask : f->paused & ~mask;
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].probes)
			probes__pause(f->v[i].probes, mask, pause);
}

void followers__step(struct followers *f, bool on)
{
	f->step_off = !on;
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].probes)
			probes__step(f->v[i].probes, on);
}

size_t followers__pids(const struct followers *f, int *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < f->n && n < max; i++)
		out[n++] = f->v[i].pid;
	return n;
}

void followers__trim(struct followers *f)
{
	for (size_t i = 0; i < f->n; i++)
		pyframes__trim(f->v[i].py);
}

struct tracee *followers__find(struct followers *f, int pid)
{
	return find(f, pid);
}

const struct tracee *followers__at(const struct followers *f, size_t i)
{
	return &f->v[i];
}

size_t followers__count(const struct followers *f)
{
	return f->n;
}

int ml_descendants(int root, struct ml_child **out, size_t *n)
{
	struct ml_child *all = NULL, *res;
	size_t nall = 0, cap = 0, nout = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		struct ml_proc_stat st;

		if (*end || pid <= 0 || pid > INT32_MAX || pid == root || ml_proc_stat((int)pid, &st) || st.ppid <= 0)
			continue;
		if (nall == cap) {
			struct ml_child *a = realloc(all, (cap = cap ? 2 * cap : 256) * sizeof(*a));

			if (!a) {
				closedir(d);
				free(all);
				return -ENOMEM;
			}
			all = a;
		}
		all[nall++] = (struct ml_child){(int)pid, st.ppid};
	}
	closedir(d);
	res = malloc((nall ? nall : 1) * sizeof(*res));
	if (!res) {
		free(all);
		return -ENOMEM;
	}
	/* Breadth first from root; each process has one parent, so none is found twice. */
	for (size_t i = 0; i < nall; i++)
		if (all[i].parent == root)
			res[nout++] = all[i];
	for (size_t k = 0; k < nout; k++)
		for (size_t i = 0; i < nall && nout < nall; i++)
			if (all[i].parent == res[k].pid)
				res[nout++] = all[i];
	free(all);
	*out = res;
	*n = nout;
	return 0;
}
