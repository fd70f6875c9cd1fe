/*
 * Unwinding tables in BPF maps. A file's rows are converted to the 8-byte wire rows (struct ml_urow) and
 * copied into a range of the shared row array (mmap'ed: one copy, no syscall per row); a page index in
 * another array says where the search for a pc starts. Files are known by device and inode, so processes
 * that map the same library share its table; ranges are handed out first-fit and given back when the last
 * process mapping the file forgets it.
 */
#define _GNU_SOURCE
#include "unwind/unwind.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "lib/bpfchunks.h"
#include "lib/clock.h"
#include "lib/debuginfo.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "memleak.h"
#include "unwind/ehframe.h"
#include "memleak.skel.h"

#define MAX_SEGS 8
#define IDX_STRIDE 8 /* array map elements are 8-byte aligned: a __u32 index entry takes 8 bytes */

/* Free ranges of one array, sorted by start. */
struct extents {
	struct ext {
		uint32_t start, len;
	} * v;
	size_t n, cap;
};

struct uw_seg {
	uint64_t offset, vaddr, filesz;
};

struct uw_file {
	bool ok; /* has a table in the maps; a file without one stays known so it is not parsed again */
	bool debug_file;
	uint64_t dev, ino;
	char *path; /* NULL: the slot is free */
	uint32_t row_base, n_rows, idx_base, n_idx, shift;
	uint64_t lo; /* ELF address of table offset 0 */
	uint64_t build_ns;
	uint32_t users;
	struct uw_seg segs[MAX_SEGS];
	size_t nsegs;
};

struct uw_proc {
	int pid;
	uint32_t *files; /* slots it maps, each once */
	size_t n;
	struct ml_umap *written; /* the mapping list last written to the kernel, n_written entries */
	uint32_t n_written;
};

struct unwinder {
	int umaps_fd;
	struct bpfchunks *rows, *index; /* created as the ranges in use reach them */
	uint32_t rows_cap, index_cap;	/* the most --unwind-mem allows */
	struct extents free_rows, free_index;
	struct uw_file files[ML_UW_FILES];
	struct uw_proc *procs;
	size_t nprocs, capprocs;
	uint32_t gen; /* the last ml_umaps.gen written */
	uint64_t no_room;
	bool warned_room, warned_maps;
	char *debug_dir;
};

void unwind_capacity(uint64_t mem, uint32_t *rows, uint32_t *index)
{
	uint64_t r = mem / 5 * 4 / sizeof(struct ml_urow), i = mem / 5 / IDX_STRIDE;

	*rows = r > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)(r ? r : 1);
	*index = i > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)(i ? i : 1);
}

static int ext_put(struct extents *e, uint32_t start, uint32_t len)
{
	size_t i = 0;

	while (i < e->n && e->v[i].start < start)
		i++;
	/* merge with the range before and after */
	if (i > 0 && e->v[i - 1].start + e->v[i - 1].len == start) {
		e->v[i - 1].len += len;
		if (i < e->n && start + len == e->v[i].start) {
			e->v[i - 1].len += e->v[i].len;
			memmove(&e->v[i], &e->v[i + 1], (e->n - i - 1) * sizeof(*e->v));
			e->n--;
		}
		return 0;
	}
	if (i < e->n && start + len == e->v[i].start) {
		e->v[i].start = start;
		e->v[i].len += len;
		return 0;
	}
	if (ml_grow(&e->v, &e->cap, e->n + 1, sizeof(*e->v)))
		return -ENOMEM;
	memmove(&e->v[i + 1], &e->v[i], (e->n - i) * sizeof(*e->v));
	e->v[i].start = start;
	e->v[i].len = len;
	e->n++;
	return 0;
}

/* First fit; -ENOSPC when no free range is long enough. */
static int ext_take(struct extents *e, uint32_t len, uint32_t *start)
{
	for (size_t i = 0; i < e->n; i++) {
		if (e->v[i].len < len)
			continue;
		*start = e->v[i].start;
		e->v[i].start += len;
		e->v[i].len -= len;
		if (!e->v[i].len) {
			memmove(&e->v[i], &e->v[i + 1], (e->n - i - 1) * sizeof(*e->v));
			e->n--;
		}
		return 0;
	}
	return -ENOSPC;
}

int unwinder__new(struct memleak_bpf *skel, const struct unwind_opts *o, struct unwinder **out)
{
	struct unwinder *u = calloc(1, sizeof(*u));
	struct bpfchunks_opts ro = {bpf_map__fd(skel->maps.urows), sizeof(struct ml_urow), ML_UW_ROW_CHUNK_BITS,
				    ML_UW_CHUNKS};
	struct bpfchunks_opts io = {bpf_map__fd(skel->maps.uindex), sizeof(uint32_t), ML_UW_IDX_CHUNK_BITS,
				    ML_UW_CHUNKS};
	int err = -ENOMEM;

	*out = NULL;
	if (!u)
		goto fail;
	u->umaps_fd = bpf_map__fd(skel->maps.umaps);
	unwind_capacity(o->mem, &u->rows_cap, &u->index_cap);
	if (o->debug_dir && !(u->debug_dir = strdup(o->debug_dir)))
		goto fail;
	if (bpfchunks__new(&ro, &u->rows) || bpfchunks__new(&io, &u->index))
		goto fail;
	if (ext_put(&u->free_rows, 0, u->rows_cap) || ext_put(&u->free_index, 0, u->index_cap))
		goto fail;
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
	bpfchunks__free(u->rows);
	bpfchunks__free(u->index);
	for (size_t i = 0; i < ML_UW_FILES; i++)
		free(u->files[i].path);
	for (size_t i = 0; i < u->nprocs; i++) {
		free(u->procs[i].files);
		free(u->procs[i].written);
	}
	free(u->procs);
	free(u->free_rows.v);
	free(u->free_index.v);
	free(u->debug_dir);
	free(u);
}

/* A table row as a wire row; rules the wire cannot hold stop the unwind there. */
static struct ml_urow wire_row(const struct ml_unwind_row *r, uint64_t lo)
{
	struct ml_urow w = {.pc = (uint32_t)(r->pc - lo)};
	uint8_t cfa, rbp = ML_UW_RBP_SAME, scaled = 0;

	switch (r->cfa_reg) {
	case ML_CFA_RSP:
	case ML_CFA_RBP:
		cfa = r->cfa_reg == ML_CFA_RSP ? ML_UW_RSP : ML_UW_RBP;
		if (r->cfa_off >= INT16_MIN && r->cfa_off <= INT16_MAX) {
			w.cfa_off = (int16_t)r->cfa_off;
		} else if (r->cfa_off % 8 == 0 && r->cfa_off / 8 >= INT16_MIN && r->cfa_off / 8 <= INT16_MAX) {
			w.cfa_off = (int16_t)(r->cfa_off / 8);
			scaled = 1;
		} else {
			cfa = ML_UW_STOP;
			break;
		}
		if (r->rbp_saved == ML_RBP_AT_CFA) {
			if (r->rbp_off % 8 == 0 && r->rbp_off / 8 >= INT8_MIN && r->rbp_off / 8 <= INT8_MAX) {
				rbp = ML_UW_RBP_AT;
				w.rbp_off8 = (int8_t)(r->rbp_off / 8);
			} else {
				rbp = ML_UW_RBP_LOST;
			}
		} else if (r->rbp_saved == ML_RBP_LOST) {
			rbp = ML_UW_RBP_LOST;
		}
		break;
	case ML_CFA_NONE: cfa = ML_UW_NONE_FDE; break;
	case ML_CFA_SIGNAL: cfa = ML_UW_SIGNAL; break;
	default: cfa = ML_UW_STOP; break;
	}
	if (cfa != ML_UW_RSP && cfa != ML_UW_RBP) {
		w.cfa_off = 0;
		w.rbp_off8 = 0;
		rbp = 0;
		scaled = 0;
	}
	w.kind = ML_UW_KIND(cfa, rbp, scaled);
	return w;
}

static bool same_wire(const struct ml_urow *a, const struct ml_urow *b)
{
	return a->cfa_off == b->cfa_off && a->rbp_off8 == b->rbp_off8 && a->kind == b->kind;
}

static int put_index(struct unwinder *u, uint32_t at, uint32_t v)
{
	return bpfchunks__write(u->index, at, &v, 1);
}

/* The executable PT_LOAD segments, to turn a mapping's file offset into an ELF address. */
static void read_segs(Elf *elf, struct uw_file *f)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n))
		return;
	for (size_t i = 0; i < n && f->nsegs < MAX_SEGS; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		f->segs[f->nsegs++] = (struct uw_seg){ph.p_offset, ph.p_vaddr, ph.p_filesz};
	}
}

/*
 * Reads the table of mp's file (and of its separate debug file) into t, its executable segments into f;
 * *debug_file tells whether the debug file was found. A file without a table leaves t empty: -ENOMEM only
 * is an error.
 */
static int read_table(struct unwinder *u, int pid, const struct ml_mapping *mp, struct uw_file *f,
		      struct ml_unwind_table *t, bool *debug_file)
{
	int fd, dfd = -1, err = 0;
	Elf *elf;

	fd = ml_maps__open_file(pid, mp);
	if (fd < 0)
		return 0;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF) {
		read_segs(elf, f);
		dfd = ml_debug_file_open(pid, u->debug_dir, elf, mp->path);
		if (dfd == -ENOMEM)
			err = -ENOMEM;
	}
	elf_end(elf);
	if (!err && f->nsegs) {
		err = ml_unwind_from_elf(fd, dfd, t);
		if (err && err != -ENOMEM) {
			ml_info("%s: no unwinding table (%s): frame pointers only", mp->path ? mp->path : "?",
				strerror(-err));
			err = 0;
		}
	}
	close(fd);
	*debug_file = dfd >= 0;
	if (dfd >= 0)
		close(dfd);
	return err;
}

/* t's rows as wire rows into conv (t->n of them), a row that repeats the one before left out; how many. */
static uint32_t wire_rows(const struct ml_unwind_table *t, uint64_t lo, struct ml_urow *conv)
{
	uint32_t nrows = 0;

	for (size_t i = 0; i < t->n; i++) {
		struct ml_urow w = wire_row(&t->rows[i], lo);

		if (nrows && same_wire(&conv[nrows - 1], &w))
			continue;
		conv[nrows++] = w;
	}
	return nrows;
}

/*
 * Index granularity: the finest power of two (down to 2^ML_UW_MIN_SHIFT bytes) that keeps about
 * ML_UW_ROWS_PER_SLOT rows per index entry, so the BPF search takes two or three steps and the index
 * costs a fraction of the rows.
 */
static uint32_t index_shift(uint64_t span, uint32_t nrows)
{
	uint32_t shift = ML_UW_MAX_SHIFT;

	while (shift > ML_UW_MIN_SHIFT && (span >> (shift - 1)) + 1 <= nrows / ML_UW_ROWS_PER_SLOT)
		shift--;
	return shift;
}

/*
 * Copies nrows rows and an index of npages + 1 entries into ranges taken for f. 0, or -ENOSPC when the ranges
 * or the kernel memory for a new chunk could not be had.
 */
static int place(struct unwinder *u, struct uw_file *f, const struct ml_urow *conv, uint32_t nrows, uint32_t shift,
		 uint32_t npages)
{
	int err = 0;

	if (ext_take(&u->free_rows, nrows, &f->row_base))
		return -ENOSPC;
	if (ext_take(&u->free_index, npages + 1, &f->idx_base)) {
		ext_put(&u->free_rows, f->row_base, nrows);
		return -ENOSPC;
	}
	err = bpfchunks__write(u->rows, f->row_base, conv, nrows);
	/* index[p]: the last row at or before the start of slot p (0 when none is) */
	for (uint32_t p = 0, r = 0; !err && p <= npages; p++) {
		uint64_t at = (uint64_t)p << shift;

		while (r + 1 < nrows && conv[r + 1].pc <= at)
			r++;
		err = put_index(u, f->idx_base + p, p == npages ? nrows - 1 : r);
	}
	if (err) {
		ext_put(&u->free_rows, f->row_base, nrows);
		ext_put(&u->free_index, f->idx_base, npages + 1);
		return -ENOSPC;
	}
	f->n_rows = nrows;
	f->n_idx = npages + 1;
	f->shift = shift;
	return 0;
}

/* A table that found no room: counted, said once, and its file unwound by frame pointers. */
static void no_room(struct unwinder *u, const struct ml_mapping *mp, size_t n)
{
	u->no_room++;
	if (!u->warned_room)
		ml_notice("no room left for the unwinding table of %s (%zu rows; raise --unwind-mem): its frames fall "
			  "back to frame pointers",
			  mp->path, n);
	u->warned_room = true;
}

/* Parse a file and place its table; f->ok tells whether it got one. -ENOMEM only is an error. */
static int build(struct unwinder *u, int pid, const struct ml_mapping *mp, struct uw_file *f)
{
	struct ml_unwind_table t = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC), lo, hi;
	struct ml_urow *conv = NULL;
	uint32_t nrows, npages, shift;
	bool debug_file = false;
	int err;

	err = read_table(u, pid, mp, f, &t, &debug_file);
	if (err || !t.n)
		goto out;
	lo = t.rows[0].pc & ~(uint64_t)((1u << ML_UW_MAX_SHIFT) - 1);
	hi = t.rows[t.n - 1].pc;
	if (hi - lo > UINT32_MAX || t.n > UINT32_MAX / 2) {
		ml_info("%s: unwinding table spans over 4 GiB: frame pointers only", mp->path);
		goto out;
	}
	conv = malloc(t.n * sizeof(*conv));
	if (!conv) {
		err = -ENOMEM;
		goto out;
	}
	nrows = wire_rows(&t, lo, conv);
	shift = index_shift(hi - lo, nrows);
	npages = (uint32_t)((hi - lo) >> shift) + 1;
	err = place(u, f, conv, nrows, shift, npages);
	if (err) {
		no_room(u, mp, t.n);
		err = 0;
		goto out;
	}
	f->lo = lo;
	f->debug_file = debug_file;
	f->ok = true;
	ml_info("unwinding table for %s: %u rows, %u index entries, %llu KiB, built in %.1f ms%s", mp->path, nrows,
		npages + 1,
		(unsigned long long)(((uint64_t)nrows * sizeof(struct ml_urow) + (npages + 1ULL) * IDX_STRIDE) >> 10),
		(ml_clock_ns(CLOCK_MONOTONIC) - t0) / 1e6, f->debug_file ? " (with a separate debug file)" : "");
out:
	f->build_ns = ml_clock_ns(CLOCK_MONOTONIC) - t0;
	free(conv);
	ml_unwind_table_free(&t);
	return err;
}

static void evict(struct unwinder *u, uint32_t slot)
{
	struct uw_file *f = &u->files[slot];

	if (f->ok) {
		ml_info("unwinding table for %s evicted: no traced process maps it", f->path);
		ext_put(&u->free_rows, f->row_base, f->n_rows);
		ext_put(&u->free_index, f->idx_base, f->n_idx);
	}
	free(f->path);
	memset(f, 0, sizeof(*f));
}

/* The slot of the file behind a mapping, built if new; -ENOSPC when every slot is taken. */
static int file_slot(struct unwinder *u, int pid, const struct ml_mapping *mp, uint32_t *out)
{
	uint64_t dev = ((uint64_t)mp->dev_major << 32) | mp->dev_minor;
	int free_slot = -1, err;

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

	f->dev = dev;
	f->ino = mp->inode;
	f->path = strdup(mp->path);
	if (!f->path) {
		memset(f, 0, sizeof(*f));
		return -ENOMEM;
	}
	err = build(u, pid, mp, f);
	if (err) {
		evict(u, (uint32_t)free_slot);
		return err;
	}
	*out = (uint32_t)free_slot;
	return 0;
}

/* The table offset of a runtime pc in this mapping: pc - adj. */
static bool mapping_adj(const struct uw_file *f, const struct ml_mapping *mp, uint64_t *adj)
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

int unwinder__sync(struct unwinder *u, int pid, const struct ml_maps *maps)
{
	struct ml_umaps *um = calloc(1, sizeof(*um));
	uint32_t *files = calloc(maps->n ? maps->n : 1, sizeof(*files)), key = (uint32_t)pid;
	struct uw_proc *p = proc_get(u, pid, true);
	size_t nfiles = 0;
	int err = 0;

	if (!um || !files || !p) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *mp = &maps->v[i];
		uint32_t slot;
		uint64_t adj;
		size_t k;

		if (mp->perms[2] != 'x' || !mp->path || mp->path[0] != '/' || !mp->inode)
			continue;
		err = file_slot(u, pid, mp, &slot);
		if (err == -ENOMEM)
			goto out;
		if (err) {
			err = 0;
			continue;
		}
		/* A file without a table is kept too (as used by this process), so it is not parsed again. */
		for (k = 0; k < nfiles && files[k] != slot; k++)
			;
		if (k == nfiles)
			files[nfiles++] = slot;
		if (!u->files[slot].ok || !mapping_adj(&u->files[slot], mp, &adj))
			continue;
		if (um->n == ML_UW_MAPS) {
			if (!u->warned_maps)
				ml_notice("pid %d maps over %d executable files; the rest unwind by frame pointers",
					  pid, ML_UW_MAPS);
			u->warned_maps = true;
			continue;
		}
		um->m[um->n++] = (struct ml_umap){.start = mp->start,
						  .end = mp->end,
						  .adj = adj,
						  .row_base = u->files[slot].row_base,
						  .n_rows = u->files[slot].n_rows,
						  .idx_base = u->files[slot].idx_base,
						  .n_slots = u->files[slot].n_idx - 1,
						  .shift = u->files[slot].shift};
	}
	/* Written only when changed: a new list has a new gen, which drops the rules the kernel cached. */
	if (!p->written || um->n != p->n_written || (um->n && memcmp(um->m, p->written, um->n * sizeof(um->m[0])))) {
		struct ml_umap *copy = malloc((um->n ? um->n : 1) * sizeof(*copy));

		if (!copy) {
			err = -ENOMEM;
			goto out;
		}
		u->gen = u->gen == UINT32_MAX ? 1 : u->gen + 1;
		um->gen = u->gen;
		if (bpf_map_update_elem(u->umaps_fd, &key, um, BPF_ANY)) {
			err = -errno;
			free(copy);
		} else {
			memcpy(copy, um->m, um->n * sizeof(*copy));
			free(p->written);
			p->written = copy;
			p->n_written = um->n;
		}
	}
	set_files(u, p, files, nfiles);
	files = NULL;
	if (!err)
		err = (int)um->n;
out:
	free(files);
	free(um);
	return err;
}

void unwinder__forget(struct unwinder *u, int pid)
{
	struct uw_proc *p = u ? proc_get(u, pid, false) : NULL;
	uint32_t key = (uint32_t)pid;

	if (!p)
		return;
	bpf_map_delete_elem(u->umaps_fd, &key);
	set_files(u, p, NULL, 0);
	free(p->written);
	*p = u->procs[--u->nprocs];
}

size_t unwinder__n_files(const struct unwinder *u)
{
	size_t n = 0;

	for (size_t i = 0; i < ML_UW_FILES; i++)
		n += u->files[i].ok;
	return n;
}

int unwinder__file(const struct unwinder *u, size_t want, struct unwind_file_info *out)
{
	for (size_t i = 0, n = 0; i < ML_UW_FILES; i++) {
		const struct uw_file *f = &u->files[i];

		if (!f->ok || n++ != want)
			continue;
		*out = (struct unwind_file_info){.path = f->path,
						 .rows = f->n_rows,
						 .pages = f->n_idx,
						 .bytes = (uint64_t)f->n_rows * sizeof(struct ml_urow) +
							  (uint64_t)f->n_idx * IDX_STRIDE,
						 .build_ns = f->build_ns,
						 .users = f->users,
						 .debug_file = f->debug_file};
		return 0;
	}
	return -ENOENT;
}

void unwinder__usage(const struct unwinder *u, uint64_t *rows_used, uint64_t *rows_cap, uint64_t *no_room)
{
	uint64_t used = 0;

	for (size_t i = 0; i < ML_UW_FILES; i++)
		if (u->files[i].ok)
			used += u->files[i].n_rows;
	*rows_used = used;
	*rows_cap = u->rows_cap;
	*no_room = u->no_room;
}

uint64_t unwinder__memory(const struct unwinder *u)
{
	return bpfchunks__bytes(u->rows) + bpfchunks__bytes(u->index);
}

const struct ml_urow *unwinder__row(const struct unwinder *u, uint32_t i)
{
	return bpfchunks__at(u->rows, i);
}

const uint32_t *unwinder__index(const struct unwinder *u, uint32_t i)
{
	return bpfchunks__at(u->index, i);
}
