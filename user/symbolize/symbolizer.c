/*
 * Turns runtime code addresses of one target process into functions, modules and source lines: its mapped
 * files, shared across processes, and their ELF symbols here; their DWARF lines and inlines in dwlines.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/debuginfo.h"
#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "lib/u64map.h"
#include "memleak.h"
#include "symbolize/dwlines.h"
#include "symbolize/symbolizer.h"

/* An unknown address re-reads the maps at most this often: garbage addresses must stay cheap. */
#define REFRESH_INTERVAL_NS (100 * 1000 * 1000ULL)

/* One file behind executable mappings, shared by all its regions. */
struct sym_file {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char *path; /* as in maps; also the frames' module string */
	int fd;	    /* -1 once handed to elf_syms, or when it could not be opened */
	bool tried; /* ELF and DWARF opening attempted */
	struct elf_syms *syms;
	struct elf_syms *dsyms; /* the separate debug file's, when one was found: its .symtab comes first */
	struct dwlines *dw;	/* NULL: no DWARF */
	unsigned int refs;	/* symbolizers holding it (see shared) */
};

/*
 * Files with an identity (device and inode) are shared by every symbolizer of the run: the sixteen ranks of a
 * node map the same libtorch, and its ELF and DWARF are parsed once, not once per process. The first process
 * to map a file opens it (through its /proc/PID/map_files, and its root for a separate debug file).
 * Symbolizers are used from the session's thread only: no lock.
 */
static struct sym_file **shared;
static size_t nshared, capshared;

/* One executable mapping: [start, end) maps the file from offset. */
struct region {
	uint64_t start, end, offset;
	struct sym_file *file;
};

struct frame_ent {
	struct ml_frame f;
	uint64_t gen;		 /* region generation the lookup saw */
	bool in_module;		 /* the address was inside a known region */
	struct frame_ent *older; /* replaced entries for the same address, still owned for callers */
	struct ml_frame *inl;	 /* functions inlined at the address, innermost first; f is the real one */
	size_t ninl;
};

struct symbolizer {
	int pid;
	char *debug_dir; /* NULL: the default */
	int procfd;	 /* /proc/PID, pins the process identity against pid reuse */
	bool gone;
	struct region *regions; /* sorted by start, not overlapping */
	size_t nregions;
	struct sym_file **files;
	size_t nfiles, capfiles;
	uint64_t gen; /* bumped whenever the region set changes */
	uint64_t last_refresh_ns;
	struct u64map frames; /* address -> struct frame_ent */
	struct symnames nm;   /* display names and source file names */
};

static bool is_code_mapping(const struct ml_mapping *mp)
{
	return mp->perms[2] == 'x' && mp->path;
}

static struct sym_file *file_find(const struct symbolizer *s, const struct ml_mapping *mp)
{
	struct sym_file *f;
	size_t i;

	for (i = 0; i < s->nfiles; i++) {
		f = s->files[i];
		if (f->dev_major != mp->dev_major || f->dev_minor != mp->dev_minor || f->inode != mp->inode)
			continue;
		/* Inode 0 is no identity ([vdso] and friends): tell those apart by name. */
		if (!mp->inode && strcmp(f->path, mp->path))
			continue;
		return f;
	}
	return NULL;
}

static int file_get(struct symbolizer *s, const struct ml_mapping *mp, struct sym_file **out)
{
	struct sym_file *f = file_find(s, mp);

	if (f) {
		*out = f;
		return 0;
	}
	if (ml_grow(&s->files, &s->capfiles, s->nfiles + 1, sizeof(*s->files)))
		return -ENOMEM;
	for (size_t i = 0; mp->inode && i < nshared; i++)
		if (shared[i]->inode == mp->inode && shared[i]->dev_major == mp->dev_major &&
		    shared[i]->dev_minor == mp->dev_minor) {
			shared[i]->refs++;
			s->files[s->nfiles++] = shared[i];
			*out = shared[i];
			return 0;
		}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->refs = 1;
	f->path = strdup(mp->path);
	if (!f->path) {
		free(f);
		return -ENOMEM;
	}
	f->dev_major = mp->dev_major;
	f->dev_minor = mp->dev_minor;
	f->inode = mp->inode;
	f->fd = -1;
	/* Opened now, while the process exists; read only when an address needs it. */
	if (mp->path[0] == '/') {
		f->fd = ml_maps__open_file_at(s->procfd, mp);
		if (f->fd == -ENOMEM) {
			free(f->path);
			free(f);
			return -ENOMEM;
		}
		if (f->fd < 0)
			f->fd = -1;
	}
	s->files[s->nfiles++] = f;
	/* Not shared when the registry cannot grow: this symbolizer keeps it alone. */
	if (mp->inode && !ml_grow(&shared, &capshared, nshared + 1, sizeof(*shared)))
		shared[nshared++] = f;
	*out = f;
	return 0;
}

static void file_free(struct sym_file *f)
{
	if (--f->refs)
		return;
	for (size_t i = 0; i < nshared; i++)
		if (shared[i] == f) {
			shared[i] = shared[--nshared];
			break;
		}
	if (!nshared) {
		free(shared);
		shared = NULL;
		capshared = 0;
	}
	dwlines__free(f->dw);
	elf_syms__free(f->syms);
	elf_syms__free(f->dsyms);
	if (f->fd >= 0)
		close(f->fd);
	free(f->path);
	free(f);
}

/* Index of the last region starting at or below addr, or nregions when none does. */
static size_t region_floor(const struct region *r, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (r[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : n;
}

static const struct region *find_region(const struct symbolizer *s, uint64_t addr)
{
	size_t i = region_floor(s->regions, s->nregions, addr);

	if (i == s->nregions || addr >= s->regions[i].end)
		return NULL;
	return &s->regions[i];
}

static bool overlaps_any(const struct region *cur, size_t ncur, const struct region *r)
{
	size_t i = region_floor(cur, ncur, r->end - 1);

	/* cur does not overlap itself, so only the last one starting before r's end can reach r. */
	return i != ncur && cur[i].end > r->start;
}

static int cmp_region(const void *a, const void *b)
{
	const struct region *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Is the very same region (dev + inode + start, and its extent) in the sorted set? */
static bool region_in(const struct region *set, size_t n, const struct region *r)
{
	size_t i = region_floor(set, n, r->start);
	const struct region *o;

	if (i == n)
		return false;
	o = &set[i];
	return o->start == r->start && o->end == r->end && o->offset == r->offset && o->file == r->file;
}

int symbolizer__refresh(struct symbolizer *s)
{
	struct ml_maps maps;
	int err;

	s->last_refresh_ns = ml_clock_ns(CLOCK_MONOTONIC);
	if (s->gone)
		return -ESRCH;
	err = ml_maps__read_at(s->procfd, &maps);
	if (err == -ENOENT || err == -ESRCH) {
		s->gone = true;
		return -ESRCH;
	}
	if (err)
		return err;
	err = symbolizer__update(s, &maps);
	ml_maps__clear(&maps);
	return err;
}

int symbolizer__update(struct symbolizer *s, const struct ml_maps *maps)
{
	struct region *cur = NULL, *merged;
	size_t ncur = 0, n, i;
	bool changed = false;
	int err = 0;

	s->last_refresh_ns = ml_clock_ns(CLOCK_MONOTONIC);
	if (s->gone)
		return -ESRCH;
	if (!maps->n) {
		/* Exited (an exited or zombie process has no mappings left): keep what we have. */
		s->gone = true;
		return -ESRCH;
	}
	cur = calloc(maps->n, sizeof(*cur));
	if (!cur)
		return -ENOMEM;
	for (i = 0; i < maps->n; i++) {
		const struct ml_mapping *mp = &maps->v[i];
		struct sym_file *f;

		if (!is_code_mapping(mp))
			continue;
		if (ncur && mp->start < cur[ncur - 1].end)
			continue;
		err = file_get(s, mp, &f);
		if (err)
			goto out;
		cur[ncur].start = mp->start;
		cur[ncur].end = mp->end;
		cur[ncur].offset = mp->offset;
		cur[ncur].file = f;
		if (!region_in(s->regions, s->nregions, &cur[ncur]))
			changed = true;
		ncur++;
	}
	merged = calloc(ncur + s->nregions + 1, sizeof(*merged));
	if (!merged) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(merged, cur, ncur * sizeof(*cur));
	n = ncur;
	/* Unloaded code stays resolvable for stacks captured earlier, until something replaces it. */
	for (i = 0; i < s->nregions; i++) {
		if (!overlaps_any(cur, ncur, &s->regions[i]))
			merged[n++] = s->regions[i];
		else if (!region_in(cur, ncur, &s->regions[i]))
			changed = true;
	}
	if (n)
		qsort(merged, n, sizeof(*merged), cmp_region);
	free(s->regions);
	s->regions = merged;
	s->nregions = n;
	if (changed)
		s->gen++;
out:
	free(cur);
	return err;
}

int symbolizer__new(int pid, const char *debug_dir, struct symbolizer **out)
{
	struct symbolizer *s;
	char name[32];
	int err;

	*out = NULL;
	if (pid <= 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	if (debug_dir && !(s->debug_dir = strdup(debug_dir))) {
		free(s);
		return -ENOMEM;
	}
	/* Cannot truncate: "/proc/" and at most 11 characters of an int. */
	snprintf(name, sizeof(name), "/proc/%d", pid);
	s->procfd = open(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->procfd < 0) {
		err = errno == ENOENT ? -ESRCH : -errno;
		ml_dbg("symbolizer: cannot open %s: %s", name, strerror(-err));
		free(s);
		return err;
	}
	err = symbolizer__refresh(s);
	if (err) {
		symbolizer__free(s);
		return err;
	}
	*out = s;
	return 0;
}

void symbolizer__free(struct symbolizer *s)
{
	struct frame_ent *e, *older;
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->frames.cap; i++) {
		for (e = s->frames.slots[i].val; e; e = older) {
			older = e->older;
			free(e->inl);
			free(e);
		}
		s->frames.slots[i].val = NULL;
	}
	u64map__free_values(&s->frames);
	symnames__clear(&s->nm);
	for (i = 0; i < s->nfiles; i++)
		file_free(s->files[i]);
	free(s->files);
	free(s->regions);
	if (s->procfd >= 0)
		close(s->procfd);
	free(s->debug_dir);
	free(s);
}

/* Lazily parse the ELF and DWARF of a file. Failure to parse just leaves the file unsymbolized. */
static int file_open(struct symbolizer *s, struct sym_file *f)
{
	int err, dfd;

	if (f->tried || f->fd < 0)
		return 0;
	err = elf_syms__open(f->fd, &f->syms);
	if (err == -ENOMEM)
		return err;
	f->tried = true;
	if (err)
		return 0;
	/* elf_syms holds its own duplicate; one fd per module is enough against the fd limit. */
	close(f->fd);
	f->fd = -1;
	/* A separate debug file (by build-id or debuglink) brings .symtab and DWARF a stripped object lacks. */
	dfd = ml_debug_file_open(s->gone ? 0 : s->pid, s->debug_dir, elf_syms__elf(f->syms), f->path);
	if (dfd == -ENOMEM)
		return -ENOMEM;
	if (dfd >= 0) {
		err = elf_syms__open(dfd, &f->dsyms);
		close(dfd);
		if (err == -ENOMEM)
			return err;
	}
	return dwlines__new(f->dsyms ? elf_syms__elf(f->dsyms) : NULL, elf_syms__elf(f->syms), &f->dw);
}

static bool refresh_due(const struct symbolizer *s)
{
	return !s->gone && ml_clock_ns(CLOCK_MONOTONIC) - s->last_refresh_ns >= REFRESH_INTERVAL_NS;
}

/*
 * A return address: the call is the byte before it, which may even lie in another function. A pc where a
 * signal interrupted the code (ML_IP_EXACT) is the instruction itself.
 */
static uint64_t call_site(uint64_t addr)
{
	if (addr & ML_IP_EXACT)
		return addr & ~ML_IP_EXACT;
	return addr ? addr - 1 : 0;
}

static int build_frame(struct symbolizer *s, uint64_t word, bool may_refresh, struct frame_ent **out)
{
	uint64_t pc = call_site(word), addr = word & ~ML_IP_EXACT, off_pc, vpc, sym_off;
	const struct region *r;
	struct frame_ent *e;
	struct sym_file *f;
	const char *raw;
	int err;

	*out = NULL;
	r = find_region(s, pc);
	if (!r && may_refresh && refresh_due(s)) {
		err = symbolizer__refresh(s);
		if (err == -ENOMEM)
			return err;
		r = find_region(s, pc);
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->f.addr = addr;
	e->f.offset = addr;
	e->gen = s->gen;
	*out = e;
	if (!r)
		return 0;
	e->in_module = true;
	f = r->file;
	e->f.module = f->path;
	/* addr may be one past the region's end (a call as its last instruction): off_pc is exact. */
	if (__builtin_add_overflow(pc - r->start, r->offset, &off_pc))
		return 0;
	e->f.offset = off_pc + (addr - pc);
	err = file_open(s, f);
	if (err)
		goto fail;
	if (!f->syms || elf_syms__offset_to_vaddr(f->syms, off_pc, &vpc))
		return 0;
	raw = f->dsyms ? elf_syms__lookup(f->dsyms, vpc, &sym_off) : NULL;
	if (!raw)
		raw = elf_syms__lookup(f->syms, vpc, &sym_off);
	if (raw) {
		err = symnames__display(&s->nm, raw, &e->f.func);
		if (err)
			goto fail;
		e->f.offset = sym_off + (addr - pc);
	}
	if (f->dw) {
		err = dwlines__lookup(f->dw, &s->nm, vpc, &e->f, &e->inl, &e->ninl);
		if (err)
			goto fail;
	}
	return 0;
fail:
	free(e->inl);
	free(e);
	*out = NULL;
	return err;
}

bool symbolizer__in_module(struct symbolizer *s, uint64_t addr)
{
	uint64_t pc = call_site(addr);

	if (find_region(s, pc))
		return true;
	if (refresh_due(s) && symbolizer__refresh(s) == 0)
		return find_region(s, pc) != NULL;
	return false;
}

int symbolizer__resolve(struct symbolizer *s, uint64_t addr, const struct ml_frame **out)
{
	struct frame_ent *e = u64map__get(&s->frames, addr), *n;
	int err;

	*out = NULL;
	if (e) {
		/*
		 * Found nowhere before, possibly while the rate limit held a refresh back: refresh now if
		 * due, and if the maps have changed since, the module may be known.
		 */
		if (!e->in_module && e->gen == s->gen && refresh_due(s)) {
			err = symbolizer__refresh(s);
			if (err == -ENOMEM)
				return err;
		}
		if (!e->in_module && e->gen != s->gen) {
			e->gen = s->gen;
			if (find_region(s, call_site(addr))) {
				err = build_frame(s, addr, false, &n);
				if (err)
					return err;
				n->older = e;
				/* Replacing an existing key cannot allocate. */
				u64map__put(&s->frames, addr, n);
				e = n;
			}
		}
		*out = e->ninl ? &e->inl[0] : &e->f;
		return 0;
	}
	err = build_frame(s, addr, true, &e);
	if (err)
		return err;
	err = u64map__put(&s->frames, addr, e);
	if (err) {
		free(e->inl);
		free(e);
		return err;
	}
	*out = e->ninl ? &e->inl[0] : &e->f;
	return 0;
}
