/* Unit tests for /proc maps parsing, ELF symbol tables and the symbolizer (build with -g -O0). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "lib/demangle.h"
#include "lib/elfsites.h"
#include "lib/elfsym.h"
#include "lib/procmaps.h"
#include "symbolize/symbolizer.h"

/* ---- marker functions: their addresses and lines are what the symbolizer must find ---- */

static int marker_line;

static __attribute__((noinline)) uint64_t grab_return_address(void)
{
	return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

static __attribute__((noinline)) uint64_t marker_function(void)
{
	uint64_t ra = grab_return_address();

	marker_line = __LINE__ - 2; /* the call's line */

	return ra;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* ---- /proc/PID/maps parsing ---- */

static const char sample_maps[] =
    "55d0c6a4e000-55d0c6a53000 r-xp 00002000 08:01 1234567                    /usr/bin/cat\n"
    "55d0c6a4c000-55d0c6a4e000 r--p 00000000 08:01 1234567                    /usr/bin/cat\n"
    "55d0c7a00000-55d0c7a21000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f1a2b000000-7f1a2b021000 rw-p 00000000 00:00 0 \n"
    "7f1a2c000000-7f1a2c001000 r-xp 00000000 fd:02 42                         /tmp/my lib/lib x.so\n"
    "7f1a2d000000-7f1a2d001000 r-xs 00001000 103:05 987654321                 /memfd:jit (deleted)\n"
    "7f1a2e000000-7f1a2e001000 rw-p 00000000 00:00 0\n"
    "7ffc1c000000-7ffc1c021000 rw-p 00000000 00:00 0                          [stack]\n"
    "7ffc1c1fe000-7ffc1c200000 r-xp 00000000 00:00 0                          [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

static bool path_is(const struct ml_mapping *mp, const char *path)
{
	if (!path)
		return !mp->path;
	return mp->path && !strcmp(mp->path, path);
}

static void test_maps_parse(void)
{
	struct ml_maps m;
	const struct ml_mapping *mp;
	int err;

	err = ml_maps__parse(sample_maps, strlen(sample_maps), &m);
	CHECK(!err && m.n == 10, "maps: sample parses to 10 mappings");
	if (err || m.n != 10)
		return;
	/* The first two lines were out of order: the result is sorted. */
	mp = &m.v[0];
	CHECK(mp->start == 0x55d0c6a4c000ULL && mp->end == 0x55d0c6a4e000ULL && !strcmp(mp->perms, "r--p") &&
		  mp->offset == 0 && mp->dev_major == 8 && mp->dev_minor == 1 && mp->inode == 1234567 &&
		  path_is(mp, "/usr/bin/cat") && !mp->deleted,
	      "maps: normal line, sorted");
	mp = &m.v[1];
	CHECK(mp->offset == 0x2000 && !strcmp(mp->perms, "r-xp"), "maps: offset and perms");
	CHECK(path_is(&m.v[2], "[heap]") && m.v[2].inode == 0, "maps: [heap]");
	CHECK(path_is(&m.v[3], NULL), "maps: anonymous with trailing blank");
	CHECK(path_is(&m.v[4], "/tmp/my lib/lib x.so") && m.v[4].dev_major == 0xfd && m.v[4].dev_minor == 2,
	      "maps: path with spaces");
	CHECK(path_is(&m.v[5], "/memfd:jit") && m.v[5].deleted && m.v[5].dev_major == 0x103 && m.v[5].dev_minor == 5 &&
		  m.v[5].inode == 987654321 && !strcmp(m.v[5].perms, "r-xs"),
	      "maps: (deleted) suffix removed");
	CHECK(path_is(&m.v[6], NULL), "maps: anonymous without trailing blank");
	CHECK(path_is(&m.v[7], "[stack]"), "maps: [stack]");
	CHECK(path_is(&m.v[8], "[vdso]"), "maps: [vdso]");
	CHECK(m.v[9].start == 0xffffffffff600000ULL && path_is(&m.v[9], "[vsyscall]"), "maps: last line, no newline");

	mp = ml_maps__find(&m, 0x55d0c7a00010ULL);
	CHECK(mp == &m.v[2], "maps: find inside");
	CHECK(ml_maps__find(&m, 0x55d0c7a21000ULL) == NULL, "maps: find at end is outside");
	CHECK(ml_maps__find(&m, 0x1000) == NULL, "maps: find below all");
	CHECK(ml_maps__find(&m, 0x55d0c6a4e000ULL) == &m.v[1], "maps: find at start");
	ml_maps__clear(&m);
	CHECK(m.v == NULL && m.n == 0, "maps: clear");

	err = ml_maps__parse("", 0, &m);
	CHECK(!err && m.n == 0, "maps: empty text is no mappings");
}

static void test_maps_malformed(void)
{
	static const char *const bad[] = {
	    "7f00-7f10 rw-p 0000",
	    "7f00-7f10 rw-p 00000000 00:00",
	    "7f00-7f10 rw-p 00000000 00:00 ",
	    "7f00-7f10 rw-p 00000000 00",
	    "7f00-7f10",
	    "7f00",
	    "7g00-7f10 rw-p 00000000 00:00 0",
	    "7f00-7f10 rw-p 0000000z 00:00 0",
	    "7f00-7f10 rw-p 00000000 0g:00 0",
	    "10000000000000000-20000000000000000 rw-p 00000000 00:00 0",
	    "ffffffffffffffffffffffff-fffffffffffffffffffffffff rw-p 00000000 00:00 0",
	    "7f00-7f10 rw-p 00000000 00:00 99999999999999999999999 /x",
	    "7f00-7f10 rw-p 00000000 100000000:00 0",
	    "7f00-7f10 rw-p 00000000 00:100000000 0",
	    "0x7f00-0x7f10 rw-p 00000000 00:00 0",
	    "-7f00-7f10 rw-p 00000000 00:00 0",
	    "+7f00-7f10 rw-p 00000000 00:00 0",
	    " 7f00-7f10 rw-p 00000000 00:00 0",
	    "7f10-7f00 rw-p 00000000 00:00 0",
	    "7f00-7f00 rw-p 00000000 00:00 0",
	    "7f00-7f10 rwxq 00000000 00:00 0",
	    "7f00-7f10 rw- 00000000 00:00 0",
	    "7f00-7f10 rw-p 00000000 00:00 0x5",
	    "7f00-7f10 rw-p 00000000 00:00 -5",
	    "7f00-7f10 rw-p 00000000 00:00 0\t/path",
	    "7f00-7f10  rw-p 00000000 00:00 0",
	    "\n",
	    "7f00-7f10 rw-p 00000000 00:00 0\n\n7f10-7f20 rw-p 00000000 00:00 0\n",
	    "7f00-7f10 rw-p 00000000 00:00 0\nbogus\n",
	    "garbage",
	};
	static const char with_nul[] = "7f00-7f10 rw-p 00000000 00:00 0 /a\0b\n";
	struct ml_maps m;
	bool all = true;
	size_t i, len;
	char *copy;
	unsigned int seed = 12345;
	int err, k;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m.v = (void *)1;
		m.n = 99;
		err = ml_maps__parse(bad[i], strlen(bad[i]), &m);
		if (err != -EINVAL || m.v || m.n) {
			fprintf(stderr, "  malformed line accepted (%d): \"%s\"\n", err, bad[i]);
			all = false;
		}
	}
	CHECK(all, "maps: malformed lines rejected with -EINVAL");
	err = ml_maps__parse(with_nul, sizeof(with_nul) - 1, &m);
	CHECK_EQ_INT(err, -EINVAL, "maps: embedded NUL rejected");

	/* Not NUL-terminated: the parser must stay inside len. */
	len = strlen("7f00-7f10 rw-p 00000000 00:00 0 /abc");
	copy = malloc(len);
	memcpy(copy, "7f00-7f10 rw-p 00000000 00:00 0 /abc", len);
	err = ml_maps__parse(copy, len, &m);
	CHECK(!err && m.n == 1 && path_is(&m.v[0], "/abc"), "maps: unterminated buffer");
	ml_maps__clear(&m);
	free(copy);

	/* Every truncation and random corruption of the sample: only 0 or -EINVAL, never a crash. */
	all = true;
	for (len = 0; len <= strlen(sample_maps); len++) {
		err = ml_maps__parse(sample_maps, len, &m);
		if (err && err != -EINVAL)
			all = false;
		ml_maps__clear(&m);
	}
	len = strlen(sample_maps);
	copy = malloc(len);
	for (i = 0; i < 20000; i++) {
		memcpy(copy, sample_maps, len);
		for (k = 0; k < 1 + (int)(i % 4); k++)
			copy[rand_r(&seed) % len] = (char)(rand_r(&seed) & 0xff);
		err = ml_maps__parse(copy, len, &m);
		if (err && err != -EINVAL)
			all = false;
		if (!err && m.n)
			(void)ml_maps__find(&m, m.v[m.n / 2].start);
		ml_maps__clear(&m);
	}
	free(copy);
	CHECK(all, "maps: truncated and corrupted samples");
}

static void test_maps_live(void)
{
	const struct ml_mapping *mp, *dmp = NULL;
	char *apath = NULL, tmpl[] = "/tmp/ml_test_delXXXXXX", fifo[] = "/tmp/ml_test_fifoXXXXXX";
	struct ml_mapping fake;
	char exe[4096], buf[4];
	struct ml_maps m;
	ssize_t n;
	void *p;
	int err, fd, tfd;

	err = ml_maps__read(getpid(), &m);
	CHECK(!err && m.n > 5, "maps: read own maps");
	if (err)
		return;
	mp = ml_maps__find(&m, (uint64_t)(uintptr_t)marker_function);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	CHECK(mp && mp->perms[2] == 'x' && path_is(mp, exe), "maps: own code mapping found, path matches exe");
	if (mp) {
		fd = ml_maps__open_file(getpid(), mp);
		CHECK(fd >= 0 && read(fd, buf, 4) == 4 && !memcmp(buf, ELFMAG, 4), "maps: open_file via map_files");
		if (fd >= 0)
			close(fd);
		fd = -1;
		err = ml_maps__attach_path(getpid(), mp, &apath);
		CHECK(!err && apath && strstr(apath, "/map_files/") && (fd = open(apath, O_RDONLY)) >= 0,
		      "maps: attach_path is the map_files path");
		if (!err && fd >= 0)
			close(fd);
		free(apath);
		apath = NULL;

		/* A range that is not mapped: map_files fails, the root fallback finds the file. */
		fake = *mp;
		fake.start = 0x1000;
		fake.end = 0x2000;
		fd = -1;
		err = ml_maps__attach_path(getpid(), &fake, &apath);
		CHECK(!err && apath && strstr(apath, "/root/") && (fd = open(apath, O_RDONLY)) >= 0,
		      "maps: attach_path falls back to /proc/PID/root");
		if (!err && fd >= 0)
			close(fd);
		free(apath);
		fd = ml_maps__open_file(getpid(), &fake);
		CHECK(fd >= 0, "maps: open_file falls back to /proc/PID/root");
		if (fd >= 0)
			close(fd);

		/* A FIFO under a mapping's name must be refused, not block. */
		tfd = mkstemp(fifo);
		if (tfd >= 0) {
			close(tfd);
			unlink(fifo);
			if (!mkfifo(fifo, 0600)) {
				fake.path = fifo;
				fd = ml_maps__open_file(getpid(), &fake);
				CHECK_EQ_INT(fd, -ENOEXEC, "maps: FIFO refused");
				if (fd >= 0)
					close(fd);
				unlink(fifo);
			}
		}
		fake.path = "/nonexistent/file";
		CHECK_EQ_INT(ml_maps__open_file(getpid(), &fake), -ENOENT, "maps: missing file is -ENOENT");
	}
	ml_maps__clear(&m);

	/* A deleted file stays readable through map_files. */
	tfd = mkstemp(tmpl);
	if (tfd >= 0 && write(tfd, "MLDL", 4) == 4) {
		p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, tfd, 0);
		close(tfd);
		unlink(tmpl);
		err = ml_maps__read(getpid(), &m);
		if (!err && p != MAP_FAILED)
			dmp = ml_maps__find(&m, (uint64_t)(uintptr_t)p);
		CHECK(dmp && dmp->deleted && path_is(dmp, tmpl), "maps: live (deleted) mapping");
		fd = dmp ? ml_maps__open_file(getpid(), dmp) : -1;
		CHECK(fd >= 0 && read(fd, buf, 4) == 4 && !memcmp(buf, "MLDL", 4), "maps: deleted file opens");
		if (fd >= 0)
			close(fd);
		ml_maps__clear(&m);
		if (p != MAP_FAILED)
			munmap(p, 4096);
	} else {
		CHECK(false, "maps: temp file for deleted mapping");
	}

	err = ml_maps__read(0x3fffffff, &m);
	CHECK(err == -ENOENT || err == -ESRCH, "maps: missing process");
	CHECK_EQ_INT(ml_maps__read(-1, &m), -EINVAL, "maps: bad pid");
}

/* ---- a hand-made ELF, for exact symbol-table cases and for corruption ---- */

struct fake_elf {
	unsigned char buf[0x1000];
	size_t len;
};

static void build_fake_elf(struct fake_elf *fe, uint16_t e_type)
{
	static const char strtab[] = "\0bar\0foo@@V2\0foo@V1\0baz\0undef_fn\0zero_fn\0obj\0";
	static const char shstrtab[] = "\0.text\0.symtab\0.strtab\0.shstrtab\0";
	enum { S_BAR = 1, S_FOO2 = 5, S_FOO1 = 13, S_BAZ = 20, S_UNDEF = 24, S_ZERO = 33, S_OBJ = 41 };
	const Elf64_Sym syms[] = {
	    {0},
	    {S_BAR, ELF64_ST_INFO(STB_LOCAL, STT_FUNC), 0, 1, 0x1150, 0},
	    {S_BAZ, ELF64_ST_INFO(STB_LOCAL, STT_FUNC), 0, 1, 0x1140, 8},
	    {S_FOO2, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0, 1, 0x1110, 0x10},
	    {S_FOO1, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0, 1, 0x1130, 0x10},
	    {S_BAZ, ELF64_ST_INFO(STB_WEAK, STT_FUNC), 0, 1, 0x1140, 8},
	    {S_UNDEF, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0, SHN_UNDEF, 0, 0},
	    {S_ZERO, ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), 0, 1, 0, 4},
	    {S_OBJ, ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT), 0, 1, 0x1160, 8},
	};
	const size_t sym_off = 0x200, str_off = sym_off + sizeof(syms), shstr_off = str_off + sizeof(strtab);
	const size_t sh_off = (shstr_off + sizeof(shstrtab) + 7) & ~(size_t)7;
	Elf64_Ehdr eh = {0};
	Elf64_Phdr ph = {0};
	Elf64_Shdr sh[5] = {{0}};

	memset(fe, 0, sizeof(*fe));
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = e_type;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = sh_off;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(ph);
	eh.e_phnum = 1;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = 5;
	eh.e_shstrndx = 4;
	/* File offset 0 is loaded at 0x1000: translation has to add, not assume identity. */
	ph.p_type = PT_LOAD;
	ph.p_flags = PF_R | PF_X;
	ph.p_offset = 0;
	ph.p_vaddr = 0x1000;
	ph.p_paddr = 0x1000;
	ph.p_filesz = 0x200;
	ph.p_memsz = 0x200;
	ph.p_align = 0x1000;
	sh[1] = (Elf64_Shdr){1, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0x1100, 0x100, 0x100, 0, 0, 16, 0};
	sh[2] = (Elf64_Shdr){7, SHT_SYMTAB, 0, 0, sym_off, sizeof(syms), 3, 3, 8, sizeof(Elf64_Sym)};
	sh[3] = (Elf64_Shdr){15, SHT_STRTAB, 0, 0, str_off, sizeof(strtab), 0, 0, 1, 0};
	sh[4] = (Elf64_Shdr){23, SHT_STRTAB, 0, 0, shstr_off, sizeof(shstrtab), 0, 0, 1, 0};
	memcpy(fe->buf, &eh, sizeof(eh));
	memcpy(fe->buf + sizeof(eh), &ph, sizeof(ph));
	memset(fe->buf + 0x100, 0xc3, 0x100);
	memcpy(fe->buf + sym_off, syms, sizeof(syms));
	memcpy(fe->buf + str_off, strtab, sizeof(strtab));
	memcpy(fe->buf + shstr_off, shstrtab, sizeof(shstrtab));
	memcpy(fe->buf + sh_off, sh, sizeof(sh));
	fe->len = sh_off + sizeof(sh);
}

static int write_file(int fd, const void *buf, size_t len)
{
	if (ftruncate(fd, 0) || pwrite(fd, buf, len, 0) != (ssize_t)len)
		return -errno;
	return 0;
}

static int count_cb(const char *name, uint64_t vaddr, uint64_t size, void *ctx)
{
	(void)name;
	(void)vaddr;
	(void)size;
	(*(int *)ctx)++;
	return 0;
}

static int stop_cb(const char *name, uint64_t vaddr, uint64_t size, void *ctx)
{
	(void)name;
	(void)vaddr;
	(void)size;
	(void)ctx;
	return 7;
}

/* Run every query on whatever opened: corrupt input must not crash any of them. */
static void exercise(const struct elf_syms *es)
{
	uint64_t v, sz, off;
	int count = 0;

	elf_syms__find(es, "foo", &v, &sz);
	elf_syms__find(es, "baz", &v, &sz);
	elf_syms__for_each(es, count_cb, &count);
	for (v = 0xff0; v < 0x1220; v += 7) {
		elf_syms__lookup(es, v, &off);
		elf_syms__vaddr_to_offset(es, v, &off);
		elf_syms__offset_to_vaddr(es, v - 0x1000, &off);
	}
}

static void test_elf_fake(void)
{
	char tmpl[] = "/tmp/ml_test_elfXXXXXX";
	struct fake_elf fe, bad;
	uint64_t v, sz, off;
	char label[96];
	struct elf_syms *es;
	unsigned int seed = 777;
	const char *name;
	int fd, err, count = 0, opened = 0, k;
	bool ok;
	size_t i;

	fd = mkstemp(tmpl);
	if (fd < 0) {
		CHECK(false, "elf: temp file");
		return;
	}
	unlink(tmpl);
	build_fake_elf(&fe, ET_DYN);
	write_file(fd, fe.buf, fe.len);
	err = elf_syms__open(fd, &es);
	CHECK(!err && es, "elf: hand-made ELF opens");
	if (err)
		goto out;
	CHECK_EQ_INT(elf_syms__is_dyn(es), 1, "elf: ET_DYN");
	CHECK(!elf_syms__find(es, "foo", &v, &sz) && v == 0x1110 && sz == 0x10,
	      "elf: versioned name matches, default version preferred");
	CHECK(!elf_syms__find(es, "foo@V1", &v, &sz) && v == 0x1130, "elf: exact versioned name");
	CHECK_EQ_INT(elf_syms__find(es, "fo", &v, &sz), -ENOENT, "elf: prefix is no match");
	CHECK_EQ_INT(elf_syms__find(es, "undef_fn", &v, &sz), -ENOENT, "elf: undefined symbol skipped");
	CHECK_EQ_INT(elf_syms__find(es, "zero_fn", &v, &sz), -ENOENT, "elf: zero-valued symbol skipped");
	CHECK_EQ_INT(elf_syms__find(es, "obj", &v, &sz), -ENOENT, "elf: data symbol skipped");
	CHECK(!elf_syms__find(es, "baz", &v, &sz) && v == 0x1140 && sz == 8, "elf: duplicate symbol found");
	elf_syms__for_each(es, count_cb, &count);
	CHECK_EQ_INT(count, 4, "elf: for_each sees the 4 distinct functions (duplicates merged)");
	CHECK_EQ_INT(elf_syms__for_each(es, stop_cb, NULL), 7, "elf: for_each stops on non-zero");
	name = elf_syms__lookup(es, 0x1115, &off);
	CHECK(name && !strcmp(name, "foo@@V2") && off == 5, "elf: lookup inside sized symbol");
	name = elf_syms__lookup(es, 0x1110, &off);
	CHECK(name && !strcmp(name, "foo@@V2") && off == 0, "elf: lookup at symbol start");
	name = elf_syms__lookup(es, 0x1158, &off);
	CHECK(name && !strcmp(name, "bar") && off == 8, "elf: size-0 symbol reaches the next one");
	CHECK(!elf_syms__lookup(es, 0x1148, &off), "elf: gap after a sized symbol is unknown");
	CHECK(!elf_syms__lookup(es, 0x1250, &off), "elf: size-0 symbol stops at its section's end");
	CHECK(!elf_syms__lookup(es, 0x1000, &off), "elf: below all symbols");
	CHECK(!elf_syms__vaddr_to_offset(es, 0x1110, &off) && off == 0x110, "elf: vaddr to offset");
	CHECK(!elf_syms__offset_to_vaddr(es, 0x110, &v) && v == 0x1110, "elf: offset to vaddr");
	CHECK_EQ_INT(elf_syms__vaddr_to_offset(es, 0x5000, &off), -ENOENT, "elf: vaddr outside PT_LOAD");
	CHECK_EQ_INT(elf_syms__offset_to_vaddr(es, 0x200, &v), -ENOENT, "elf: offset outside PT_LOAD");
	elf_syms__free(es);
	elf_syms__free(NULL);

	build_fake_elf(&bad, ET_REL);
	write_file(fd, bad.buf, bad.len);
	CHECK(elf_syms__open(fd, &es) == -ENOEXEC && !es, "elf: ET_REL refused");

	write_file(fd, "this is not an ELF file at all", 30);
	CHECK_EQ_INT(elf_syms__open(fd, &es), -ENOEXEC, "elf: garbage refused");
	write_file(fd, "", 0);
	CHECK_EQ_INT(elf_syms__open(fd, &es), -ENOEXEC, "elf: empty file refused");
	write_file(fd, fe.buf, 40);
	CHECK(elf_syms__open(fd, &es) < 0, "elf: truncated header refused");

	/* Every truncation, then random corruption: any result, but no crash and no leak. */
	ok = true;
	for (i = 0; i < fe.len; i++) {
		write_file(fd, fe.buf, i);
		err = elf_syms__open(fd, &es);
		if (!err) {
			opened++;
			exercise(es);
			elf_syms__free(es);
		} else if (err != -ENOEXEC) {
			ok = false;
		}
	}
	CHECK(ok, "elf: all truncations handled");
	for (i = 0; i < 3000; i++) {
		bad = fe;
		for (k = 0; k < 1 + (int)(i % 6); k++)
			bad.buf[rand_r(&seed) % fe.len] = (unsigned char)rand_r(&seed);
		write_file(fd, bad.buf, bad.len);
		if (!elf_syms__open(fd, &es)) {
			opened++;
			exercise(es);
			elf_syms__free(es);
		}
	}
	/* Reaching here is the crash test; the count says the readers behind a successful open were exercised. */
	snprintf(label, sizeof(label), "elf: truncated and corrupted files handled, %d of them opened and read",
		 opened);
	CHECK(opened > 0, label);
out:
	close(fd);
}

/* A truncated copy of a real binary. */
static void test_elf_truncated_exe(void)
{
	char tmpl[] = "/tmp/ml_test_exeXXXXXX";
	static const size_t cuts[] = {64, 4096, 0};
	struct elf_syms *es;
	struct stat st;
	int fd, src, err;
	bool ok = true;
	size_t i, len;
	char *buf;

	src = open("/proc/self/exe", O_RDONLY);
	if (src < 0 || fstat(src, &st) || st.st_size <= 0) {
		CHECK(false, "elf: read own exe");
		return;
	}
	buf = malloc((size_t)st.st_size);
	if (!buf || pread(src, buf, (size_t)st.st_size, 0) != st.st_size) {
		CHECK(false, "elf: read own exe");
		free(buf);
		close(src);
		return;
	}
	close(src);
	fd = mkstemp(tmpl);
	unlink(tmpl);
	for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]) + 3; i++) {
		if (i < sizeof(cuts) / sizeof(cuts[0]))
			len = cuts[i] ? cuts[i] : (size_t)st.st_size / 2;
		else
			len = (size_t)st.st_size - (i - sizeof(cuts) / sizeof(cuts[0])) * 97 - 1;
		write_file(fd, buf, len);
		err = elf_syms__open(fd, &es);
		if (len == 64 && err != -ENOEXEC)
			ok = false;
		if (!err) {
			exercise(es);
			elf_syms__free(es);
		}
	}
	CHECK(ok, "elf: truncated copies of own exe handled");
	close(fd);
	free(buf);
}

struct find_ctx {
	const char *want;
	bool found;
};

static int find_cb(const char *name, uint64_t vaddr, uint64_t size, void *ctx)
{
	struct find_ctx *fc = ctx;

	(void)vaddr;
	(void)size;
	if (!strcmp(name, fc->want))
		fc->found = true;
	return 0;
}

static void test_elf_self(void)
{
	uint64_t v, sz, off, rt = (uint64_t)(uintptr_t)marker_function, fv;
	struct find_ctx fc = {"marker_function", false};
	const struct ml_mapping *mp;
	struct elf_syms *es;
	struct ml_maps m;
	const char *name;
	int fd, err;

	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	err = elf_syms__open(fd, &es);
	close(fd);
	CHECK(!err, "elf: own exe opens");
	if (err)
		return;
	err = elf_syms__find(es, "marker_function", &v, &sz);
	CHECK(!err && v && sz > 0, "elf: static function found by name");
	name = elf_syms__lookup(es, v + 3, &off);
	CHECK(name && !strcmp(name, "marker_function") && off == 3, "elf: static function found by address");
	elf_syms__for_each(es, find_cb, &fc);
	CHECK(fc.found, "elf: for_each lists the static function");
	/* Runtime address -> file offset -> ELF vaddr lands on the symbol. */
	err = ml_maps__read(getpid(), &m);
	mp = err ? NULL : ml_maps__find(&m, rt);
	CHECK(mp && !elf_syms__offset_to_vaddr(es, rt - mp->start + mp->offset, &fv) && fv == v,
	      "elf: runtime address maps to the symbol's vaddr");
	CHECK(!elf_syms__vaddr_to_offset(es, v, &off) && mp && off == rt - mp->start + mp->offset,
	      "elf: vaddr maps back to the file offset");
	ml_maps__clear(&m);
	elf_syms__free(es);
}

/* Runtime address of libc's own malloc (not an interposer), from its ELF file and the maps. */
static int libc_malloc_address(uint64_t *rt, uint64_t *sz)
{
	const struct ml_mapping *code = NULL;
	struct elf_syms *es = NULL;
	uint64_t v, off;
	struct ml_maps m;
	size_t i;
	int fd = -1, err;

	err = ml_maps__read(getpid(), &m);
	if (err)
		return err;
	for (i = 0; i < m.n; i++) {
		if (m.v[i].path && !strcmp(base_name(m.v[i].path), "libc.so.6") && m.v[i].perms[2] == 'x')
			code = &m.v[i];
	}
	err = -ENOENT;
	if (!code)
		goto out;
	fd = ml_maps__open_file(getpid(), code);
	if (fd < 0 || elf_syms__open(fd, &es))
		goto out;
	if (elf_syms__find(es, "malloc", &v, sz) || elf_syms__vaddr_to_offset(es, v, &off))
		goto out;
	if (off < code->offset || off - code->offset >= code->end - code->start)
		goto out;
	*rt = code->start + off - code->offset;
	err = 0;
out:
	elf_syms__free(es);
	if (fd >= 0)
		close(fd);
	ml_maps__clear(&m);
	return err;
}

static void test_libc_malloc(void)
{
	uint64_t rt = 0, sz = 0;
	void *h, *sym = NULL;
	int err;

	err = libc_malloc_address(&rt, &sz);
	CHECK(!err && rt && sz, "libc: malloc found in mapped libc.so.6");
	h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		sym = dlsym(h, "malloc");
		dlclose(h);
	}
	CHECK(sym && (uint64_t)(uintptr_t)sym == rt, "libc: address agrees with the dynamic linker");
}

static void test_demangle(void)
{
	char *d;

	d = ml_demangle("_ZN3foo3barEi");
	CHECK_EQ_STR(d, "foo::bar(int)", "demangle: _ZN3foo3barEi");
	free(d);
	d = ml_demangle("_ZN3foo3barEi@@V1");
	CHECK_EQ_STR(d, "foo::bar(int)", "demangle: version suffix ignored");
	free(d);
	errno = 0;
	d = ml_demangle("malloc");
	CHECK(!d && errno == EINVAL, "demangle: C name is not mangled");
	d = ml_demangle("_Zgarbage((");
	CHECK(!d && errno == EINVAL, "demangle: invalid mangling");
	d = ml_demangle("_Z");
	CHECK(!d, "demangle: bare prefix");
}

static void test_symbolizer_self(void)
{
	uint64_t ra = marker_function(), rt = 0, sz, start, a;
	const struct ml_frame *fr, *fr2;
	struct symbolizer *s;
	struct timespec t0, t1;
	char exe[4096], label[128];
	void *heap;
	double secs;
	bool ok;
	ssize_t n;
	int err;
	size_t i;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	CHECK_EQ_INT(symbolizer__new(getpid(), NULL, &s), 0, "sym: new on self");
	if (!s)
		return;
	err = symbolizer__resolve(s, ra, &fr);
	CHECK(!err && fr && fr->addr == ra, "sym: resolve marker");
	if (err)
		goto out;
	CHECK_EQ_STR(fr->func, "marker_function", "sym: marker function name");
	CHECK(fr->offset == ra - (uint64_t)(uintptr_t)marker_function, "sym: offset from function start");
	CHECK_EQ_STR(fr->module, exe, "sym: module is the exe");
	CHECK(fr->file && !strcmp(base_name(fr->file), "test_symbols.c"), "sym: source file test_symbols.c");
	snprintf(label, sizeof(label), "sym: line %d (got %d)", marker_line, fr->line);
	CHECK(fr->line == marker_line, label);
	err = symbolizer__resolve(s, ra, &fr2);
	CHECK(!err && fr2 == fr, "sym: second resolve is cached");

	err = symbolizer__resolve(s, 0x10, &fr);
	CHECK(!err && fr && !fr->func && !fr->module && fr->offset == 0x10 && !fr->file && !fr->line,
	      "sym: unknown address gives an empty frame");
	err = symbolizer__resolve(s, 0, &fr);
	CHECK(!err && fr && !fr->func, "sym: address 0");
	heap = malloc(64);
	err = symbolizer__resolve(s, (uint64_t)(uintptr_t)heap, &fr);
	CHECK(!err && fr && !fr->func && !fr->module, "sym: heap address is unknown");
	free(heap);

	if (!libc_malloc_address(&rt, &sz)) {
		err = symbolizer__resolve(s, rt + 1, &fr);
		CHECK(!err && fr->func && !strcmp(fr->func, "malloc") && fr->offset == 1 && fr->module &&
			  !strcmp(base_name(fr->module), "libc.so.6"),
		      "sym: libc malloc + 1");
		/* A return address at a function's start belongs to the call in the previous function. */
		err = symbolizer__resolve(s, rt, &fr);
		CHECK(!err && (!fr->func || strcmp(fr->func, "malloc")), "sym: return address looks at addr - 1");

		/* 100k distinct addresses across libc's code, then all again from the cache. */
		start = rt & ~0xfffULL;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ok = true;
		for (i = 0; i < 100000 && ok; i++) {
			a = start + i * 7 - 350000;
			ok = !symbolizer__resolve(s, a, &fr) && fr->addr == a;
		}
		for (i = 0; i < 100000 && ok; i++) {
			a = start + i * 7 - 350000;
			ok = !symbolizer__resolve(s, a, &fr2) && fr2->addr == a;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		snprintf(label, sizeof(label), "sym: 100k distinct addresses twice (%.2f s)", secs);
		CHECK(ok, label); /* the time is shown, not judged: speed belongs in make bench */
	} else {
		CHECK(false, "sym: libc malloc address");
	}
out:
	symbolizer__free(s);
	symbolizer__free(NULL);
	CHECK(symbolizer__new(0x3fffffff, NULL, &s) == -ESRCH && !s, "sym: missing process is -ESRCH");
}

/* Frames of a process resolve after it has exited, from the files opened while it lived. */
static void test_symbolizer_exited(void)
{
	uint64_t ra = marker_function();
	const struct ml_frame *fr;
	struct symbolizer *s;
	int pipefd[2], status;
	pid_t pid;
	char c;

	if (pipe(pipefd)) {
		CHECK(false, "sym: pipe");
		return;
	}
	pid = fork();
	if (pid < 0) {
		CHECK(false, "sym: fork");
		return;
	}
	if (!pid) {
		close(pipefd[0]);
		if (write(pipefd[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(pipefd[1]);
	if (read(pipefd[0], &c, 1) != 1)
		c = 0;
	close(pipefd[0]);
	symbolizer__new(pid, NULL, &s);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	CHECK(s != NULL, "sym: new on child");
	if (!s)
		return;
	/* The child is a fork: the marker's return address is the same there. */
	CHECK(!symbolizer__resolve(s, ra, &fr) && fr->func && !strcmp(fr->func, "marker_function") &&
		  fr->line == marker_line,
	      "sym: resolves after the process exited");
	CHECK_EQ_INT(symbolizer__refresh(s), -ESRCH, "sym: refresh after exit is -ESRCH");
	CHECK(!symbolizer__resolve(s, 0x20, &fr) && !fr->func, "sym: unknown address after exit");
	CHECK(!symbolizer__resolve(s, ra, &fr) && fr->func && !strcmp(fr->func, "marker_function"),
	      "sym: state still usable after failed refresh");
	symbolizer__free(s);
}

/* Code mapped after the symbolizer was made is found by a refresh; unmapped code stays resolvable. */
static void test_symbolizer_refresh(void)
{
	uint64_t ra = marker_function(), a, fn = (uint64_t)(uintptr_t)marker_function;
	const struct ml_mapping *code;
	const struct ml_frame *fr;
	struct symbolizer *s = NULL;
	struct ml_maps m;
	void *p = MAP_FAILED;
	size_t len = 0;
	int fd = -1;

	if (ml_maps__read(getpid(), &m)) {
		CHECK(false, "sym: maps for refresh test");
		return;
	}
	code = ml_maps__find(&m, ra);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (!code || fd < 0)
		goto out;
	len = code->end - code->start;
	if (symbolizer__new(getpid(), NULL, &s))
		goto out;
	/* A second copy of our own code, at an address the symbolizer has not seen. */
	p = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, (off_t)code->offset);
	if (p == MAP_FAILED)
		goto out;
	a = (uint64_t)(uintptr_t)p + (ra - code->start);
	/* Usually within 100 ms of the refresh in symbolizer__new, so held back: either answer is right. */
	CHECK(!symbolizer__resolve(s, a, &fr) && (!fr->func || !strcmp(fr->func, "marker_function")),
	      "sym: new mapping right after a refresh");
	usleep(120 * 1000);
	CHECK(!symbolizer__resolve(s, a, &fr) && fr->func && !strcmp(fr->func, "marker_function") &&
		  fr->line == marker_line && fr->addr == a,
	      "sym: new mapping found by a later refresh");
	munmap(p, len);
	p = MAP_FAILED;
	CHECK(!symbolizer__refresh(s), "sym: refresh");
	a = a - ra + fn + 1;
	CHECK(!symbolizer__resolve(s, a, &fr) && fr->func && !strcmp(fr->func, "marker_function") && fr->offset == 1,
	      "sym: unmapped code still resolves");
out:
	CHECK(s && len, "sym: refresh test ran");
	if (p != MAP_FAILED)
		munmap(p, len);
	if (fd >= 0)
		close(fd);
	symbolizer__free(s);
	ml_maps__clear(&m);
}

static int count_fds(void)
{
	char name[64];
	int n = 0, i;

	for (i = 0; i < 4096; i++) {
		snprintf(name, sizeof(name), "/proc/self/fd/%d", i);
		n += !access(name, F_OK);
	}
	return n;
}

/* python3.11's python:function__entry note, as readelf -n shows it: three arguments, a semaphore, a base. */
static int sdt_entry(const struct elf_sdt_note *n, void *ctx)
{
	if (strcmp(n->provider, "python") || strcmp(n->name, "function__entry"))
		return 0;
	return n->pc && n->base && n->semaphore && !strcmp(n->args, "8@%rbp 8@%r12 -4@%eax") ? 1 : 2;
}

/* SystemTap SDT notes by provider: Debian's python3.11 has "python" probes and libstdc++ "libstdcxx" ones. */
static void test_sdt_providers(void)
{
	static const struct {
		const char *path, *has;
	} objs[] = {{"/usr/bin/python3.11", "python"}, {"/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "libstdcxx"}};
	char label[160];

	for (size_t i = 0; i < sizeof(objs) / sizeof(objs[0]); i++) {
		struct elf_syms *es = NULL;
		int fd = open(objs[i].path, O_RDONLY | O_CLOEXEC);

		CHECK(fd >= 0 && !elf_syms__open(fd, &es), "sdt: object opens");
		if (fd >= 0)
			close(fd);
		if (!es)
			continue;
		snprintf(label, sizeof(label), "sdt: %s has %s probes, none of pytorch or pytho", objs[i].path,
			 objs[i].has);
		CHECK(elf_syms__has_sdt_provider(es, objs[i].has) && !elf_syms__has_sdt_provider(es, "pytorch") &&
			  !elf_syms__has_sdt_provider(es, "pytho"),
		      label);
		if (i == 0)
			CHECK_EQ_U64(elf_syms__for_each_sdt(es, sdt_entry, NULL), 1,
				     "sdt: python:function__entry's address, base, semaphore and arguments");
		elf_syms__free(es);
	}
}

int main(void)
{
	int fds;

	setvbuf(stdout, NULL, _IOLBF, 0);
	fds = count_fds();
	test_maps_parse();
	test_maps_malformed();
	test_maps_live();
	test_elf_fake();
	test_elf_truncated_exe();
	test_elf_self();
	test_libc_malloc();
	test_sdt_providers();
	test_demangle();
	test_symbolizer_self();
	test_symbolizer_exited();
	test_symbolizer_refresh();
	CHECK_EQ_INT(count_fds(), fds, "no file descriptor leaked");
	return SUMMARY("symbols");
}
