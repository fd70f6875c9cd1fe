/* A traced process's uprobe links, kept by layer: dropped, paused and windowed as the budget samples. */
#include "attach/links.h"
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attach/uprobe_multi.h"
#include "lib/closeall.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "memleak.h"
#include "memleak.skel.h"

struct links {
	struct memleak_bpf *skel;
	int pid;
	struct bpf_link **links;
	unsigned char *link_layers; /* per link: the layers of its object's rows (links__drop) */
	size_t nlinks, caplinks;
	struct ml_mlink *mfds; /* uprobe_multi links */
	size_t nmfds, capmfds;
	unsigned int paused; /* layers whose allocation-side links are closed for now (links__pause) */
	unsigned int closed; /* layers whose links are all closed for now (links__window) */
	bool step_off;	     /* the step clock's links are closed for now (links__step) */
};

int links__new(struct memleak_bpf *skel, int pid, struct links **out)
{
	struct links *l = calloc(1, sizeof(*l));

	*out = l;
	if (!l)
		return -ENOMEM;
	l->skel = skel;
	l->pid = pid;
	return 0;
}

void links__free(struct links *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nmfds; i++)
		ml_mlink_clear(&l->mfds[i]);
	for (size_t i = 0; i < l->nlinks; i++)
		bpf_link__destroy(l->links[i]);
	free(l->mfds);
	free(l->links);
	free(l->link_layers);
	free(l);
}

/* Room for one more in two arrays kept side by side (a handle and its layers). 0 or -ENOMEM. */
static int grow_pair(void *a, size_t a_elem, unsigned char **libc, size_t n, size_t *cap)
{
	size_t c1 = *cap, c2 = *cap;

	if (ml_grow(a, &c1, n + 1, a_elem) || ml_grow(libc, &c2, n + 1, sizeof(**libc)))
		return -ENOMEM;
	*cap = c1 < c2 ? c1 : c2;
	return 0;
}

int links__add(struct links *l, struct bpf_link *link)
{
	if (grow_pair(&l->links, sizeof(*l->links), &l->link_layers, l->nlinks, &l->caplinks))
		return -ENOMEM;
	l->link_layers[l->nlinks] = 0;
	l->links[l->nlinks++] = link;
	return 0;
}

/* The link just made (fd) of a batch, with its recipe. 0 or -ENOMEM (fd not kept). */
static int push_mfd(struct links *l, int fd, int batch, const char *path, const uint64_t *offs, const uint64_t *cookies,
		    uint32_t cnt)
{
	struct ml_mlink m;

	if (ml_mlink_init(&m, fd, batch, path, offs, cookies, cnt) ||
	    ml_grow(&l->mfds, &l->capmfds, l->nmfds + 1, sizeof(*l->mfds))) {
		m.fd = -1; /* the caller closes it */
		ml_mlink_clear(&m);
		return -ENOMEM;
	}
	l->mfds[l->nmfds++] = m;
	return 0;
}

static int batch_prog_fd(const struct links *l, int b)
{
	struct bpf_program *progs[LINKS_NBATCH] = {l->skel->progs.alloc_exit, l->skel->progs.free_exit,
						   l->skel->progs.free_enter, l->skel->progs.alloc_enter,
						   l->skel->progs.alloc_enter};

	return bpf_program__fd(progs[b]);
}

static bool is_return(int b)
{
	return b == LINKS_ALLOC_RET || b == LINKS_FREE_RET;
}

int links__add_multi(struct links *l, int b, const char *path, const uint64_t *offs, const uint64_t *cookies,
		     uint32_t cnt)
{
	int fd = ml_uprobe_multi_attach(batch_prog_fd(l, b), path, offs, cookies, cnt, is_return(b), l->pid);
	int err;

	if (fd < 0) {
		/* The caller says the object is not probed, once (tolerate); the detail is -v's. */
		if (fd != -ESRCH)
			ml_info("cannot attach uprobes in %s: %s", path, strerror(-fd));
		return fd;
	}
	err = push_mfd(l, fd, b, path, offs, cookies, cnt);
	if (err)
		close(fd);
	return err;
}

struct links_mark links__mark(const struct links *l)
{
	return (struct links_mark){.nlinks = l->nlinks, .nmulti = l->nmfds};
}

void links__commit(struct links *l, struct links_mark mark, unsigned int layers)
{
	for (size_t i = mark.nlinks; i < l->nlinks; i++)
		l->link_layers[i] = (unsigned char)layers;
	for (size_t i = mark.nmulti; i < l->nmfds; i++)
		l->mfds[i].layers = l->mfds[i].batch == LINKS_STEP ? 0 : (unsigned char)layers;
	if (l->paused)
		links__pause(l, l->paused, true);
	if (l->closed)
		links__window(l, l->closed, false);
	if (l->step_off)
		links__step(l, false);
}

void links__rollback(struct links *l, struct links_mark mark)
{
	while (l->nlinks > mark.nlinks)
		bpf_link__destroy(l->links[--l->nlinks]);
	while (l->nmfds > mark.nmulti)
		ml_mlink_clear(&l->mfds[--l->nmfds]);
}

/* A link goes when every layer of its object's rows is in the mask (a library mixing layers keeps its links). */
static bool drops(unsigned char layers, unsigned int mask)
{
	return layers && !(layers & ~mask);
}

void links__drop(struct links *l, unsigned int mask)
{
	int *fds = calloc(l->nmfds ? l->nmfds : 1, sizeof(*fds));
	size_t j = 0, nfds = 0;

	for (size_t i = 0; i < l->nmfds; i++) {
		if (drops(l->mfds[i].layers, mask)) {
			/* Closed together below (or here, in turn, without memory for the list). */
			if (fds) {
				fds[nfds++] = l->mfds[i].fd;
				l->mfds[i].fd = -1;
			}
			ml_mlink_clear(&l->mfds[i]);
			continue;
		}
		l->mfds[j++] = l->mfds[i];
	}
	l->nmfds = j;
	ml_close_all(fds, nfds);
	free(fds);
	j = 0;
	for (size_t i = 0; i < l->nlinks; i++) {
		if (drops(l->link_layers[i], mask)) {
			bpf_link__destroy(l->links[i]);
			continue;
		}
		l->link_layers[j] = l->link_layers[i];
		l->links[j++] = l->links[i];
	}
	l->nlinks = j;
}

/* An allocation-side link of objects whose rows are all of the layers in mask. */
static bool pausable(const struct ml_mlink *m, unsigned int mask)
{
	return m->path && m->layers && !(m->layers & ~mask);
}

bool links__pausable(const struct links *l, unsigned int mask)
{
	for (size_t i = 0; i < l->nmfds; i++)
		if (pausable(&l->mfds[i], mask))
			return true;
	return false;
}

/*
 * Close the pausable links of mask's layers whose batch is in order[], all at once (their breakpoints go at
 * the start of each close, the waits overlap); or reopen them, in that order.
 */
static int toggle(struct links *l, unsigned int mask, bool pause, const int *order, int n)
{
	int fds[LINKS_NBATCH * 64], err = 0;
	size_t nfds = 0;

	for (int k = 0; k < n && !(err && !pause); k++) {
		for (size_t i = 0; i < l->nmfds; i++) {
			struct ml_mlink *m = &l->mfds[i];
			int fd;

			if (m->batch != order[k] || !pausable(m, mask) || (m->fd >= 0) != pause)
				continue;
			if (pause) {
				if (nfds == sizeof(fds) / sizeof(fds[0])) {
					ml_close_all(fds, nfds);
					nfds = 0;
				}
				fds[nfds++] = m->fd;
				m->fd = -1;
				continue;
			}
			fd = ml_mlink_attach(m, batch_prog_fd(l, m->batch), is_return(m->batch), l->pid);
			if (fd < 0)
				err = fd; /* no entry goes on without its return: the next resume tries again */
			else
				m->fd = fd;
		}
	}
	ml_close_all(fds, nfds);
	return err;
}

int links__pause(struct links *l, unsigned int mask, bool pause)
{
	/* Entries go first and come back last: a call entered always finds its return probe on. */
	static const int off[] = {LINKS_ALLOC, LINKS_ALLOC_RET}, on[] = {LINKS_ALLOC_RET, LINKS_ALLOC};
	int err = toggle(l, mask, pause, pause ? off : on, 2);

	if (pause)
		l->paused |= mask;
	else if (!err)
		l->paused &= ~mask;
	return err;
}

/*
 * Closing a window: the allocation links at once, the release links LINKS_GRACE_US later, so that a block
 * recorded just before the window closed is still seen released when it lives that long (the sweep finds
 * the others, except one whose address and size are handed out again meanwhile).
 */
#define LINKS_GRACE_US 20000

static void close_staggered(struct links *l, unsigned int mask)
{
	int fds[2][64];
	size_t n[2] = {0, 0};

	for (size_t i = 0; i < l->nmfds; i++) {
		struct ml_mlink *m = &l->mfds[i];
		int side = m->batch == LINKS_FREE || m->batch == LINKS_FREE_RET;

		if (!pausable(m, mask) || m->fd < 0)
			continue;
		if (n[side] == 64) {
			ml_close_all(fds[side], n[side]);
			n[side] = 0;
		}
		fds[side][n[side]++] = m->fd;
		m->fd = -1;
	}
	ml_close_staggered(fds[0], n[0], LINKS_GRACE_US, fds[1], n[1]);
}

int links__window(struct links *l, unsigned int mask, bool open)
{
	/* Releases before allocations, returns before entries: a block recorded is released in view. */
	static const int on[] = {LINKS_FREE_RET, LINKS_FREE, LINKS_ALLOC_RET, LINKS_ALLOC};
	int err;

	if (!open) {
		close_staggered(l, mask);
		l->closed |= mask;
		return 0;
	}
	err = toggle(l, mask, false, on, sizeof(on) / sizeof(on[0]));
	if (!err)
		l->closed &= ~mask;
	return err;
}

int links__step(struct links *l, bool on)
{
	int err = 0;

	for (size_t i = 0; i < l->nmfds; i++) {
		struct ml_mlink *m = &l->mfds[i];
		int fd;

		if (m->batch != LINKS_STEP || (m->fd >= 0) == on)
			continue;
		if (!on) {
			close(m->fd);
			m->fd = -1;
			continue;
		}
		fd = ml_mlink_attach(m, batch_prog_fd(l, m->batch), false, l->pid);
		if (fd < 0)
			err = err ? err : fd; /* the next window tries again */
		else
			m->fd = fd;
	}
	l->step_off = !on;
	return err;
}
