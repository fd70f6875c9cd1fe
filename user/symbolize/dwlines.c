/*
 * One file's DWARF (libdw): the source line of an address, and the functions inlined there as frames of their
 * own. Compile units are found by .debug_aranges, or by their ranges where a compiler (clang) writes none.
 */
#include "symbolize/dwlines.h"
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

struct cu_range {
	uint64_t start, end;
	Dwarf_Die die;
};

struct dwlines {
	Dwarf *dw;
	/* Units by address, built only when dwarf_addrdie fails (no .debug_aranges, as with clang). */
	struct cu_range *cus;
	size_t ncus;
	bool cus_built;
};

int dwlines__new(Elf *debug, Elf *elf, struct dwlines **out)
{
	Dwarf *dw = debug ? dwarf_begin_elf(debug, DWARF_C_READ, NULL) : NULL;

	*out = NULL;
	if (!dw)
		dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
	/* NULL when there is no DWARF: then there are no lines, which is fine. */
	if (!dw)
		return 0;
	*out = calloc(1, sizeof(**out));
	if (!*out) {
		dwarf_end(dw);
		return -ENOMEM;
	}
	(*out)->dw = dw;
	return 0;
}

void dwlines__free(struct dwlines *d)
{
	if (!d)
		return;
	dwarf_end(d->dw);
	free(d->cus);
	free(d);
}

static int cmp_cu(const void *a, const void *b)
{
	const struct cu_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int build_cu_ranges(struct dwlines *d)
{
	Dwarf_Addr base, start, end;
	Dwarf_CU *cu = NULL, *next;
	struct cu_range *n;
	size_t cap = 0;
	Dwarf_Half version;
	uint8_t unit_type;
	Dwarf_Die cudie;
	ptrdiff_t off;

	while (dwarf_get_units(d->dw, cu, &next, &version, &unit_type, &cudie, NULL) == 0) {
		cu = next;
		if (unit_type != DW_UT_compile && unit_type != DW_UT_partial)
			continue;
		off = 0;
		while ((off = dwarf_ranges(&cudie, off, &base, &start, &end)) > 0) {
			if (start >= end)
				continue;
			if (d->ncus == cap) {
				cap = cap ? cap * 2 : 64;
				if (cap > SIZE_MAX / sizeof(*n))
					return -ENOMEM;
				n = realloc(d->cus, cap * sizeof(*n));
				if (!n)
					return -ENOMEM;
				d->cus = n;
			}
			d->cus[d->ncus].start = start;
			d->cus[d->ncus].end = end;
			d->cus[d->ncus].die = cudie;
			d->ncus++;
		}
	}
	if (d->ncus)
		qsort(d->cus, d->ncus, sizeof(*d->cus), cmp_cu);
	d->cus_built = true;
	return 0;
}

/* How many units starting below an address are checked for containing it (ranges may nest). */
#define CU_LOOKUP_BACK 8

static int cu_by_ranges(struct dwlines *d, uint64_t vaddr, Dwarf_Die *out)
{
	size_t lo = 0, hi, mid;
	int err, k;

	if (!d->cus_built) {
		err = build_cu_ranges(d);
		if (err)
			return err;
	}
	hi = d->ncus;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (d->cus[mid].start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = 0; lo && k < CU_LOOKUP_BACK; k++, lo--) {
		if (vaddr < d->cus[lo - 1].end) {
			*out = d->cus[lo - 1].die;
			return 0;
		}
	}
	return -ENOENT;
}

/* The compile unit holding vaddr: 0, -ENOENT, -ENOMEM. */
static int find_cu(struct dwlines *d, uint64_t vaddr, Dwarf_Die *cu)
{
	if (dwarf_addrdie(d->dw, vaddr, cu))
		return 0;
	return cu_by_ranges(d, vaddr, cu);
}

static int find_line(struct symnames *nm, Dwarf_Die *cu, uint64_t vaddr, struct ml_frame *fr)
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
	return symnames__src(nm, src, &fr->file);
}

/* An inlined subroutine's name: its linkage name demangled, else its plain name (through its origin). */
static int inline_name(struct symnames *nm, Dwarf_Die *die, char **out)
{
	Dwarf_Attribute a;
	const char *raw = NULL;

	*out = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		raw = dwarf_formstring(&a);
	if (!raw && dwarf_attr_integrate(die, DW_AT_name, &a))
		raw = dwarf_formstring(&a);
	return raw ? symnames__display(nm, raw, out) : 0;
}

/*
 * Functions inlined at vaddr become frames of their own, innermost first, as debuggers show them: the
 * innermost at the address's line, each outer one (and at last the real function, f) at the line of
 * the call that was inlined.
 */
static int add_inlines(struct symnames *nm, Dwarf_Die *cu, uint64_t vaddr, struct ml_frame *f, struct ml_frame **inl,
		       size_t *ninl)
{
	Dwarf_Die *scopes = NULL;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0, k = 0;
	int n, err = 0;

	n = dwarf_getscopes(cu, vaddr, &scopes);
	if (n <= 0)
		return 0;
	for (int i = 0; i < n; i++)
		*ninl += dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine;
	if (!*ninl)
		goto out;
	*inl = calloc(*ninl, sizeof(**inl));
	if (!*inl) {
		*ninl = 0;
		err = -ENOMEM;
		goto out;
	}
	dwarf_getsrcfiles(cu, &files, &nfiles);
	/* the innermost inlined function takes the address's own line */
	(*inl)[0] = *f;
	f->file = NULL;
	f->line = 0;
	for (int i = 0; i < n && k < *ninl; i++) {
		struct ml_frame *fr = &(*inl)[k], *outer = k + 1 < *ninl ? &(*inl)[k + 1] : f;
		Dwarf_Attribute a;
		Dwarf_Word v;

		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			continue;
		err = inline_name(nm, &scopes[i], &fr->func);
		if (err)
			goto out;
		fr->inlined = true;
		fr->outer = outer;
		if (k + 1 < *ninl)
			*outer = (struct ml_frame){
			    .kind = ML_FRAME_NATIVE, .addr = f->addr, .module = f->module, .offset = f->offset};
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &a) && !dwarf_formudata(&a, &v) && v > 0 && v <= INT32_MAX)
			outer->line = (int)v;
		if (files && dwarf_attr(&scopes[i], DW_AT_call_file, &a) && !dwarf_formudata(&a, &v) && v < nfiles) {
			const char *src = dwarf_filesrc(files, v, NULL, NULL);

			if (src && (err = symnames__src(nm, src, &outer->file)))
				goto out;
		}
		k++;
	}
out:
	free(scopes);
	return err;
}

int dwlines__lookup(struct dwlines *d, struct symnames *nm, uint64_t vaddr, struct ml_frame *f, struct ml_frame **inl,
		    size_t *ninl)
{
	Dwarf_Die cu;
	int err;

	*inl = NULL;
	*ninl = 0;
	err = find_cu(d, vaddr, &cu);
	if (err == -ENOENT)
		return 0;
	if (!err)
		err = find_line(nm, &cu, vaddr, f);
	if (!err)
		err = add_inlines(nm, &cu, vaddr, f, inl, ninl);
	return err;
}
