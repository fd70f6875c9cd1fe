/* Which of the allocator table's rows one object defines, and where (see rowfind.h). */
#define _GNU_SOURCE
#include "attach/rowfind.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "attach/allocators.h"
#include "lib/demangle.h"
#include "lib/elfsym.h"
#include "lib/log.h"

static bool wanted(const struct rowfind_opts *o, const struct ml_allocator *a)
{
	return o->layers & (1U << a->spec.layer);
}

struct demangle_ctx {
	const struct rowfind_opts *o;
	struct found *found;
};

/*
 * The identifier just before the parameter list: "raw_alloc" of "...::raw_alloc(unsigned long)". The list's
 * '(' is the first outside template arguments ("Impl<std::function<void (T*)> >::free(void*)").
 */
static bool name_token(const char *demangled, const char **tok, size_t *len)
{
	const char *paren = NULL, *start;
	int depth = 0;

	for (const char *c = demangled; *c && !paren; c++) {
		if (*c == '<')
			depth++;
		else if (*c == '>')
			depth--;
		else if (*c == '(' && depth == 0)
			paren = c;
	}
	if (!paren)
		return false;
	start = paren;
	while (start > demangled && start[-1] != ':' && start[-1] != ' ')
		start--;
	*tok = start;
	*len = (size_t)(paren - start);
	return *len > 0;
}

static int match_demangled(const char *raw, uint64_t vaddr, uint64_t size, void *vctx)
{
	struct demangle_ctx *ctx = vctx;
	char *dm = NULL;

	if (strncmp(raw, "_Z", 2))
		return 0;
	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		const struct ml_allocator *a = &ml_allocators[row];
		const char *tok;
		size_t len;

		if (a->match != ML_MATCH_DEMANGLED || ctx->found[row].ok || !wanted(ctx->o, a) ||
		    !name_token(a->func, &tok, &len))
			continue;
		/* Cheap filter first: the mangled name spells the identifier as <length><name>. */
		if (!memmem(raw, strlen(raw), tok, len))
			continue;
		if (!dm && !(dm = ml_demangle(raw)))
			return 0;
		if (!strcmp(dm, a->func)) {
			ctx->found[row].ok = true;
			ctx->found[row].vaddr = vaddr;
		}
	}
	free(dm);
	return 0;
}

/* The rows found by their symbol's name; a C library's required ones must be there. 0 or -ENOENT. */
static int find_symbols(const struct elf_syms *syms, const struct rowfind_opts *o, struct found *found,
			bool *any_demangled)
{
	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		const struct ml_allocator *a = &ml_allocators[row];
		uint64_t size;

		if (!wanted(o, a) || (a->lib == ML_LIB_LIBC) != o->as_libc)
			continue;
		if (a->match == ML_MATCH_DEMANGLED)
			*any_demangled = true;
		else if (a->lib == ML_LIB_PLT)
			continue; /* after the demangled pass has found the host */
		else if (elf_syms__find(syms, a->func, &found[row].vaddr, &size) == 0)
			found[row].ok = true;
		else if (a->required)
			return -ENOENT;
	}
	return 0;
}

/* Aliases (tcmalloc's free is its operator delete): one probe per function, its first row's. */
static void drop_aliases(const struct rowfind_opts *o, struct found *found)
{
	for (unsigned int row = 0; row < ml_allocators_n; row++)
		for (unsigned int prev = 0; found[row].ok && prev < row; prev++)
			if (found[prev].ok && found[prev].vaddr == found[row].vaddr) {
				ml_dbg("%s: %s is %s: probed once", o->path, ml_allocators[row].func,
				       ml_allocators[prev].func);
				found[row].ok = false;
			}
}

/* PLT rows: the stubs through which a library whose demangled host row was found calls them. */
static void find_plt_stubs(const struct elf_syms *syms, const struct rowfind_opts *o, struct found *found)
{
	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		const struct ml_allocator *a = &ml_allocators[row];

		if (a->lib != ML_LIB_PLT || !wanted(o, a))
			continue;
		for (unsigned int h = 0; h < ml_allocators_n; h++)
			if (found[h].ok && ml_allocators[h].match == ML_MATCH_DEMANGLED &&
			    !strcmp(ml_allocators[h].func, a->host) &&
			    elf_syms__plt_stub(syms, a->func, &found[row].vaddr) == 0)
				found[row].ok = true;
	}
}

int ml_rows_find(const struct elf_syms *syms, const struct rowfind_opts *o, struct found *found)
{
	struct demangle_ctx dctx = {.o = o, .found = found};
	bool any_demangled = false;
	int err;

	err = find_symbols(syms, o, found, &any_demangled);
	if (err)
		return err;
	drop_aliases(o, found);
	if (any_demangled && !o->as_libc)
		elf_syms__for_each(syms, match_demangled, &dctx);
	if (!o->as_libc)
		find_plt_stubs(syms, o, found);
	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		if (found[row].ok && ml_allocators[row].optin && !o->torch_raw) {
			ml_info("%s: %s not probed (needs --torch-raw-alloc)", o->path, ml_allocators[row].func);
			found[row].ok = false;
		}
	}
	return 0;
}
