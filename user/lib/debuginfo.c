/*
 * Separate debug files. Distributions strip .symtab, DWARF and .debug_frame out of their binaries into
 * files under /usr/lib/debug, named after the object's build-id and also pointed to by its .gnu_debuglink
 * section (name + CRC-32). Both are checked before a file is used: a stale debug file describes other code.
 */
#define _GNU_SOURCE
#include "lib/debuginfo.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "lib/elfsym.h"
#include "lib/procmaps.h"

#define MAX_BUILD_ID 64
#define MAX_DEBUG_FILE (4ULL << 30)

size_t ml_elf_build_id(Elf *elf, unsigned char *id, size_t max)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Nhdr nh;
		size_t off = 0, noff, doff;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)d->d_buf + noff, "GNU", 4) || !nh.n_descsz || nh.n_descsz > max)
				continue;
			memcpy(id, (const char *)d->d_buf + doff, nh.n_descsz);
			return nh.n_descsz;
		}
	}
	return 0;
}

/* The .gnu_debuglink name (NUL-terminated inside the section) and CRC, or NULL. */
static const char *debuglink(Elf *elf, uint32_t *crc)
{
	GElf_Shdr sh;
	Elf_Scn *scn = ml_elf_section(elf, ".gnu_debuglink", true, &sh);
	const unsigned char *p;
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	size_t len, at;

	if (!d || !d->d_buf)
		return NULL;
	p = d->d_buf;
	len = strnlen((const char *)p, d->d_size);
	if (!len || len == d->d_size || strchr((const char *)p, '/'))
		return NULL;
	at = (len + 4) & ~(size_t)3; /* the name, its NUL, padding to 4, then the CRC */
	if (at + 4 > d->d_size)
		return NULL;
	memcpy(crc, p + at, 4);
	return (const char *)p;
}

/* A candidate as the target sees it (see ml_open_in_root): a regular file no larger than MAX_DEBUG_FILE. */
static int open_candidate(int pid, const char *path)
{
	struct stat st;
	int fd = ml_open_in_root(pid, path);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || (unsigned long long)st.st_size > MAX_DEBUG_FILE) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

static bool build_id_matches(int fd, const unsigned char *id, size_t n)
{
	unsigned char got[MAX_BUILD_ID];
	Elf *e = elf_begin(fd, ELF_C_READ, NULL);
	bool ok = e && elf_kind(e) == ELF_K_ELF && ml_elf_build_id(e, got, sizeof(got)) == n && !memcmp(got, id, n);

	elf_end(e);
	return ok;
}

static bool crc_matches(int fd, uint32_t want)
{
	unsigned char buf[1 << 16];
	uLong crc = crc32(0, NULL, 0);
	ssize_t r;
	off_t off = 0;

	while ((r = pread(fd, buf, sizeof(buf), off)) > 0) {
		crc = crc32(crc, buf, (uInt)r);
		off += r;
	}
	return r == 0 && (uint32_t)crc == want;
}

int ml_debug_file_open(int pid, const char *dir, Elf *elf, const char *path)
{
	unsigned char id[MAX_BUILD_ID];
	char *cand = NULL, *objdir = NULL, *slash;
	const char *link;
	uint32_t crc = 0;
	size_t n;
	int fd, err = -ENOENT;

	if (!dir)
		dir = ML_DEBUG_DIR_DEFAULT;
	n = ml_elf_build_id(elf, id, sizeof(id));
	if (n >= 2) {
		char hex[2 * MAX_BUILD_ID + 1];

		for (size_t i = 0; i < n; i++)
			sprintf(hex + 2 * i, "%02x", id[i]);
		if (asprintf(&cand, "%s/.build-id/%.2s/%s.debug", dir, hex, hex + 2) < 0)
			return -ENOMEM;
		fd = open_candidate(pid, cand);
		free(cand);
		cand = NULL;
		if (fd >= 0 && build_id_matches(fd, id, n))
			return fd;
		if (fd >= 0)
			close(fd);
	}
	link = debuglink(elf, &crc);
	if (!link || !path || path[0] != '/')
		return -ENOENT;
	objdir = strdup(path);
	if (!objdir)
		return -ENOMEM;
	slash = strrchr(objdir, '/');
	slash[1] = '\0'; /* keeps the trailing slash */
	for (int k = 0; k < 3; k++) {
		int r = k == 0	 ? asprintf(&cand, "%s%s", objdir, link)
			: k == 1 ? asprintf(&cand, "%s.debug/%s", objdir, link)
				 : asprintf(&cand, "%s%s%s", dir, objdir, link);

		if (r < 0) {
			err = -ENOMEM;
			break;
		}
		/* The object itself can carry the same name as its debuglink: never take it for its debug file. */
		if (k == 0 && !strcmp(strrchr(path, '/') + 1, link)) {
			free(cand);
			cand = NULL;
			continue;
		}
		fd = open_candidate(pid, cand);
		free(cand);
		cand = NULL;
		if (fd >= 0 && crc_matches(fd, crc)) {
			free(objdir);
			return fd;
		}
		if (fd >= 0)
			close(fd);
	}
	free(objdir);
	return err;
}
