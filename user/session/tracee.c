/* One traced process: probes, Python frame decoder and symbolizer, for the first process and followers alike. */
#define _GNU_SOURCE
#include "session/tracee.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include "collect/census.h"
#include "collect/heapscan.h"
#include "collect/rsspages.h"
#include "collect/sizeweights.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "python/pyframes.h"
#include "report/format.h"
#include "symbolize/symbolizer.h"
#include "unwind/unwind.h"
#include "memleak.skel.h"

int ml_heap_track(struct memleak_bpf *skel, int pid)
{
	struct ml_heap_proc hp = {};
	__u32 key = (__u32)pid;

	return bpf_map_update_elem(bpf_map__fd(skel->maps.heap_procs), &key, &hp, BPF_ANY) ? -errno : 0;
}

/* One image of pid: tables and the Python layout first, so the first event a new probe sees has its whole stack. */
static int sync_image(int pid, struct probes *pr, struct pyframes *py, struct unwinder *uw, struct symbolizer *sym,
		      bool held)
{
	struct ml_maps maps = {};
	int n, err;

	err = ml_maps__read(pid, &maps);
	if (err)
		return err;
	if (uw && (held ? unwinder__sync_held : unwinder__sync)(uw, pid, &maps) == -ENOMEM)
		ml_notice("pid %d: out of memory building unwinding tables", pid);
	if (py && pyframes__sync(py, &maps) < 0)
		ml_notice("pid %d: out of memory looking for a Python interpreter", pid);
	n = probes__sync(pr, &maps);
	if (n >= 0 && sym)
		symbolizer__update(sym, &maps);
	ml_maps__clear(&maps);
	return n;
}

int tracee__attach(struct tracee *t, const struct tracee_env *e, const struct probes_opts *po)
{
	int err;

	/* the baseline its growth is counted from: before its probes fire */
	tracee__sample_memory(t, 1, 0, TRACEE_WALK_NOW);
	/* The rss layer (when its programs were loaded): a fork of a traced process is in already. */
	if (bpf_program__fd(e->skel->progs.rss_page_alloc) >= 0 && ml_rss_track(e->skel, t->pid))
		ml_notice("pid %d: the rss layer cannot trace it: %s", t->pid, strerror(errno));
	err = probes__new(e->skel, po, &t->probes);
	if (!err && e->python)
		err = pyframes__new(e->skel, t->pid, &t->py);
	return err ? err : sync_image(t->pid, t->probes, t->py, e->uw, NULL, false);
}

int tracee__symbolize(struct tracee *t, const struct tracee_env *e)
{
	int err = symbolizer__new(t->pid, e->debug_dir, &t->sym);

	if (!err)
		symbolizer__refresh(t->sym);
	return err;
}

int tracee__sync(struct tracee *t, const struct tracee_env *e)
{
	return t->probes ? sync_image(t->pid, t->probes, t->py, e->uw, t->sym, false) : 0;
}

int tracee__sync_held(struct tracee *t, const struct tracee_env *e)
{
	return t->probes ? sync_image(t->pid, t->probes, t->py, e->uw, t->sym, true) : 0;
}

/* The heap walk and the census it points at, both gone: the walk never outlives its census. */
static void forget_heap(struct tracee *t)
{
	heapfrag__clear(&t->frag);
	t->frag_ok = false;
	census__free(t->census);
	t->census = NULL;
}

int tracee__reprobe(struct tracee *t, const struct tracee_env *e, const struct probes_opts *po)
{
	struct probes *np = NULL;
	struct pyframes *npy = NULL;
	int n;

	/* The new image's loader watched before its maps are read: the C library it maps after that read is
	 * then reported (watched after, it was missed in 3 runs of 5, and probed at the next full scan, 15 s on). */
	if (t->ld_watch)
		tracee__watch_loader(t);
	n = probes__new(e->skel, po, &np);
	if (!n && e->python)
		n = pyframes__new(e->skel, t->pid, &npy);
	if (!n)
		n = sync_image(t->pid, np, npy, e->uw, t->sym, false);
	if (n < 0) {
		probes__free(np);
		pyframes__free(npy);
		return n;
	}
	probes__free(t->probes);
	t->probes = np;
	pyframes__free(t->py);
	t->py = npy;
	/* A new address space: its vtables are read again, and the old heap's walk, which points at the census,
	 * describes nothing there now (kept, a report after a pyenv shim's exec read the freed census). */
	forget_heap(t);
	tracee__relabel(t); /* a new comm, maybe a new environment; the role stays */
	return 0;
}

void tracee__watch_loader(struct tracee *t)
{
	struct ml_maps maps = {};

	bpf_link__destroy(t->ld_watch);
	t->ld_watch = NULL;
	if (!t->probes || ml_maps__read(t->pid, &maps))
		return;
	t->ld_watch = probes__loader_watch(t->probes, &maps);
	ml_maps__clear(&maps);
}

void tracee__relabel(struct tracee *t)
{
	ml_labels__clear(&t->labels);
	if (ml_labels__read(t->pid, &t->labels) == -ENOMEM)
		ml_notice("pid %d: out of memory reading its labels", t->pid);
}

void tracee__label(struct tracee *t, const struct tracee *parent)
{
	const char *mine, *theirs;

	tracee__relabel(t);
	mine = t->labels.rank;
	theirs = parent ? parent->labels.rank : NULL;
	t->role = !parent || (mine && (!theirs || strcmp(mine, theirs))) ? "main" : "worker";
}

bool tracee__oom_chosen(struct tracee *t, const struct ml_oom_event *o)
{
	char a[32], f[32], sh[32];

	if (t->oom.killed)
		return false;
	t->oom = (struct ml_oom){
	    .killed = true, .anon_bytes = o->anon_bytes, .file_bytes = o->file_bytes, .shmem_bytes = o->shmem_bytes};
	ml_fmt_bytes(a, sizeof(a), (double)o->anon_bytes);
	ml_fmt_bytes(f, sizeof(f), (double)o->file_bytes);
	ml_fmt_bytes(sh, sizeof(sh), (double)o->shmem_bytes);
	ml_notice("pid %d was chosen by the kernel's OOM killer (RSS then: anon %s, file %s, shmem %s): its report "
		  "follows",
		  t->pid, a, f, sh);
	return true;
}

void ml_protect_from_oom(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, "-1000", 5) != 5)
		ml_info("cannot keep memleak-ai out of the OOM killer's choice: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

bool tracee__rollup_paced(const struct tracee *t)
{
	return t->rollup_ns >= TRACEE_ROLLUP_CHEAP_NS && !(t->role && !strcmp(t->role, "worker"));
}

void tracee__sample_memory(struct tracee *t, double pace, uint64_t others_ns, enum tracee_walk how)
{
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC);
	struct ml_procmem m = t->mem, r;

	/* An exited process keeps its last reading: the report after its exit shows what it had. */
	if (ml_procmem__read_statm(t->pid, &m))
		return;
	if (!tracee__rollup_paced(t) || !t->mem_ok || how == TRACEE_WALK_NOW || how == TRACEE_WALK_LAST ||
	    (how == TRACEE_WALK_PACED && now >= t->rollup_next_ns)) {
		if (ml_procmem__read(t->pid, &r))
			return;
		m.private_dirty = r.private_dirty;
		m.pss = r.pss;
		t->rollup_ns = ml_clock_ns(CLOCK_MONOTONIC) - now;
		t->rollup_next_ns = now + (uint64_t)((double)(t->rollup_ns + others_ns) * (pace > 1 ? pace : 1));
	}
	t->mem = m;
	t->mem_ok = true;
	t->mem_ns = now;
	if (!t->mem_base_ok) {
		t->mem_base = t->mem;
		t->mem_base_ok = true;
	}
}

/* Whether its C heap has glibc's chunk layout (glibc, or a static build's); false while no heap is known. */
static bool glibc_chunks(const struct tracee *t)
{
	const char *heap = t->probes ? probes__heap(t->probes) : NULL;

	return heap && (!strcmp(heap, "glibc") || !strncmp(heap, "static", 6));
}

/* Whether its C heap is known and another allocator's (jemalloc, tcmalloc): no chunk headers to read. */
static bool other_heap(const struct tracee *t)
{
	return t->probes && probes__heap(t->probes) && !glibc_chunks(t);
}

void tracee__scan_heap(struct tracee *t, struct ledger *l, double pace, uint64_t others_ns, enum tracee_walk how)
{
	uint64_t now = ml_clock_ns(CLOCK_MONOTONIC);
	bool force = how == TRACEE_WALK_NOW || how == TRACEE_WALK_LAST;
	int err;

	/* glibc's chunk layout only; an exited process keeps its last reading, like its memory. */
	if (!glibc_chunks(t))
		return;
	/* The first walks come at each report, so that the census can call a type growing by the third; and
	 * so do those until three walks have counted the vtables a slow first read added late. */
	if (t->frag_ok && !force && (how == TRACEE_WALK_EARLY || now < t->frag_next_ns) &&
	    !(t->census && (census__walks(t->census) < TRACEE_EARLY_WALKS || !census__settled(t->census))))
		return;
	if (!t->census && census__new(t->pid, &t->census))
		ml_info("pid %d: no heap census: %s", t->pid, strerror(ENOMEM));
	/* Rows held for a walk (force) that the last one could not cover, capped: a wider budget each time, or a
	 * heap past it never has its newest range walked, and a bystander's growth there reads as a leak. */
	err = heapfrag__scan(&t->frag, t->pid, t->census, force && t->frag.capped ? t->frag.widened + 1 : 0);
	/*
	 * A walk the heap changed under counts nothing (the size weights and census keep the last whole one's). The
	 * final report's is tried again at once; while the C heap is weighed by size, a paced one at the next
	 * report rather than a paced interval on, TRACEE_BROKEN_RETRIES times in a row. A C program freeing
	 * 400,000 blocks a second broke 4 walks in a row under ASan, and its leak was weighed at a walk 6 s old:
	 * half of what it kept. A PyTorch job's walks (90-300 ms) are not retried between reports: a 0.5-s report
	 * came late, and the next on its heels.
	 */
	for (unsigned int i = 0;
	     how == TRACEE_WALK_LAST && err != -ESRCH && t->frag.broken && i < TRACEE_BROKEN_RETRIES; i++)
		err = heapfrag__scan(&t->frag, t->pid, t->census, 0);
	t->broken_walks = t->frag.broken && t->size_tried_ns ? t->broken_walks + 1 : 0;
	t->frag_next_ns = now + (t->broken_walks && t->broken_walks <= TRACEE_BROKEN_RETRIES
				     ? 0
				     : (uint64_t)((double)(t->frag.scan_ns + others_ns) * (pace > 1 ? pace : 1)));
	if (err == -ESRCH)
		return;
	t->frag_ok = !err && !heapfrag__attribute(&t->frag, l, t->pid);
	if (err && err != -ESRCH)
		ml_info("pid %d: cannot read its C heap's chunks: %s", t->pid, strerror(-err));
}

static bool size_growth(void *ctx, uint64_t chunk, int64_t *growth)
{
	return census__size_growth(ctx, chunk, growth);
}

static bool anon_growth(void *ctx, uint64_t chunk, int64_t *growth)
{
	const struct tracee *t = ctx;

	*growth = (int64_t)(t->mem.anon - t->size_base_anon);
	return t->mem_ok;
}

/* Not glibc: no chunks to count, so the process weighs whole, by its anonymous memory since a reading. */
static bool whole_due(struct tracee *t, uint64_t since_ns, struct sizeweights_proc *out)
{
	if (!t->mem_ok || t->mem_ns == t->size_weighed_ns || t->mem_ns < since_ns)
		return false;
	t->size_weighed_ns = t->mem_ns;
	if (t->size_base_ns < since_ns) {
		t->size_base_ns = t->mem_ns;
		t->size_base_anon = t->mem.anon;
		return false;
	}
	*out = (struct sizeweights_proc){.tgid = t->pid,
					 .whole = true,
					 .since_ns = t->size_base_ns,
					 .until_ns = t->mem_ns,
					 .growth = anon_growth,
					 .ctx = t};
	return true;
}

void tracee__size_base(struct tracee *t, struct ledger *l, uint64_t since_ns)
{
	if (!since_ns || t->size_tried_ns == since_ns || t->size_base_ns >= since_ns ||
	    !(glibc_chunks(t) || other_heap(t)) || probes__active_layers(t->probes) & (1U << ML_LAYER_TORCH_CPU))
		return;
	t->size_tried_ns = since_ns; /* once a start: a heap too large to walk whole is not walked each scan */
	if (other_heap(t))
		tracee__sample_memory(t, 1, 0, TRACEE_WALK_NOW);
	else
		tracee__scan_heap(t, l, 1, 0, TRACEE_WALK_NOW);
}

bool tracee__size_due(struct tracee *t, struct sizeweights *sw, uint64_t since_ns, struct sizeweights_proc *out)
{
	if (since_ns && other_heap(t))
		return whole_due(t, since_ns, out);
	if (!since_ns || !t->census) {
		t->size_base_ns = 0;
		t->size_tried_ns = 0;
		sizeweights__drop(sw, t->pid);
		return false;
	}
	if (t->frag.walked_ns == t->size_weighed_ns || t->frag.walked_ns < since_ns)
		return false;
	/* A walk cut short counts part of the heap: the weights stay as the last whole one set them. */
	if (!t->frag_ok || t->frag.capped || t->frag.broken) {
		ml_dbg("pid %d: its C heap's walk was cut short (%s): no size weights from it", t->pid,
		       !t->frag_ok	? "unreadable"
		       : t->frag.capped ? "capped"
					: "changed under it");
		return false;
	}
	t->size_weighed_ns = t->frag.walked_ns;
	if (t->size_base_ns < since_ns) {
		if (!census__size_base(t->census))
			t->size_base_ns = t->frag.walked_ns;
		return false;
	}
	*out = (struct sizeweights_proc){.tgid = t->pid,
					 .since_ns = t->size_base_ns,
					 .until_ns = t->frag.walked_ns,
					 .growth = size_growth,
					 .ctx = t->census};
	return true;
}

void tracee__resolver(const struct tracee *t, struct ml_resolver *out)
{
	out->frag = t->frag_ok ? &t->frag : NULL;
	out->mem = t->mem_ok ? &t->mem : NULL;
	out->mem_base = t->mem_base_ok ? &t->mem_base : NULL;
	out->labels = &t->labels;
	out->oom = t->oom.killed ? &t->oom : NULL;
	out->role = t->role;
	out->parent = t->parent;
	out->sym = t->sym;
	out->py = t->py;
	out->heap = t->probes ? probes__heap(t->probes) : NULL;
}

bool tracee__exited(const struct tracee *t)
{
	struct pollfd pfd = {.fd = t->pidfd, .events = POLLIN};

	return t->pidfd >= 0 && poll(&pfd, 1, 0) == 1;
}

void tracee__release(struct tracee *t, const struct tracee_env *e)
{
	bpf_link__destroy(t->ld_watch);
	t->ld_watch = NULL;
	probes__free(t->probes);
	pyframes__free(t->py);
	symbolizer__free(t->sym);
	if (t->pidfd >= 0)
		close(t->pidfd);
	unwinder__forget(e->uw, t->pid);
	ml_rss_untrack(e->skel, t->pid);
	ml_labels__clear(&t->labels);
	forget_heap(t);
	t->probes = NULL;
	t->py = NULL;
	t->sym = NULL;
	t->pidfd = -1;
}
