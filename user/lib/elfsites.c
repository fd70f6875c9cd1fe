/*
 * Probe sites an ELF file has beside its function symbols: SystemTap SDT notes and x86-64 PLT stubs, found
 * through its sections (elfsites.h).
 */
#define _GNU_SOURCE
#include "lib/elfsites.h"
#include <errno.h>
#include <string.h>

/*
 * SystemTap SDT notes: type 3, owner "stapsdt", a descriptor of three addresses (the probe, the .stapsdt.base
 * section, the semaphore) followed by the provider, the name and the arguments, each NUL-terminated. Every
 * length is the file's word: a string that runs past its descriptor is read as missing, with those after it.
 */
#define SDT_NOTE_TYPE 3
#define SDT_DESC_ADDRS 24

int elf_syms__for_each_sdt(const struct elf_syms *s, int (*cb)(const struct elf_sdt_note *n, void *ctx), void *ctx)
{
	size_t off = 0, name_off, desc_off;
	GElf_Shdr sh;
	Elf_Scn *scn = ml_elf_section(elf_syms__elf(s), ".note.stapsdt", true, &sh);
	Elf_Data *d = scn && sh.sh_type == SHT_NOTE ? elf_getdata(scn, NULL) : NULL;
	GElf_Nhdr nh;

	if (!d || !d->d_buf)
		return 0;
	while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const char *desc = (const char *)d->d_buf + desc_off, *str[3];
		size_t at = SDT_DESC_ADDRS;
		struct elf_sdt_note n;
		int i, ret;

		if (nh.n_type != SDT_NOTE_TYPE || nh.n_namesz != sizeof("stapsdt") ||
		    memcmp((const char *)d->d_buf + name_off, "stapsdt", sizeof("stapsdt")) ||
		    nh.n_descsz < SDT_DESC_ADDRS)
			continue;
		for (i = 0; i < 3 && at < nh.n_descsz; i++) {
			const char *end = memchr(desc + at, '\0', nh.n_descsz - at);

			if (!end)
				break;
			str[i] = desc + at;
			at = (size_t)(end - desc) + 1;
		}
		if (i < 1)
			continue;
		memcpy(&n.pc, desc, 8);
		memcpy(&n.base, desc + 8, 8);
		memcpy(&n.semaphore, desc + 16, 8);
		n.provider = str[0];
		n.name = i > 1 ? str[1] : "";
		n.args = i > 2 ? str[2] : "";
		ret = cb(&n, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

static int is_provider(const struct elf_sdt_note *n, void *ctx)
{
	return !strcmp(n->provider, ctx);
}

bool elf_syms__has_sdt_provider(const struct elf_syms *s, const char *provider)
{
	return elf_syms__for_each_sdt(s, is_provider, (void *)provider) != 0;
}

/*
 * x86-64 PLT: the i-th .rela.plt relocation has its stub at .plt.sec + 16 i when the object has a
 * .plt.sec (IBT builds), else at .plt + 16 (i + 1) after the resolver stub. A probe on such a stub fires
 * only for this object's calls to that function.
 */
int elf_syms__plt_stub(const struct elf_syms *s, const char *name, uint64_t *vaddr)
{
	GElf_Shdr rela_sh, plt_sh, sec_sh, dynsym_sh;
	Elf_Scn *rela, *plt, *sec, *dynsym;
	Elf_Data *rd, *sd;
	size_t n, len = strlen(name);
	Elf *elf = elf_syms__elf(s);

	rela = ml_elf_section(elf, ".rela.plt", false, &rela_sh);
	plt = ml_elf_section(elf, ".plt", false, &plt_sh);
	sec = ml_elf_section(elf, ".plt.sec", false, &sec_sh);
	if (!rela || !plt || rela_sh.sh_type != SHT_RELA || !rela_sh.sh_entsize)
		return -ENOENT;
	dynsym = elf_getscn(elf, rela_sh.sh_link);
	if (!dynsym || !gelf_getshdr(dynsym, &dynsym_sh) || dynsym_sh.sh_type != SHT_DYNSYM)
		return -ENOENT;
	rd = elf_getdata(rela, NULL);
	sd = elf_getdata(dynsym, NULL);
	if (!rd || !sd)
		return -ENOENT;
	n = rela_sh.sh_size / rela_sh.sh_entsize;
	for (size_t i = 0; i < n; i++) {
		GElf_Rela r;
		GElf_Sym sym;
		const char *sname;
		uint64_t stub;

		if (!gelf_getrela(rd, (int)i, &r) || GELF_R_TYPE(r.r_info) != R_X86_64_JUMP_SLOT)
			continue;
		if (!gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym))
			continue;
		sname = elf_strptr(elf, dynsym_sh.sh_link, sym.st_name);
		if (!sname || strncmp(sname, name, len) || (sname[len] && sname[len] != '@'))
			continue;
		stub = sec ? sec_sh.sh_addr + 16 * i : plt_sh.sh_addr + 16 * (i + 1);
		if ((sec && stub + 16 > sec_sh.sh_addr + sec_sh.sh_size) ||
		    (!sec && stub + 16 > plt_sh.sh_addr + plt_sh.sh_size))
			return -ENOENT; /* a malformed object: the index points past the stubs */
		*vaddr = stub;
		return 0;
	}
	return -ENOENT;
}
