/* Function symbols and load segments of one ELF file, read with libelf. */
#ifndef MEMLEAK_AI_ELFSYM_H
#define MEMLEAK_AI_ELFSYM_H

#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>

struct elf_syms;

/*
 * Read .symtab and .dynsym (merged, duplicates dropped) and the PT_LOAD program headers of the
 * ELF file open on fd. fd is duplicated; the caller keeps its own. -ENOEXEC if not a usable ELF
 * (not ET_EXEC/ET_DYN, no PT_LOAD, malformed), -ENOMEM.
 */
int elf_syms__open(int fd, struct elf_syms **out);
/*
 * What elf_syms__open_as reads: the segments and data symbols alone; function symbols too, as the file lists
 * them, repeats kept (for elf_syms__find and one pass of elf_syms__for_each: planning probes in libtorch's
 * 600,000 symbols, where sorting took a third of the time); or sorted by address, for elf_syms__lookup.
 */
enum elf_syms_read { ELF_SYMS_DATA, ELF_SYMS_FUNCS, ELF_SYMS_SORTED };
int elf_syms__open_as(int fd, enum elf_syms_read what, struct elf_syms **out);
void elf_syms__free(struct elf_syms *s); /* NULL-safe */

/*
 * Defined function symbol (STT_FUNC or STT_GNU_IFUNC, st_shndx != SHN_UNDEF, value != 0) by name.
 * A versioned table name ("malloc@GLIBC_2.2.5", "cudaMalloc@@libcudart.so.13") matches its part
 * before '@'. Prefers default-version over hidden-version, then global over weak over local.
 * Returns 0 or -ENOENT.
 */
int elf_syms__find(const struct elf_syms *s, const char *name, uint64_t *vaddr, uint64_t *size);

/* elf_syms__find for n names in one pass over the symbols: found, vaddr and size of each. 0 or -ENOMEM. */
struct elf_sym_want {
	const char *name;
	bool found;
	uint64_t vaddr, size;
};
int elf_syms__find_each(const struct elf_syms *s, struct elf_sym_want *w, size_t n);

/* Defined data symbol (STT_OBJECT) by name, version suffix ignored: _PyRuntime, Py_Version. 0 or -ENOENT. */
int elf_syms__find_object(const struct elf_syms *s, const char *name, uint64_t *vaddr, uint64_t *size);
/* Call cb for every defined data symbol whose table name starts with prefix ("_ZTV": the vtables), of .dynsym
 * alone with dynamic_only; cb returns non-zero to stop, and that value is returned, else 0. */
int elf_syms__for_each_object(const struct elf_syms *s, const char *prefix, bool dynamic_only,
			      int (*cb)(const char *name, uint64_t vaddr, uint64_t size, void *ctx), void *ctx);
/*
 * Call cb for every defined function symbol (raw table names, version suffix included). cb returns
 * non-zero to stop; that value is returned, else 0.
 */
int elf_syms__for_each(const struct elf_syms *s, int (*cb)(const char *name, uint64_t vaddr, uint64_t size, void *ctx),
		       void *ctx);

/* Translation through the PT_LOAD file images. -ENOENT outside them. */
int elf_syms__vaddr_to_offset(const struct elf_syms *s, uint64_t vaddr, uint64_t *off);
int elf_syms__offset_to_vaddr(const struct elf_syms *s, uint64_t off, uint64_t *vaddr);

/*
 * Symbol containing vaddr: vaddr in [st_value, st_value + max(size, 1)), or for a size-0 symbol the
 * nearest preceding one when vaddr is in the same section. Returns the raw name (valid until
 * elf_syms__free) and *sym_off = vaddr - st_value, or NULL (NULL always unless opened ELF_SYMS_SORTED).
 */
const char *elf_syms__lookup(const struct elf_syms *s, uint64_t vaddr, uint64_t *sym_off);

/*
 * The first section called want, or NULL; *out gets its header. With skip_nobits, the first of that name
 * with contents in the file (a debug file keeps some sections as NOBITS placeholders).
 */
Elf_Scn *ml_elf_section(Elf *elf, const char *want, bool skip_nobits, GElf_Shdr *out);

Elf *elf_syms__elf(const struct elf_syms *s);	/* for libdw; owned by s */
int elf_syms__is_dyn(const struct elf_syms *s); /* ET_DYN */

#endif
