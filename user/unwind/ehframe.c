/* Compact x86-64 unwind tables from .eh_frame (DWARF call frame information, LSB flavour). */
#define _GNU_SOURCE
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/radix.h"
#include "unwind/cfi.h"
#include "unwind/cfi_reader.h"
#include "unwind/ehframe.h"

_Static_assert(ML_EHFRAME_MAX_STATE_DEPTH == CFI_MAX_STATE_DEPTH, "one nesting limit, as ehframe.h states it");

struct cie {
	size_t off; /* of the entry's first byte in the section */
	bool ok;
	uint8_t fde_enc;
	bool has_z;
	struct cfi_cie cfi; /* what its instructions and its FDEs' take from it */
};

/* Collected rows before sorting: a real row beats an FDE-end marker at the same pc, then file order. */
struct tmp_row {
	struct ml_unwind_row r;
	uint32_t seq;
	uint8_t real;
};

struct builder {
	const uint8_t *sect;
	uint64_t sect_addr;
	struct cie *cies; /* in section order, so sorted by off */
	size_t ncies, capcies;
	struct tmp_row *tmp;
	size_t ntmp, captmp;
	const bool *stop; /* NULL, or polled while parsing: a builder thread told to quit */
};

/* Room for need elements (lib/grow.h), refused past limit: the section's bytes choose need. */
static int grow(void *arr, size_t *cap, size_t need, size_t elem, size_t limit)
{
	return need > limit ? -E2BIG : ml_grow(arr, cap, need, elem);
}

/* The row the rules give from pc on: a frame the BPF unwinder can walk, or the reason it cannot. */
static void state_to_row(const struct cfi_state *st, uint64_t pc, struct ml_unwind_row *row)
{
	memset(row, 0, sizeof(*row));
	row->pc = pc;
	row->cfa_reg = st->signal ? ML_CFA_SIGNAL : ML_CFA_UNSUPPORTED;
	if (st->signal || !st->cfa_set || st->cfa_expr || (st->cfa_reg != CFI_REG_RSP && st->cfa_reg != CFI_REG_RBP))
		return;
	if (st->cfa_off < INT32_MIN || st->cfa_off > INT32_MAX)
		return;
	if (st->ra_rule != CFI_RULE_OFFSET || st->ra_off != -8)
		return;
	switch (st->rbp_rule) {
	case CFI_RULE_SAME: row->rbp_saved = ML_RBP_SAME; break;
	case CFI_RULE_OFFSET:
		if (st->rbp_off < INT32_MIN || st->rbp_off > INT32_MAX)
			return;
		row->rbp_saved = ML_RBP_AT_CFA;
		row->rbp_off = (int32_t)st->rbp_off;
		break;
	default: row->rbp_saved = ML_RBP_LOST; break;
	}
	row->cfa_reg = st->cfa_reg == CFI_REG_RSP ? ML_CFA_RSP : ML_CFA_RBP;
	row->cfa_off = (int32_t)st->cfa_off;
}

static bool same_rule(const struct ml_unwind_row *a, const struct ml_unwind_row *b)
{
	return a->cfa_reg == b->cfa_reg && a->cfa_off == b->cfa_off && a->rbp_saved == b->rbp_saved &&
	       a->rbp_off == b->rbp_off;
}

/* Append a row; rows of the current FDE (from index first) at the same pc replace, repeats are dropped. */
static int emit(struct builder *b, size_t first, const struct ml_unwind_row *row, bool real)
{
	struct tmp_row *last = b->ntmp > first ? &b->tmp[b->ntmp - 1] : NULL;
	int err;

	if (last && last->r.pc == row->pc) {
		last->r = *row;
		last->real = real;
		return 0;
	}
	if (last && same_rule(&last->r, row))
		return 0;
	err = grow(&b->tmp, &b->captmp, b->ntmp + 1, sizeof(*b->tmp), ML_EHFRAME_MAX_ROWS);
	if (err)
		return err;
	b->tmp[b->ntmp].r = *row;
	b->tmp[b->ntmp].seq = (uint32_t)b->ntmp;
	b->tmp[b->ntmp].real = real;
	b->ntmp++;
	return 0;
}

/* The pc-begin encoding: readable, absolute or pcrel, and not indirect. */
static bool fde_enc_ok(uint8_t enc)
{
	if (enc & PE_INDIRECT || !pe_format_ok(enc))
		return false;
	return (enc & PE_APP_MASK) == 0 || (enc & PE_APP_MASK) == PE_PCREL;
}

/*
 * Personality and LSDA encodings: their values are never used (nor indirections followed), but they must
 * be readable, and textrel, funcrel and aligned are refused.
 */
static bool aux_enc_ok(uint8_t enc)
{
	uint8_t app = enc & PE_APP_MASK;

	if (enc == PE_OMIT)
		return true;
	return pe_format_ok(enc) && (app == 0 || app == PE_PCREL || app == PE_DATAREL);
}

/* The CIE's fields between its augmentation string and data: alignment factors and the return address column. */
static int cie_factors(struct rd *r, struct cie *c, uint8_t version)
{
	uint64_t ra;

	if (version == 4) { /* address size 8, no segment selectors */
		uint8_t asz, ssz;

		if (rd_u8(r, &asz) || rd_u8(r, &ssz) || asz != 8 || ssz != 0)
			return -EINVAL;
	}
	if (rd_uleb(r, &c->cfi.caf) || rd_sleb(r, &c->cfi.daf))
		return -EINVAL;
	if (version == 1) {
		uint8_t b8;

		if (rd_u8(r, &b8))
			return -EINVAL;
		ra = b8;
	} else if (rd_uleb(r, &ra)) {
		return -EINVAL;
	}
	return ra == CFI_REG_RA ? 0 : -EINVAL;
}

/* The augmentation data aug announces: the FDEs' pointer encoding kept, the personality's and LSDA's checked. */
static int cie_aug_data(struct builder *b, struct rd *r, struct cie *c, const char *aug)
{
	uint64_t u;
	struct rd ar;
	uint8_t e;

	if (aug[0] != 'z') {
		for (size_t i = 0; aug[i]; i++) /* without 'z' only letters that carry no data are understood */
			if (aug[i] != 'S')
				return -EINVAL;
		return 0;
	}
	c->has_z = true;
	if (rd_uleb(r, &u) || u > rd_left(r))
		return -EINVAL;
	ar.p = r->p;
	ar.end = r->p + u;
	r->p += u;
	for (size_t i = 1; aug[i]; i++) {
		switch (aug[i]) {
		case 'R':
			if (rd_u8(&ar, &e) || !fde_enc_ok(e))
				return -EINVAL;
			c->fde_enc = e;
			break;
		case 'P':
			if (rd_u8(&ar, &e) || !aux_enc_ok(e))
				return -EINVAL;
			if (e != PE_OMIT && rd_encoded(&ar, e, false, b->sect, b->sect_addr, &u))
				return -EINVAL;
			break;
		case 'L':
			if (rd_u8(&ar, &e) || !aux_enc_ok(e))
				return -EINVAL;
			break;
		case 'S': break;
		default: return -EINVAL;
		}
	}
	return 0;
}

/* Parse a CIE's body (after the CIE id) into c; c->ok tells whether its FDEs can be used. */
static int parse_cie(struct builder *b, struct rd *r, struct cie *c, bool debug)
{
	const uint8_t *nul;
	const char *aug;
	uint8_t version;
	int err;

	memset(c, 0, sizeof(*c));
	c->fde_enc = PE_ABSPTR;
	if (rd_u8(r, &version) || (version != 1 && version != 3 && !(debug && version == 4)))
		return -EINVAL;
	nul = memchr(r->p, 0, rd_left(r));
	if (!nul)
		return -EINVAL;
	aug = (const char *)r->p;
	r->p = nul + 1;
	if (aug[0] == 'e' && aug[1] == 'h') /* old GCC: an eh pointer of unknown size follows */
		return -EINVAL;
	if (cie_factors(r, c, version) || cie_aug_data(b, r, c, aug))
		return -EINVAL;
	c->cfi.init.rbp_rule = CFI_RULE_SAME;
	c->cfi.init.ra_rule = CFI_RULE_SAME;
	c->cfi.init.signal = strchr(aug, 'S') != NULL;
	err = cfi__run(r, &c->cfi, &c->cfi.init, NULL);
	if (err == -E2BIG || err == -ENOMEM)
		return err;
	if (err)
		return -EINVAL;
	c->ok = true;
	return 0;
}

static const struct cie *find_cie(const struct builder *b, size_t off)
{
	size_t lo = 0, hi = b->ncies;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->cies[mid].off == off)
			return &b->cies[mid];
		if (b->cies[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Where an FDE's rows go: b->tmp, where its rows from index first on are its own. */
struct fde_sink {
	struct builder *b;
	size_t first;
};

static int emit_real(void *ctx, const struct cfi_state *st, uint64_t pc)
{
	struct fde_sink *k = ctx;
	struct ml_unwind_row row;

	state_to_row(st, pc, &row);
	return emit(k->b, k->first, &row, true);
}

/*
 * Interpret one FDE; r covers its body after the CIE pointer. -EINVAL: skip it (the caller drops its
 * rows); -E2BIG, -ENOMEM: give up.
 */
static int parse_fde(struct builder *b, struct rd *r, const struct cie *c)
{
	struct fde_sink k = {.b = b, .first = b->ntmp};
	struct cfi_fde f = {.enc = c->fde_enc, .sect = b->sect, .sect_addr = b->sect_addr, .row = emit_real, .ctx = &k};
	struct ml_unwind_row row;
	struct cfi_state st;
	uint64_t begin, range;
	int err;

	if (rd_encoded(r, c->fde_enc, true, b->sect, b->sect_addr, &begin))
		return -EINVAL;
	if (rd_encoded(r, c->fde_enc & PE_FORMAT_MASK, false, b->sect, b->sect_addr, &range))
		return -EINVAL;
	if ((c->fde_enc & PE_FORMAT_MASK) >= PE_SLEB128 && (int64_t)range < 0)
		return -EINVAL;
	if (begin + range < begin)
		return -EINVAL;
	if (c->has_z && rd_skip_block(r))
		return -EINVAL;
	if (!range) /* covers nothing */
		return 0;
	f.loc = begin;
	f.end = begin + range;
	st = c->cfi.init;
	err = cfi__run(r, &c->cfi, &st, &f);
	if (err)
		return err;
	if (!f.done) {
		state_to_row(&st, f.loc, &row);
		err = emit(b, k.first, &row, true);
		if (err)
			return err;
	}
	memset(&row, 0, sizeof(row));
	row.pc = f.end;
	row.cfa_reg = ML_CFA_NONE;
	return emit(b, k.first, &row, false);
}

static int cmp_tmp(const void *pa, const void *pb)
{
	const struct tmp_row *a = pa, *b = pb;

	if (a->r.pc != b->r.pc)
		return a->r.pc < b->r.pc ? -1 : 1;
	if (a->real != b->real)
		return a->real < b->real ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/*
 * b->tmp's rows in order: *sorted[i].idx is the i-th row's index, from ml_radix_sort (or qsort, in place, when a pc
 * leaves no room for the real bit). *mem is what to free. As much memory as qsort's merge takes: 32 bytes a row.
 */
static int sort_rows(struct builder *b, struct ml_sort_key **sorted, struct ml_sort_key **mem)
{
	struct ml_sort_key *k = malloc(2 * b->ntmp * sizeof(*k));
	bool wide = false;

	if (!k)
		return -ENOMEM;
	for (size_t i = 0; i < b->ntmp && !wide; i++) {
		wide = b->tmp[i].r.pc >> 63;
		k[i] = (struct ml_sort_key){b->tmp[i].r.pc << 1 | b->tmp[i].real, i};
	}
	if (wide) {
		qsort(b->tmp, b->ntmp, sizeof(*b->tmp), cmp_tmp);
		for (size_t i = 0; i < b->ntmp; i++)
			k[i].idx = i;
		*sorted = k;
	} else {
		*sorted = ml_radix_sort(k, k + b->ntmp, b->ntmp);
	}
	*mem = k;
	return 0;
}

/* Sort, keep the last row for each pc (real rows after end markers, then file order), merge repeats. */
static int finish(struct builder *b, struct ml_unwind_table *out)
{
	struct ml_sort_key *o, *mem;
	size_t i, n = 0;
	int err;

	if (!b->ntmp)
		return 0;
	err = sort_rows(b, &o, &mem);
	if (err)
		return err;
	out->rows = malloc(b->ntmp * sizeof(*out->rows));
	if (!out->rows) {
		free(mem);
		return -ENOMEM;
	}
	for (i = 0; i < b->ntmp; i++) {
		const struct ml_unwind_row *r = &b->tmp[o[i].idx].r;

		if (i + 1 < b->ntmp && b->tmp[o[i + 1].idx].r.pc == r->pc)
			continue;
		if (n && same_rule(&out->rows[n - 1], r))
			continue;
		out->rows[n++] = *r;
	}
	free(mem);
	out->n = n;
	return 0;
}

/*
 * The entries of one section into b->tmp. .eh_frame: CIE id 0, CIE pointers count back from their own
 * field and are 4 bytes. .debug_frame: CIE id all ones, CIE pointers are section offsets, both as wide as
 * the entry's length field.
 */
static int parse_entries(struct builder *b, const uint8_t *data, size_t len, bool debug, size_t *n_skipped)
{
	size_t off = 0, n = 0;
	int err = 0;

	b->ncies = 0;
	while (off < len) {
		struct rd r = {data + off, data + len};
		uint64_t elen, id, cie_id = 0;
		size_t body, idw = 4;

		/* libtorch_cpu.so's 17 MB took over 30 s at SCHED_IDLE on a busy machine: a stop may not wait */
		if (b->stop && ++n % 4096 == 0 && __atomic_load_n(b->stop, __ATOMIC_RELAXED))
			return -ECANCELED;
		if (rd_bytes(&r, 4, &elen, false))
			return -EINVAL;
		if (elen == 0) /* terminator */
			break;
		if (elen == 0xffffffffu) {
			if (rd_bytes(&r, 8, &elen, false))
				return -EINVAL;
			if (debug)
				idw = 8;
		}
		if (debug)
			cie_id = idw == 8 ? UINT64_MAX : 0xffffffffu;
		if (elen > rd_left(&r) || elen < idw)
			return -EINVAL;
		body = (size_t)(r.p - data);
		r.end = r.p + elen;
		rd_bytes(&r, idw, &id, false);
		if (id == cie_id) {
			struct cie *c;

			err = grow(&b->cies, &b->capcies, b->ncies + 1, sizeof(*b->cies), SIZE_MAX / sizeof(*b->cies));
			if (err)
				return err;
			c = &b->cies[b->ncies++];
			err = parse_cie(b, &r, c, debug);
			c->off = off;
			if (err && err != -EINVAL)
				return err;
		} else {
			const struct cie *c;
			size_t first = b->ntmp;

			if (debug) /* an offset into the section */
				c = id < off ? find_cie(b, (size_t)id) : NULL;
			else /* counts back from its own field */
				c = id <= body ? find_cie(b, body - id) : NULL;
			err = c && c->ok ? parse_fde(b, &r, c) : -EINVAL;
			if (err == -EINVAL) {
				b->ntmp = first;
				(*n_skipped)++;
			} else if (err) {
				return err;
			}
		}
		off = body + elen;
	}
	return 0;
}

/* Parse sections (NULL data: absent) into out: .debug_frame first, so .eh_frame rows win at equal pcs. */
static int parse_sections(const uint8_t *eh, size_t eh_len, uint64_t eh_addr, const uint8_t *dbg, size_t dbg_len,
			  bool dbg_optional, const bool *stop, struct ml_unwind_table *out)
{
	struct builder b = {.stop = stop};
	size_t skipped = 0;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if ((!eh && eh_len) || (!dbg && dbg_len))
		return -EINVAL;
	if (dbg) {
		b.sect = dbg;
		b.sect_addr = 0;
		err = parse_entries(&b, dbg, dbg_len, true, &skipped);
		if (err == -EINVAL && dbg_optional) {
			b.ntmp = 0;
			skipped++;
			err = 0;
		}
	}
	if (!err && eh) {
		b.sect = eh;
		b.sect_addr = eh_addr;
		err = parse_entries(&b, eh, eh_len, false, &skipped);
	}
	if (!err)
		err = finish(&b, out);
	free(b.cies);
	free(b.tmp);
	if (err) {
		free(out->rows);
		memset(out, 0, sizeof(*out));
	} else {
		out->n_skipped = skipped;
	}
	return err;
}

/* NULL data with a length is refused by parse_sections; NULL with none is an empty section. */
int ml_ehframe_parse(const uint8_t *data, size_t len, uint64_t sect_addr, struct ml_unwind_table *out)
{
	return parse_sections(data, len, sect_addr, NULL, 0, false, NULL, out);
}

int ml_debugframe_parse(const uint8_t *data, size_t len, struct ml_unwind_table *out)
{
	return parse_sections(NULL, 0, 0, data, len, false, NULL, out);
}

/*
 * The contents of the named section of an open ELF (decompressed if SHF_COMPRESSED, as debug files'
 * sections often are), or NULL. *addr gets its address.
 */
static Elf_Data *section_data(Elf *elf, const char *want, uint64_t *addr)
{
	GElf_Shdr sh;
	Elf_Scn *scn = ml_elf_section(elf, want, true, &sh);
	Elf_Data *d;

	if (!scn || ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0))
		return NULL;
	d = elf_getdata(scn, NULL);
	if (!d || (!d->d_buf && d->d_size))
		return NULL;
	*addr = sh.sh_addr;
	return d;
}

/* A 64-bit x86-64 ELF opened for reading, or NULL. */
static Elf *open_elf(int fd)
{
	GElf_Ehdr eh;
	Elf *elf;

	/* ELF_C_READ: pread into memory rather than mmap, so a file truncated under us cannot SIGBUS. */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (elf && (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
		    eh.e_machine != EM_X86_64)) {
		elf_end(elf);
		elf = NULL;
	}
	return elf;
}

int ml_unwind_from_elf(int fd, int debug_fd, const bool *stop, struct ml_unwind_table *out)
{
	Elf *elf, *delf = NULL;
	Elf_Data *eh, *dbg;
	uint64_t eh_addr = 0, dummy;
	int err;

	memset(out, 0, sizeof(*out));
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOEXEC;
	elf = open_elf(fd);
	if (!elf)
		return -ENOEXEC;
	if (debug_fd >= 0)
		delf = open_elf(debug_fd);
	eh = section_data(elf, ".eh_frame", &eh_addr);
	dbg = section_data(delf ? delf : elf, ".debug_frame", &dummy);
	if (!dbg && delf) /* a debug file without one: the object's own, if any */
		dbg = section_data(elf, ".debug_frame", &dummy);
	if (!eh && !dbg)
		err = -ENOENT;
	else
		err = parse_sections(eh ? eh->d_buf : NULL, eh ? eh->d_size : 0, eh_addr, dbg ? dbg->d_buf : NULL,
				     dbg ? dbg->d_size : 0, eh != NULL, stop, out);
	elf_end(delf);
	elf_end(elf);
	return err;
}

const struct ml_unwind_row *ml_unwind_lookup(const struct ml_unwind_table *t, uint64_t pc)
{
	size_t lo = 0, hi = t ? t->n : 0;

	/* The first row with rows[i].pc > pc, then one back. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->rows[mid].pc <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &t->rows[lo - 1] : NULL;
}

void ml_unwind_table_free(struct ml_unwind_table *t)
{
	if (!t)
		return;
	free(t->rows);
	memset(t, 0, sizeof(*t));
}
