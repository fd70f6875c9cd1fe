/* One file's unwinding table parsed and turned into wire rows (uwparse.h). */
#define _GNU_SOURCE
#include "unwind/uwparse.h"
#include <errno.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/debuginfo.h"
#include "lib/log.h"
#include "unwind/ehframe.h"

/* A table row as a wire row; rules the wire cannot hold stop the unwind there. */
static struct ml_urow wire_row(const struct ml_unwind_row *r, uint64_t lo)
{
	struct ml_urow w = {.pc = (uint32_t)(r->pc - lo)};
	uint8_t cfa, rbp = ML_UW_RBP_SAME, scaled = 0;

	switch (r->cfa_reg) {
	case ML_CFA_RSP:
	case ML_CFA_RBP:
		cfa = r->cfa_reg == ML_CFA_RSP ? ML_UW_RSP : ML_UW_RBP;
		if (r->cfa_off >= INT16_MIN && r->cfa_off <= INT16_MAX) {
			w.cfa_off = (int16_t)r->cfa_off;
		} else if (r->cfa_off % 8 == 0 && r->cfa_off / 8 >= INT16_MIN && r->cfa_off / 8 <= INT16_MAX) {
			w.cfa_off = (int16_t)(r->cfa_off / 8);
			scaled = 1;
		} else {
			cfa = ML_UW_STOP;
			break;
		}
		if (r->rbp_saved == ML_RBP_AT_CFA) {
			if (r->rbp_off % 8 == 0 && r->rbp_off / 8 >= INT8_MIN && r->rbp_off / 8 <= INT8_MAX) {
				rbp = ML_UW_RBP_AT;
				w.rbp_off8 = (int8_t)(r->rbp_off / 8);
			} else {
				rbp = ML_UW_RBP_LOST;
			}
		} else if (r->rbp_saved == ML_RBP_LOST) {
			rbp = ML_UW_RBP_LOST;
		}
		break;
	case ML_CFA_NONE: cfa = ML_UW_NONE_FDE; break;
	case ML_CFA_SIGNAL: cfa = ML_UW_SIGNAL; break;
	default: cfa = ML_UW_STOP; break;
	}
	if (cfa != ML_UW_RSP && cfa != ML_UW_RBP) {
		w.cfa_off = 0;
		w.rbp_off8 = 0;
		rbp = 0;
		scaled = 0;
	}
	w.kind = ML_UW_KIND(cfa, rbp, scaled);
	return w;
}

static bool same_wire(const struct ml_urow *a, const struct ml_urow *b)
{
	return a->cfa_off == b->cfa_off && a->rbp_off8 == b->rbp_off8 && a->kind == b->kind;
}

/* The executable PT_LOAD segments, to turn a mapping's file offset into an ELF address. */
static void read_segs(Elf *elf, struct uw_parsed *f)
{
	size_t n;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n))
		return;
	for (size_t i = 0; i < n && f->nsegs < UW_MAX_SEGS; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		f->segs[f->nsegs++] = (struct uw_seg){ph.p_offset, ph.p_vaddr, ph.p_filesz};
	}
}

/*
 * Reads the table of the file open on fd (and of its separate debug file, looked for as pid sees it) into t,
 * its executable segments into f. A file without a table leaves t empty: -ENOMEM only is an error.
 */
static int read_table(const char *debug_dir, int pid, int fd, const char *path, const bool *stop, struct uw_parsed *f,
		      struct ml_unwind_table *t)
{
	int dfd = -1, err = 0;
	Elf *elf;

	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF) {
		read_segs(elf, f);
		dfd = ml_debug_file_open(pid, debug_dir, elf, path);
		if (dfd == -ENOMEM)
			err = -ENOMEM;
	}
	elf_end(elf);
	if (!err && f->nsegs) {
		err = ml_unwind_from_elf(fd, dfd, stop, t);
		if (err && err != -ENOMEM && err != -ECANCELED) {
			ml_info("%s: no unwinding table (%s): frame pointers only", path, strerror(-err));
			err = 0;
		}
	}
	f->debug_file = dfd >= 0;
	if (dfd >= 0)
		close(dfd);
	return err;
}

/* t's rows as wire rows into conv (t->n of them), a row that repeats the one before left out; how many. */
static uint32_t wire_rows(const struct ml_unwind_table *t, uint64_t lo, struct ml_urow *conv)
{
	uint32_t nrows = 0;

	for (size_t i = 0; i < t->n; i++) {
		struct ml_urow w = wire_row(&t->rows[i], lo);

		if (nrows && same_wire(&conv[nrows - 1], &w))
			continue;
		conv[nrows++] = w;
	}
	return nrows;
}

/*
 * Index granularity: the finest power of two (down to 2^ML_UW_MIN_SHIFT bytes) that keeps about
 * ML_UW_ROWS_PER_SLOT rows per index entry, so the BPF search takes two or three steps and the index
 * costs a fraction of the rows.
 */
static uint32_t index_shift(uint64_t span, uint32_t nrows)
{
	uint32_t shift = ML_UW_MAX_SHIFT;

	while (shift > ML_UW_MIN_SHIFT && (span >> (shift - 1)) + 1 <= nrows / ML_UW_ROWS_PER_SLOT)
		shift--;
	return shift;
}

int uw_parse(const char *debug_dir, int pid, int fd, const char *path, const bool *stop, struct uw_parsed *p)
{
	struct ml_unwind_table t = {};
	uint64_t t0 = ml_clock_ns(CLOCK_MONOTONIC), hi;
	int err;

	memset(p, 0, sizeof(*p));
	err = read_table(debug_dir, pid, fd, path, stop, p, &t);
	if (err || !t.n)
		goto out;
	p->lo = t.rows[0].pc & ~(uint64_t)((1u << ML_UW_MAX_SHIFT) - 1);
	hi = t.rows[t.n - 1].pc;
	if (hi - p->lo > UINT32_MAX || t.n > UINT32_MAX / 2) {
		ml_info("%s: unwinding table spans over 4 GiB: frame pointers only", path);
		goto out;
	}
	p->conv = malloc(t.n * sizeof(*p->conv));
	if (!p->conv) {
		err = -ENOMEM;
		goto out;
	}
	p->n_src = t.n;
	p->nrows = wire_rows(&t, p->lo, p->conv);
	p->shift = index_shift(hi - p->lo, p->nrows);
	p->npages = (uint32_t)((hi - p->lo) >> p->shift) + 1;
out:
	p->build_ns = ml_clock_ns(CLOCK_MONOTONIC) - t0;
	ml_unwind_table_free(&t);
	return err;
}
