/* Function symbols and load segments of one ELF file, read with libelf. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/radix.h"

struct ml_sym {
	uint64_t value;
	uint64_t size;
	const char *name; /* inside libelf's copy of the string table; lives as long as the Elf */
	uint32_t shndx;	  /* section, or SHN_UNDEF when it has none (SHN_ABS and the like) */
	uint16_t score;	  /* higher is preferred when names or addresses collide */
	uint16_t lead_us; /* leading underscores: "malloc" reads better than "__libc_malloc" */
};

struct ml_load {
	uint64_t vaddr, offset, filesz;
};

struct ml_sect {
	uint64_t addr, size;
	bool alloc;
};

struct elf_syms {
	int fd;
	Elf *elf;
	bool dyn;
	struct ml_sym *syms; /* sorted by value, then preference (ELF_SYMS_SORTED), else as the file lists them */
	bool sorted;
	size_t nsyms, capsyms;
	struct ml_load *loads;
	size_t nloads;
	struct ml_sect *sects; /* indexed by section number */
	size_t nsects;
};

#define SCORE_DEFAULT_VERSION 4
#define SCORE_GLOBAL 2
#define SCORE_WEAK 1

/* Length of the name before any "@VERSION" / "@@VERSION" suffix. */
static size_t base_len(const char *name)
{
	return strcspn(name, "@");
}

static int cmp_base(const char *a, const char *b)
{
	size_t la = base_len(a), lb = base_len(b);
	int c = memcmp(a, b, la < lb ? la : lb);

	if (c)
		return c;
	return la < lb ? -1 : la > lb;
}

/* Order for dropping duplicates: one (address, name) pair once, the best-scored first. */
static int cmp_dedup(const void *pa, const void *pb)
{
	const struct ml_sym *a = pa, *b = pb;
	int c;

	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	c = cmp_base(a->name, b->name);
	if (c)
		return c;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	return a->size > b->size ? -1 : a->size < b->size;
}

/* Final order: by address; among aliases the preferred one first, so lookups take it. */
static int cmp_addr(const void *pa, const void *pb)
{
	const struct ml_sym *a = pa, *b = pb;

	if (a->value != b->value)
		return a->value < b->value ? -1 : 1;
	if (a->score != b->score)
		return a->score > b->score ? -1 : 1;
	if (a->lead_us != b->lead_us)
		return a->lead_us < b->lead_us ? -1 : 1;
	if ((a->size != 0) != (b->size != 0))
		return a->size ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int add_sym(struct elf_syms *s, const struct ml_sym *sym)
{
	if (ml_grow(&s->syms, &s->capsyms, s->nsyms + 1, sizeof(*s->syms)))
		return -ENOMEM;
	s->syms[s->nsyms++] = *sym;
	return 0;
}

static int load_phdrs(struct elf_syms *s)
{
	size_t n, i;
	GElf_Phdr ph;
	uint64_t end;

	if (elf_getphdrnum(s->elf, &n))
		return -ENOEXEC;
	/* libelf has checked that the table fits in the file, which bounds n. */
	s->loads = calloc(n ? n : 1, sizeof(*s->loads));
	if (!s->loads)
		return -ENOMEM;
	for (i = 0; i < n && i <= INT_MAX; i++) {
		if (!gelf_getphdr(s->elf, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		if (__builtin_add_overflow(ph.p_vaddr, ph.p_filesz, &end) ||
		    __builtin_add_overflow(ph.p_offset, ph.p_filesz, &end))
			continue;
		s->loads[s->nloads].vaddr = ph.p_vaddr;
		s->loads[s->nloads].offset = ph.p_offset;
		s->loads[s->nloads].filesz = ph.p_filesz;
		s->nloads++;
	}
	return s->nloads ? 0 : -ENOEXEC;
}

static int load_sections(struct elf_syms *s)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t n, idx;

	if (elf_getshdrnum(s->elf, &n))
		return -ENOEXEC;
	/* Like the program headers, libelf has bounded n by the file size. */
	s->sects = calloc(n ? n : 1, sizeof(*s->sects));
	if (!s->sects)
		return -ENOMEM;
	s->nsects = n;
	while ((scn = elf_nextscn(s->elf, scn))) {
		idx = elf_ndxscn(scn);
		if (idx >= n || !gelf_getshdr(scn, &sh))
			continue;
		/* A separate debug file keeps the code sections' addresses with no contents (NOBITS): its
		 * .symtab still names their functions. */
		if (!(sh.sh_flags & SHF_ALLOC))
			continue;
		if (sh.sh_addr + sh.sh_size < sh.sh_addr)
			continue;
		s->sects[idx].addr = sh.sh_addr;
		s->sects[idx].size = sh.sh_size;
		s->sects[idx].alloc = true;
	}
	return 0;
}

/* Section data of the first section of a type linked to section link, or NULL. */
static Elf_Data *linked_data(Elf *elf, Elf64_Word type, size_t link)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		if (gelf_getshdr(scn, &sh) && sh.sh_type == type && sh.sh_link == link)
			return elf_getdata(scn, NULL);
	}
	return NULL;
}

static int load_symtab(struct elf_syms *s, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *data, *xdata, *vdata = NULL;
	size_t entsize, n, i, idx = elf_ndxscn(scn);
	struct ml_sym sym;
	Elf32_Word xndx;
	GElf_Versym ver;
	const char *name;
	bool hidden;
	GElf_Sym es;
	int type, bind, err;

	data = elf_getdata(scn, NULL);
	entsize = gelf_fsize(s->elf, ELF_T_SYM, 1, EV_CURRENT);
	if (!data || !entsize)
		return 0;
	n = data->d_size / entsize;
	xdata = linked_data(s->elf, SHT_SYMTAB_SHNDX, idx);
	/* Versions of .dynsym entries live in .gnu.version, indexed alike. */
	if (sh->sh_type == SHT_DYNSYM) {
		Elf_Scn *vs = NULL;
		GElf_Shdr vsh;

		while ((vs = elf_nextscn(s->elf, vs))) {
			if (gelf_getshdr(vs, &vsh) && vsh.sh_type == SHT_GNU_versym && vsh.sh_link == idx) {
				vdata = elf_getdata(vs, NULL);
				break;
			}
		}
	}
	for (i = 1; i < n && i <= INT_MAX; i++) {
		xndx = 0;
		if (!gelf_getsymshndx(data, xdata, (int)i, &es, &xndx))
			continue;
		type = GELF_ST_TYPE(es.st_info);
		bind = GELF_ST_BIND(es.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC)
			continue;
		if (es.st_shndx == SHN_UNDEF || !es.st_value)
			continue;
		name = elf_strptr(s->elf, sh->sh_link, es.st_name);
		if (!name || !*name)
			continue;
		memset(&sym, 0, sizeof(sym));
		sym.value = es.st_value;
		sym.size = es.st_size;
		if (sym.value + sym.size < sym.value)
			sym.size = UINT64_MAX - sym.value;
		sym.name = name;
		if (es.st_shndx == SHN_XINDEX)
			sym.shndx = xdata ? xndx : SHN_UNDEF;
		else if (es.st_shndx < SHN_LORESERVE)
			sym.shndx = es.st_shndx;
		else
			sym.shndx = SHN_UNDEF;
		/* "name@VER" is a non-default version, "name@@VER" the default one. */
		hidden = strchr(name, '@') && !strstr(name, "@@");
		if (vdata && gelf_getversym(vdata, (int)i, &ver) && (ver & 0x8000))
			hidden = true;
		if (!hidden)
			sym.score += SCORE_DEFAULT_VERSION;
		if (bind == STB_GLOBAL || bind == STB_GNU_UNIQUE)
			sym.score += SCORE_GLOBAL;
		else if (bind == STB_WEAK)
			sym.score += SCORE_WEAK;
		while (sym.lead_us < UINT16_MAX && name[sym.lead_us] == '_')
			sym.lead_us++;
		err = add_sym(s, &sym);
		if (err)
			return err;
	}
	return 0;
}

/* The symbols of one address, s->syms[*n..] on return: .symtab repeats what .dynsym has, so one entry per base
 * name is kept, the best-scored, and the aliases left come in lookup order. run[0..len) is sorted by address. */
static void keep_run(struct elf_syms *s, struct ml_sym *run, size_t len, size_t *n)
{
	size_t j = 1;

	if (len > 1) {
		qsort(run, len, sizeof(*run), cmp_dedup);
		for (size_t i = 1; i < len; i++)
			if (cmp_base(run[i].name, run[j - 1].name))
				run[j++] = run[i];
		qsort(run, j, sizeof(*run), cmp_addr);
	}
	memmove(&s->syms[*n], run, j * sizeof(*run));
	*n += j;
}

/* By address (a radix sort: qsort's merge of 620,000 of libtorch_cpu's symbols took 41 % of reading them), then
 * each address's aliases by the comparators, in place. 0 or -ENOMEM. */
static int sort_symbols(struct elf_syms *s)
{
	struct ml_sort_key *k = malloc(2 * s->nsyms * sizeof(*k)), *o;
	struct ml_sym *v = malloc(s->nsyms * sizeof(*v));
	size_t i, start, n = 0;

	if (!k || !v) {
		free(k);
		free(v);
		return -ENOMEM;
	}
	for (i = 0; i < s->nsyms; i++)
		k[i] = (struct ml_sort_key){s->syms[i].value, i};
	o = ml_radix_sort(k, k + s->nsyms, s->nsyms);
	for (i = 0; i < s->nsyms; i++)
		v[i] = s->syms[o[i].idx];
	free(k);
	for (start = 0, i = 1; i <= s->nsyms; i++)
		if (i == s->nsyms || v[i].value != v[start].value) {
			keep_run(s, &v[start], i - start, &n);
			start = i;
		}
	free(v);
	s->nsyms = n;
	return 0;
}

static int load_symbols(struct elf_syms *s, bool sorted)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int err;

	while ((scn = elf_nextscn(s->elf, scn))) {
		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		err = load_symtab(s, scn, &sh);
		if (err)
			return err;
	}
	s->sorted = sorted;
	if (!s->nsyms || !sorted)
		return 0; /* a name's lookups and passes take a repeat as it comes: the first found row wins */
	return sort_symbols(s);
}

int elf_syms__open(int fd, struct elf_syms **out)
{
	return elf_syms__open_as(fd, ELF_SYMS_SORTED, out);
}

int elf_syms__open_as(int fd, enum elf_syms_read what, struct elf_syms **out)
{
	struct elf_syms *s;
	GElf_Ehdr eh;
	int err;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (s->fd < 0) {
		err = -errno;
		free(s);
		return err;
	}
	/*
	 * ELF_C_READ reads what is asked for with pread into memory, rather than mapping the file: a
	 * target that truncates its own file must not be able to SIGBUS us.
	 */
	s->elf = elf_begin(s->fd, ELF_C_READ, NULL);
	err = -ENOEXEC;
	if (!s->elf || elf_kind(s->elf) != ELF_K_ELF || !gelf_getehdr(s->elf, &eh))
		goto fail;
	if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
		goto fail;
	s->dyn = eh.e_type == ET_DYN;
	err = load_phdrs(s);
	if (err)
		goto fail;
	err = load_sections(s);
	if (err)
		goto fail;
	err = what == ELF_SYMS_DATA ? 0 : load_symbols(s, what == ELF_SYMS_SORTED);
	if (err)
		goto fail;
	*out = s;
	return 0;
fail:
	elf_syms__free(s);
	return err;
}

void elf_syms__free(struct elf_syms *s)
{
	if (!s)
		return;
	if (s->elf)
		elf_end(s->elf);
	if (s->fd >= 0)
		close(s->fd);
	free(s->syms);
	free(s->loads);
	free(s->sects);
	free(s);
}

static bool name_matches(const char *table_name, const char *name, size_t len)
{
	return !strncmp(table_name, name, len) && (table_name[len] == '\0' || table_name[len] == '@');
}

int elf_syms__for_each_object(const struct elf_syms *s, const char *prefix, bool dynamic_only,
			      int (*cb)(const char *name, uint64_t vaddr, uint64_t size, void *ctx), void *ctx)
{
	size_t plen = strlen(prefix), entsize = gelf_fsize(s->elf, ELF_T_SYM, 1, EV_CURRENT);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int ret;

	if (!entsize)
		return 0;
	/* Data symbols are looked up rarely: read the tables on demand rather than keep them. */
	while ((scn = elf_nextscn(s->elf, scn))) {
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && (dynamic_only || sh.sh_type != SHT_SYMTAB)))
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 1; data && i < data->d_size / entsize && i <= INT_MAX; i++) {
			const char *nm;
			GElf_Sym es;

			if (!gelf_getsym(data, (int)i, &es) || GELF_ST_TYPE(es.st_info) != STT_OBJECT ||
			    es.st_shndx == SHN_UNDEF || !es.st_value)
				continue;
			nm = elf_strptr(s->elf, sh.sh_link, es.st_name);
			if (nm && !strncmp(nm, prefix, plen) && (ret = cb(nm, es.st_value, es.st_size, ctx)))
				return ret;
		}
	}
	return 0;
}

struct find_object_ctx {
	const char *name;
	size_t len;
	uint64_t vaddr, size;
};

static int find_object_cb(const char *nm, uint64_t vaddr, uint64_t size, void *ctx)
{
	struct find_object_ctx *f = ctx;

	if (!name_matches(nm, f->name, f->len))
		return 0;
	f->vaddr = vaddr;
	f->size = size;
	return 1;
}

int elf_syms__find_object(const struct elf_syms *s, const char *name, uint64_t *vaddr, uint64_t *size)
{
	struct find_object_ctx f = {.name = name, .len = strlen(name)};

	if (elf_syms__for_each_object(s, name, false, find_object_cb, &f) != 1)
		return -ENOENT;
	if (vaddr)
		*vaddr = f.vaddr;
	if (size)
		*size = f.size;
	return 0;
}

/* One symbol against one name: whether it is the name (or the name under a version) and better than *best. */
static void find_step(const struct ml_sym *sym, const char *name, size_t len, const struct ml_sym **best,
		      bool *best_exact)
{
	bool exact;

	/* The first two characters first: libtorch has a million symbols, and a probe set has 40 names. */
	if (sym->name[0] != name[0] || (name[0] && name[1] && sym->name[1] != name[1]))
		return;
	/* A caller asking for "malloc@GLIBC_2.2.5" wants exactly that. */
	if (!name_matches(sym->name, name, len) && strcmp(sym->name, name))
		return;
	exact = !strcmp(sym->name, name);
	if (!*best || (exact && !*best_exact) || (exact == *best_exact && sym->score > (*best)->score)) {
		*best = sym;
		*best_exact = exact;
	}
}

int elf_syms__find_each(const struct elf_syms *s, struct elf_sym_want *w, size_t n)
{
	const struct ml_sym **best = calloc(n ? n : 1, sizeof(*best));
	bool *exact = calloc(n ? n : 1, sizeof(*exact)), first[256] = {false};
	size_t *len = calloc(n ? n : 1, sizeof(*len));

	if (!best || !exact || !len) {
		free(best), free(exact), free(len);
		return -ENOMEM;
	}
	for (size_t j = 0; j < n; j++) {
		len[j] = strlen(w[j].name);
		first[(unsigned char)w[j].name[0]] = true;
	}
	/* One pass whatever n: the names' first characters sort out nearly every symbol at once. */
	for (size_t i = 0; i < s->nsyms; i++) {
		const struct ml_sym *sym = &s->syms[i];

		if (!first[(unsigned char)sym->name[0]])
			continue;
		for (size_t j = 0; j < n; j++)
			find_step(sym, w[j].name, len[j], &best[j], &exact[j]);
	}
	for (size_t j = 0; j < n; j++) {
		w[j].found = best[j] != NULL;
		w[j].vaddr = best[j] ? best[j]->value : 0;
		w[j].size = best[j] ? best[j]->size : 0;
	}
	free(best), free(exact), free(len);
	return 0;
}

int elf_syms__find(const struct elf_syms *s, const char *name, uint64_t *vaddr, uint64_t *size)
{
	const struct ml_sym *best = NULL;
	size_t len = strlen(name);
	bool exact = false;

	for (size_t i = 0; i < s->nsyms; i++)
		find_step(&s->syms[i], name, len, &best, &exact);
	if (!best)
		return -ENOENT;
	if (vaddr)
		*vaddr = best->value;
	if (size)
		*size = best->size;
	return 0;
}

int elf_syms__for_each(const struct elf_syms *s, int (*cb)(const char *name, uint64_t vaddr, uint64_t size, void *ctx),
		       void *ctx)
{
	size_t i;
	int ret;

	for (i = 0; i < s->nsyms; i++) {
		ret = cb(s->syms[i].name, s->syms[i].value, s->syms[i].size, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

int elf_syms__vaddr_to_offset(const struct elf_syms *s, uint64_t vaddr, uint64_t *off)
{
	size_t i;

	for (i = 0; i < s->nloads; i++) {
		const struct ml_load *l = &s->loads[i];

		if (vaddr >= l->vaddr && vaddr - l->vaddr < l->filesz) {
			*off = vaddr - l->vaddr + l->offset;
			return 0;
		}
	}
	return -ENOENT;
}

int elf_syms__offset_to_vaddr(const struct elf_syms *s, uint64_t off, uint64_t *vaddr)
{
	size_t i;

	for (i = 0; i < s->nloads; i++) {
		const struct ml_load *l = &s->loads[i];

		if (off >= l->offset && off - l->offset < l->filesz) {
			*vaddr = off - l->offset + l->vaddr;
			return 0;
		}
	}
	return -ENOENT;
}

static bool contains(const struct ml_sym *sym, uint64_t vaddr)
{
	return vaddr - sym->value < (sym->size ? sym->size : 1);
}

static bool same_section(const struct elf_syms *s, const struct ml_sym *sym, uint64_t vaddr)
{
	const struct ml_sect *sec;

	if (sym->shndx == SHN_UNDEF || sym->shndx >= s->nsects)
		return false;
	sec = &s->sects[sym->shndx];
	return sec->alloc && vaddr >= sec->addr && vaddr - sec->addr < sec->size && sym->value >= sec->addr &&
	       sym->value - sec->addr < sec->size;
}

static bool all_unsized(const struct elf_syms *s, size_t first, size_t end)
{
	size_t i;

	for (i = first; i < end; i++) {
		if (s->syms[i].size)
			return false;
	}
	return true;
}

/* How many distinct addresses below the nearest one are searched for an enclosing sized symbol. */
#define LOOKUP_BACK 16

const char *elf_syms__lookup(const struct elf_syms *s, uint64_t vaddr, uint64_t *sym_off)
{
	size_t lo = 0, hi = s->nsyms, mid, first, i;
	const struct ml_sym *sym = NULL;
	int group;

	if (!s->sorted)
		return NULL;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (s->syms[mid].value <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* syms[lo - 1] is the last symbol at or below vaddr; walk back over whole address groups. */
	for (group = 0; lo && group < LOOKUP_BACK && !sym; group++) {
		first = lo - 1;
		while (first && s->syms[first - 1].value == s->syms[lo - 1].value)
			first--;
		for (i = first; i < lo; i++) {
			if (contains(&s->syms[i], vaddr)) {
				sym = &s->syms[i];
				break;
			}
		}
		/* Size-0 symbols (hand-written assembly) stretch to the next symbol, not further back. */
		if (!sym && !group && all_unsized(s, first, lo) && same_section(s, &s->syms[first], vaddr))
			sym = &s->syms[first];
		lo = first;
	}
	if (!sym)
		return NULL;
	if (sym_off)
		*sym_off = vaddr - sym->value;
	return sym->name;
}

Elf *elf_syms__elf(const struct elf_syms *s)
{
	return s->elf;
}

int elf_syms__is_dyn(const struct elf_syms *s)
{
	return s->dyn;
}

Elf_Scn *ml_elf_section(Elf *elf, const char *want, bool skip_nobits, GElf_Shdr *out)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;

		if (!gelf_getshdr(scn, out) || (skip_nobits && out->sh_type == SHT_NOBITS))
			continue;
		name = elf_strptr(elf, shstrndx, out->sh_name);
		if (name && !strcmp(name, want))
			return scn;
	}
	return NULL;
}
