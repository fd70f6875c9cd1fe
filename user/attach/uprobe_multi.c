/* Batched uprobes: one BPF link for many offsets in one file, made with the raw syscall (libbpf 1.1 has no API). */
#include "attach/uprobe_multi.h"
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include "lib/procmaps.h"

/*
 * The link_create part of union bpf_attr as kernels since 6.6 define it. Debian 12's <linux/bpf.h> predates
 * the uprobe_multi member, so the layout is spelled out here: the attach-type union starts at byte 16.
 */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t um_flags;
	uint32_t pid;
	uint32_t pad;
};

_Static_assert(sizeof(struct link_create_uprobe_multi) == 64, "link_create layout");

#define ML_BPF_F_UPROBE_MULTI_RETURN 1U

bool ml_uprobe_multi_supported(void)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = ML_BPF_TRACE_UPROBE_MULTI);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ml_probe_um", "GPL", insns, 2, &o);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

int ml_uprobe_multi_attach(int prog_fd, const char *path, const uint64_t *offsets, const uint64_t *cookies,
			   uint32_t cnt, bool retprobe, int pid)
{
	struct link_create_uprobe_multi a;
	long fd;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (uint32_t)prog_fd;
	a.attach_type = ML_BPF_TRACE_UPROBE_MULTI;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offsets;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = cnt;
	a.um_flags = retprobe ? ML_BPF_F_UPROBE_MULTI_RETURN : 0;
	a.pid = (uint32_t)pid;
	fd = syscall(SYS_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : (int)fd;
}

int ml_mlink_init(struct ml_mlink *m, int fd, int batch, const char *path, const uint64_t *offs,
		  const uint64_t *cookies, uint32_t cnt)
{
	struct stat st;

	*m = (struct ml_mlink){.fd = fd, .batch = (unsigned char)batch, .cnt = cnt};
	m->path = strdup(path);
	m->offs = malloc(cnt * sizeof(*offs));
	m->cookies = malloc(cnt * sizeof(*cookies));
	if (!(m->path && m->offs && m->cookies))
		return -ENOMEM;
	memcpy(m->offs, offs, cnt * sizeof(*offs));
	memcpy(m->cookies, cookies, cnt * sizeof(*cookies));
	if (!stat(path, &st))
		m->ino = st.st_ino, m->major = major(st.st_dev), m->minor = minor(st.st_dev);
	return 0;
}

void ml_mlink_clear(struct ml_mlink *m)
{
	if (m->fd >= 0)
		close(m->fd);
	free(m->path);
	free(m->offs);
	free(m->cookies);
	*m = (struct ml_mlink){.fd = -1};
}

int ml_mlink_attach(struct ml_mlink *m, int prog_fd, bool retprobe, int pid)
{
	int fd = ml_uprobe_multi_attach(prog_fd, m->path, m->offs, m->cookies, m->cnt, retprobe, pid);
	char *again;

	if (fd != -ENOENT || !m->ino || ml_maps__attach_path_of(pid, m->ino, m->major, m->minor, &again))
		return fd;
	free(m->path);
	m->path = again;
	return ml_uprobe_multi_attach(prog_fd, m->path, m->offs, m->cookies, m->cnt, retprobe, pid);
}
