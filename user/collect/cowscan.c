/* Copies on write found by comparing a child's page table with its parent's (see cowscan.h). */
#define _GNU_SOURCE
#include "collect/cowscan.h"
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/hash.h"
#include "lib/procmaps.h"

#define PAGE_SHIFT 12
#define PM_PFN ((1ULL << 55) - 1)
#define CHUNK 4096 /* entries read at once */
#define BLOCK 512  /* pages per owner block (2 MiB) */

/* A page's state at its last read: the child's frame (hashed to 29 bits; 0 when not present) and flags. */
#define ST_SEEN (1U << 31)
#define ST_SHARED (1U << 30)  /* the parent mapped the same frame */
#define ST_COUNTED (1U << 29) /* counted as the child's copy */
#define ST_FRAME ((1U << 29) - 1)

struct cowrange {
	uint64_t lo, hi;
	uint32_t *st;	/* per page */
	uint32_t **own; /* per block of BLOCK pages, made at its first copy: the owner of each counted page */
};

struct owner_total {
	uint32_t owner;
	uint64_t bytes, first_ns;
};

struct cowchild {
	int pid, parent;
	int cfd, pfd; /* their pagemap files */
	struct cowrange *r;
	size_t nr;
	uint64_t pages; /* in all of them */
	size_t at_r;	/* where the next pass resumes: range, page within it */
	uint64_t at_p;
	struct owner_total *tot;
	size_t ntot, cap_tot;
};

struct cowscan {
	struct cowscan_opts o;
	struct cowchild *v;
	size_t n, cap;
	uint64_t cbuf[CHUNK], pbuf[CHUNK];
	uint64_t present, frames; /* this pass: entries present, and those with a frame number */
};

int cowscan__new(const struct cowscan_opts *o, struct cowscan **out)
{
	*out = calloc(1, sizeof(struct cowscan));
	if (!*out)
		return -ENOMEM;
	(*out)->o = *o;
	return 0;
}

static void child_clear(struct cowchild *ch)
{
	for (size_t i = 0; i < ch->nr; i++) {
		size_t nb = ((ch->r[i].hi - ch->r[i].lo) >> PAGE_SHIFT) / BLOCK + 1;

		for (size_t b = 0; ch->r[i].own && b < nb; b++)
			free(ch->r[i].own[b]);
		free(ch->r[i].own);
		free(ch->r[i].st);
	}
	free(ch->r);
	free(ch->tot);
	if (ch->cfd >= 0)
		close(ch->cfd);
	if (ch->pfd >= 0)
		close(ch->pfd);
}

void cowscan__free(struct cowscan *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		child_clear(&c->v[i]);
	free(c->v);
	free(c);
}

static struct cowchild *find(const struct cowscan *c, int child)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].pid == child)
			return &c->v[i];
	return NULL;
}

int cowscan__has(const struct cowscan *c, int child)
{
	return find(c, child) != NULL;
}

/* Memory a fork shares until written: anonymous or the break's heap (not [stack]: the child's own calls). */
static bool anon_writable(const struct ml_mapping *m)
{
	return (!m->path || !strcmp(m->path, "[heap]")) && m->perms[1] == 'w' && m->perms[3] == 'p';
}

/* The ranges both map as anonymous private writable memory, the first max pages of them. */
static int inherited(struct cowchild *ch, const struct ml_maps *cm, const struct ml_maps *pm, uint64_t max,
		     uint64_t *truncated)
{
	size_t cap = 0, j = 0;
	uint64_t pages = 0;

	*truncated = 0;
	for (size_t i = 0; i < cm->n; i++) {
		const struct ml_mapping *a = &cm->v[i];

		if (!anon_writable(a))
			continue;
		while (j < pm->n && pm->v[j].end <= a->start)
			j++;
		for (size_t k = j; k < pm->n && pm->v[k].start < a->end; k++) {
			uint64_t lo = a->start > pm->v[k].start ? a->start : pm->v[k].start;
			uint64_t hi = a->end < pm->v[k].end ? a->end : pm->v[k].end, np;

			if (!anon_writable(&pm->v[k]) || hi <= lo)
				continue;
			np = (hi - lo) >> PAGE_SHIFT;
			if (pages + np > max) {
				*truncated += pages + np - max;
				np = max - pages;
				hi = lo + (np << PAGE_SHIFT);
			}
			if (!np)
				continue;
			if (ml_grow(&ch->r, &cap, ch->nr + 1, sizeof(*ch->r)))
				return -ENOMEM;
			ch->r[ch->nr] = (struct cowrange){.lo = lo, .hi = hi, .st = calloc(np, sizeof(uint32_t))};
			if (!ch->r[ch->nr++].st)
				return -ENOMEM;
			pages += np;
			ch->pages = pages;
		}
	}
	return 0;
}

int cowscan__add(struct cowscan *c, int child, int parent, uint64_t *truncated)
{
	struct ml_maps cm = {0}, pm = {0};
	struct cowchild ch = {.pid = child, .parent = parent, .cfd = -1, .pfd = -1};
	int err;

	*truncated = 0;
	if (find(c, child))
		return 0;
	err = ml_maps__read(child, &cm);
	if (!err)
		err = ml_maps__read(parent, &pm);
	if (!err)
		err = inherited(&ch, &cm, &pm, c->o.max_tracked, truncated);
	ml_maps__clear(&cm);
	ml_maps__clear(&pm);
	if (!err && (ch.cfd = ml_proc_open(child, "pagemap")) < 0)
		err = ch.cfd;
	if (!err && (ch.pfd = ml_proc_open(parent, "pagemap")) < 0)
		err = ch.pfd;
	if (!err && ml_grow(&c->v, &c->cap, c->n + 1, sizeof(*c->v)))
		err = -ENOMEM;
	if (err) {
		child_clear(&ch);
		return err == -ENOENT ? -ESRCH : err;
	}
	c->v[c->n++] = ch;
	return 0;
}

void cowscan__remove(struct cowscan *c, int pid)
{
	size_t k = 0;

	for (size_t i = 0; i < c->n; i++) {
		if (c->v[i].pid == pid || c->v[i].parent == pid)
			child_clear(&c->v[i]);
		else
			c->v[k++] = c->v[i];
	}
	c->n = k;
}

/* A frame number in 29 bits: two frames reading the same by chance is one page in 2^29. */
static uint32_t frame_of(uint64_t e)
{
	return e & ML_PM_PRESENT ? (uint32_t)(ml_hash64(e & PM_PFN) & ST_FRAME) | 1U : 0;
}

static int add_bytes(struct cowchild *ch, uint32_t owner, int64_t bytes)
{
	size_t i = 0;

	while (i < ch->ntot && ch->tot[i].owner != owner)
		i++;
	if (i == ch->ntot) {
		if (bytes < 0 || ml_grow(&ch->tot, &ch->cap_tot, ch->ntot + 1, sizeof(*ch->tot)))
			return bytes < 0 ? 0 : -ENOMEM;
		ch->tot[ch->ntot++] = (struct owner_total){.owner = owner, .first_ns = ml_clock_ns(CLOCK_MONOTONIC)};
	}
	if (bytes < 0 && ch->tot[i].bytes < (uint64_t)-bytes)
		ch->tot[i].bytes = 0;
	else
		ch->tot[i].bytes += (uint64_t)bytes;
	return 0;
}

/* The owner slot of page p of r, its block made when asked to. NULL when missing (or out of memory). */
static uint32_t *owner_slot(struct cowrange *r, uint64_t p, bool make)
{
	size_t nb = ((r->hi - r->lo) >> PAGE_SHIFT) / BLOCK + 1, b = p / BLOCK;

	if (!r->own && (!make || !(r->own = calloc(nb, sizeof(*r->own)))))
		return NULL;
	if (!r->own[b] && (!make || !(r->own[b] = calloc(BLOCK, sizeof(uint32_t)))))
		return NULL;
	return &r->own[b][p % BLOCK];
}

/* One page: its child and parent entries against its state. 0 or -ENOMEM. */
static int compare(struct cowchild *ch, struct cowrange *r, uint64_t p, uint64_t ce, uint64_t pe,
		   cowscan_owner_fn owner, void *ctx)
{
	uint32_t st = r->st[p], was = st & ST_FRAME, cf = frame_of(ce), pf = frame_of(pe), *os;
	uint64_t addr = r->lo + (p << PAGE_SHIFT);
	int err = 0;

	if (st & ST_COUNTED) {
		if (cf == was)
			return 0; /* still its own copy */
		os = owner_slot(r, p, false);
		err = add_bytes(ch, os ? *os : 0, -(int64_t)(1 << PAGE_SHIFT));
		st &= ~ST_COUNTED;
	} else if ((st & ST_SEEN) && (st & ST_SHARED) && cf && cf != was && pf == was) {
		uint32_t id = owner(ctx, ch->parent, addr);

		os = owner_slot(r, p, true);
		if (!os)
			return -ENOMEM;
		*os = id;
		err = add_bytes(ch, id, 1 << PAGE_SHIFT);
		r->st[p] = ST_SEEN | ST_COUNTED | cf;
		return err;
	}
	r->st[p] = ST_SEEN | (cf && cf == pf ? ST_SHARED : 0) | cf;
	return err;
}

/* n entries of fd from page index first. 0, or a negative errno; entries past a short read are 0. */
static int read_entries(int fd, uint64_t first, uint64_t *buf, size_t n)
{
	ssize_t got = pread(fd, buf, n * sizeof(*buf), (off_t)(first * sizeof(*buf)));

	if (got < 0)
		return errno == ESRCH || errno == ENOENT ? -ESRCH : -errno;
	memset((char *)buf + got, 0, n * sizeof(*buf) - (size_t)got);
	return 0;
}

/* Up to budget pages of one child, from where its last pass stopped. Pages compared, or a negative errno. */
static long child_pass(struct cowscan *c, struct cowchild *ch, cowscan_owner_fn owner, void *ctx)
{
	uint64_t done = 0, max = c->o.max_pages < ch->pages ? c->o.max_pages : ch->pages;

	while (done < max) {
		struct cowrange *r = &ch->r[ch->at_r];
		uint64_t np = (r->hi - r->lo) >> PAGE_SHIFT, n = np - ch->at_p,
			 first = (r->lo >> PAGE_SHIFT) + ch->at_p;
		int err;

		if (n > CHUNK)
			n = CHUNK;
		if (n > max - done)
			n = max - done;
		err = read_entries(ch->cfd, first, c->cbuf, n);
		if (!err)
			err = read_entries(ch->pfd, first, c->pbuf, n);
		for (uint64_t i = 0; !err && i < n; i++) {
			c->present += !!(c->cbuf[i] & ML_PM_PRESENT);
			c->frames += (c->cbuf[i] & ML_PM_PRESENT) && (c->cbuf[i] & PM_PFN);
			err = compare(ch, r, ch->at_p + i, c->cbuf[i], c->pbuf[i], owner, ctx);
		}
		if (err)
			return err;
		done += n;
		ch->at_p += n;
		if (ch->at_p == np) {
			ch->at_p = 0;
			ch->at_r = (ch->at_r + 1) % ch->nr;
		}
	}
	return (long)done;
}

long cowscan__pass(struct cowscan *c, cowscan_owner_fn owner, void *ctx)
{
	long total = 0;

	c->present = c->frames = 0;
	for (size_t i = 0; i < c->n; i++) {
		long n = child_pass(c, &c->v[i], owner, ctx);

		if (n == -ENOMEM)
			return n;
		total += n > 0 ? n : 0; /* a child gone meanwhile: cowscan__remove comes with its exit */
	}
	return c->present && !c->frames ? -EPERM : total;
}

long cowscan__pass_child(struct cowscan *c, int child, cowscan_owner_fn owner, void *ctx)
{
	struct cowchild *ch = find(c, child);

	return ch ? child_pass(c, ch, owner, ctx) : -ESRCH;
}

void cowscan__totals(const struct cowscan *c, cowscan_total_fn fn, void *ctx)
{
	for (size_t i = 0; i < c->n; i++)
		for (size_t k = 0; k < c->v[i].ntot; k++)
			fn(ctx, c->v[i].pid, c->v[i].tot[k].owner, c->v[i].tot[k].bytes, c->v[i].tot[k].first_ns);
}
