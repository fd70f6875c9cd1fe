/* Line numbers from CPython 3.11+ location tables (code.co_linetable, PEP 626/657), read from a target's memory. */
#ifndef ML_PYLINE_H
#define ML_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Line of the instruction at code-unit index instr (code units are 2 bytes: index = byte offset / 2, inline
 * caches counted) given co_linetable bytes and co_firstlineno. Returns 0 and sets *line (-1 when the table says
 * the instruction has no line; 0 is a real line, that of a module's RESUME), -ENOENT when instr lies past the end
 * of the table, -EINVAL for a malformed table (truncated entry or varint, an entry without the high bit set where
 * an entry must start, a varint longer than 32 bits of payload, or line arithmetic overflowing int). Only the
 * entries up to the one covering instr are read, and each of them whole. *line is left alone on error.
 *
 * The frame's instruction pointer gives instr: (prev_instr - first code unit) on 3.11 and 3.12, (instr_ptr -
 * first code unit) on 3.13. A prev_instr one unit before the code (index -1: the frame has not started) stands
 * for co_firstlineno, as PyCode_Addr2Line has it; that case is the caller's.
 */
int ml_pyline_lookup(const uint8_t *table, size_t len, int firstlineno, uint32_t instr, int *line);

#endif
