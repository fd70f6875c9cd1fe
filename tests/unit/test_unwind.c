/*
 * The unwinding tables as BPF sees them: the real BPF object is loaded, this process's own mappings are
 * synced, and every wire row and index entry read back through the mmap'ed maps is checked against the
 * parser's table; sharing between processes and eviction are checked through the per-file info. Also the
 * .debug_frame parser and the separate debug file lookup. Needs root (BPF).
 */
#define _GNU_SOURCE
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "lib/debuginfo.h"
#include "lib/procmaps.h"
#include "memleak.h"
#include "unwind/ehframe.h"
#include "unwind/unwind.h"
#include "memleak.skel.h"

static const struct ml_mapping *libc_text(const struct ml_maps *m)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].path && strstr(m->v[i].path, "/libc.so.6") && m->v[i].perms[2] == 'x')
			return &m->v[i];
	return NULL;
}

/* The wire rule a table row must have become (what wire_row in unwind.c promises). */
static int expect_kind(const struct ml_unwind_row *r)
{
	switch (r->cfa_reg) {
	case ML_CFA_RSP:
	case ML_CFA_RBP: return r->cfa_reg == ML_CFA_RSP ? ML_UW_RSP : ML_UW_RBP;
	case ML_CFA_NONE: return ML_UW_NONE_FDE;
	case ML_CFA_SIGNAL: return ML_UW_SIGNAL;
	default: return ML_UW_STOP;
	}
}

/* Look pc up the way the BPF program does: index, then the last row at or before it. */
static const struct ml_urow *bpf_style_lookup(const struct ml_urow *rows, const uint8_t *index, const struct ml_umap *f,
					      uint64_t off)
{
	uint32_t r0, r1;
	uint64_t page = off >> f->shift;

	if (page >= f->n_slots)
		return NULL;
	memcpy(&r0, index + (size_t)(f->idx_base + page) * 8, 4);
	memcpy(&r1, index + (size_t)(f->idx_base + page + 1) * 8, 4);
	const struct ml_urow *best = NULL;

	for (uint32_t i = r0; i <= r1 && i < f->n_rows; i++)
		if (rows[f->row_base + i].pc <= off)
			best = &rows[f->row_base + i];
	return best;
}

/* The real BPF object, loaded; NULL (reported) on failure. */
static struct memleak_bpf *load(void)
{
	struct memleak_bpf *skel = memleak_bpf__open();

	if (!skel) {
		CHECK(0, "open the BPF object");
		return NULL;
	}
	skel->rodata->unwind_tables = 1;
	if (memleak_bpf__load(skel)) {
		CHECK(0, "load the BPF object (root needed)");
		memleak_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

/*
 * A chunked array read back from the kernel, as one flat copy: each chunk the outer map holds is found by its
 * id and mapped read-only, the way the BPF side sees it. *chunks: how many the outer map holds.
 */
static uint8_t *kernel_flat(int outer_fd, uint32_t bits, uint32_t stride, uint32_t *chunks)
{
	size_t chunk = (size_t)stride << bits;
	uint8_t *flat = NULL;

	*chunks = 0;
	for (uint32_t k = 0; k < ML_UW_CHUNKS; k++) {
		uint32_t id;
		int fd;
		void *p, *q;

		if (bpf_map_lookup_elem(outer_fd, &k, &id))
			continue;
		fd = bpf_map_get_fd_by_id(id);
		p = fd >= 0 ? mmap(NULL, chunk, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
		q = realloc(flat, (k + 1) * chunk);
		if (p != MAP_FAILED && q) {
			flat = q;
			memcpy(flat + k * chunk, p, chunk);
			(*chunks)++;
		}
		if (p != MAP_FAILED)
			munmap(p, chunk);
		if (fd >= 0)
			close(fd);
	}
	return flat;
}

static void test_tables(void)
{
	struct memleak_bpf *skel;
	struct ml_maps maps = {};
	struct ml_unwind_table t = {};
	struct unwinder *u = NULL;
	struct unwind_file_info info;
	uint32_t rows, index;
	uint64_t used, cap, no_room, used1;
	const struct ml_mapping *lc;
	int n, child, fd;

	unwind_capacity(64ULL << 20, &rows, &index);
	CHECK(rows == (64u << 20) / 5 * 4 / 8 && index == (64u << 20) / 5 / 8, "capacity split 4/5 rows, 1/5 index");
	skel = load();
	if (!skel)
		return;
	CHECK_EQ_INT(unwinder__new(skel, &(struct unwind_opts){.mem = 64ULL << 20}, &u), 0, "unwinder made");
	CHECK(u && unwinder__memory(u) == 0, "no chunk before a table is placed");
	if (!u)
		goto out;
	CHECK_EQ_INT(ml_maps__read(getpid(), &maps), 0, "read own maps");
	n = unwinder__sync(u, getpid(), &maps);
	CHECK(n >= 2, "own executable mappings with a table (the test and libc at least)");
	lc = libc_text(&maps);
	CHECK(lc != NULL, "libc's text mapping");
	unwinder__usage(u, &used, &cap, &no_room);
	CHECK(used > 10000 && cap == rows && no_room == 0, "rows in use, nothing left out");
	printf("# %llu rows in use, %llu KiB of chunks\n", (unsigned long long)used,
	       (unsigned long long)(unwinder__memory(u) >> 10));
	CHECK(unwinder__memory(u) >= used * sizeof(struct ml_urow) &&
		  unwinder__memory(u) <= used * sizeof(struct ml_urow) * 2 + (24ULL << 20),
	      "chunks grow with the rows in use, not with --unwind-mem");

	/* Read the process's entry and libc's table back from the maps. */
	{
		struct ml_umaps *um = calloc(1, sizeof(*um));
		__u32 key = (__u32)getpid();
		uint32_t nr, ni;
		struct ml_urow *wr =
		    (struct ml_urow *)kernel_flat(bpf_map__fd(skel->maps.urows), ML_UW_ROW_CHUNK_BITS, 8, &nr);
		uint8_t *wi = kernel_flat(bpf_map__fd(skel->maps.uindex), ML_UW_IDX_CHUNK_BITS, 8, &ni);
		const struct ml_umap *m = NULL;
		size_t bad = 0, tested = 0, sorted = 1;

		CHECK(um && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.umaps), &key, um), "process entry in umaps");
		for (uint32_t i = 0; um && i < um->n; i++) {
			if (i && um->m[i].start < um->m[i - 1].end)
				sorted = 0;
			if (lc && um->m[i].start == lc->start)
				m = &um->m[i];
		}
		CHECK(um && sorted && um->n == (uint32_t)n, "mappings sorted, as many as sync said");
		/* An unchanged list is not written again: its gen (which keys the kernel's cached rules) stays. */
		{
			__u32 gen = um ? um->gen : 0;

			CHECK(unwinder__sync(u, getpid(), &maps) == n && um &&
				  !bpf_map_lookup_elem(bpf_map__fd(skel->maps.umaps), &key, um) && gen &&
				  um->gen == gen,
			      "a sync with the same mappings keeps the entry and its gen");
		}
		CHECK(m != NULL, "libc's mapping listed");
		fd = lc ? open(lc->path, O_RDONLY) : -1;
		CHECK(nr * (1ULL << ML_UW_ROW_CHUNK_BITS) * 8 + ni * (1ULL << ML_UW_IDX_CHUNK_BITS) * 8 ==
			  unwinder__memory(u),
		      "the kernel's outer maps hold every chunk made");
		if (m && wr && wi && fd >= 0 && ml_unwind_from_elf(fd, -1, NULL, &t) == 0) {
			/* every 7th byte of libc's table range: same rule as the parser's table */
			uint64_t lo = t.rows[0].pc, hi = t.rows[t.n - 1].pc;

			for (uint64_t vpc = lo; vpc < hi; vpc += 7) {
				const struct ml_unwind_row *want = ml_unwind_lookup(&t, vpc);
				uint64_t runtime = vpc - (lo & ~((1ULL << ML_UW_MAX_SHIFT) - 1)) + m->adj;
				const struct ml_urow *got = bpf_style_lookup(wr, wi, m, runtime - m->adj);

				tested++;
				if (!want || !got || ML_UW_KIND_CFA(got->kind) != expect_kind(want)) {
					bad++;
					continue;
				}
				if (want->cfa_reg <= ML_CFA_RBP && ML_UW_KIND_CFA(got->kind) <= ML_UW_RBP) {
					int64_t off = ML_UW_KIND_SCALED(got->kind) ? got->cfa_off * 8 : got->cfa_off;

					if (off != want->cfa_off)
						bad++;
					else if (want->rbp_saved == ML_RBP_AT_CFA &&
						 (ML_UW_KIND_RBP(got->kind) != ML_UW_RBP_AT ||
						  got->rbp_off8 * 8 != want->rbp_off))
						bad++;
				}
			}
			printf("# %zu pcs of libc compared, %zu differ\n", tested, bad);
			CHECK(tested > 100000 && bad == 0,
			      "wire rows and index give the parser's rule at every 7th byte of libc");
		} else {
			CHECK(0, "libc's table read back");
		}
		ml_unwind_table_free(&t);
		if (fd >= 0)
			close(fd);
		free(um);
		free(wr);
		free(wi);
	}

	/* A second process mapping the same files shares their tables. */
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	{
		struct ml_maps cm = {};
		bool shared = false;

		usleep(50000);
		ml_maps__read(child, &cm);
		used1 = used;
		n = unwinder__sync(u, child, &cm);
		unwinder__usage(u, &used, &cap, &no_room);
		CHECK(n > 0 && used == used1, "a forked child's mappings reuse the tables: no new rows");
		{
			struct ml_umaps *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
			__u32 k1 = (__u32)getpid(), k2 = (__u32)child;

			CHECK(a && b && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.umaps), &k1, a) &&
				  !bpf_map_lookup_elem(bpf_map__fd(skel->maps.umaps), &k2, b) && b->gen &&
				  b->gen != a->gen,
			      "the same mappings in another process: a gen of its own");
			free(a);
			free(b);
		}
		for (size_t i = 0; i < unwinder__n_files(u); i++)
			if (!unwinder__file(u, i, &info) && strstr(info.path, "/libc.so.6") && info.users == 2)
				shared = true;
		CHECK(shared, "libc's table has two users");
		ml_maps__clear(&cm);
	}
	unwinder__forget(u, getpid());
	unwinder__usage(u, &used, &cap, &no_room);
	CHECK_EQ_INT(used, used1, "tables stay while the child maps them");
	unwinder__forget(u, child);
	unwinder__usage(u, &used, &cap, &no_room);
	CHECK(used == 0 && unwinder__n_files(u) == 0, "the last user gone: every table evicted");
	{
		__u32 key = (__u32)child;
		struct ml_umaps *um = calloc(1, sizeof(*um));

		CHECK(um && bpf_map_lookup_elem(bpf_map__fd(skel->maps.umaps), &key, um) == -ENOENT,
		      "the process entry is deleted");
		free(um);
	}
	/* Ranges freed by eviction are reused: syncing again fits in the same rows. */
	n = unwinder__sync(u, getpid(), &maps);
	unwinder__usage(u, &used, &cap, &no_room);
	CHECK(n >= 2 && used == used1 && no_room == 0, "re-synced after eviction into the freed ranges");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);

	/* No room: a budget too small for libc leaves it to frame pointers, said once, counted. */
	unwinder__free(u);
	u = NULL;
	ml_maps__clear(&maps);
out:
	unwinder__free(u);
	memleak_bpf__destroy(skel);
}

static void test_no_room(void)
{
	struct memleak_bpf *skel = load();
	struct ml_maps maps = {};
	struct unwinder *u;
	uint64_t used, cap, no_room;

	if (!skel)
		return;
	unwinder__new(skel, &(struct unwind_opts){.mem = 1ULL << 16}, &u);
	ml_maps__read(getpid(), &maps);
	unwinder__sync(u, getpid(), &maps);
	unwinder__usage(u, &used, &cap, &no_room);
	CHECK(u && no_room >= 1 && used <= cap, "64 KiB: libc does not fit, counted, nothing overflows");
	ml_maps__clear(&maps);
	unwinder__free(u);
	memleak_bpf__destroy(skel);
}

/* The umaps entry of pid: its mapping count and gen; -1 when it has none. */
static int umaps_of(struct memleak_bpf *skel, int pid, __u32 *gen)
{
	struct ml_umaps *um = calloc(1, sizeof(*um));
	__u32 key = (__u32)pid;
	int n = -1;

	if (um && !bpf_map_lookup_elem(bpf_map__fd(skel->maps.umaps), &key, um)) {
		n = (int)um->n;
		*gen = um->gen;
	}
	free(um);
	return n;
}

/*
 * Tables in the background, with no time for a sync beyond the first rank: the sync lists libc's mappings
 * (built at once) but not the test's own, which the thread builds; its list is then published again, whole.
 */
static void test_background(void)
{
	struct memleak_bpf *skel = load();
	struct ml_maps maps = {};
	struct unwinder *u = NULL, *whole = NULL;
	struct unwind_loading ld;
	__u32 gen0 = 0, gen1 = 0;
	int n0, n1, nwhole;

	if (!skel)
		return;
	ml_maps__read(getpid(), &maps);
	CHECK_EQ_INT(unwinder__new(skel, &(struct unwind_opts){.mem = 64ULL << 20}, &whole), 0, "unwinder made");
	nwhole = whole ? unwinder__sync(whole, getpid(), &maps) : -1;
	unwinder__free(whole);
	CHECK_EQ_INT(unwinder__new(skel, &(struct unwind_opts){.mem = 64ULL << 20, .background = true}, &u), 0,
		     "unwinder with a builder thread made");
	if (!u)
		goto out;
	n0 = unwinder__sync(u, getpid(), &maps);
	/* The thread may publish a longer list as soon as the sync lets go of the lock. */
	CHECK(n0 >= 1 && n0 < nwhole && umaps_of(skel, getpid(), &gen0) >= n0,
	      "the sync lists libc's mappings at once, not the test's own (built in the background)");
	unwinder__wait(u);
	unwinder__loading(u, &ld);
	n1 = umaps_of(skel, getpid(), &gen1);
	printf("# %d mappings listed at once, %d once loaded (%d without a thread); %llu queued, %u built in the "
	       "background, all loaded after %.3f s\n",
	       n0, n1, nwhole, (unsigned long long)ld.queued, ld.pending ? 0 : ld.background, ld.all_loaded_s);
	CHECK(n1 == nwhole, "once loaded, the list is published again with every mapping");
	CHECK(ld.pending == 0 && ld.background >= 1 && ld.queued > ld.background && ld.all_loaded_s >= 0,
	      "the loading counts: nothing pending, the thread's tables, when the last came");
	CHECK_EQ_INT(unwinder__sync(u, getpid(), &maps), nwhole, "a sync after: every mapping, nothing queued");
out:
	ml_maps__clear(&maps);
	unwinder__free(u);
	memleak_bpf__destroy(skel);
}

/* A .debug_frame with one CIE (DWARF 4) and one FDE: push rbp at +1, CFA rsp+16, rbp at CFA-16. */
static void test_debug_frame(void)
{
	static const uint8_t df[] = {
	    /* CIE: length 20, id 0xffffffff, version 4, "", addr size 8, seg 0, caf 1, daf -8, ra 16 */
	    20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 8, 0, 1, 0x78, 16, 0x0c, 7, 8, /* def_cfa rsp+8 */
	    0x90, 1,								      /* ra at cfa-8 */
	    0, 0, 0, 0,								      /* padding nops */
	    /* FDE: length 25, CIE pointer 0, begin 0x1000, range 0x20 */
	    25, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0x41, /* advance 1 */
	    0x0e, 16, /* def_cfa_offset 16 */
	    0x86, 2,  /* rbp at cfa-16 */
	};
	struct ml_unwind_table t;
	const struct ml_unwind_row *r;
	uint8_t bad[sizeof(df)];

	CHECK(ml_debugframe_parse(df, sizeof(df), &t) == 0 && t.n_skipped == 0, "debug_frame: parses");
	r = ml_unwind_lookup(&t, 0x1000);
	CHECK(r && r->cfa_reg == ML_CFA_RSP && r->cfa_off == 8, "debug_frame: entry rsp+8");
	r = ml_unwind_lookup(&t, 0x1005);
	CHECK(r && r->cfa_reg == ML_CFA_RSP && r->cfa_off == 16 && r->rbp_saved == ML_RBP_AT_CFA && r->rbp_off == -16,
	      "debug_frame: after push rsp+16, rbp at cfa-16");
	r = ml_unwind_lookup(&t, 0x1020);
	CHECK(r && r->cfa_reg == ML_CFA_NONE, "debug_frame: past the FDE no FDE covers");
	ml_unwind_table_free(&t);
	/* The same bytes read as .eh_frame: the all-ones id is an FDE pointing nowhere. */
	/* The same bytes read as .eh_frame: the all-ones id is an FDE pointing nowhere (skipped), the FDE's
	 * zero CIE pointer reads as a CIE id, and that "CIE" has no valid version. */
	CHECK(ml_ehframe_parse(df, sizeof(df), 0, &t) == 0 && t.n == 0 && t.n_skipped == 1,
	      "debug_frame bytes as .eh_frame: nothing usable");
	ml_unwind_table_free(&t);
	memcpy(bad, df, sizeof(df));
	bad[11] = 1; /* a segment selector size: refused */
	CHECK(ml_debugframe_parse(bad, sizeof(bad), &t) == 0 && t.n == 0 && t.n_skipped == 1,
	      "debug_frame: segment selectors refused, the FDE skipped");
	ml_unwind_table_free(&t);
	memcpy(bad, df, sizeof(df));
	bad[28] = 100; /* CIE pointer past every CIE */
	CHECK(ml_debugframe_parse(bad, sizeof(bad), &t) == 0 && t.n == 0 && t.n_skipped == 1,
	      "debug_frame: FDE naming no CIE skipped");
	ml_unwind_table_free(&t);
	CHECK(ml_debugframe_parse(df, 10, &t) == -EINVAL && t.n == 0,
	      "debug_frame: truncated entry rejects the section");
}

/* Build-id lookup under a debug directory, with the file's own build-id checked. */
static void test_debug_file(void)
{
	char dir[] = "/tmp/ml-dbgXXXXXX", path[512], cmd[1536];
	unsigned char id[64];
	int fd, dfd;
	size_t n;
	Elf *e;

	elf_version(EV_CURRENT);
	if (!mkdtemp(dir)) {
		CHECK(0, "mkdtemp");
		return;
	}
	fd = open("/proc/self/exe", O_RDONLY);
	e = elf_begin(fd, ELF_C_READ, NULL);
	n = ml_elf_build_id(e, id, sizeof(id));
	CHECK_EQ_INT(n, 20, "own build-id read (20 bytes)");
	CHECK_EQ_INT(ml_debug_file_open(0, dir, e, "/proc/self/exe"), -ENOENT, "no debug file: -ENOENT");
	snprintf(path, sizeof(path), "%s/.build-id/%02x", dir, id[0]);
	mkdir(dir, 0700);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && objcopy --only-keep-debug /proc/%d/exe %s/", path, getpid(), path);
	for (size_t i = 1; i < n; i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%02x", id[i]);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), ".debug");
	CHECK_EQ_INT(system(cmd), 0, "debug file made with objcopy --only-keep-debug");
	dfd = ml_debug_file_open(0, dir, e, "/proc/self/exe");
	CHECK(dfd >= 0, "found by build-id");
	if (dfd >= 0)
		close(dfd);
	/* a file at the build-id path whose own build-id differs is not taken */
	snprintf(cmd, sizeof(cmd), "cp /bin/true %s/", path);
	for (size_t i = 1; i < n; i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%02x", id[i]);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), ".debug");
	CHECK(system(cmd) == 0 && ml_debug_file_open(0, dir, e, "/proc/self/exe") == -ENOENT,
	      "a debug file with another build-id is refused");
	elf_end(e);
	close(fd);

	/* .gnu_debuglink: a copy of this program pointing at its debug file beside it, CRC-checked */
	snprintf(cmd, sizeof(cmd),
		 "cp /proc/%d/exe %s/prog && cd %s && objcopy --only-keep-debug prog prog.dbg && "
		 "objcopy --add-gnu-debuglink=prog.dbg prog && cp prog.dbg keep.dbg",
		 getpid(), dir, dir);
	CHECK_EQ_INT(system(cmd), 0, "debuglink: copy made with objcopy --add-gnu-debuglink");
	snprintf(path, sizeof(path), "%s/prog", dir);
	fd = open(path, O_RDONLY);
	e = elf_begin(fd, ELF_C_READ, NULL);
	dfd = ml_debug_file_open(0, "/nonexistent", e, path);
	CHECK(dfd >= 0, "debuglink: found beside the object (no build-id file under the debug directory)");
	if (dfd >= 0)
		close(dfd);
	snprintf(cmd, sizeof(cmd), "echo x >> %s/prog.dbg", dir);
	CHECK(system(cmd) == 0 && ml_debug_file_open(0, "/nonexistent", e, path) == -ENOENT,
	      "debuglink: a debug file whose CRC differs is refused");
	snprintf(cmd, sizeof(cmd), "cd %s && mkdir -p .debug && mv keep.dbg .debug/prog.dbg && rm prog.dbg", dir);
	CHECK_EQ_INT(system(cmd), 0, "debuglink: the good debug file moved to .debug/");
	dfd = ml_debug_file_open(0, "/nonexistent", e, path);
	CHECK(dfd >= 0, "debuglink: found in the object's .debug/ directory");
	if (dfd >= 0)
		close(dfd);
	/* A FIFO where the debug file would be (the target names these files): passed over, not waited on. An
	 * open that blocks ends the test by SIGALRM, without a summary: a failure. */
	snprintf(cmd, sizeof(cmd), "%s/prog.dbg", dir);
	CHECK_EQ_INT(mkfifo(cmd, 0600), 0, "debuglink: a FIFO by the debug file's name beside the object");
	alarm(10);
	dfd = ml_debug_file_open(0, "/nonexistent", e, path);
	alarm(0);
	CHECK(dfd >= 0, "debuglink: the FIFO passed over, the .debug/ file found");
	if (dfd >= 0)
		close(dfd);
	elf_end(e);
	close(fd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	system(cmd);
}

int main(void)
{
	test_debug_frame();
	test_debug_file();
	if (geteuid() == 0) {
		test_tables();
		test_no_room();
		test_background();
	} else {
		CHECK(0, "BPF table tests need root");
	}
	return SUMMARY("unwind");
}
