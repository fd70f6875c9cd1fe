/* Probe attachment: finds the allocator table's functions in the target's mapped objects and attaches to them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "allocators.h"
#include "elfsym.h"
#include "log.h"
#include "probes.h"
#include "memleak.skel.h"

struct probed_object {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char *path;
	unsigned int nfuncs;
};

struct probes {
	struct memleak_bpf *skel;
	int pid;
	struct bpf_link **links;
	size_t nlinks, caplinks;
	struct probed_object *objs;
	size_t nobjs, capobjs;
};

struct probes *probes__new(struct memleak_bpf *skel, int pid)
{
	struct probes *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->skel = skel;
	p->pid = pid;
	return p;
}

void probes__free(struct probes *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nlinks; i++)
		bpf_link__destroy(p->links[i]);
	for (size_t i = 0; i < p->nobjs; i++)
		free(p->objs[i].path);
	free(p->links);
	free(p->objs);
	free(p);
}

static bool is_libc_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "libc.so", 7) || !strncmp(base, "libc-2.", 7) || !strncmp(base, "ld-musl-", 8) ||
	       !strncmp(base, "libc.musl-", 10);
}

static bool known(const struct probes *p, const struct ml_mapping *m)
{
	for (size_t i = 0; i < p->nobjs; i++)
		if (p->objs[i].inode == m->inode && p->objs[i].dev_major == m->dev_major &&
		    p->objs[i].dev_minor == m->dev_minor)
			return true;
	return false;
}

static int push_link(struct probes *p, struct bpf_link *l)
{
	if (p->nlinks == p->caplinks) {
		size_t cap = p->caplinks ? p->caplinks * 2 : 32;
		struct bpf_link **n = realloc(p->links, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		p->links = n;
		p->caplinks = cap;
	}
	p->links[p->nlinks++] = l;
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
		prog = p->skel->progs.free_enter;
	else
		prog = ret ? p->skel->progs.alloc_exit : p->skel->progs.alloc_enter;
	l = bpf_program__attach_uprobe_opts(prog, p->pid, path, off, &uo);
	if (!l) {
		err = -errno;
		ml_err("cannot attach %s to %s in %s: %s", ret ? "uretprobe" : "uprobe", a->func, path, strerror(-err));
		return err;
	}
	err = push_link(p, l);
	if (err)
		bpf_link__destroy(l);
	return err;
}

/* Attach every libc row that the object defines. Returns the number of functions probed or -errno. */
static int attach_object(struct probes *p, const struct ml_mapping *m, bool need_all_required)
{
	struct elf_syms *syms = NULL;
	char *path = NULL;
	int fd, err, n = 0;
	size_t first_link = p->nlinks;

	fd = ml_maps__open_file(p->pid, m);
	if (fd < 0)
		return fd;
	err = elf_syms__open(fd, &syms);
	close(fd);
	if (err)
		return err;
	err = ml_maps__attach_path(p->pid, m, &path);
	if (err)
		goto out;
	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		const struct ml_allocator *a = &ml_allocators[row];
		uint64_t vaddr, size, off;

		if (a->lib != ML_LIB_LIBC)
			continue;
		if (elf_syms__find(syms, a->func, &vaddr, &size) || elf_syms__vaddr_to_offset(syms, vaddr, &off)) {
			if (a->required && need_all_required) {
				err = -ENOENT;
				goto out;
			}
			ml_info("%s: no %s, not probed", m->path, a->func);
			continue;
		}
		err = attach_one(p, path, off, row, false);
		if (!err && a->spec.kind != ML_KIND_FREE)
			err = attach_one(p, path, off, row, true);
		if (err)
			goto out;
		n++;
	}
	err = n;
out:
	if (err < 0) {
		while (p->nlinks > first_link)
			bpf_link__destroy(p->links[--p->nlinks]);
	}
	free(path);
	elf_syms__free(syms);
	return err;
}

static int remember(struct probes *p, const struct ml_mapping *m, unsigned int nfuncs)
{
	struct probed_object *o;

	if (p->nobjs == p->capobjs) {
		size_t cap = p->capobjs ? p->capobjs * 2 : 8;
		struct probed_object *n = realloc(p->objs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		p->objs = n;
		p->capobjs = cap;
	}
	o = &p->objs[p->nobjs];
	o->path = strdup(m->path);
	if (!o->path)
		return -ENOMEM;
	o->dev_major = m->dev_major;
	o->dev_minor = m->dev_minor;
	o->inode = m->inode;
	o->nfuncs = nfuncs;
	p->nobjs++;
	return 0;
}

int probes__sync(struct probes *p, const struct ml_maps *maps)
{
	const struct ml_mapping *exe = NULL;
	bool any_libc = false;
	int added = 0, n;

	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *m = &maps->v[i];

		if (!m->path || m->path[0] != '/' || !m->inode)
			continue;
		if (!exe)
			exe = m; /* the kernel maps the executable first */
		if (!is_libc_name(m->path))
			continue;
		any_libc = true;
		if (known(p, m))
			continue;
		n = attach_object(p, m, true);
		if (n == -ENOENT) {
			ml_notice("%s looks like a C library but lacks malloc/free symbols; not probed", m->path);
			continue;
		}
		if (n < 0)
			return n;
		if (remember(p, m, (unsigned int)n))
			return -ENOMEM;
		added++;
	}
	/* A statically linked program carries its own allocator: probe the executable if it has the symbols. */
	if (!any_libc && p->nobjs == 0 && exe) {
		n = attach_object(p, exe, true);
		if (n == -ENOENT || n == -ENOEXEC)
			return -ENOENT;
		if (n < 0)
			return n;
		if (remember(p, exe, (unsigned int)n))
			return -ENOMEM;
		added++;
	}
	return added;
}

unsigned int probes__n_objects(const struct probes *p) { return (unsigned int)p->nobjs; }
unsigned int probes__n_links(const struct probes *p) { return (unsigned int)p->nlinks; }

const char *probes__object(const struct probes *p, unsigned int i, unsigned int *nfuncs)
{
	if (i >= p->nobjs)
		return NULL;
	if (nfuncs)
		*nfuncs = p->objs[i].nfuncs;
	return p->objs[i].path;
}
