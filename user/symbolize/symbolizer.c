/* Turns runtime code addresses of one target process into functions, modules and source lines. */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
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
#include "lib/demangle.h"
#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/procmaps.h"
#include "lib/u64map.h"
#include "memleak.h"
#include "symbolize/symbolizer.h"

/* From libstdc++ (C linkage); the binary links with -lstdc++. */

/* An unknown address re-reads the maps at most this often: garbage addresses must stay cheap. */
#define REFRESH_INTERVAL_NS (100 * 1000 * 1000ULL)

struct cu_range {
	uint64_t start, end;
	Dwarf_Die die;
};

/* One file behind executable mappings, shared by all its regions. */
struct sym_file {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char *path; /* as in maps; also the frames' module string */
	int fd;	    /* -1 once handed to elf_syms, or when it could not be opened */
	bool tried; /* ELF and DWARF opening attempted */
	struct elf_syms *syms;
	struct elf_syms *dsyms; /* the separate debug file's, when one was found: its .symtab comes first */
	Dwarf *dw;
	/* Units by address, built only when dwarf_addrdie fails (no .debug_aranges, as with clang). */
	struct cu_range *cus;
	size_t ncus;
	bool cus_built;
	unsigned int refs; /* symbolizers holding it (see shared) */
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
	struct u64map names;  /* raw symbol name pointer -> display name */
	struct u64map srcs;   /* libdw file name pointer -> our copy */
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
	if (f->dw)
		dwarf_end(f->dw);
	elf_syms__free(f->syms);
	elf_syms__free(f->dsyms);
	if (f->fd >= 0)
		close(f->fd);
	free(f->cus);
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
	struct region *cur = NULL, *merged;
	struct ml_maps maps;
	size_t ncur = 0, n, i;
	bool changed = false;
	int err;

	s->last_refresh_ns = ml_clock_ns(CLOCK_MONOTONIC);
	if (s->gone)
		return -ESRCH;
	err = ml_maps__read_at(s->procfd, &maps);
	if (err == -ENOENT || err == -ESRCH || (!err && !maps.n)) {
		/* Exited (an exited or zombie process has no mappings left): keep what we have. */
		s->gone = true;
		return -ESRCH;
	}
	if (err)
		return err;
	cur = calloc(maps.n, sizeof(*cur));
	if (!cur) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < maps.n; i++) {
		const struct ml_mapping *mp = &maps.v[i];
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
	ml_maps__clear(&maps);
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
	u64map__free_values(&s->names);
	u64map__free_values(&s->srcs);
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
	/* NULL when there is no DWARF: then there are no lines, which is fine. */
	if (f->dsyms)
		f->dw = dwarf_begin_elf(elf_syms__elf(f->dsyms), DWARF_C_READ, NULL);
	if (!f->dw)
		f->dw = dwarf_begin_elf(elf_syms__elf(f->syms), DWARF_C_READ, NULL);
	return 0;
}

static int cmp_cu(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int build_cu_ranges(struct sym_file *f)
{
	Dwarf_Addr base, start, end;
	Dwarf_CU *cu = NULL, *next;
	struct cu_range *n;
	size_t cap = 0;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Die cudie;
	ptrdiff_t off;

	while (dwarf_get_units(f->dw, cu, &next, &version, &unit_type, &cudie, NULL) == 0) {
		cu = next;
		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		off = 0;
		while ((off = dwarf_ranges(&cudie, off, &base, &start, &end)) > 0) {
			if (start >= end)
				continue;
			if (f->ncus == cap) {
				cap = cap ? cap * 2 : 64;
				if (cap > SIZE_MAX / sizeof(*n))
					return -ENOMEM;
				n = realloc(f->cus, cap * sizeof(*n));
				if (!n)
					return -ENOMEM;
				f->cus = n;
			}
			f->cus[f->ncus].start = start;
			f->cus[f->ncus].end = end;
			f->cus[f->ncus].die = cudie;
			f->ncus++;
		}
	}
	if (f->ncus)
		qsort(f->cus, f->ncus, sizeof(*f->cus), cmp_cu);
	f->cus_built = true;
	return 0;
}

/* How many units starting below an address are checked for containing it (ranges may nest). */
#define CU_LOOKUP_BACK 8

static int cu_by_ranges(struct sym_file *f, uint64_t vaddr, Dwarf_Die *out)
{
	size_t lo = 0, hi, mid;
	int err, k;

	if (!f->cus_built) {
		err = build_cu_ranges(f);
		if (err)
			return err;
	}
	hi = f->ncus;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (f->cus[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = 0; lo && k < CU_LOOKUP_BACK; k++, lo--) {
		if (vaddr < f->cus[lo - 1].end) {
			*out = f->cus[lo - 1].die;
			return 0;
		}
	}
	return -ENOENT;
}

/* Our copy of a libdw source file name (libdw's lives as long as the Dwarf; ours as long as s). */
static int src_copy(struct symbolizer *s, const char *src, char **out)
{
	char *copy = u64map__get(&s->srcs, (uintptr_t)src);

	if (!copy) {
		copy = strdup(src);
		if (!copy)
			return -ENOMEM;
		if (u64map__put(&s->srcs, (uintptr_t)src, copy)) {
			free(copy);
			return -ENOMEM;
		}
	}
	*out = copy;
	return 0;
}

/* The compile unit holding vaddr: 0, -ENOENT, -ENOMEM. */
static int find_cu(struct sym_file *f, uint64_t vaddr, Dwarf_Die *cu)
{
	if (dwarf_addrdie(f->dw, vaddr, cu))
		return 0;
	return cu_by_ranges(f, vaddr, cu);
}

static int find_line(struct symbolizer *s, Dwarf_Die *cu, uint64_t vaddr, struct ml_frame *fr)
{
	Dwarf_Line *line;
	const char *src;
	int lineno;

	line = dwarf_getsrc_die(cu, vaddr);
	if (!line || dwarf_lineno(line, &lineno) || lineno <= 0)
		return 0;
	src = dwarf_linesrc(line, NULL, NULL);
	if (!src)
		return 0;
	fr->line = lineno;
	return src_copy(s, src, &fr->file);
}

static int display_name(struct symbolizer *s, const char *raw, char **out);

/* An inlined subroutine's name: its linkage name demangled, else its plain name (through its origin). */
static int inline_name(struct symbolizer *s, Dwarf_Die *die, char **out)
{
	Dwarf_Attribute a;
	const char *raw = NULL;

	*out = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		raw = dwarf_formstring(&a);
	if (!raw && dwarf_attr_integrate(die, DW_AT_name, &a))
		raw = dwarf_formstring(&a);
	return raw ? display_name(s, raw, out) : 0;
}

/*
 * Functions inlined at vaddr become frames of their own, innermost first, as debuggers show them: the
 * innermost at the address's line, each outer one (and at last the real function, e->f) at the line of
 * the call that was inlined.
 */
static int add_inlines(struct symbolizer *s, Dwarf_Die *cu, uint64_t vaddr, struct frame_ent *e)
{
	Dwarf_Die *scopes = NULL;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0, k = 0;
	int n, err = 0;

	n = dwarf_getscopes(cu, vaddr, &scopes);
	if (n <= 0)
		return 0;
	for (int i = 0; i < n; i++)
		e->ninl += dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine;
	if (!e->ninl)
		goto out;
	e->inl = calloc(e->ninl, sizeof(*e->inl));
	if (!e->inl) {
		e->ninl = 0;
		err = -ENOMEM;
		goto out;
	}
	dwarf_getsrcfiles(cu, &files, &nfiles);
	/* the innermost inlined function takes the address's own line */
	e->inl[0] = e->f;
	e->f.file = NULL;
	e->f.line = 0;
	for (int i = 0; i < n && k < e->ninl; i++) {
		struct ml_frame *fr = &e->inl[k], *outer = k + 1 < e->ninl ? &e->inl[k + 1] : &e->f;
		Dwarf_Attribute a;
		Dwarf_Word v;

		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			continue;
		err = inline_name(s, &scopes[i], &fr->func);
		if (err)
			goto out;
		fr->inlined = true;
		fr->outer = outer;
		if (k + 1 < e->ninl)
			*outer = (struct ml_frame){
			    .kind = ML_FRAME_NATIVE, .addr = e->f.addr, .module = e->f.module, .offset = e->f.offset};
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &a) && !dwarf_formudata(&a, &v) && v > 0 && v <= INT32_MAX)
			outer->line = (int)v;
		if (files && dwarf_attr(&scopes[i], DW_AT_call_file, &a) && !dwarf_formudata(&a, &v) && v < nfiles) {
			const char *src = dwarf_filesrc(files, v, NULL, NULL);

			if (src && (err = src_copy(s, src, &outer->file)))
				goto out;
		}
		k++;
	}
out:
	free(scopes);
	return err;
}

static int display_name(struct symbolizer *s, const char *raw, char **out)
{
	char *d = u64map__get(&s->names, (uintptr_t)raw);
	size_t len;

	if (d) {
		*out = d;
		return 0;
	}
	d = ml_demangle(raw);
	if (!d) {
		if (errno == ENOMEM)
			return -ENOMEM;
		len = strcspn(raw, "@");
		d = strndup(raw, len ? len : strlen(raw));
		if (!d)
			return -ENOMEM;
	}
	if (u64map__put(&s->names, (uintptr_t)raw, d)) {
		free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
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
		err = display_name(s, raw, &e->f.func);
		if (err)
			goto fail;
		e->f.offset = sym_off + (addr - pc);
	}
	if (f->dw) {
		Dwarf_Die cu;

		err = find_cu(f, vpc, &cu);
		if (err == -ENOENT)
			return 0;
		if (!err)
			err = find_line(s, &cu, vpc, &e->f);
		if (!err)
			err = add_inlines(s, &cu, vpc, e);
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
