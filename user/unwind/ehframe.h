/*
 * Compact x86-64 unwind tables from an object's .eh_frame (DWARF CFI as described by the LSB): for each
 * pc range, how to find the caller's frame. Built in user space from hostile bytes, so every read is
 * bounded; meant to be handed to a BPF unwinder later.
 */
#ifndef MEMLEAK_AI_EHFRAME_H
#define MEMLEAK_AI_EHFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Hard limit on the rows of one table (and on the rows collected while building it): beyond, -E2BIG. */
#define ML_EHFRAME_MAX_ROWS (1u << 22)
/* DW_CFA_remember_state nesting allowed inside one FDE; deeper and the FDE is dropped. */
#define ML_EHFRAME_MAX_STATE_DEPTH 16

/*
 * How to recover the caller's frame at a pc range: CFA = reg + off; the return address is at CFA-8;
 * rbp either unchanged or at CFA+rbp_off.
 */
enum ml_cfa_reg {
	ML_CFA_RSP = 0,
	ML_CFA_RBP = 1,
	/*
	 * Stop unwinding here: the CFA is a DWARF expression or based on another register, the return
	 * address is not at CFA-8 (its rule is undefined, as in _start, or a register or expression),
	 * or an offset does not fit 32 bits. (A pc past the end of an FDE is ML_CFA_NONE.)
	 */
	ML_CFA_UNSUPPORTED = 2,
	/* No FDE covers the pc (the row closing an FDE's range): the unwinder may try frame pointers. */
	ML_CFA_NONE = 3,
	/*
	 * A signal trampoline (its CIE has the 'S' augmentation, as glibc's __restore_rt): the interrupted
	 * registers are in the kernel's x86-64 signal frame, a ucontext at the trampoline's stack pointer.
	 */
	ML_CFA_SIGNAL = 4,
};

/* Values of ml_unwind_row.rbp_saved. */
enum ml_rbp_rule {
	ML_RBP_SAME = 0,   /* the caller's rbp is the current rbp (no rule, or DW_CFA_same_value) */
	ML_RBP_AT_CFA = 1, /* saved at CFA + rbp_off */
	/*
	 * The caller's rbp cannot be recovered from this table: DW_CFA_undefined, DW_CFA_register,
	 * DW_CFA_expression, DW_CFA_val_expression or DW_CFA_val_offset(_sf) for rbp. The frame itself
	 * can still be unwound (cfa_reg tells), but a caller whose CFA is rbp-based cannot.
	 */
	ML_RBP_LOST = 2,
};

struct ml_unwind_row {
	uint64_t pc;	   /* start of the range, ELF virtual address; a row lasts until the next row's pc */
	uint8_t cfa_reg;   /* enum ml_cfa_reg */
	int32_t cfa_off;   /* 0 unless cfa_reg is ML_CFA_RSP or ML_CFA_RBP */
	uint8_t rbp_saved; /* enum ml_rbp_rule; 0 unless cfa_reg is ML_CFA_RSP or ML_CFA_RBP */
	int32_t rbp_off;   /* meaningful only for ML_RBP_AT_CFA, else 0 */
};

/*
 * Rows sorted by pc, strictly increasing, adjacent rows with the same rule merged. At the end of each
 * FDE's range there is a row with cfa_reg = ML_CFA_NONE (unless another FDE starts right there)
 * so that a lookup never extends an FDE past its end.
 */
struct ml_unwind_table {
	struct ml_unwind_row *rows;
	size_t n;
	size_t n_skipped; /* FDEs dropped as malformed (see ml_ehframe_parse) */
};

/*
 * Parse the bytes of an .eh_frame section loaded at sect_addr (the base of pcrel pointer encodings).
 * out is always initialized, empty on error. Returns:
 *   0        the table (maybe empty: an empty section, or only a zero terminator, is valid);
 *   -EINVAL  the entry framing is broken (a length field truncated or running past the end of the
 *            data, an entry too short for its CIE id): the whole section is rejected, since nothing
 *            after a bad length can be found reliably;
 *   -E2BIG   more than ML_EHFRAME_MAX_ROWS rows;
 *   -ENOMEM.
 * A CIE or FDE whose framing is intact but whose content is bad (unsupported version or augmentation,
 * textrel/funcrel/aligned/indirect pc encodings, CIE pointer not naming a good CIE, truncated fields,
 * LEB128 over 10 bytes, overflowing arithmetic, unknown CFA opcode, remember_state deeper than
 * ML_EHFRAME_MAX_STATE_DEPTH or restore_state with nothing remembered, a return address column other
 * than 16) is skipped: its FDEs contribute no rows and are counted in out->n_skipped. Instructions that
 * advance past the FDE's range end the FDE (the rest is not interpreted). The CIE id and FDE CIE
 * pointer are 4 bytes even in entries with a 64-bit length, as the LSB specifies for .eh_frame.
 */
int ml_ehframe_parse(const uint8_t *data, size_t len, uint64_t sect_addr, struct ml_unwind_table *out);

/*
 * The row covering pc (the last row whose pc is <= pc), or NULL before the first row. Past the end of
 * an FDE that is the ML_CFA_NONE row closing it.
 */
const struct ml_unwind_row *ml_unwind_lookup(const struct ml_unwind_table *t, uint64_t pc);

/*
 * The same for the bytes of a .debug_frame section (DWARF 2-4 CIE ids and versions, CIE pointers as
 * section offsets, FDE addresses absolute unless a 'z' augmentation says otherwise).
 */
int ml_debugframe_parse(const uint8_t *data, size_t len, struct ml_unwind_table *out);

/*
 * Rows from the .eh_frame of the ELF file on fd and from a .debug_frame found in it or, when debug_fd is
 * not -1, in that separate debug file (its other sections are not used): a function described by both
 * takes the .eh_frame rules. -ENOEXEC if fd is not a 64-bit x86-64 ELF, -ENOENT if neither section has
 * contents; a bad .debug_frame is ignored when .eh_frame is good, and counted in n_skipped. A stop that is not
 * NULL is polled while parsing: once true, the parse ends with -ECANCELED.
 */
int ml_unwind_from_elf(int fd, int debug_fd, const bool *stop, struct ml_unwind_table *out);

void ml_unwind_table_free(struct ml_unwind_table *t); /* NULL-safe; leaves t empty */

#endif
