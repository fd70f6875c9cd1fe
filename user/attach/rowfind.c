/* Which of the allocator table's rows one object defines, and where (see rowfind.h). */
#define _GNU_SOURCE
#include "attach/rowfind.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attach/allocators.h"
#include "lib/demangle.h"
#include "lib/elfsites.h"
#include "lib/elfsym.h"
#include "lib/log.h"

static bool wanted(const struct rowfind_opts *o, const struct ml_allocator *a)
{
	if (a->spec.kind == ML_KIND_STEP)
		return o->step != NULL;
	return o->layers & (1U << a->spec.layer);
}

/* A row's function as looked for: the step clock's is the one --step names. */
static const char *row_func(const struct rowfind_opts *o, unsigned int row)
{
	return ml_allocators[row].spec.kind == ML_KIND_STEP && o->step ? o->step : ml_allocators[row].func;
}

static enum ml_match row_match(const struct rowfind_opts *o, unsigned int row)
{
	if (ml_allocators[row].spec.kind == ML_KIND_STEP && o->step)
		return ml_step_match(o->step);
	return ml_allocators[row].match;
}

/* A demangled row still looked for, and the identifier its mangled name must spell: <len><tok>. */
struct pending {
	unsigned int row;
	const char *func; /* its whole demangled name */
	const char *tok;
	size_t len;
	char dec[24]; /* len in decimal */
	size_t ndec;
};

struct demangle_ctx {
	struct found *found;
	struct pending *want;
	size_t nwant;
	bool pair[10][256]; /* a length's last digit, then its identifier's first character: where one may start */
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

/* The rows whose identifier starts at id, n characters long: the demangler then decides. */
static int try_rows(struct demangle_ctx *ctx, const char *raw, uint64_t vaddr, const char *id, size_t n, char **dm)
{
	for (size_t i = 0; i < ctx->nwant; i++) {
		const struct pending *w = &ctx->want[i];

		if (w->len != n || ctx->found[w->row].ok || id[0] != w->tok[0] || strncmp(id, w->tok, n))
			continue;
		if (!*dm && !(*dm = ml_demangle(raw)))
			return -ENOMEM;
		if (!strcmp(*dm, w->func)) {
			ctx->found[w->row].ok = true;
			ctx->found[w->row].vaddr = vaddr;
		}
	}
	return 0;
}

/*
 * At c, a digit: the rows whose <len><identifier> has its length end here. Any digit may start a length
 * ("3c109alloc_cpu" spells 9alloc_cpu: an identifier can end in digits), so the decimal need only end at c.
 */
static int try_at(struct demangle_ctx *ctx, const char *raw, uint64_t vaddr, const char *c, char **dm)
{
	for (size_t i = 0; i < ctx->nwant; i++) {
		const struct pending *w = &ctx->want[i];

		if (w->dec[w->ndec - 1] != c[0] || w->tok[0] != c[1] || (size_t)(c - raw) + 1 < w->ndec ||
		    memcmp(c + 1 - w->ndec, w->dec, w->ndec))
			continue;
		if (try_rows(ctx, raw, vaddr, c + 1, w->len, dm))
			return -ENOMEM;
	}
	return 0;
}

/*
 * One symbol against the rows still looked for, in one scan of its mangled name: a row is a candidate when
 * the name spells its identifier as a source name, <length><identifier>, and only candidates are demangled.
 * A table of (a length's last digit, its identifier's first character) passes over the rest of the name at a
 * compare a character: libtorch's names are 78 MB.
 */
static int match_demangled(const char *raw, uint64_t vaddr, uint64_t size, void *vctx)
{
	struct demangle_ctx *ctx = vctx;
	char *dm = NULL;

	(void)size;
	if (raw[0] != '_' || raw[1] != 'Z')
		return 0;
	for (const char *c = raw + 2; c[0] && c[1]; c++) {
		unsigned int d = (unsigned int)((unsigned char)c[0] - '0');

		if (d <= 9 && ctx->pair[d][(unsigned char)c[1]] && try_at(ctx, raw, vaddr, c, &dm))
			break;
	}
	free(dm);
	return 0;
}

/* The demangled rows to look for, each with its identifier: computed once, not once per symbol. */
static int pending_rows(const struct rowfind_opts *o, const struct found *found, struct demangle_ctx *ctx)
{
	ctx->want = calloc(ml_allocators_n, sizeof(*ctx->want));
	if (!ctx->want)
		return -ENOMEM;
	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		struct pending *w = &ctx->want[ctx->nwant];

		if (row_match(o, row) == ML_MATCH_DEMANGLED && !found[row].ok && wanted(o, &ml_allocators[row]) &&
		    name_token(row_func(o, row), &w->tok, &w->len)) {
			w->row = row;
			w->func = row_func(o, row);
			w->ndec = (size_t)snprintf(w->dec, sizeof(w->dec), "%zu", w->len);
			ctx->pair[w->dec[w->ndec - 1] - '0'][(unsigned char)w->tok[0]] = true;
			ctx->nwant++;
		}
	}
	return 0;
}

/* Whether a row is found by its symbol's name in this pass (the PLT rows wait for the demangled pass). */
static bool by_symbol(const struct rowfind_opts *o, unsigned int row)
{
	const struct ml_allocator *a = &ml_allocators[row];

	return wanted(o, a) && (a->lib == ML_LIB_LIBC) == o->as_libc && row_match(o, row) != ML_MATCH_DEMANGLED &&
	       a->lib != ML_LIB_PLT;
}

/* The rows found by their symbol's name, in one pass; a C library's required ones must be there. 0 or -errno. */
static int find_symbols(const struct elf_syms *syms, const struct rowfind_opts *o, struct found *found,
			bool *any_demangled)
{
	struct elf_sym_want *w = calloc(ml_allocators_n, sizeof(*w));
	size_t n = 0;
	int err;

	if (!w)
		return -ENOMEM;
	for (unsigned int row = 0; row < ml_allocators_n; row++) {
		const struct ml_allocator *a = &ml_allocators[row];

		if (wanted(o, a) && (a->lib == ML_LIB_LIBC) == o->as_libc && row_match(o, row) == ML_MATCH_DEMANGLED)
			*any_demangled = true;
		if (by_symbol(o, row))
			w[n++].name = row_func(o, row);
	}
	err = elf_syms__find_each(syms, w, n);
	for (unsigned int row = 0, k = 0; row < ml_allocators_n && !err; row++) {
		if (!by_symbol(o, row))
			continue;
		found[row].ok = w[k].found;
		found[row].vaddr = w[k++].vaddr;
		if (!found[row].ok && ml_allocators[row].required)
			err = -ENOENT;
	}
	free(w);
	return err;
}

/* Aliases (tcmalloc's free is its operator delete): one probe per function, its first row's. */
static void drop_aliases(const struct rowfind_opts *o, struct found *found)
{
	for (unsigned int row = 0; row < ml_allocators_n; row++)
		for (unsigned int prev = 0; found[row].ok && prev < row; prev++)
			if (found[prev].ok && found[prev].vaddr == found[row].vaddr) {
				ml_dbg("%s: %s is %s: probed once", o->path, row_func(o, row), row_func(o, prev));
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
	struct demangle_ctx dctx = {.found = found};
	bool any_demangled = false;
	int err;

	err = find_symbols(syms, o, found, &any_demangled);
	if (err)
		return err;
	drop_aliases(o, found);
	if (any_demangled && !o->as_libc) {
		err = pending_rows(o, found, &dctx);
		if (err)
			return err;
		if (dctx.nwant)
			elf_syms__for_each(syms, match_demangled, &dctx);
		free(dctx.want);
	}
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
