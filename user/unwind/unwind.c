/*
 * Unwinding tables in BPF maps. A file's rows are converted to the 8-byte wire rows (struct ml_urow) and
 * placed in the shared arrays (uwstore.c). Files are known by device and inode, so processes that map the
 * same library share its table, given back when the last process mapping the file forgets it. A sync builds the tables
 * that allocations come from at once, and what else fits in UNWIND_SYNC_MS; a thread builds the rest, and each
 * process's list is published again as they arrive. Meanwhile their frames are followed by frame pointer, and walks cut
 * short there are merged into their complete stacks once these come (collect/cutmerge.c).
 */
#define _GNU_SOURCE
#include "unwind/unwind.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "memleak.h"
#include "unwind/uwbuild.h"
#include "unwind/uwparse.h"
#include "unwind/uwstore.h"
#include "memleak.skel.h"

struct uw_file {
	bool ok;      /* has a table in the maps; a file without one stays known so it is not parsed again */
	bool pending; /* known, its table not built yet: queued for the builder thread */
	bool debug_file;
	uint8_t rank; /* build order (file_ranks) */
	int fd, pid;  /* pending: the file opened when first seen (-1 once the builder took it), a process mapping it */
	uint32_t job; /* pending: which queueing, so that a table built for an evicted file is not placed */
	uint64_t size; /* the file's size: the smaller first within a rank */
	uint64_t dev, ino;
	char *path;	    /* NULL: the slot is free */
	struct uw_place at; /* ok: where its table is */
	uint64_t lo;	    /* ELF address of table offset 0 */
	uint64_t build_ns;
	uint32_t users;
	struct uw_seg segs[UW_MAX_SEGS];
	size_t nsegs;
};

/* One executable file mapping of a process, kept to publish its list again as tables arrive. */
struct uw_map {
	uint32_t slot;
	uint64_t start, end, offset;
};

struct uw_proc {
	int pid;
	uint32_t *files; /* slots it maps, each once */
	size_t n;
	struct uw_map *maps;
	size_t nmaps;
	struct ml_umap *written; /* the mapping list last written to the kernel, n_written entries */
	uint32_t n_written;
};

struct unwinder {
	int umaps_fd;
	struct uwstore *store;
	uint32_t rows_cap; /* the most --unwind-mem allows */
	struct uw_file files[ML_UW_FILES];
	struct uw_proc *procs;
	size_t nprocs, capprocs;
	uint32_t gen; /* the last ml_umaps.gen written */
	uint64_t no_room;
	bool warned_room, warned_maps;
	char *debug_dir;
	pthread_mutex_t lock;	 /* the whole state: syncs and reports on the main thread, the builder beside them */
	pthread_cond_t idle;	 /* unwinder__wait's: nothing pending */
	struct uwbuild *builder; /* NULL: every table built at once */
	bool background;
	uint64_t sync_ns; /* how long a sync builds before the files past the first rank go to the builder */
	uint32_t jobs;
	struct unwind_loading loading;
	uint64_t queued_ns; /* when the first of the files pending now was queued */
};

void unwind_capacity(uint64_t mem, uint32_t *rows, uint32_t *index)
{
	uint64_t r = mem / 5 * 4 / sizeof(struct ml_urow), i = mem / 5 / UW_IDX_STRIDE;

	*rows = r > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)(r ? r : 1);
	*index = i > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)(i ? i : 1);
}

static bool builder_take(void *ctx, struct uwbuild_job *j);
static void builder_built(void *ctx, const struct uwbuild_job *j, int err, struct uw_parsed *p);

int unwinder__new(struct memleak_bpf *skel, const struct unwind_opts *o, struct unwinder **out)
{
	struct unwinder *u = calloc(1, sizeof(*u));
	uint32_t index_cap;
	int err = -ENOMEM;

	*out = NULL;
	if (!u)
		goto fail;
	u->umaps_fd = bpf_map__fd(skel->maps.umaps);
	unwind_capacity(o->mem, &u->rows_cap, &index_cap);
	if (o->debug_dir && !(u->debug_dir = strdup(o->debug_dir)))
		goto fail;
	if (uwstore__new(bpf_map__fd(skel->maps.urows), bpf_map__fd(skel->maps.uindex), u->rows_cap, index_cap,
			 &u->store))
		goto fail;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->idle, NULL);
	u->loading.all_loaded_s = -1;
	u->sync_ns = (uint64_t)o->sync_ms * 1000000;
	if (o->background) {
		struct uwbuild_ops ops = {builder_take, builder_built, u};

		err = uwbuild__new(&u->lock, u->debug_dir, &ops, &u->builder);
		if (err)
			goto fail;
		u->background = true;
	}
	*out = u;
	return 0;
fail:
	unwinder__free(u);
	return err;
}

void unwinder__free(struct unwinder *u)
{
	if (!u)
		return;
	uwbuild__free(u->builder);
	uwstore__free(u->store);
	for (size_t i = 0; i < ML_UW_FILES; i++) {
		free(u->files[i].path);
		if (u->files[i].pending && u->files[i].fd >= 0)
			close(u->files[i].fd);
	}
	for (size_t i = 0; i < u->nprocs; i++) {
		free(u->procs[i].files);
		free(u->procs[i].maps);
		free(u->procs[i].written);
	}
	free(u->procs);
	free(u->debug_dir);
	free(u);
}

/* A table that found no room: counted, said once, and its file unwound by frame pointers. */
static void no_room(struct unwinder *u, const char *path, size_t n)
{
	u->no_room++;
	if (!u->warned_room)
		ml_notice("no room left for the unwinding table of %s (%zu rows; raise --unwind-mem): its frames fall "
			  "back to frame pointers",
			  path, n);
	u->warned_room = true;
}

/* A parsed table into the maps for f; f->ok tells whether it got one. Frees p's rows. */
static void install(struct unwinder *u, struct uw_file *f, struct uw_parsed *p)
{
	uint32_t nrows = p->nrows, npages = p->npages;

	memcpy(f->segs, p->segs, sizeof(f->segs));
	f->nsegs = p->nsegs;
	f->build_ns = p->build_ns;
	f->debug_file = p->debug_file;
	if (p->conv && uwstore__place(u->store, p->conv, nrows, p->shift, npages, &f->at))
		no_room(u, f->path, p->n_src);
	else if (p->conv)
		f->ok = true;
	if (f->ok)
		ml_info("unwinding table for %s: %u rows, %u index entries, %llu KiB, built in %.1f ms%s", f->path,
			nrows, npages + 1, (unsigned long long)(uwstore__bytes(nrows, npages + 1) >> 10),
			p->build_ns / 1e6, f->debug_file ? " (with a separate debug file)" : "");
	f->lo = p->lo;
	free(p->conv);
	p->conv = NULL;
}

/* The file's table built now, on the caller's thread. -ENOMEM only is an error. */
static int build_now(struct unwinder *u, struct uw_file *f)
{
	struct uw_parsed p;
	int err = uw_parse(u->debug_dir, f->pid, f->fd, f->path, NULL, &p);

	if (!err)
		install(u, f, &p);
	free(p.conv);
	return err;
}

/* A pending file built or given up: its fd closed, and the queue's count and times kept. */
static void done_pending(struct unwinder *u, struct uw_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	f->pending = false;
	if (--u->loading.pending)
		return;
	u->loading.all_loaded_s = (double)(ml_clock_ns(CLOCK_MONOTONIC) - u->queued_ns) / 1e9;
	pthread_cond_broadcast(&u->idle);
}

static void evict(struct unwinder *u, uint32_t slot)
{
	struct uw_file *f = &u->files[slot];

	if (f->ok) {
		ml_info("unwinding table for %s evicted: no traced process maps it", f->path);
		uwstore__release(u->store, &f->at);
	}
	if (f->pending)
		done_pending(u, f);
	free(f->path);
	memset(f, 0, sizeof(*f));
}

/*
 * Build order: the process's executable and the files allocations come from or through first (rank 0 always at
 * once, with the probes' libraries), then PyTorch's (rank 1), then the rest (2); the smaller first within a rank.
 */
static const struct {
	const char *prefix;
	uint8_t rank;
} file_ranks[] = {
    {"libc.so", 0},	{"libc-", 0},	  {"ld-linux", 0},	  {"libstdc++", 0},    {"libpython", 0},
    {"python", 0},	{"libc10", 0},	  {"libtorch_python", 1}, {"libtorch_cpu", 1}, {"libtorch_cuda", 1},
    {"libtorch.so", 1}, {"libcudart", 1}, {"libcuda.so", 1},
};

static uint8_t file_rank(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (size_t i = 0; i < sizeof(file_ranks) / sizeof(file_ranks[0]); i++)
		if (!strncmp(base, file_ranks[i].prefix, strlen(file_ranks[i].prefix)))
			return file_ranks[i].rank;
	return 2;
}

/*
 * The slot of the file behind a mapping; a file not seen before takes a free slot, opened as pid maps it and
 * pending (*fresh). -ENOSPC when every slot is taken.
 */
static int file_slot(struct unwinder *u, int pid, const struct ml_mapping *mp, uint32_t *out, bool *fresh)
{
	uint64_t dev = ((uint64_t)mp->dev_major << 32) | mp->dev_minor;
	int free_slot = -1;
	struct stat st;

	*fresh = false;
	for (uint32_t i = 0; i < ML_UW_FILES; i++) {
		if (u->files[i].path && u->files[i].dev == dev && u->files[i].ino == mp->inode) {
			*out = i;
			return 0;
		}
		if (!u->files[i].path && free_slot < 0)
			free_slot = (int)i;
	}
	if (free_slot < 0)
		return -ENOSPC;
	struct uw_file *f = &u->files[free_slot];

	f->path = strdup(mp->path);
	if (!f->path)
		return -ENOMEM;
	f->dev = dev;
	f->ino = mp->inode;
	f->pid = pid;
	f->rank = ml_maps__is_exe(pid, mp) ? 0 : file_rank(mp->path); /* a program's allocations come from its code */
	f->fd = ml_maps__open_file(pid, mp);
	if (f->fd >= 0) { /* else known without a table, as one that has none */
		f->size = fstat(f->fd, &st) ? 0 : (uint64_t)st.st_size;
		f->pending = true;
		f->job = ++u->jobs;
		if (!u->loading.pending++)
			u->queued_ns = ml_clock_ns(CLOCK_MONOTONIC);
		u->loading.queued++;
		*fresh = true;
	}
	*out = (uint32_t)free_slot;
	return 0;
}

/* The table offset of a runtime pc in this mapping: pc - adj. */
static bool mapping_adj(const struct uw_file *f, const struct uw_map *mp, uint64_t *adj)
{
	for (size_t i = 0; i < f->nsegs; i++) {
		const struct uw_seg *s = &f->segs[i];
		uint64_t pg_off = s->offset & ~0xfffULL;

		if (mp->offset < pg_off || mp->offset >= s->offset + s->filesz)
			continue;
		/* ELF address of the mapping's first byte, then the load bias */
		*adj = mp->start - (s->vaddr - (s->offset - mp->offset)) + f->lo;
		return true;
	}
	return false;
}

static struct uw_proc *proc_get(struct unwinder *u, int pid, bool create)
{
	struct uw_proc *n;

	for (size_t i = 0; i < u->nprocs; i++)
		if (u->procs[i].pid == pid)
			return &u->procs[i];
	if (!create)
		return NULL;
	if (ml_grow(&u->procs, &u->capprocs, u->nprocs + 1, sizeof(*u->procs)))
		return NULL;
	n = &u->procs[u->nprocs++];
	memset(n, 0, sizeof(*n));
	n->pid = pid;
	return n;
}

/* Make the process's file set `files`, adjusting the users of each file; evict the unused. */
static void set_files(struct unwinder *u, struct uw_proc *p, uint32_t *files, size_t n)
{
	for (size_t i = 0; i < n; i++)
		u->files[files[i]].users++;
	for (size_t i = 0; i < p->n; i++)
		u->files[p->files[i]].users--;
	for (size_t i = 0; i < p->n; i++)
		if (u->files[p->files[i]].path && !u->files[p->files[i]].users)
			evict(u, p->files[i]);
	free(p->files);
	p->files = files;
	p->n = n;
}

/*
 * The process's mapping list, those of its mappings whose table is in, to BPF. Written only when changed: a new
 * list has a new gen, which drops the rules the kernel cached. The number listed, -ENOMEM or -errno.
 */
static int publish(struct unwinder *u, struct uw_proc *p)
{
	struct ml_umaps *um = calloc(1, sizeof(*um));
	uint32_t key = (uint32_t)p->pid;
	struct ml_umap *copy;
	int err = 0;

	if (!um)
		return -ENOMEM;
	for (size_t i = 0; i < p->nmaps; i++) {
		const struct uw_file *f = &u->files[p->maps[i].slot];
		uint64_t adj;

		if (!f->ok || !mapping_adj(f, &p->maps[i], &adj))
			continue;
		if (um->n == ML_UW_MAPS) {
			if (!u->warned_maps)
				ml_notice("pid %d maps over %d executable files; the rest unwind by frame pointers",
					  p->pid, ML_UW_MAPS);
			u->warned_maps = true;
			break;
		}
		um->m[um->n++] = (struct ml_umap){.start = p->maps[i].start,
						  .end = p->maps[i].end,
						  .adj = adj,
						  .row_base = f->at.row_base,
						  .n_rows = f->at.n_rows,
						  .idx_base = f->at.idx_base,
						  .n_slots = f->at.n_idx - 1,
						  .shift = f->at.shift};
	}
	if (p->written && um->n == p->n_written && !(um->n && memcmp(um->m, p->written, um->n * sizeof(um->m[0]))))
		goto out;
	copy = malloc((um->n ? um->n : 1) * sizeof(*copy));
	if (!copy) {
		err = -ENOMEM;
		goto out;
	}
	u->gen = u->gen == UINT32_MAX ? 1 : u->gen + 1;
	um->gen = u->gen;
	if (bpf_map_update_elem(u->umaps_fd, &key, um, BPF_ANY)) {
		err = -errno;
		free(copy);
		goto out;
	}
	memcpy(copy, um->m, um->n * sizeof(*copy));
	free(p->written);
	p->written = copy;
	p->n_written = um->n;
out:
	err = err ? err : (int)um->n;
	free(um);
	return err;
}

static int cmp_order(const void *a, const void *b, void *arg)
{
	const struct uw_file *fa = &((struct unwinder *)arg)->files[*(const uint32_t *)a];
	const struct uw_file *fb = &((struct unwinder *)arg)->files[*(const uint32_t *)b];

	if (fa->rank != fb->rank)
		return fa->rank < fb->rank ? -1 : 1;
	return fa->size < fb->size ? -1 : fa->size > fb->size;
}

/*
 * The files a sync saw first: the first rank's built now, then the others of at most UW_SYNC_MAX_BYTES in order
 * while the sync's time (budget_ns) lasts (a larger one can take a second: libtorch_cpu.so's 985 ms); the rest go
 * to the builder thread (all built now without one). -ENOMEM only is an error.
 */
#define UW_SYNC_MAX_BYTES (8ULL << 20)
static int build_fresh(struct unwinder *u, uint32_t *fresh, size_t n, uint64_t budget_ns)
{
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC);
	bool queued = false;
	int err = 0;

	qsort_r(fresh, n, sizeof(*fresh), cmp_order, u);
	for (size_t i = 0; i < n && !err; i++) {
		struct uw_file *f = &u->files[fresh[i]];

		if (u->background && f->rank &&
		    (f->size > UW_SYNC_MAX_BYTES || ml_clock_ns(CLOCK_MONOTONIC) - t0 >= budget_ns)) {
			queued = true;
			continue;
		}
		err = build_now(u, f);
		done_pending(u, f);
	}
	if (queued)
		uwbuild__kick(u->builder);
	return err;
}

/* Keep the process's executable file mappings, its files, and the new files' slots (each once). */
static int scan_maps(struct unwinder *u, struct uw_proc *p, const struct ml_maps *maps, uint32_t *files, size_t *nfiles,
		     uint32_t *fresh, size_t *nfresh)
{
	struct uw_map *keep = calloc(maps->n ? maps->n : 1, sizeof(*keep));
	size_t nkeep = 0;

	if (!keep)
		return -ENOMEM;
	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *mp = &maps->v[i];
		uint32_t slot;
		bool is_new;
		size_t k;
		int err;

		if (mp->perms[2] != 'x' || !mp->path || mp->path[0] != '/' || !mp->inode)
			continue;
		err = file_slot(u, p->pid, mp, &slot, &is_new);
		if (err == -ENOMEM) {
			free(keep);
			return err;
		}
		if (err)
			continue;
		if (is_new)
			fresh[(*nfresh)++] = slot;
		/* A file without a table is kept too (as used by this process), so it is not parsed again. */
		for (k = 0; k < *nfiles && files[k] != slot; k++)
			;
		if (k == *nfiles)
			files[(*nfiles)++] = slot;
		keep[nkeep++] = (struct uw_map){slot, mp->start, mp->end, mp->offset};
	}
	free(p->maps);
	p->maps = keep;
	p->nmaps = nkeep;
	return 0;
}

static int sync_locked(struct unwinder *u, int pid, const struct ml_maps *maps, uint64_t budget_ns)
{
	uint32_t *files = calloc(maps->n ? maps->n : 1, sizeof(*files));
	uint32_t *fresh = calloc(maps->n ? maps->n : 1, sizeof(*fresh));
	struct uw_proc *p = proc_get(u, pid, true);
	size_t nfiles = 0, nfresh = 0;
	int err = -ENOMEM;

	if (!files || !fresh || !p)
		goto out;
	err = scan_maps(u, p, maps, files, &nfiles, fresh, &nfresh);
	/* Its files are its own before any is built: one evicted meanwhile would lose a fresh slot. */
	if (!err) {
		set_files(u, p, files, nfiles);
		files = NULL;
		err = build_fresh(u, fresh, nfresh, budget_ns);
	}
	if (!err)
		err = publish(u, p);
out:
	free(files);
	free(fresh);
	return err;
}

static int sync_within(struct unwinder *u, int pid, const struct ml_maps *maps, uint64_t budget_ns)
{
	int err;

	pthread_mutex_lock(&u->lock);
	err = sync_locked(u, pid, maps, budget_ns);
	pthread_mutex_unlock(&u->lock);
	return err;
}

int unwinder__sync(struct unwinder *u, int pid, const struct ml_maps *maps)
{
	return sync_within(u, pid, maps, u->sync_ns);
}

int unwinder__sync_held(struct unwinder *u, int pid, const struct ml_maps *maps)
{
	return sync_within(u, pid, maps, 0);
}

/* The next file for the builder: pending, not taken, first in build order; -1 when none. */
static int next_pending(const struct unwinder *u)
{
	int best = -1;

	for (int i = 0; i < ML_UW_FILES; i++) {
		const struct uw_file *f = &u->files[i];

		if (!f->pending || f->fd < 0)
			continue;
		if (best < 0 || f->rank < u->files[best].rank ||
		    (f->rank == u->files[best].rank && f->size < u->files[best].size))
			best = i;
	}
	return best;
}

/* A table the builder made, placed if its file is still the one queued, and every list mapping it published. */
static void builder_place(struct unwinder *u, int slot, uint32_t job, struct uw_parsed *p)
{
	struct uw_file *f = &u->files[slot];
	int err;

	if (!f->path || !f->pending || f->job != job)
		return; /* evicted meanwhile */
	install(u, f, p);
	u->loading.background++;
	done_pending(u, f);
	if (!u->loading.pending)
		ml_info("unwinding tables: all loaded, %.2f s after the first of them was queued (%u in the background "
			"so far)",
			u->loading.all_loaded_s, u->loading.background);
	for (size_t i = 0; f->ok && i < u->nprocs; i++)
		for (size_t k = 0; k < u->procs[i].nmaps; k++)
			if (u->procs[i].maps[k].slot == (uint32_t)slot) {
				err = publish(u, &u->procs[i]);
				if (err < 0)
					ml_info("pid %d: cannot publish its unwinding tables: %s", u->procs[i].pid,
						strerror(-err));
				break;
			}
}

/* The builder's next file: taken, its fd handed over. */
static bool builder_take(void *ctx, struct uwbuild_job *j)
{
	struct unwinder *u = ctx;
	int slot = next_pending(u);

	if (slot < 0)
		return false;
	*j = (struct uwbuild_job){.slot = slot,
				  .fd = u->files[slot].fd,
				  .pid = u->files[slot].pid,
				  .job = u->files[slot].job,
				  .path = strdup(u->files[slot].path)};
	u->files[slot].fd = -1; /* taken */
	return true;
}

static void builder_built(void *ctx, const struct uwbuild_job *j, int err, struct uw_parsed *p)
{
	struct unwinder *u = ctx;
	struct uw_file *f = &u->files[j->slot];

	if (!err) {
		builder_place(u, j->slot, j->job, p);
	} else if (f->pending && f->job == j->job) {
		ml_notice("out of memory building the unwinding table of %s", f->path);
		done_pending(u, f);
	}
}

void unwinder__loading(struct unwinder *u, struct unwind_loading *out)
{
	pthread_mutex_lock(&u->lock);
	*out = u->loading;
	pthread_mutex_unlock(&u->lock);
}

void unwinder__tick(struct unwinder *u)
{
	pthread_mutex_lock(&u->lock);
	if (u->builder && u->loading.pending)
		uwbuild__hurry(u->builder, ml_clock_ns(CLOCK_MONOTONIC) - u->queued_ns);
	pthread_mutex_unlock(&u->lock);
}

void unwinder__wait(struct unwinder *u)
{
	pthread_mutex_lock(&u->lock);
	while (u->loading.pending && u->builder)
		pthread_cond_wait(&u->idle, &u->lock);
	pthread_mutex_unlock(&u->lock);
}

void unwinder__forget(struct unwinder *u, int pid)
{
	struct uw_proc *p;
	uint32_t key = (uint32_t)pid;

	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	p = proc_get(u, pid, false);
	if (p) {
		bpf_map_delete_elem(u->umaps_fd, &key);
		set_files(u, p, NULL, 0);
		free(p->maps);
		free(p->written);
		*p = u->procs[--u->nprocs];
	}
	pthread_mutex_unlock(&u->lock);
}

size_t unwinder__n_files(struct unwinder *u)
{
	size_t n = 0;

	pthread_mutex_lock(&u->lock);
	for (size_t i = 0; i < ML_UW_FILES; i++)
		n += u->files[i].ok;
	pthread_mutex_unlock(&u->lock);
	return n;
}

/* The path is the unwinder's: valid until that file is evicted. */
int unwinder__file(struct unwinder *u, size_t want, struct unwind_file_info *out)
{
	int err = -ENOENT;

	pthread_mutex_lock(&u->lock);
	for (size_t i = 0, n = 0; i < ML_UW_FILES && err; i++) {
		const struct uw_file *f = &u->files[i];

		if (!f->ok || n++ != want)
			continue;
		*out = (struct unwind_file_info){.path = f->path,
						 .rows = f->at.n_rows,
						 .pages = f->at.n_idx,
						 .bytes = uwstore__bytes(f->at.n_rows, f->at.n_idx),
						 .build_ns = f->build_ns,
						 .users = f->users,
						 .debug_file = f->debug_file};
		err = 0;
	}
	pthread_mutex_unlock(&u->lock);
	return err;
}

void unwinder__usage(struct unwinder *u, uint64_t *rows_used, uint64_t *rows_cap, uint64_t *no_room)
{
	uint64_t used = 0;

	pthread_mutex_lock(&u->lock);
	for (size_t i = 0; i < ML_UW_FILES; i++)
		if (u->files[i].ok)
			used += u->files[i].at.n_rows;
	pthread_mutex_unlock(&u->lock);
	*rows_used = used;
	*rows_cap = u->rows_cap;
	*no_room = u->no_room;
}

uint64_t unwinder__memory(const struct unwinder *u)
{
	return uwstore__memory(u->store);
}

const struct ml_urow *unwinder__row(const struct unwinder *u, uint32_t i)
{
	return uwstore__row(u->store, i);
}

const uint32_t *unwinder__index(const struct unwinder *u, uint32_t i)
{
	return uwstore__index(u->store, i);
}
