/* One file's DWARF: the source line of an address, and the functions inlined there as frames of their own. */
#ifndef ML_DWLINES_H
#define ML_DWLINES_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/frames.h"
#include "symbolize/symnames.h"

struct dwlines;

/*
 * The DWARF of debug (a separate debug file's ELF, or NULL), else of elf; both stay the caller's and must
 * outlive it. 0 with *out NULL when neither has any: no lines, which is fine. 0 or -ENOMEM.
 */
int dwlines__new(Elf *debug, Elf *elf, struct dwlines **out);
void dwlines__free(struct dwlines *d); /* NULL-safe */

/*
 * The source file and line of vaddr (a link-time address) into f, and the functions inlined there as *ninl
 * frames in *inl (the caller frees it), innermost first: the innermost takes vaddr's line, each outer one, f
 * last, the line of the call that was inlined. Names and files come from nm and live as long as it does.
 * An address in no compile unit leaves f as it was. 0 or -ENOMEM (*inl may then hold frames to free).
 */
int dwlines__lookup(struct dwlines *d, struct symnames *nm, uint64_t vaddr, struct ml_frame *f, struct ml_frame **inl,
		    size_t *ninl);

#endif
