/* libFuzzer target: ELF files come from the target's mappings, so any bytes must load or be rejected cleanly. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "lib/elfsites.h"
#include "lib/elfsym.h"

static int visit(const char *name, uint64_t vaddr, uint64_t size, void *ctx)
{
	(void)name, (void)vaddr, (void)size, (void)ctx;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct elf_syms *s = NULL;
	uint64_t v, sz, off;
	int fd = memfd_create("fuzz-elf", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size && elf_syms__open(fd, &s) == 0) {
		elf_syms__find(s, "malloc", &v, &sz);
		elf_syms__plt_stub(s, "posix_memalign", &v);
		elf_syms__for_each(s, visit, NULL);
		elf_syms__vaddr_to_offset(s, 0x1000, &off);
		elf_syms__offset_to_vaddr(s, 0x1000, &v);
		elf_syms__lookup(s, 0x1000, &off);
		elf_syms__has_sdt_provider(s, "pytorch");
		elf_syms__free(s);
	}
	close(fd);
	return 0;
}
