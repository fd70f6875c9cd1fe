/*
 * The DWARF call frame instruction interpreter (DW_CFA_*): runs a CIE's initial instructions or an FDE's,
 * keeping the CFA's rule and the rules of the two registers an x86-64 walk needs (rbp, the return address),
 * and hands the rules on at each advance. ehframe.c frames the entries and makes the rules rows; the
 * instructions are the target's bytes, so every operand is read through cfi_reader.h's bounded cursor and
 * every product checked for overflow.
 */
#ifndef ML_CFI_H
#define ML_CFI_H

#include <stdbool.h>
#include <stdint.h>
#include "unwind/cfi_reader.h"

/* DWARF register numbers on x86-64; the return address's is the only column a CIE may name. */
#define CFI_REG_RBP 6
#define CFI_REG_RSP 7
#define CFI_REG_RA 16
/* DW_CFA_remember_state nesting allowed inside one FDE (ehframe.h's ML_EHFRAME_MAX_STATE_DEPTH). */
#define CFI_MAX_STATE_DEPTH 16

/* Rule for one register: only rbp and the return address matter here. */
enum cfi_rule {
	CFI_RULE_SAME, /* no rule yet, or DW_CFA_same_value */
	CFI_RULE_UNDEF,
	CFI_RULE_OFFSET, /* saved at CFA + off */
	CFI_RULE_OTHER,	 /* register, expression, val_offset, val_expression */
};

struct cfi_state {
	uint64_t cfa_reg;
	int64_t cfa_off;
	bool cfa_expr;
	bool cfa_set;
	uint8_t rbp_rule, ra_rule;
	int64_t rbp_off, ra_off;
	bool signal; /* the CIE has the 'S' augmentation */
};

/* What the instructions run under a CIE take from it. */
struct cfi_cie {
	uint64_t caf;	       /* code alignment factor */
	int64_t daf;	       /* data alignment factor */
	struct cfi_state init; /* after the initial instructions */
};

/* The rules in force from pc on, as an FDE's pc advances past them: 0, or a negative errno that ends the run. */
typedef int (*cfi_row_fn)(void *ctx, const struct cfi_state *st, uint64_t pc);

/* The FDE being interpreted. */
struct cfi_fde {
	uint64_t loc, end;   /* the pc reached, the end of its range */
	uint8_t enc;	     /* its CIE's pointer encoding (DW_CFA_set_loc) */
	const uint8_t *sect; /* the section, and its address: the base of pcrel pointers */
	uint64_t sect_addr;
	bool done;	/* advanced past the range */
	cfi_row_fn row; /* each range's rules */
	void *ctx;
};

/*
 * Run call frame instructions. With f NULL they are a CIE's initial instructions (c->init is being built,
 * nothing to restore to, no rows); else an FDE's, starting from c->init. -EINVAL on anything malformed, else
 * what f->row returned.
 */
int cfi__run(struct rd *r, const struct cfi_cie *c, struct cfi_state *st, struct cfi_fde *f);

#endif
