/*
 * The per-process parts of a report: labels, the process tree, OOM kills, and resident memory against what
 * traced allocations explain of its growth.
 */
#define _GNU_SOURCE
#include "report/procview.h"
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/procmem.h"
#include "report/censusview.h"
#include "report/format.h"
#include "report/fragview.h"
#include "report/json.h"
#include "report/stackview.h"

/* " (comm, role, rank R of W, job J, container ID)": what a fleet user tells processes apart by. */
void ml_text_labels(FILE *f, struct stackview *sv, int tgid)
{
	struct ml_resolver res;
	const struct ml_labels *l;

	if (stackview__proc(sv, tgid, &res) || !res.labels || !res.labels->comm)
		return;
	l = res.labels;
	fputs(" (", f);
	ml_put_safe(f, l->comm);
	fprintf(f, ", %s", res.role ? res.role : "main");
	if (l->rank)
		fprintf(f, ", rank %s%s%s", l->rank, l->world_size ? " of " : "", l->world_size ? l->world_size : "");
	if (l->local_rank)
		fprintf(f, ", local rank %s", l->local_rank);
	if (l->job) {
		fputs(", job ", f);
		ml_put_safe(f, l->job);
	}
	if (l->container)
		fprintf(f, ", container %.12s", l->container);
	fputc(')', f);
}

/* The traced parent of procs[i] among procs, or -1. */
static ptrdiff_t proc_parent(struct stackview *sv, const struct ml_snapshot *s, size_t i)
{
	struct ml_resolver res;

	if (stackview__proc(sv, (int)s->procs[i].tgid, &res) || !res.parent)
		return -1;
	for (size_t j = 0; j < s->nprocs; j++)
		if (j != i && (int)s->procs[j].tgid == res.parent)
			return (ptrdiff_t)j;
	return -1;
}

/*
 * The snapshot's processes in tree order, each followed by its children one level deeper: order[] and depth[]
 * (n each). A child whose parent holds nothing (not in the snapshot) stands at the top level. 0 or -ENOMEM.
 */
int ml_proc_tree(struct stackview *sv, const struct ml_snapshot *s, size_t *order, unsigned int *depth)
{
	ptrdiff_t *parent = calloc(s->nprocs ? s->nprocs : 1, sizeof(*parent));
	bool *done = calloc(s->nprocs ? s->nprocs : 1, sizeof(*done));
	size_t n = 0;

	if (!parent || !done) {
		free(parent);
		free(done);
		return -ENOMEM;
	}
	for (size_t i = 0; i < s->nprocs; i++)
		parent[i] = proc_parent(sv, s, i);
	/* Roots in pid order; after each, its subtree, found by scanning for children of what was placed last. */
	for (size_t root = 0; root < s->nprocs; root++) {
		size_t start = n;

		if (done[root] || parent[root] >= 0)
			continue;
		done[root] = true;
		order[n] = root;
		depth[n++] = 0;
		for (size_t k = start; k < n;
		     k++) /* breadth within the subtree, then each child right after its parent */
			for (size_t j = s->nprocs; j-- > 0;)
				if (!done[j] && parent[j] == (ptrdiff_t)order[k]) {
					done[j] = true;
					memmove(&order[k + 2], &order[k + 1], (n - k - 1) * sizeof(*order));
					memmove(&depth[k + 2], &depth[k + 1], (n - k - 1) * sizeof(*depth));
					order[k + 1] = j;
					depth[k + 1] = depth[k] + 1;
					n++;
				}
	}
	for (size_t i = 0; i < s->nprocs; i++) /* a cycle of reused pids: never lose a process */
		if (!done[i]) {
			order[n] = i;
			depth[n++] = 0;
		}
	free(parent);
	free(done);
	return 0;
}

/* The same in JSON, on a process's object. */
static void json_labels(struct jw *w, struct stackview *sv, int tgid)
{
	struct ml_resolver res;
	const struct ml_labels *l;

	if (stackview__proc(sv, tgid, &res) || !res.labels)
		return;
	l = res.labels;
	jw_str(w, "comm", l->comm);
	jw_str(w, "role", res.role);
	jw_i64(w, "parent", res.parent);
	jw_str(w, "rank", l->rank);
	jw_str(w, "local_rank", l->local_rank);
	jw_str(w, "world_size", l->world_size);
	jw_str(w, "job", l->job);
	jw_str(w, "container", l->container);
	jw_str(w, "exit_reason", res.oom ? "oom_killed" : NULL);
	if (res.oom) {
		jw_obj_begin(w, "oom_rss");
		jw_u64(w, "anon_bytes", res.oom->anon_bytes);
		jw_u64(w, "file_bytes", res.oom->file_bytes);
		jw_u64(w, "shmem_bytes", res.oom->shmem_bytes);
		jw_obj_end(w);
	}
}

/* Text: a line for a process the OOM killer chose. */
static void text_oom_line(FILE *f, struct stackview *sv, int pid)
{
	struct ml_resolver res;
	char a[32], fb[32], sh[32];
	const char *comm;

	if (!pid || stackview__proc(sv, pid, &res) || !res.oom)
		return;
	comm = res.labels && res.labels->comm ? res.labels->comm : NULL;
	ml_fmt_bytes(a, sizeof(a), (double)res.oom->anon_bytes);
	ml_fmt_bytes(fb, sizeof(fb), (double)res.oom->file_bytes);
	ml_fmt_bytes(sh, sizeof(sh), (double)res.oom->shmem_bytes);
	fprintf(f, "OOM: pid %d", pid);
	if (comm) {
		fputs(" (", f);
		ml_put_safe(f, comm);
		fputc(')', f);
	}
	fprintf(f, " was killed by the kernel's OOM killer; its RSS then: anon %s, file %s, shmem %s\n", a, fb, sh);
}

/* Each process of the report the OOM killer chose, and the first process even when it holds nothing. */
void ml_text_oom(FILE *f, struct stackview *sv, const struct ml_snapshot *s, int root)
{
	bool root_seen = false;

	for (size_t i = 0; i < s->nprocs; i++) {
		root_seen |= (int)s->procs[i].tgid == root;
		text_oom_line(f, sv, (int)s->procs[i].tgid);
	}
	if (!root_seen)
		text_oom_line(f, sv, root);
}

/*
 * Host memory a process holds in traced allocations: what can explain its anonymous growth since attach
 * (with the free heap their blocks hold, mem_view).
 */
static uint64_t host_bytes(const struct ml_proc_total *p)
{
	return p ? p->layers[ML_LAYER_LIBC].bytes + p->layers[ML_LAYER_TORCH_CPU].bytes +
		       p->layers[ML_LAYER_CUDA_HOST].bytes
		 : 0;
}

/* Its memory against what explains it; false when its memory was never read. */
struct mem_view {
	const struct ml_procmem *now;
	int64_t growth;		  /* anonymous memory since attach */
	uint64_t explained;	  /* the part of a positive growth that traced allocations hold */
	double pct;		  /* explained / growth * 100; < 0 when growth <= 0 */
	int64_t dirty_growth;	  /* private dirty memory since attach: new pages and pages copied on write */
	uint64_t dirty_explained; /* the part of a positive one the rss layer's pages (first touches, copies) hold */
};

static bool mem_view(struct stackview *sv, int pid, const struct ml_proc_total *p, struct mem_view *out)
{
	struct ml_resolver res;
	uint64_t held = host_bytes(p), frag, brk = p ? p->brk_bytes : 0, rss;

	if (stackview__proc(sv, pid, &res) || !res.mem || !res.mem_base)
		return false;
	/*
	 * Free heap that recorded blocks hold is theirs too. It lies outside every block, but inside the break's
	 * growth that heap-growth records cover: only what exceeds those is added.
	 */
	frag = ml_frag_named(res.frag);
	held += frag > brk ? frag - brk : 0;
	/*
	 * The rss layer's first touches are the resident pages themselves, made since attach: the blocks and
	 * the free heap above lie in them (or in pages from before attach). Whichever says more, never both.
	 */
	if (p && p->layers[ML_LAYER_RSS].bytes - p->layers[ML_LAYER_RSS].cow_bytes > held)
		held = p->layers[ML_LAYER_RSS].bytes - p->layers[ML_LAYER_RSS].cow_bytes;
	out->now = res.mem;
	out->growth = (int64_t)res.mem->anon - (int64_t)res.mem_base->anon;
	out->explained = out->growth > 0 ? (held < (uint64_t)out->growth ? held : (uint64_t)out->growth) : 0;
	out->pct = out->growth > 0 ? (double)out->explained * 100 / (double)out->growth : -1;
	/* A copy on write leaves RSS as it was and makes the page private: it shows in Private_Dirty. */
	out->dirty_growth = (int64_t)res.mem->private_dirty - (int64_t)res.mem_base->private_dirty;
	rss = p ? p->layers[ML_LAYER_RSS].bytes : 0;
	out->dirty_explained =
	    out->dirty_growth > 0 ? (rss < (uint64_t)out->dirty_growth ? rss : (uint64_t)out->dirty_growth) : 0;
	return true;
}

static void json_memory(struct jw *w, struct stackview *sv, int pid, const struct ml_proc_total *p)
{
	struct mem_view m;

	if (!mem_view(sv, pid, p, &m))
		return;
	jw_obj_begin(w, "memory");
	jw_u64(w, "rss_bytes", m.now->rss);
	jw_u64(w, "anon_bytes", m.now->anon);
	jw_u64(w, "private_dirty_bytes", m.now->private_dirty);
	jw_u64(w, "pss_bytes", m.now->pss);
	jw_i64(w, "anon_growth_bytes", m.growth);
	jw_u64(w, "explained_bytes", m.explained);
	if (m.pct >= 0)
		jw_double(w, "explained_pct", m.pct);
	else
		jw_str(w, "explained_pct", NULL);
	jw_u64(w, "unexplained_bytes", m.growth > 0 ? (uint64_t)m.growth - m.explained : 0);
	jw_i64(w, "private_dirty_growth_bytes", m.dirty_growth);
	jw_u64(w, "private_dirty_explained_bytes", m.dirty_explained);
	if (m.dirty_growth > 0)
		jw_double(w, "private_dirty_explained_pct", (double)m.dirty_explained * 100 / (double)m.dirty_growth);
	else
		jw_str(w, "private_dirty_explained_pct", NULL);
	jw_u64(w, "cow_bytes", p ? p->layers[ML_LAYER_RSS].cow_bytes : 0);
	jw_obj_end(w);
}

void ml_text_memory(FILE *f, struct stackview *sv, const struct ml_snapshot *s, const int *traced, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct ml_proc_total *p = NULL;
		struct mem_view m;
		char b[5][32];

		for (size_t k = 0; k < s->nprocs && !p; k++)
			if ((int)s->procs[k].tgid == traced[i])
				p = &s->procs[k];
		if (!mem_view(sv, traced[i], p, &m))
			continue;
		ml_fmt_bytes(b[0], sizeof(b[0]), (double)m.now->rss);
		ml_fmt_bytes(b[1], sizeof(b[1]), (double)m.now->anon);
		ml_fmt_bytes(b[2], sizeof(b[2]), (double)m.growth);
		ml_fmt_bytes(b[3], sizeof(b[3]), (double)m.explained);
		ml_fmt_bytes(b[4], sizeof(b[4]), m.growth > 0 ? (double)((uint64_t)m.growth - m.explained) : 0.0);
		fprintf(f, "memory: pid %d RSS %s, anon %s (%s%s since attach)", traced[i], b[0], b[1],
			m.growth >= 0 ? "+" : "", b[2]);
		if (m.pct >= 0)
			fprintf(f, ": traced allocations hold %s of that growth (%.0f%%), %s unexplained\n", b[3],
				m.pct, b[4]);
		else
			fputs(": no growth to explain\n", f);
		if (p && p->layers[ML_LAYER_RSS].cow_bytes) {
			ml_fmt_bytes(b[3], sizeof(b[3]), (double)p->layers[ML_LAYER_RSS].cow_bytes);
			ml_fmt_bytes(b[4], sizeof(b[4]), (double)m.dirty_growth);
			fprintf(
			    f,
			    "copy-on-write: pid %d holds %s of pages copied from memory it shared with another process "
			    "(RSS unchanged); Private_Dirty %s%s since attach, %.0f%% of it in traced pages\n",
			    traced[i], b[3], m.dirty_growth >= 0 ? "+" : "", b[4],
			    m.dirty_growth > 0 ? (double)m.dirty_explained * 100 / (double)m.dirty_growth : 100.0);
		}
		{
			struct ml_resolver res;

			if (!stackview__proc(sv, traced[i], &res)) {
				ml_text_frag(f, sv, traced[i], res.frag);
				ml_text_census(f, traced[i], res.frag);
			}
		}
	}
}

void ml_json_proc(struct jw *w, struct stackview *sv, int pid, const struct ml_proc_total *p)
{
	struct ml_resolver res;

	json_labels(w, sv, pid);
	json_memory(w, sv, pid, p);
	if (!stackview__proc(sv, pid, &res)) {
		ml_json_frag(w, sv, res.frag);
		ml_json_census(w, res.frag);
	}
}
