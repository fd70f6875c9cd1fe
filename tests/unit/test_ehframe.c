/* Unit tests for the .eh_frame parser: hand-built sections, malformed ones, and real objects against readelf. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "unwind/ehframe.h"

/* ---- a growable byte buffer to build sections with ---- */

struct buf {
	uint8_t *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *src, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->n, src, n);
	b->n += n;
}

static void u8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void u32(struct buf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void u64(struct buf *b, uint64_t v)
{
	put(b, &v, 8);
}

static void uleb(struct buf *b, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;

		v >>= 7;
		u8(b, c | (v ? 0x80 : 0));
	} while (v);
}

static void sleb(struct buf *b, int64_t v)
{
	bool more = true;

	while (more) {
		uint8_t c = v & 0x7f;

		v >>= 7;
		more = !((v == 0 && !(c & 0x40)) || (v == -1 && (c & 0x40)));
		u8(b, c | (more ? 0x80 : 0));
	}
}

static void bytes(struct buf *b, const char *s, size_t n)
{
	put(b, s, n);
}

/* Entry length placeholder: returns where to patch. */
static size_t begin_entry(struct buf *b)
{
	size_t at = b->n;

	u32(b, 0);
	return at;
}

static void end_entry(struct buf *b, size_t at)
{
	uint32_t len = (uint32_t)(b->n - at - 4);

	memcpy(b->p + at, &len, 4);
}

/* CIE "zR" with FDE encoding enc: code align 1, data align -8, ra 16, CFA = rsp+8, ra at c-8. */
static size_t cie_zr(struct buf *b, uint8_t enc)
{
	size_t start = b->n, at = begin_entry(b);

	u32(b, 0); /* CIE id */
	u8(b, 1);  /* version */
	bytes(b, "zR", 3);
	uleb(b, 1);
	sleb(b, -8);
	u8(b, 16);
	uleb(b, 1); /* augmentation data length */
	u8(b, enc);
	u8(b, 0x0c), uleb(b, 7), uleb(b, 8); /* def_cfa rsp+8 */
	u8(b, 0x80 | 16), uleb(b, 1);	     /* offset ra, c-8 */
	end_entry(b, at);
	return start;
}

/* FDE header for cie at cie_off with sdata4|pcrel pc; the caller adds instructions, then end_entry. */
static size_t fde_begin(struct buf *b, size_t cie_off, uint64_t sect_addr, uint64_t pc, uint32_t range)
{
	size_t at = begin_entry(b);

	u32(b, (uint32_t)(b->n - cie_off));
	u32(b, (uint32_t)(pc - (sect_addr + b->n)));
	u32(b, range);
	uleb(b, 0); /* augmentation data */
	return at;
}

#define ADDR 0x10000

static bool row_is(const struct ml_unwind_row *r, int reg, int32_t off, int rbp, int32_t rbp_off)
{
	return r && r->cfa_reg == reg && r->cfa_off == off && r->rbp_saved == rbp && r->rbp_off == rbp_off;
}

static bool row_unsup(const struct ml_unwind_row *r)
{
	return r && (r->cfa_reg == ML_CFA_UNSUPPORTED || r->cfa_reg == ML_CFA_NONE);
}

/* A typical frame-pointer function: push rbp; mov rsp,rbp; ...; leave at +20; ret. */
static void fde_push_rbp(struct buf *b, size_t cie, uint64_t pc)
{
	size_t at = fde_begin(b, cie, ADDR, pc, 0x20);

	u8(b, 0x41);			     /* advance 1 */
	u8(b, 0x0e), uleb(b, 16);	     /* def_cfa_offset 16 */
	u8(b, 0x80 | 6), uleb(b, 2);	     /* rbp at c-16 */
	u8(b, 0x43);			     /* advance 3 */
	u8(b, 0x0d), uleb(b, 6);	     /* def_cfa_register rbp */
	u8(b, 0x02), u8(b, 16);		     /* advance_loc1 16 -> pc+20 */
	u8(b, 0x0c), uleb(b, 7), uleb(b, 8); /* def_cfa rsp+8 */
	u8(b, 0xc0 | 6);		     /* restore rbp */
	end_entry(b, at);
}

static void test_basic(void)
{
	struct buf b = {0};
	struct ml_unwind_table t;
	size_t cie;
	int err;

	cie = cie_zr(&b, 0x1b);
	fde_push_rbp(&b, cie, 0x401000);
	u32(&b, 0);	     /* terminator */
	u32(&b, 0xdeadbeef); /* ignored after the terminator */
	err = ml_ehframe_parse(b.p, b.n, ADDR, &t);
	CHECK_EQ_INT(err, 0, "basic: parses");
	CHECK(t.n == 5 && t.n_skipped == 0, "basic: 4 rows and the end marker");
	CHECK(ml_unwind_lookup(&t, 0x400fff) == NULL, "basic: before the first FDE: NULL");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401000), ML_CFA_RSP, 8, 0, 0), "basic: entry rsp+8");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401001), ML_CFA_RSP, 16, 1, -16), "basic: after push rsp+16, rbp c-16");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401003), ML_CFA_RSP, 16, 1, -16), "basic: still rsp+16");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401004), ML_CFA_RBP, 16, 1, -16), "basic: rbp+16");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401013), ML_CFA_RBP, 16, 1, -16), "basic: rbp+16 until leave");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401014), ML_CFA_RSP, 8, 0, 0), "basic: after leave rsp+8, rbp restored");
	CHECK(row_unsup(ml_unwind_lookup(&t, 0x401020)), "basic: past the end: unsupported");
	CHECK(row_unsup(ml_unwind_lookup(&t, UINT64_MAX)), "basic: far past the end: unsupported");
	ml_unwind_table_free(&t);
	CHECK(t.rows == NULL && t.n == 0, "basic: free empties");
	ml_unwind_table_free(NULL);
	free(b.p);
}

/* Two adjacent FDEs, out of order, a zPLR CIE with 64-bit length, udata8 absolute pointers. */
static void test_layouts(void)
{
	struct buf b = {0};
	struct ml_unwind_table t;
	size_t cie, cie2, at;
	uint64_t len;

	cie = cie_zr(&b, 0x1b);
	fde_push_rbp(&b, cie, 0x402000);
	fde_push_rbp(&b, cie, 0x401fe0); /* ends exactly where the other begins */
	/* CIE with a 64-bit length and "zPLR": personality indirect|pcrel|sdata4, LSDA pcrel|sdata4, R udata8. */
	cie2 = b.n;
	u32(&b, 0xffffffff);
	at = b.n;
	u64(&b, 0);
	u32(&b, 0);
	u8(&b, 1);
	bytes(&b, "zPLR", 5);
	uleb(&b, 1);
	sleb(&b, -8);
	u8(&b, 16);
	uleb(&b, 7);
	u8(&b, 0x9b), u32(&b, 0x1234);
	u8(&b, 0x1b);
	u8(&b, 0x04);
	u8(&b, 0x0c), uleb(&b, 7), uleb(&b, 8);
	u8(&b, 0x80 | 16), uleb(&b, 1);
	len = b.n - at - 8;
	memcpy(b.p + at, &len, 8);
	/* FDE with 64-bit length, udata8 pc, 4 bytes of LSDA augmentation data. */
	u32(&b, 0xffffffff);
	at = b.n;
	u64(&b, 0);
	u32(&b, (uint32_t)(b.n - cie2));
	u64(&b, 0x500000);
	u64(&b, 0x10);
	uleb(&b, 4), u32(&b, 0);
	u8(&b, 0x42);
	u8(&b, 0x0e), uleb(&b, 32);
	len = b.n - at - 8;
	memcpy(b.p + at, &len, 8);

	CHECK(ml_ehframe_parse(b.p, b.n, ADDR, &t) == 0 && t.n_skipped == 0, "layouts: parse");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401fe0), ML_CFA_RSP, 8, 0, 0), "layouts: first FDE");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401fff), ML_CFA_RSP, 8, 0, 0), "layouts: first FDE tail");
	CHECK(row_is(ml_unwind_lookup(&t, 0x402000), ML_CFA_RSP, 8, 0, 0),
	      "layouts: adjacent FDE not cut by end marker");
	CHECK(row_is(ml_unwind_lookup(&t, 0x402001), ML_CFA_RSP, 16, 1, -16), "layouts: second FDE");
	CHECK(row_unsup(ml_unwind_lookup(&t, 0x402020)), "layouts: end of second FDE");
	CHECK(row_is(ml_unwind_lookup(&t, 0x500001), ML_CFA_RSP, 8, 0, 0), "layouts: 64-bit FDE");
	CHECK(row_is(ml_unwind_lookup(&t, 0x50000f), ML_CFA_RSP, 32, 0, 0), "layouts: 64-bit FDE after advance");
	CHECK(row_unsup(ml_unwind_lookup(&t, 0x500010)), "layouts: 64-bit FDE end");
	ml_unwind_table_free(&t);
	free(b.p);
}

/* Parse a section of one zR CIE and one FDE at 0x401000 (0x40 long) whose instructions are given. */
static int one_fde(const uint8_t *ins, size_t n, struct ml_unwind_table *t)
{
	struct buf b = {0};
	size_t cie, at;
	int err;

	cie = cie_zr(&b, 0x1b);
	at = fde_begin(&b, cie, ADDR, 0x401000, 0x40);
	put(&b, ins, n);
	end_entry(&b, at);
	err = ml_ehframe_parse(b.p, b.n, ADDR, t);
	free(b.p);
	return err;
}

static void test_rules(void)
{
	struct ml_unwind_table t;
	/* CFA expression after 4 bytes, back to rsp+8 at 8 */
	static const uint8_t expr[] = {0x44, 0x0f, 0x02, 0x77, 0x08, 0x44, 0x0c, 0x07, 0x08};
	/* rbp by expression, then via register */
	static const uint8_t rbp_expr[] = {0x10, 0x06, 0x01, 0x00, 0x41, 0x09, 0x06, 0x03, 0x41, 0x08, 0x06};
	/* ra in a register */
	static const uint8_t ra_reg[] = {0x41, 0x09, 0x10, 0x03};
	/* ra undefined (outermost frame) */
	static const uint8_t ra_undef[] = {0x07, 0x10};
	/* def_cfa_sf r7, -2 * -8 = 16; offset_extended_sf rbp -3 * -8 = +24; CFA on r12 later */
	static const uint8_t sf[] = {0x12, 0x07, 0x7e, 0x11, 0x06, 0x7d, 0x41, 0x0d, 0x0c, 0x2e, 0x10};
	/* remember, change, restore */
	static const uint8_t remember[] = {0x0a, 0x0e, 0x20, 0x41, 0x0b, 0x41, 0x00, 0x00};
	/* advance_loc4 huge: rows past the range are never produced */
	static const uint8_t huge[] = {0x41, 0x0e, 0x10, 0x04, 0xff, 0xff, 0xff, 0xff, 0x0e, 0x20, 0x41};
	/* offset too large for 32 bits */
	static const uint8_t big_off[] = {0x0e, 0x80, 0x80, 0x80, 0x80, 0x10};

	CHECK(one_fde(expr, sizeof(expr), &t) == 0 && t.n_skipped == 0, "rules: cfa expression parses");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401000), ML_CFA_RSP, 8, 0, 0) &&
		  row_unsup(ml_unwind_lookup(&t, 0x401004)) &&
		  row_is(ml_unwind_lookup(&t, 0x401008), ML_CFA_RSP, 8, 0, 0),
	      "rules: cfa expression is unsupported, then back");
	ml_unwind_table_free(&t);
	CHECK_EQ_INT(one_fde(rbp_expr, sizeof(rbp_expr), &t), 0, "rules: rbp expression parses");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401000), ML_CFA_RSP, 8, ML_RBP_LOST, 0) &&
		  row_is(ml_unwind_lookup(&t, 0x401001), ML_CFA_RSP, 8, ML_RBP_LOST, 0) &&
		  row_is(ml_unwind_lookup(&t, 0x401002), ML_CFA_RSP, 8, ML_RBP_SAME, 0),
	      "rules: rbp by expression or register is lost, same_value is same");
	ml_unwind_table_free(&t);
	CHECK(one_fde(ra_reg, sizeof(ra_reg), &t) == 0 && row_unsup(ml_unwind_lookup(&t, 0x401001)) &&
		  !row_unsup(ml_unwind_lookup(&t, 0x401000)),
	      "rules: ra in a register is unsupported");
	ml_unwind_table_free(&t);
	CHECK(one_fde(ra_undef, sizeof(ra_undef), &t) == 0 && row_unsup(ml_unwind_lookup(&t, 0x401000)),
	      "rules: undefined ra is unsupported");
	ml_unwind_table_free(&t);
	CHECK(one_fde(sf, sizeof(sf), &t) == 0 && row_is(ml_unwind_lookup(&t, 0x401000), ML_CFA_RSP, 16, 1, 24) &&
		  row_unsup(ml_unwind_lookup(&t, 0x401001)),
	      "rules: _sf forms factored, cfa on r12 unsupported, args_size ignored");
	ml_unwind_table_free(&t);
	CHECK(one_fde(remember, sizeof(remember), &t) == 0 &&
		  row_is(ml_unwind_lookup(&t, 0x401000), ML_CFA_RSP, 32, 0, 0) &&
		  row_is(ml_unwind_lookup(&t, 0x401001), ML_CFA_RSP, 8, 0, 0) &&
		  row_is(ml_unwind_lookup(&t, 0x40103f), ML_CFA_RSP, 8, 0, 0),
	      "rules: remember/restore state");
	ml_unwind_table_free(&t);
	CHECK(one_fde(huge, sizeof(huge), &t) == 0 && t.n_skipped == 0 &&
		  row_is(ml_unwind_lookup(&t, 0x40103f), ML_CFA_RSP, 16, 0, 0) &&
		  row_unsup(ml_unwind_lookup(&t, 0x401040)) && t.n == 3,
	      "rules: huge advance ends the FDE, clipped to its range");
	ml_unwind_table_free(&t);
	CHECK(one_fde(big_off, sizeof(big_off), &t) == 0 && row_unsup(ml_unwind_lookup(&t, 0x401000)),
	      "rules: offset over 32 bits is unsupported");
	ml_unwind_table_free(&t);
}

/* Expect the FDE to be skipped (parse succeeds, no rows, one skipped). */
static void expect_skipped(const uint8_t *ins, size_t n, const char *name)
{
	struct ml_unwind_table t;
	int err = one_fde(ins, n, &t);

	CHECK(err == 0 && t.n == 0 && t.n_skipped == 1, name);
	ml_unwind_table_free(&t);
}

static void test_bad_fdes(void)
{
	static const uint8_t long_leb[] = {0x0e, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
	static const uint8_t wide_leb[] = {0x0e, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02};
	static const uint8_t trunc_leb[] = {0x0e, 0x80};
	static const uint8_t unknown[] = {0x41, 0x2d};
	static const uint8_t unknown2[] = {0x17};
	static const uint8_t restore_empty[] = {0x0b};
	static const uint8_t trunc_block[] = {0x0f, 0x10, 0x00};
	static const uint8_t trunc_adv[] = {0x04, 0x01, 0x00};
	static const uint8_t mul_ovf[] = {0x05, 0x06, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
	uint8_t deep[2 * (ML_EHFRAME_MAX_STATE_DEPTH + 1)];
	struct ml_unwind_table t;
	size_t i;

	expect_skipped(long_leb, sizeof(long_leb), "bad: LEB128 of 11 bytes");
	expect_skipped(wide_leb, sizeof(wide_leb), "bad: LEB128 over 64 bits");
	expect_skipped(trunc_leb, sizeof(trunc_leb), "bad: LEB128 truncated");
	expect_skipped(unknown, sizeof(unknown), "bad: unknown opcode 0x2d");
	expect_skipped(unknown2, sizeof(unknown2), "bad: unknown opcode 0x17");
	expect_skipped(restore_empty, sizeof(restore_empty), "bad: restore_state with nothing remembered");
	expect_skipped(trunc_block, sizeof(trunc_block), "bad: expression block past the end");
	expect_skipped(trunc_adv, sizeof(trunc_adv), "bad: advance_loc4 truncated");
	expect_skipped(mul_ovf, sizeof(mul_ovf), "bad: factored offset overflows");
	memset(deep, 0x0a, ML_EHFRAME_MAX_STATE_DEPTH + 1);
	expect_skipped(deep, ML_EHFRAME_MAX_STATE_DEPTH + 1, "bad: remember_state overflow");
	for (i = 0; i < ML_EHFRAME_MAX_STATE_DEPTH; i++)
		deep[i + ML_EHFRAME_MAX_STATE_DEPTH] = 0x0b;
	CHECK(one_fde(deep, 2 * ML_EHFRAME_MAX_STATE_DEPTH, &t) == 0 && t.n_skipped == 0 && t.n == 2,
	      "bad: remember_state at the limit is fine");
	ml_unwind_table_free(&t);
}

/* A CIE with the given augmentation string and data, then an FDE using it (absolute udata8 pc). */
static int with_cie(const char *aug, const uint8_t *augdata, size_t augn, int version, struct ml_unwind_table *t)
{
	struct buf b = {0};
	size_t at, cie = 0;
	int err;

	at = begin_entry(&b);
	u32(&b, 0);
	u8(&b, (uint8_t)version);
	bytes(&b, aug, strlen(aug) + 1);
	uleb(&b, 1);
	sleb(&b, -8);
	u8(&b, 16);
	if (aug[0] == 'z') {
		uleb(&b, augn);
		put(&b, augdata, augn);
	}
	u8(&b, 0x0c), uleb(&b, 7), uleb(&b, 8);
	u8(&b, 0x80 | 16), uleb(&b, 1);
	end_entry(&b, at);
	at = begin_entry(&b);
	u32(&b, (uint32_t)(b.n - cie));
	if (strchr(aug, 'R') && augn && augdata[augn - 1] == 0x03) {
		u32(&b, 0x401000);
		u32(&b, 0x10);
	} else {
		u64(&b, 0x401000);
		u64(&b, 0x10);
	}
	if (aug[0] == 'z')
		uleb(&b, 0);
	end_entry(&b, at);
	err = ml_ehframe_parse(b.p, b.n, ADDR, t);
	free(b.p);
	return err;
}

static void test_augmentations(void)
{
	static const uint8_t r_udata4[] = {0x03};
	static const uint8_t r_textrel[] = {0x23};
	static const uint8_t r_datarel[] = {0x33};
	static const uint8_t r_indirect[] = {0x9b};
	static const uint8_t p_textrel[] = {0x23, 0, 0, 0, 0, 0x03};
	static const uint8_t p_trunc[] = {0x0b, 0};
	struct ml_unwind_table t;
	const struct ml_unwind_row *r;

	CHECK(with_cie("", NULL, 0, 1, &t) == 0 && t.n == 2, "aug: empty augmentation, absolute pointers");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zR", r_udata4, 1, 3, &t) == 0 && (r = ml_unwind_lookup(&t, 0x401000)) && r->pc == 0x401000 &&
		  r->cfa_reg == ML_CFA_RSP,
	      "aug: zR udata4, version 3");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zRS", r_udata4, 1, 1, &t) == 0 && t.n == 2, "aug: S accepted");
	ml_unwind_table_free(&t);
	CHECK(with_cie("S", NULL, 0, 1, &t) == 0 && t.n == 2, "aug: S without z accepted");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zX", r_udata4, 1, 1, &t) == 0 && t.n == 0 && t.n_skipped == 1, "aug: unknown letter rejected");
	ml_unwind_table_free(&t);
	CHECK(with_cie("eh", NULL, 0, 1, &t) == 0 && t.n == 0 && t.n_skipped == 1, "aug: eh rejected");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zR", r_textrel, 1, 1, &t) == 0 && t.n == 0 && t.n_skipped == 1, "aug: textrel rejected");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zR", r_datarel, 1, 1, &t) == 0 && t.n == 0 && t.n_skipped == 1, "aug: datarel pc rejected");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zR", r_indirect, 1, 1, &t) == 0 && t.n == 0 && t.n_skipped == 1, "aug: indirect pc rejected");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zPR", p_textrel, sizeof(p_textrel), 1, &t) == 0 && t.n_skipped == 1,
	      "aug: textrel personality rejected");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zPR", p_trunc, sizeof(p_trunc), 1, &t) == 0 && t.n_skipped == 1,
	      "aug: personality past the augmentation data rejected");
	ml_unwind_table_free(&t);
	CHECK(with_cie("zR", r_udata4, 1, 2, &t) == 0 && t.n_skipped == 1, "aug: version 2 rejected");
	ml_unwind_table_free(&t);
}

static void test_framing(void)
{
	struct buf b = {0};
	struct ml_unwind_table t;
	size_t cie, at;
	uint8_t *copy;
	int err;

	CHECK(ml_ehframe_parse(NULL, 0, ADDR, &t) == 0 && t.n == 0 && t.rows == NULL, "framing: zero-length section");
	CHECK(ml_ehframe_parse((const uint8_t *)"\0\0\0\0", 4, ADDR, &t) == 0 && t.n == 0,
	      "framing: only a terminator");
	CHECK(ml_ehframe_parse((const uint8_t *)"\x10\0\0", 3, ADDR, &t) == -EINVAL && t.n == 0,
	      "framing: truncated length");
	CHECK_EQ_INT(ml_ehframe_parse((const uint8_t *)"\xff\xff\xff\xff\x10\0\0", 7, ADDR, &t), -EINVAL,
		     "framing: truncated 64-bit length");
	CHECK_EQ_INT(ml_ehframe_parse((const uint8_t *)"\x02\0\0\0\0\0", 6, ADDR, &t), -EINVAL,
		     "framing: entry shorter than its id");

	cie = cie_zr(&b, 0x1b);
	fde_push_rbp(&b, cie, 0x401000);
	copy = malloc(b.n);
	memcpy(copy, b.p, b.n);
	err = ml_ehframe_parse(copy, b.n - 1, ADDR, &t);
	CHECK(err == -EINVAL && t.n == 0 && t.rows == NULL, "framing: length past the end");
	free(copy);
	/* FDE whose CIE pointer goes before the section, and one that points at an FDE. */
	at = fde_begin(&b, cie, ADDR, 0x402000, 0x10);
	memcpy(b.p + at + 4, &(uint32_t){0x7fffffff}, 4);
	end_entry(&b, at);
	at = fde_begin(&b, cie, ADDR, 0x403000, 0x10);
	memcpy(b.p + at + 4, &(uint32_t){(uint32_t)(at + 4 - (cie + 0x18))}, 4); /* the first FDE */
	end_entry(&b, at);
	at = fde_begin(&b, cie, ADDR, 0x404000, 0x10);
	memcpy(b.p + at + 4, &(uint32_t){(uint32_t)(at + 4 - 3)}, 4); /* mid-CIE */
	end_entry(&b, at);
	err = ml_ehframe_parse(b.p, b.n, ADDR, &t);
	CHECK(err == 0 && t.n_skipped == 3, "framing: CIE pointers out of range or not at a CIE skip the FDE");
	CHECK(row_is(ml_unwind_lookup(&t, 0x401001), ML_CFA_RSP, 16, 1, -16) &&
		  row_unsup(ml_unwind_lookup(&t, 0x402008)),
	      "framing: the good FDE stays");
	ml_unwind_table_free(&t);
	free(b.p);
}

/* ML_EHFRAME_MAX_ROWS: one FDE alternating its CFA offset every byte. */
static void test_row_limit(void)
{
	size_t nrows = ML_EHFRAME_MAX_ROWS + 8, i;
	struct buf b = {0};
	struct ml_unwind_table t;
	size_t cie, at;
	int err;

	cie = cie_zr(&b, 0x1b);
	at = fde_begin(&b, cie, ADDR, 0x1000000, (uint32_t)nrows + 16);
	for (i = 0; i < nrows; i++) {
		u8(&b, 0x0e), u8(&b, i & 1 ? 0x10 : 0x18);
		u8(&b, 0x41);
	}
	end_entry(&b, at);
	err = ml_ehframe_parse(b.p, b.n, ADDR, &t);
	CHECK(err == -E2BIG && t.n == 0 && t.rows == NULL, "limit: too many rows is -E2BIG");
	free(b.p);
}

/* ---- real objects against readelf --debug-dump=frames-interp ---- */

/* Expected rule at a pc range, from readelf. rbp -1: "u", which may be no rule or DW_CFA_undefined. */
struct exp_row {
	uint64_t pc, end;
	int reg;
	int64_t off;
	int rbp;
	int64_t rbp_off;
};

struct exp_tab {
	struct exp_row *rows;
	size_t n, cap;
};

/* "rsp+8", "rbp+16", "r12+8", "exp", "c-16", "u", ... */
static bool split_rule(const char *tok, char *name, size_t namesz, int64_t *off)
{
	size_t i = strcspn(tok, "+-");

	if (!tok[i] || i + 1 > namesz)
		return false;
	memcpy(name, tok, i);
	name[i] = 0;
	*off = strtoll(tok + i, NULL, 10);
	return true;
}

static void add_exp(struct exp_tab *e, uint64_t pc, uint64_t end, char **tok, int ntok, int cfa_col, int rbp_col,
		    int ra_col)
{
	struct exp_row *r;
	char name[16];
	int64_t off;

	if (e->n == e->cap) {
		e->cap = e->cap ? e->cap * 2 : 1024;
		e->rows = realloc(e->rows, e->cap * sizeof(*e->rows));
		if (!e->rows)
			abort();
	}
	r = &e->rows[e->n++];
	memset(r, 0, sizeof(*r));
	r->pc = pc;
	r->end = end;
	r->reg = ML_CFA_UNSUPPORTED;
	if (cfa_col < 0 || cfa_col >= ntok || ra_col < 0 || ra_col >= ntok || strcmp(tok[ra_col], "c-8"))
		return;
	if (!split_rule(tok[cfa_col], name, sizeof(name), &off) || off < INT32_MIN || off > INT32_MAX)
		return;
	if (!strcmp(name, "rsp"))
		r->reg = ML_CFA_RSP;
	else if (!strcmp(name, "rbp"))
		r->reg = ML_CFA_RBP;
	else
		return;
	r->off = off;
	if (rbp_col < 0 || rbp_col >= ntok || !strcmp(tok[rbp_col], "s"))
		r->rbp = ML_RBP_SAME;
	else if (!strcmp(tok[rbp_col], "u"))
		r->rbp = -1;
	else if (tok[rbp_col][0] == 'c' && split_rule(tok[rbp_col], name, sizeof(name), &off))
		r->rbp = ML_RBP_AT_CFA, r->rbp_off = off;
	else
		r->rbp = ML_RBP_LOST;
}

/* Parse readelf's output into expected rows. An FDE without rows has its CIE's initial state. */
static int read_expected(const char *path, struct exp_tab *e)
{
	char cmd[4096], line[4096], *tok[64], *save;
	char cie_line[4096] = "";
	int cfa_col = -1, rbp_col = -1, ra_col = -1, ntok, cie_cfa = -1, cie_rbp = -1, cie_ra = -1;
	uint64_t fde_lo = 0, fde_hi = 0, prev_pc = 0;
	bool in_fde = false, have_row = false, in_cie = false;
	char prev[4096] = "";
	FILE *f;

	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	f = popen(cmd, "r");
	if (!f)
		return -1;
#define FLUSH_PREV()                                                                                                   \
	do {                                                                                                           \
		if (in_fde && have_row) {                                                                              \
			char tmp[4096];                                                                                \
			strcpy(tmp, prev);                                                                             \
			ntok = 0;                                                                                      \
			for (char *s = strtok_r(tmp, " \t\n", &save); s && ntok < 64;                                  \
			     s = strtok_r(NULL, " \t\n", &save))                                                       \
				if (s[0] != '(') /* "r10 (r10)" is one column */                                       \
					tok[ntok++] = s;                                                               \
			add_exp(e, prev_pc, fde_hi, tok, ntok, cfa_col, rbp_col, ra_col);                              \
		}                                                                                                      \
	} while (0)
	while (fgets(line, sizeof(line), f)) {
		uint64_t a, b;
		char *p;

		if (strstr(line, " FDE ") && (p = strstr(line, "pc=")) &&
		    sscanf(p, "pc=%" SCNx64 "..%" SCNx64, &a, &b) == 2) {
			FLUSH_PREV();
			if (in_fde && !have_row && cie_line[0] && fde_hi > fde_lo) {
				strcpy(prev, cie_line);
				prev_pc = fde_lo;
				have_row = true;
				{
					int c1 = cfa_col, c2 = rbp_col, c3 = ra_col;

					cfa_col = cie_cfa, rbp_col = cie_rbp, ra_col = cie_ra;
					FLUSH_PREV();
					cfa_col = c1, rbp_col = c2, ra_col = c3;
				}
			}
			in_fde = b > a;
			in_cie = false;
			have_row = false;
			fde_lo = a;
			fde_hi = b;
			cfa_col = rbp_col = ra_col = -1;
			continue;
		}
		if (strstr(line, " CIE")) {
			FLUSH_PREV();
			if (in_fde && !have_row && cie_line[0] && fde_hi > fde_lo) {
				strcpy(prev, cie_line);
				prev_pc = fde_lo;
				have_row = true;
				cfa_col = cie_cfa, rbp_col = cie_rbp, ra_col = cie_ra;
				FLUSH_PREV();
			}
			in_fde = false;
			have_row = false;
			in_cie = true;
			cie_line[0] = 0;
			cfa_col = rbp_col = ra_col = -1;
			continue;
		}
		if (strstr(line, "   LOC ")) {
			int i = 0;

			for (char *s = strtok_r(line, " \t\n", &save); s; s = strtok_r(NULL, " \t\n", &save), i++) {
				if (!strcmp(s, "CFA"))
					cfa_col = i;
				else if (!strcmp(s, "rbp"))
					rbp_col = i;
				else if (!strcmp(s, "ra"))
					ra_col = i;
			}
			if (in_cie)
				cie_cfa = cfa_col, cie_rbp = rbp_col, cie_ra = ra_col;
			continue;
		}
		if (strlen(line) > 17 && line[16] == ' ' && sscanf(line, "%" SCNx64, &a) == 1) {
			if (in_cie) {
				snprintf(cie_line, sizeof(cie_line), "%s", line);
				continue;
			}
			if (!in_fde)
				continue;
			if (have_row && a != prev_pc) {
				uint64_t keep = fde_hi;

				fde_hi = a; /* this row ends where the next begins */
				FLUSH_PREV();
				fde_hi = keep;
			}
			snprintf(prev, sizeof(prev), "%s", line);
			prev_pc = a;
			have_row = true;
		}
	}
	FLUSH_PREV();
#undef FLUSH_PREV
	pclose(f); /* readelf exits 1 on objects without .debug_* sections; the rows are what count */
	return 0;
}

static bool matches(const struct exp_row *e, const struct ml_unwind_row *r)
{
	/* readelf prints a signal trampoline's expression rules, which the table replaces by one kind */
	if (r && e->reg == ML_CFA_UNSUPPORTED && (r->cfa_reg == ML_CFA_SIGNAL || r->cfa_reg == ML_CFA_UNSUPPORTED))
		return true;
	if (!r || r->cfa_reg != e->reg)
		return false;
	if (r->cfa_off != e->off)
		return false;
	if (e->rbp == -1)
		return r->rbp_saved == ML_RBP_SAME || r->rbp_saved == ML_RBP_LOST;
	return r->rbp_saved == e->rbp && (e->rbp != ML_RBP_AT_CFA || r->rbp_off == e->rbp_off);
}

/* A function's address and size from .dynsym or .symtab, 0 if absent. */
static uint64_t func_addr(const char *path, const char *want, uint64_t *size)
{
	Elf_Scn *scn = NULL;
	uint64_t found = 0;
	GElf_Shdr sh;
	Elf *elf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE || !(elf = elf_begin(fd, ELF_C_READ, NULL))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (!found && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;
		GElf_Sym s;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			const char *n;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC || !s.st_value)
				continue;
			n = elf_strptr(elf, sh.sh_link, s.st_name);
			if (n && !strncmp(n, want, strlen(want)) && (!n[strlen(want)] || n[strlen(want)] == '@')) {
				found = s.st_value;
				*size = s.st_size;
				break;
			}
		}
	}
	elf_end(elf);
	close(fd);
	return found;
}

static void compare_with_readelf(const char *path, const char *label, const char **funcs, bool want_rbp_cfa)
{
	struct exp_tab e = {0};
	struct ml_unwind_table t;
	size_t i, compared = 0, bad = 0, rbp_rows = 0;
	char name[512];
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	err = fd < 0 ? -errno : ml_unwind_from_elf(fd, -1, NULL, &t);
	if (fd >= 0)
		close(fd);
	snprintf(name, sizeof(name), "%s: table built from .eh_frame", label);
	CHECK(err == 0 && t.n > 0, name);
	if (err)
		return;
	snprintf(name, sizeof(name), "%s: no FDE skipped", label);
	CHECK_EQ_INT(t.n_skipped, 0, name);
	for (i = 1; i < t.n; i++)
		if (t.rows[i].pc <= t.rows[i - 1].pc)
			break;
	snprintf(name, sizeof(name), "%s: rows strictly sorted", label);
	CHECK(i >= t.n, name);
	for (i = 0; i < t.n; i++)
		rbp_rows += t.rows[i].cfa_reg == ML_CFA_RBP;
	if (want_rbp_cfa) {
		snprintf(name, sizeof(name), "%s: has rbp-based CFA rows", label);
		CHECK(rbp_rows > 0, name);
	}
	if (read_expected(path, &e) || !e.n) {
		printf("ok - %s: readelf comparison skipped (no readelf output)\n", label);
		ml_unwind_table_free(&t);
		free(e.rows);
		return;
	}
	for (i = 0; i < e.n; i++) {
		const struct exp_row *x = &e.rows[i];
		uint64_t pcs[3] = {x->pc, x->pc + (x->end - x->pc) / 2, x->end - 1};

		for (int k = 0; k < 3; k++) {
			compared++;
			if (!matches(x, ml_unwind_lookup(&t, pcs[k]))) {
				if (bad++ < 5) {
					const struct ml_unwind_row *r = ml_unwind_lookup(&t, pcs[k]);

					printf("# %s: pc %#" PRIx64 ": readelf reg %d off %" PRId64 " rbp %d/%" PRId64
					       ", got reg %d off %d rbp %d/%d\n",
					       label, pcs[k], x->reg, x->off, x->rbp, x->rbp_off, r ? r->cfa_reg : -1,
					       r ? r->cfa_off : 0, r ? r->rbp_saved : -1, r ? r->rbp_off : 0);
				}
			}
		}
	}
	printf("# %s: %zu rows, %zu readelf rows, %zu lookups compared\n", label, t.n, e.n, compared);
	snprintf(name, sizeof(name), "%s: every readelf row matches (start, middle, end)", label);
	CHECK(bad == 0 && compared > 3, name);
	/* Every byte of the named functions. */
	for (; funcs && *funcs; funcs++) {
		uint64_t sz = 0, a = func_addr(path, *funcs, &sz), pc;
		size_t j = 0, fbad = 0, fn = 0;

		snprintf(name, sizeof(name), "%s: %s found with a size", label, *funcs);
		CHECK(a && sz, name);
		if (!a || !sz)
			continue;
		for (pc = a; pc < a + sz; pc++) {
			while (j < e.n && e.rows[j].end <= pc)
				j++;
			/* rows come sorted by FDE start in readelf order only within an FDE: search */
			for (j = 0; j < e.n && !(e.rows[j].pc <= pc && pc < e.rows[j].end); j++)
				;
			if (j == e.n)
				continue;
			fn++;
			fbad += !matches(&e.rows[j], ml_unwind_lookup(&t, pc));
		}
		snprintf(name, sizeof(name), "%s: every byte of %s matches readelf (%zu pcs)", label, *funcs, fn);
		CHECK(fbad == 0 && fn == sz, name);
		snprintf(name, sizeof(name), "%s: %s entry is rsp+8", label, *funcs);
		CHECK(row_is(ml_unwind_lookup(&t, a), ML_CFA_RSP, 8, ML_RBP_SAME, 0), name);
	}
	ml_unwind_table_free(&t);
	free(e.rows);
}

static const char test_prog[] =
    "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
    "__attribute__((noinline)) int vla(int n) { char b[n]; memset(b, n, n); return b[n / 2] + b[0]; }\n"
    "__attribute__((noinline)) long many(long a, long b, long c, long d) {\n"
    "  long x[8]; for (int i = 0; i < 8; i++) x[i] = rand() * a + b * i;\n"
    "  for (int i = 0; i < 8; i++) c += x[i] * d + printf(\"%ld\", x[i]);\n  return c; }\n"
    "__attribute__((noinline)) int rec(int n) { return n < 2 ? n : rec(n - 1) + rec(n - 2); }\n"
    "int main(int argc, char **argv) { return vla(argc + 10) + (int)many(argc, 2, 3, 4) + rec(argc); }\n";

static bool build_prog(const char *dir, const char *flags, const char *out)
{
	char cmd[1024], src[512];
	FILE *f;

	snprintf(src, sizeof(src), "%s/prog.c", dir);
	f = fopen(src, "w");
	if (!f)
		return false;
	fputs(test_prog, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -O2 %s -o %s %s 2>/dev/null", flags, out, src);
	return system(cmd) == 0;
}

static void test_real_objects(void)
{
	static const char *libc_funcs[] = {"malloc", "free", NULL};
	static const char *prog_funcs[] = {"vla", "many", "rec", NULL};
	const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	char dir[] = "/tmp/test_ehframe.XXXXXX", omit[600], keep[600], cmd[700];

	if (access(libc, R_OK) == 0)
		compare_with_readelf(libc, "libc.so.6", libc_funcs, false);
	else
		printf("ok - libc.so.6 comparison skipped (not found)\n");
	if (!mkdtemp(dir)) {
		printf("ok - test programs skipped (no temporary directory)\n");
		return;
	}
	snprintf(omit, sizeof(omit), "%s/omit", dir);
	snprintf(keep, sizeof(keep), "%s/keep", dir);
	if (build_prog(dir, "-fomit-frame-pointer", omit))
		compare_with_readelf(omit, "prog -fomit-frame-pointer", prog_funcs, true);
	else
		printf("ok - prog -fomit-frame-pointer skipped (no cc)\n");
	if (build_prog(dir, "-fno-omit-frame-pointer", keep))
		compare_with_readelf(keep, "prog -fno-omit-frame-pointer", prog_funcs, true);
	else
		printf("ok - prog -fno-omit-frame-pointer skipped (no cc)\n");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
}

static void test_from_elf_errors(void)
{
	struct ml_unwind_table t;
	int fd = open("/dev/null", O_RDONLY);

	CHECK(fd >= 0 && ml_unwind_from_elf(fd, -1, NULL, &t) == -ENOEXEC && t.n == 0,
	      "from_elf: not an ELF is -ENOEXEC");
	if (fd >= 0)
		close(fd);
}

/* A stop already set ends the parse of a file with over 4,096 entries (libstdc++'s 4,867 FDEs) with nothing kept. */
static void test_stop(void)
{
	const char *path = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
	struct ml_unwind_table t;
	bool stop = true;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	err = fd < 0 ? -errno : ml_unwind_from_elf(fd, -1, &stop, &t);
	CHECK(err == -ECANCELED && t.n == 0 && !t.rows, "from_elf: a stop set ends the parse with -ECANCELED");
	if (fd >= 0) {
		stop = false;
		err = ml_unwind_from_elf(fd, -1, &stop, &t);
		CHECK(err == 0 && t.n > 4096, "from_elf: a stop not set lets it finish");
		ml_unwind_table_free(&t);
		close(fd);
	}
}

int main(void)
{
	test_basic();
	test_layouts();
	test_rules();
	test_bad_fdes();
	test_augmentations();
	test_framing();
	test_row_limit();
	test_from_elf_errors();
	test_stop();
	test_real_objects();
	return SUMMARY("ehframe");
}
