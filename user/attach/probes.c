/* Probe attachment: finds the allocator table's functions in the target's mapped objects and attaches to them. */
#define _GNU_SOURCE
#include "attach/probes.h"
#include <bpf/libbpf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "attach/links.h"
#include "attach/planahead.h"
#include "attach/rowcache.h"
#include "attach/rowfind.h"
#include "lib/clock.h"
#include "lib/elfsites.h"
#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/path.h"
#include "lib/procmaps.h"
#include "memleak.skel.h"

struct object {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char *path;	 /* NULL for objects looked at and not probed */
	bool libc_tried; /* looked at as a C library (or static executable) */
	unsigned int nfuncs;
	unsigned int layers;
};

struct probes {
	struct memleak_bpf *skel;
	struct probes_opts o;
	struct links *links; /* every link attached, by the layers of its object's rows */
	struct object *objs;
	size_t nobjs, capobjs;
	unsigned int active;
	bool started;	       /* initial attach done: later activations are news worth a notice */
	const char *heap;      /* the C heap allocator the process uses ("glibc", "jemalloc", ...), NULL until known */
	uint64_t last_sync_ns; /* CLOCK_MONOTONIC at the previous sync: what it did not see was mapped after */
	uint64_t window_ns;    /* this sync: how long a library new now may have run unprobed */
	bool held;	       /* the process stops at its loader's reports (-c): new libraries run only once probed */
	bool heap_replaced;    /* heap is one that took over from the C library's (preloaded or linked) */
	bool retry;	       /* the last sync left an object to open again (its mapping changed under it) */
};

int probes__new(struct memleak_bpf *skel, const struct probes_opts *o, struct probes **out)
{
	struct probes *p = calloc(1, sizeof(*p));

	*out = p;
	if (!p || links__new(skel, o->pid, &p->links)) {
		free(p);
		*out = NULL;
		return -ENOMEM;
	}
	p->skel = skel;
	p->o = *o;
	return 0;
}

void probes__free(struct probes *p)
{
	if (!p)
		return;
	links__free(p->links);
	for (size_t i = 0; i < p->nobjs; i++)
		free(p->objs[i].path);
	free(p->objs);
	free(p);
}

static bool layer_on(const struct probes *p, unsigned int layer)
{
	return p->o.layers & (1U << layer);
}

/* The planners' view of p's options (planahead.h): whose objects, into which cache, for which rows. */
#define PLAN_OPTS(p) (&(struct plan_opts){(p)->o.pid, (p)->o.rows, (p)->o.layers, (p)->o.torch_raw, (p)->o.step})

static struct object *lookup(const struct probes *p, const struct ml_mapping *m)
{
	for (size_t i = 0; i < p->nobjs; i++)
		if (p->objs[i].inode == m->inode && p->objs[i].dev_major == m->dev_major &&
		    p->objs[i].dev_minor == m->dev_minor)
			return &p->objs[i];
	return NULL;
}

static struct object *add_object(struct probes *p, const struct ml_mapping *m)
{
	struct object *o;

	if (ml_grow(&p->objs, &p->capobjs, p->nobjs + 1, sizeof(*p->objs)))
		return NULL;
	o = &p->objs[p->nobjs++];
	memset(o, 0, sizeof(*o));
	o->dev_major = m->dev_major;
	o->dev_minor = m->dev_minor;
	o->inode = m->inode;
	return o;
}

/* Whether a row's function gets a return probe as well as its entry probe. */
static bool needs_return_probe(const struct ml_spec *sp)
{
	if (sp->kind == ML_KIND_FREE)
		return sp->track_free;
	return sp->kind != ML_KIND_WRAP && sp->kind != ML_KIND_RAISE && sp->kind != ML_KIND_STEP;
}

/*
 * All the object's rows in four uprobe_multi links, in the order that keeps every call accounted: return
 * probes before entries, releases before allocations. Removing a link costs the kernel one wait, where
 * single probes cost one each (0.1-0.2 s apiece here).
 */
static int attach_batched(struct probes *p, const char *path, const struct rowat *rows)
{
	uint64_t offs[LINKS_NBATCH][ML_MAX_SPECS], cookies[LINKS_NBATCH][ML_MAX_SPECS];
	uint32_t cnt[LINKS_NBATCH] = {};

	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		const struct ml_spec *sp = &ml_allocators[row].spec;
		uint64_t off = rows[row].off;

		if (!rows[row].ok)
			continue;
		int entry = sp->kind == ML_KIND_FREE ? LINKS_FREE : sp->kind == ML_KIND_STEP ? LINKS_STEP : LINKS_ALLOC;
		int ret = sp->kind == ML_KIND_FREE ? LINKS_FREE_RET : LINKS_ALLOC_RET;

		if (needs_return_probe(sp))
			offs[ret][cnt[ret]] = off, cookies[ret][cnt[ret]++] = row;
		offs[entry][cnt[entry]] = off, cookies[entry][cnt[entry]++] = row;
	}
	for (int b = 0; b < LINKS_NBATCH; b++) {
		int err = cnt[b] ? links__add_multi(p->links, b, path, offs[b], cookies[b], cnt[b]) : 0;

		if (err)
			return err;
	}
	return 0;
}

static int attach_one(struct probes *p, const char *path, uint64_t off, unsigned int row, bool ret)
{
	const struct ml_allocator *a = &ml_allocators[row];
	struct bpf_program *prog;
	struct bpf_link *l;
	int err;

	LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = row, .retprobe = ret);
	if (a->spec.kind == ML_KIND_FREE)
		prog = ret ? p->skel->progs.free_exit : p->skel->progs.free_enter;
	else
		prog = ret ? p->skel->progs.alloc_exit : p->skel->progs.alloc_enter;
	l = bpf_program__attach_uprobe_opts(prog, p->o.pid, path, off, &uo);
	if (!l) {
		err = -errno;
		ml_info("cannot attach %s to %s in %s: %s", ret ? "uretprobe" : "uprobe", a->func, path,
			strerror(-err));
		return err;
	}
	err = links__add(p->links, l);
	if (err)
		bpf_link__destroy(l);
	return err;
}

/* -v: where the notes of provider:name are, their arguments and semaphores (what libbpf attached to). */
struct sdt_say {
	const char *provider, *name, *path;
	unsigned int n;
};

static int say_sdt(const struct elf_sdt_note *n, void *vctx)
{
	struct sdt_say *c = vctx;
	unsigned int nargs = 0;

	if (strcmp(n->provider, c->provider) || strcmp(n->name, c->name))
		return 0;
	for (const char *a = n->args; *a; a++)
		nargs += *a != ' ' && (a == n->args || a[-1] == ' ');
	ml_info("USDT %s:%s in %s at 0x%" PRIx64 ": %u args \"%s\", semaphore 0x%" PRIx64, n->provider, n->name,
		c->path, n->pc, nargs, n->args, n->semaphore);
	c->n++;
	return 0;
}

/*
 * PyTorch's USDT probes. libbpf reads the notes and handles the semaphores; the programs come from
 * probes_opts.usdt_prog (loaded apart). Returns probes attached.
 */
static int attach_usdts(struct probes *p, const char *path, const struct ml_mapping *m, const struct elf_syms *syms,
			unsigned int *layers)
{
	int n = 0;

	for (unsigned int j = 0; j < ml_usdts_n; j++) {
		/* the release probe first, as for the functions */
		const struct ml_usdt *u = &ml_usdts[(j + 1) % ml_usdts_n];
		struct bpf_program *prog;
		struct bpf_link *l;

		if (!layer_on(p, u->layer) || !p->o.usdt_prog || !(prog = p->o.usdt_prog(p->o.usdt_ctx, u->is_free)))
			continue;
		l = bpf_program__attach_usdt(prog, p->o.pid, path, u->provider, u->name, NULL);
		if (!l) {
			int e = errno;

			if (e == ENOENT)
				ml_dbg("%s: no USDT probe %s:%s", path, u->provider, u->name);
			else
				ml_notice("cannot attach USDT probe %s:%s in %s: %s", u->provider, u->name, path,
					  strerror(e));
			continue;
		}
		if (links__add(p->links, l)) {
			bpf_link__destroy(l);
			return -ENOMEM;
		}
		*layers |= 1U << u->layer;
		n++;
		if (ml_log_level >= 1 && syms) {
			struct sdt_say c = {u->provider, u->name, m->path, 0};

			elf_syms__for_each_sdt(syms, say_sdt, &c);
			ml_info("USDT %s:%s attached in %s: %u locations", u->provider, u->name, m->path, c.n);
		} else {
			ml_info("USDT %s:%s attached in %s (its notes as read when the object was planned)",
				u->provider, u->name, m->path);
		}
	}
	return n;
}

/*
 * Whether a row's probe says its layer is traced in the object: an error's constructor does not, nor does the
 * step clock (an object of no layer keeps its links when the budget sheds one).
 */
static unsigned int layer_bit(const struct ml_spec *sp)
{
	return sp->kind == ML_KIND_RAISE || sp->kind == ML_KIND_STEP ? 0 : 1U << sp->layer;
}

/* Attach the rows found, adding their layers to *layers. Returns the number of functions probed. */
static int attach_rows(struct probes *p, const char *path, const struct rowat *rows, unsigned int *layers)
{
	int err = 0, n = 0;

	if (p->o.multi) {
		err = attach_batched(p, path, rows);
		for (unsigned int row = 0; row < ml_allocators_n && !err; row++) {
			if (rows[row].ok) {
				*layers |= layer_bit(&ml_allocators[row].spec);
				n++;
			}
		}
		return err ? err : n;
	}
	/*
	 * Releases go on first: a block allocated and freed while only the allocation probe was on would
	 * stay "outstanding" for good.
	 */
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned int row = 0; row < ml_allocators_n; row++) {
			const struct ml_allocator *a = &ml_allocators[row];

			if (!rows[row].ok || (a->spec.kind == ML_KIND_FREE) != (pass == 0))
				continue;
			/*
			 * Return probe first: an entry seen without its return hooked would leave a call "in flight"
			 * for good, and later calls at that depth would pass for nested ones.
			 */
			if (needs_return_probe(&a->spec))
				err = attach_one(p, path, rows[row].off, row, true);
			if (!err)
				err = attach_one(p, path, rows[row].off, row, false);
			if (err)
				return err;
			*layers |= layer_bit(&a->spec);
			n++;
		}
	}
	return n;
}

/* PyTorch's USDT probes, and a word when its raw_alloc functions were not found beside them. */
static int attach_torch_usdts(struct probes *p, const char *path, const struct ml_mapping *m,
			      const struct elf_syms *syms, const struct rowat *rows, unsigned int *layers)
{
	struct elf_syms *notes = NULL;
	bool raw = false;
	int u, fd;

	/* -v lists the notes; a plan made before (ahead of the attach, or for another process) read them then. */
	if (!syms && ml_log_level >= 1 && (fd = ml_maps__open_file(p->o.pid, m)) >= 0) {
		if (elf_syms__open_as(fd, ELF_SYMS_DATA, &notes))
			notes = NULL;
		close(fd);
	}
	u = attach_usdts(p, path, m, syms ? syms : notes, layers);
	elf_syms__free(notes);
	if (u <= 0)
		return u;
	for (unsigned int row = 0; row < ml_allocators_n; row++)
		if (rows[row].ok && ml_allocators[row].spec.layer == ML_LAYER_TORCH_CUDA &&
		    ml_allocators[row].spec.kind == ML_KIND_FREE)
			raw = true;
	if (!raw)
		ml_notice("%s has PyTorch's allocator probes but no raw_alloc/raw_delete symbols (stripped?): "
			  "torch_cuda misses memory taken through raw_alloc",
			  m->path);
	return u;
}

/* -v: where each function was probed. */
static void say_probed(const struct probes *p, const struct ml_mapping *m, const struct rowat *rows)
{
	for (unsigned int row = 0; row < ml_allocators_n && ml_log_level >= 1; row++) {
		if (rows[row].ok && ml_allocators[row].spec.kind == ML_KIND_STEP)
			ml_info("%s: the step clock, %s, probed at offset 0x%" PRIx64, m->path, p->o.step,
				rows[row].off);
		else if (rows[row].ok)
			ml_info("%s: %s probed at offset 0x%" PRIx64 " (layer %s)", m->path, ml_allocators[row].func,
				rows[row].off, ml_layer_name(ml_allocators[row].spec.layer));
	}
}

/*
 * Probe one object: the rows of enabled layers it defines (libc rows only in a C library, or a static
 * executable when `as_libc`), and PyTorch's USDT probes. Returns the number of probes attached, -ENOENT
 * when a C library lacks malloc/free, or another negative errno.
 */
static int probe_object(struct probes *p, const struct ml_mapping *m, bool as_libc, unsigned int *layers)
{
	struct links_mark mark = links__mark(p->links);
	const struct rowplan *plan = NULL;
	struct rowplan *fresh = NULL;
	struct elf_syms *syms = NULL;
	char *path = NULL;
	int err, u = 0;

	*layers = 0;
	err = planahead__plan(PLAN_OPTS(p), m, as_libc, &plan, &fresh, &syms);
	if (!err)
		err = plan->err;
	if (!err)
		err = ml_maps__attach_path(p->o.pid, m, &path);
	if (!err)
		err = attach_rows(p, path, plan->rows, layers);
	if (err >= 0 && plan->usdts)
		u = attach_torch_usdts(p, path, m, syms, plan->rows, layers);
	if (err >= 0 && u >= 0) {
		say_probed(p, m, plan->rows);
		err += u;
		links__commit(p->links, mark, *layers);
	} else {
		err = err < 0 ? err : u;
		links__rollback(p->links, mark);
	}
	/*
	 * What the file holds does not change with one process's attach failing: kept even then. A plan the
	 * cache could not keep is read again next time.
	 */
	if (fresh)
		(void)rowcache__put(p->o.rows, fresh);
	free(path);
	elf_syms__free(syms);
	return err;
}

static void announce(struct probes *p, const char *path, unsigned int layers, int nfuncs)
{
	unsigned int fresh = layers & ~p->active;

	for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
		if (!(fresh & (1U << l)))
			continue;
		if (p->started && p->held)
			ml_notice("layer %s now active: %s (loaded after attach; probed before its code ran)",
				  ml_layer_name(l), path);
		else if (p->started)
			ml_notice("layer %s now active: %s (loaded after attach; probed at most %.0f ms after it was "
				  "mapped: calls made before then were not seen)",
				  ml_layer_name(l), path, (double)p->window_ns / 1e6);
		else
			ml_info("layer %s active: %s", ml_layer_name(l), path);
	}
	ml_info("probing %d functions in %s", nfuncs, path);
	p->active |= layers;
}

/* A heap allocator was probed: the one a replacement names wins over the C library's. */
static void note_heap(struct probes *p, const char *path)
{
	bool replaces = false;
	const char *name = ml_heap_lib(path, &replaces);

	if (!name || (p->heap_replaced && !replaces))
		return;
	if (replaces && (!p->heap || !p->heap_replaced))
		ml_info("pid %d's C heap is %s (%s), not the C library's", p->o.pid, name, path);
	p->heap = name;
	p->heap_replaced = replaces;
}

const char *probes__heap(const struct probes *p)
{
	return p->heap;
}

void probes__held(struct probes *p, bool held)
{
	p->held = held;
}

/*
 * probe_object's result n as the sync takes it: an object we cannot use is said why and skipped (0), so that it
 * keeps no other from being probed; what is left negative (-ENOMEM, -ESRCH) ends the sync.
 */
static int tolerate(const struct ml_mapping *m, bool libc, int n)
{
	if (n == -ENOENT && libc) {
		ml_notice("%s looks like a C library but lacks malloc/free symbols; not probed", m->path);
		return 0;
	}
	if (n == -ENOEXEC || n == -ENOENT || n == -EACCES) {
		ml_info("%s: not probed (%s)", m->path, strerror(-n));
		return 0;
	}
	if (n < 0 && n != -ENOMEM && n != -ESRCH) {
		ml_notice("%s: not probed: %s", m->path, strerror(-n)); /* -v: which probe failed */
		return 0;
	}
	return n;
}

/* Probe an object not looked at yet and record it as looked at. 1 when probes were attached, 0, or -errno. */
static int sync_object(struct probes *p, const struct ml_mapping *m, bool libc)
{
	unsigned int layers = 0;
	struct object *o;
	int n = probe_object(p, m, libc, &layers);

	if (n == -EAGAIN) {
		p->retry = true; /* not recorded as looked at: the next sync opens it again */
		return 0;
	}
	n = tolerate(m, libc, n);
	if (n < 0)
		return n;
	o = add_object(p, m);
	if (!o)
		return -ENOMEM;
	o->libc_tried = libc;
	if (!n)
		return 0;
	o->path = strdup(m->path);
	o->nfuncs = (unsigned int)n;
	o->layers = layers;
	if (!o->path)
		return -ENOMEM;
	announce(p, m->path, layers, n);
	if (libc && (layers & (1U << ML_LAYER_LIBC)))
		note_heap(p, m->path);
	return 1;
}

/* A statically linked program carries its own allocator: probe the executable if it has the symbols. */
static int sync_static(struct probes *p, const struct ml_mapping *exe)
{
	struct object *o = lookup(p, exe);
	unsigned int layers = 0;
	int n;

	if (!o && !(o = add_object(p, exe)))
		return -ENOMEM;
	if (o->libc_tried)
		return 0;
	o->libc_tried = true;
	n = probe_object(p, exe, true, &layers);
	if (n < 0)
		return n == -ENOENT || n == -ENOEXEC ? 0 : n;
	if (!n)
		return 0;
	if (!o->path && !(o->path = strdup(exe->path)))
		return -ENOMEM;
	o->nfuncs += (unsigned int)n;
	o->layers |= layers;
	announce(p, exe->path, layers, n);
	if (!p->heap)
		p->heap = "static (in the executable)";
	return 1;
}

/*
 * Held at its loader's reports (-c), the process waits for the new objects' plans: two or more are planned
 * side by side first (planahead__now), into the session's cache that sync_object then finds them in.
 */
static void plan_new(struct probes *p, const struct ml_maps *maps)
{
	struct ml_maps fresh = {.v = calloc(maps->n ? maps->n : 1, sizeof(*maps->v))};
	int err;

	for (size_t i = 0; fresh.v && i < maps->n; i++)
		if (maps->v[i].path && maps->v[i].path[0] == '/' && maps->v[i].inode && !lookup(p, &maps->v[i]))
			fresh.v[fresh.n++] = maps->v[i]; /* borrowed: its path stays the caller's */
	if (fresh.n > 1 && (err = planahead__now(PLAN_OPTS(p), &fresh)))
		ml_dbg("pid %d: new objects not planned side by side: %s", p->o.pid, strerror(-err));
	free(fresh.v);
}

int probes__sync(struct probes *p, const struct ml_maps *maps)
{
	const struct ml_mapping *exe = NULL;
	bool any_libc = false;
	int added = 0, n;
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC);

	p->window_ns = p->last_sync_ns ? now - p->last_sync_ns : 0;
	p->last_sync_ns = now;
	p->retry = false;
	if (p->held && p->o.rows)
		plan_new(p, maps);
	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *m = &maps->v[i];
		bool libc;

		if (!m->path || m->path[0] != '/' || !m->inode)
			continue;
		if (!exe)
			exe = m; /* the kernel maps the executable first */
		libc = planahead__as_libc(m->path);
		any_libc |= libc;
		if (lookup(p, m))
			continue;
		n = sync_object(p, m, libc);
		if (n < 0)
			return n;
		added += n;
	}
	if (!any_libc && layer_on(p, ML_LAYER_LIBC) && exe) {
		n = sync_static(p, exe);
		if (n < 0)
			return n;
		added += n;
	}
	return added;
}

/* A uprobe of prog on the dynamic loader's _dl_debug_state() in p's process; NULL if it maps no loader. */
static struct bpf_link *loader_probe(struct probes *p, const struct ml_maps *maps, struct bpf_program *prog)
{
	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *m = &maps->v[i];
		struct elf_syms *syms = NULL;
		struct bpf_link *l = NULL;
		uint64_t vaddr, size, off;
		char *path = NULL;
		int fd;

		if (!m->path || m->path[0] != '/' || strncmp(ml_base_name(m->path), "ld-linux", 8))
			continue;
		fd = ml_maps__open_file(p->o.pid, m);
		if (fd < 0)
			return NULL;
		if (elf_syms__open(fd, &syms) == 0 && elf_syms__find(syms, "_dl_debug_state", &vaddr, &size) == 0 &&
		    elf_syms__vaddr_to_offset(syms, vaddr, &off) == 0 && ml_maps__attach_path(p->o.pid, m, &path) == 0)
			l = bpf_program__attach_uprobe(prog, false, p->o.pid, path, off);
		close(fd);
		free(path);
		elf_syms__free(syms);
		return l;
	}
	return NULL;
}

struct bpf_link *probes__loader_stop(struct probes *p, const struct ml_maps *maps)
{
	return loader_probe(p, maps, p->skel->progs.ldso_stop);
}

struct bpf_link *probes__loader_watch(struct probes *p, const struct ml_maps *maps)
{
	return loader_probe(p, maps, p->skel->progs.ldso_notify);
}

bool probes__retry_pending(const struct probes *p)
{
	return p->retry;
}

bool probes__libc_missing(const struct probes *p, const struct ml_maps *maps)
{
	const struct ml_mapping *exe = NULL;
	const struct object *o;

	for (size_t i = 0; i < maps->n; i++) {
		const char *path = maps->v[i].path, *base;

		if (!path || path[0] != '/' || !maps->v[i].inode)
			continue;
		if (!exe)
			exe = &maps->v[i];
		base = ml_base_name(path);
		/* A C library, or a dynamic loader that will map one: not (yet) a reason to give up. */
		if (planahead__as_libc(path) || !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld-musl", 7))
			return false;
	}
	o = exe ? lookup(p, exe) : NULL;
	return !(o && (o->layers & (1U << ML_LAYER_LIBC)));
}

void probes__started(struct probes *p)
{
	p->started = true;
}

void probes__drop_layers(struct probes *p, unsigned int mask)
{
	links__drop(p->links, mask);
	p->o.layers &= ~mask;
	p->active &= ~mask;
	for (size_t i = 0; i < p->nobjs; i++)
		p->objs[i].layers &= ~mask;
}

bool probes__pausable(const struct probes *p, unsigned int mask)
{
	return links__pausable(p->links, mask);
}

int probes__pause(struct probes *p, unsigned int mask, bool pause)
{
	return links__pause(p->links, mask, pause);
}

int probes__window(struct probes *p, unsigned int mask, bool open)
{
	return links__window(p->links, mask, open);
}

int probes__step(struct probes *p, bool on)
{
	return links__step(p->links, on);
}

unsigned int probes__n_probed(const struct probes *p, unsigned int *nfuncs)
{
	unsigned int nobj = 0;

	*nfuncs = 0;
	for (size_t i = 0; i < p->nobjs; i++) {
		if (!p->objs[i].path)
			continue;
		*nfuncs += p->objs[i].nfuncs;
		nobj++;
	}
	return nobj;
}

unsigned int probes__active_layers(const struct probes *p)
{
	return p->active;
}
