/*
 * Where an ELF file can be probed beside its function symbols: its SystemTap SDT notes (USDT probes) and the
 * PLT stubs through which it calls other objects' functions. Both read its sections, through elf_syms's Elf.
 */
#ifndef MEMLEAK_AI_ELFSITES_H
#define MEMLEAK_AI_ELFSITES_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/elfsym.h"

/* Whether its SystemTap SDT notes (.note.stapsdt; 64-bit objects) have a probe of this provider ("pytorch"). */
bool elf_syms__has_sdt_provider(const struct elf_syms *s, const char *provider);

/* One SystemTap SDT note: its probe's address, .stapsdt.base and semaphore as linked, and its strings. */
struct elf_sdt_note {
	uint64_t pc, base, semaphore;	    /* semaphore 0: none */
	const char *provider, *name, *args; /* args: "-8@%rdi -4@8(%rsp)", "" for none */
};

/* Call cb for each SDT note (64-bit objects); cb returns non-zero to stop, and that value is returned, else 0. */
int elf_syms__for_each_sdt(const struct elf_syms *s, int (*cb)(const struct elf_sdt_note *n, void *ctx), void *ctx);

/* The address of this object's PLT stub for calls to `name` (version suffix ignored). 0 or -ENOENT. */
int elf_syms__plt_stub(const struct elf_syms *s, const char *name, uint64_t *vaddr);

#endif
