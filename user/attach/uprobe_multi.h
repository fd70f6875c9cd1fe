/* Batched uprobes: one BPF link for many offsets in one file, made with the raw syscall (libbpf 1.1 has no API). */
#ifndef ML_UPROBE_MULTI_H
#define ML_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>

#define ML_BPF_TRACE_UPROBE_MULTI 48 /* enum bpf_attach_type, kernel 6.6 on */

/* Whether this kernel takes uprobe_multi links (loads a two-instruction program to find out). */
bool ml_uprobe_multi_supported(void);

/* A link attaching prog_fd at every offset of path, each with its cookie. Link fd, or -errno. */
int ml_uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies,
			   uint32_t cnt, bool retprobe, int pid);

/*
 * A uprobe_multi link: one program at several offsets of one file. It keeps what attaching it again takes,
 * for links__pause (the allocation side) and links__window (both sides).
 */
struct ml_mlink {
	int fd;		      /* -1 while closed */
	unsigned char layers; /* the layers of its object's rows (links__drop) */
	unsigned char batch;  /* which program (enum links_batch) */
	char *path;	      /* the file, offsets and cookies it was attached with */
	uint64_t ino;	      /* the file's identity, to find it again in the maps */
	uint32_t major, minor;
	uint64_t *offs, *cookies;
	uint32_t cnt;
};

/* m as the recipe of link fd (copies of path, offsets and cookies). 0 or -ENOMEM (m then holds what to clear). */
int ml_mlink_init(struct ml_mlink *m, int fd, int batch, const char *path, const uint64_t *offs,
		  const uint64_t *cookies, uint32_t cnt);
void ml_mlink_clear(struct ml_mlink *m); /* closes its fd, frees the recipe */
/*
 * The link made again from its recipe (m->fd not set). When its path no longer opens (a map_files path of a
 * mapping gone: under -c, the image before exec), the file's path is made again from pid's maps once.
 */
int ml_mlink_attach(struct ml_mlink *m, int prog_fd, bool retprobe, int pid);

#endif
