/* The DWARF call frame instruction interpreter: DW_CFA_* ops run into the CFA's and two registers' rules. */
#include "unwind/cfi.h"
#include <errno.h>

/* Call frame instructions. */
#define CFA_advance_loc 0x40
#define CFA_offset 0x80
#define CFA_restore 0xc0
#define CFA_nop 0x00
#define CFA_set_loc 0x01
#define CFA_advance_loc1 0x02
#define CFA_advance_loc2 0x03
#define CFA_advance_loc4 0x04
#define CFA_offset_extended 0x05
#define CFA_restore_extended 0x06
#define CFA_undefined 0x07
#define CFA_same_value 0x08
#define CFA_register 0x09
#define CFA_remember_state 0x0a
#define CFA_restore_state 0x0b
#define CFA_def_cfa 0x0c
#define CFA_def_cfa_register 0x0d
#define CFA_def_cfa_offset 0x0e
#define CFA_def_cfa_expression 0x0f
#define CFA_expression 0x10
#define CFA_offset_extended_sf 0x11
#define CFA_def_cfa_sf 0x12
#define CFA_def_cfa_offset_sf 0x13
#define CFA_val_offset 0x14
#define CFA_val_offset_sf 0x15
#define CFA_val_expression 0x16
#define CFA_GNU_args_size 0x2e
#define CFA_GNU_negative_offset_extended 0x2f

/* Where a rule is stored for the two registers we track; NULL for any other register. */
static bool track(struct cfi_state *st, uint64_t reg, uint8_t **rule, int64_t **off)
{
	if (reg == CFI_REG_RBP) {
		*rule = &st->rbp_rule;
		*off = &st->rbp_off;
		return true;
	}
	if (reg == CFI_REG_RA) {
		*rule = &st->ra_rule;
		*off = &st->ra_off;
		return true;
	}
	return false;
}

static void set_rule(struct cfi_state *st, uint64_t reg, uint8_t rule, int64_t off)
{
	uint8_t *r;
	int64_t *o;

	if (track(st, reg, &r, &o)) {
		*r = rule;
		*o = off;
	}
}

/* DW_CFA_restore: back to the rule the CIE's initial instructions left. */
static void restore_rule(struct cfi_state *st, const struct cfi_state *init, uint64_t reg)
{
	if (reg == CFI_REG_RBP) {
		st->rbp_rule = init->rbp_rule;
		st->rbp_off = init->rbp_off;
	} else if (reg == CFI_REG_RA) {
		st->ra_rule = init->ra_rule;
		st->ra_off = init->ra_off;
	}
}

static int factored(uint64_t v, int64_t daf, int64_t *out)
{
	int64_t s;

	if (v > INT64_MAX)
		return -EINVAL;
	return __builtin_mul_overflow((int64_t)v, daf, &s) ? -EINVAL : (*out = s, 0);
}

static int factored_s(int64_t v, int64_t daf, int64_t *out)
{
	return __builtin_mul_overflow(v, daf, out) ? -EINVAL : 0;
}

static int advance(struct cfi_fde *f, const struct cfi_cie *c, const struct cfi_state *st, uint64_t delta)
{
	uint64_t d;
	int err;

	if (!f)
		return -EINVAL; /* no rows in a CIE */
	if (__builtin_mul_overflow(delta, c->caf, &d))
		d = UINT64_MAX;
	if (!d)
		return 0;
	err = f->row(f->ctx, st, f->loc);
	if (err)
		return err;
	if (d >= f->end - f->loc)
		f->done = true;
	else
		f->loc += d;
	return 0;
}

/* A run of call frame instructions: where it reads, the state it changes, DW_CFA_remember_state's stack. */
struct cfi_run {
	struct rd *r;
	const struct cfi_cie *c;
	struct cfi_state *st;
	struct cfi_fde *f; /* NULL while running a CIE's initial instructions */
	struct cfi_state stack[CFI_MAX_STATE_DEPTH];
	unsigned int depth;
};

#define CFI_NOT_MINE 1 /* an op handler's answer for an op of another group */

/* Ops that set a register's rule (only RBP's and the return address's are kept). */
static int cfi_rule_op(struct cfi_run *x, uint8_t op)
{
	uint64_t reg, reg2, u;
	int64_t s;

	switch (op) {
	case CFA_offset_extended:
		if (rd_uleb(x->r, &reg) || rd_uleb(x->r, &u) || factored(u, x->c->daf, &s))
			return -EINVAL;
		set_rule(x->st, reg, CFI_RULE_OFFSET, s);
		return 0;
	case CFA_offset_extended_sf:
		if (rd_uleb(x->r, &reg) || rd_sleb(x->r, &s) || factored_s(s, x->c->daf, &s))
			return -EINVAL;
		set_rule(x->st, reg, CFI_RULE_OFFSET, s);
		return 0;
	case CFA_GNU_negative_offset_extended:
		if (rd_uleb(x->r, &reg) || rd_uleb(x->r, &u) || factored(u, x->c->daf, &s) || s == INT64_MIN)
			return -EINVAL;
		set_rule(x->st, reg, CFI_RULE_OFFSET, -s);
		return 0;
	case CFA_restore_extended:
		if (!x->f || rd_uleb(x->r, &reg))
			return -EINVAL;
		restore_rule(x->st, &x->c->init, reg);
		return 0;
	case CFA_undefined:
	case CFA_same_value:
		if (rd_uleb(x->r, &reg))
			return -EINVAL;
		set_rule(x->st, reg, op == CFA_undefined ? CFI_RULE_UNDEF : CFI_RULE_SAME, 0);
		return 0;
	case CFA_register:
		if (rd_uleb(x->r, &reg) || rd_uleb(x->r, &reg2))
			return -EINVAL;
		set_rule(x->st, reg, CFI_RULE_OTHER, 0);
		return 0;
	case CFA_val_offset:
		if (rd_uleb(x->r, &reg) || rd_uleb(x->r, &u) || factored(u, x->c->daf, &s))
			return -EINVAL;
		set_rule(x->st, reg, CFI_RULE_OTHER, 0);
		return 0;
	case CFA_val_offset_sf:
		if (rd_uleb(x->r, &reg) || rd_sleb(x->r, &s) || factored_s(s, x->c->daf, &s))
			return -EINVAL;
		set_rule(x->st, reg, CFI_RULE_OTHER, 0);
		return 0;
	case CFA_expression:
	case CFA_val_expression:
		if (rd_uleb(x->r, &reg) || rd_skip_block(x->r))
			return -EINVAL;
		set_rule(x->st, reg, CFI_RULE_OTHER, 0);
		return 0;
	}
	return CFI_NOT_MINE;
}

/* Ops that define the CFA. */
static int cfi_cfa_op(struct cfi_run *x, uint8_t op)
{
	struct cfi_state *st = x->st;
	uint64_t reg, u;
	int64_t s;

	switch (op) {
	case CFA_def_cfa:
		if (rd_uleb(x->r, &reg) || rd_uleb(x->r, &u) || u > INT64_MAX)
			return -EINVAL;
		st->cfa_reg = reg;
		st->cfa_off = (int64_t)u;
		st->cfa_expr = false;
		st->cfa_set = true;
		return 0;
	case CFA_def_cfa_sf:
		if (rd_uleb(x->r, &reg) || rd_sleb(x->r, &s) || factored_s(s, x->c->daf, &s))
			return -EINVAL;
		st->cfa_reg = reg;
		st->cfa_off = s;
		st->cfa_expr = false;
		st->cfa_set = true;
		return 0;
	case CFA_def_cfa_register:
		/* Only meaningful on a register rule; on an expression the CFA stays unsupported. */
		if (rd_uleb(x->r, &reg))
			return -EINVAL;
		st->cfa_reg = reg;
		return 0;
	case CFA_def_cfa_offset:
		if (rd_uleb(x->r, &u) || u > INT64_MAX)
			return -EINVAL;
		st->cfa_off = (int64_t)u;
		return 0;
	case CFA_def_cfa_offset_sf:
		if (rd_sleb(x->r, &s) || factored_s(s, x->c->daf, &s))
			return -EINVAL;
		st->cfa_off = s;
		return 0;
	case CFA_def_cfa_expression:
		if (rd_skip_block(x->r))
			return -EINVAL;
		st->cfa_expr = true;
		st->cfa_set = true;
		return 0;
	}
	return CFI_NOT_MINE;
}

/* The other extended ops: moving the location, saving and restoring the state, ops without effect. */
static int cfi_flow_op(struct cfi_run *x, uint8_t op)
{
	struct cfi_fde *f = x->f;
	uint64_t u;

	switch (op) {
	case CFA_nop: return 0;
	case CFA_set_loc: {
		struct cfi_cie one = *x->c; /* advance by u - loc with a code alignment of 1 */

		if (!f || rd_encoded(x->r, f->enc, true, f->sect, f->sect_addr, &u))
			return -EINVAL;
		if (u < f->loc)
			return -EINVAL;
		one.caf = 1;
		return advance(f, &one, x->st, u - f->loc);
	}
	case CFA_advance_loc1:
	case CFA_advance_loc2:
	case CFA_advance_loc4:
		if (rd_bytes(x->r, op == CFA_advance_loc1 ? 1 : op == CFA_advance_loc2 ? 2 : 4, &u, false))
			return -EINVAL;
		return advance(f, x->c, x->st, u);
	case CFA_remember_state:
		if (!f || x->depth >= CFI_MAX_STATE_DEPTH)
			return -EINVAL;
		x->stack[x->depth++] = *x->st;
		return 0;
	case CFA_restore_state:
		if (!f || !x->depth)
			return -EINVAL;
		*x->st = x->stack[--x->depth];
		return 0;
	case CFA_GNU_args_size: return rd_uleb(x->r, &u) ? -EINVAL : 0;
	}
	return -EINVAL;
}

/* One op whose low six bits are an operand (advance_loc, offset, restore), or an extended one. */
static int cfi_op(struct cfi_run *x, uint8_t op)
{
	uint64_t u;
	int64_t s;
	int err;

	switch (op & 0xc0) {
	case CFA_advance_loc: return advance(x->f, x->c, x->st, op & 0x3f);
	case CFA_offset:
		if (rd_uleb(x->r, &u) || factored(u, x->c->daf, &s))
			return -EINVAL;
		set_rule(x->st, op & 0x3f, CFI_RULE_OFFSET, s);
		return 0;
	case CFA_restore:
		if (!x->f)
			return -EINVAL;
		restore_rule(x->st, &x->c->init, op & 0x3f);
		return 0;
	}
	err = cfi_rule_op(x, op);
	if (err == CFI_NOT_MINE)
		err = cfi_cfa_op(x, op);
	if (err == CFI_NOT_MINE)
		err = cfi_flow_op(x, op);
	return err;
}

int cfi__run(struct rd *r, const struct cfi_cie *c, struct cfi_state *st, struct cfi_fde *f)
{
	struct cfi_run x; /* not zeroed: the state stack is written before it is read */
	uint8_t op;
	int err;

	x.r = r;
	x.c = c;
	x.st = st;
	x.f = f;
	x.depth = 0;
	while (rd_left(r) && !(f && f->done)) {
		rd_u8(r, &op);
		err = cfi_op(&x, op);
		if (err)
			return err;
	}
	return 0;
}
