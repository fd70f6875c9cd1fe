/*
 * libFuzzer target: location tables are read from the target's memory, so any bytes must give a line or be
 * rejected cleanly. Input: 4 bytes co_firstlineno, 4 bytes instruction index (both little-endian), then the table.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include "python/pyline.h"

/* Indexes walked per input: enough for every seed, bounded so that the quadratic walk stays fast. */
#define MAX_WALK 1024

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *table;
	uint32_t instr, i;
	int first, line, err, want_err = 1, want_line = 0;
	size_t len;

	if (size < 8)
		return 0;
	first = (int)le32(data);
	instr = le32(data + 4);
	table = data + 8;
	len = size - 8;

	line = 42;
	err = ml_pyline_lookup(table, len, first, instr, &line);
	if (err != 0 && err != -ENOENT && err != -EINVAL)
		__builtin_trap();
	if (err && line != 42)
		__builtin_trap();

	/* Every index up to the end or the first malformed entry: an entry covers at most 8 code units. */
	for (i = 0; i < MAX_WALK; i++) {
		int l = 42, e = ml_pyline_lookup(table, len, first, i, &l);

		if (i == instr)
			want_err = e, want_line = l;
		if (e) {
			if ((e != -ENOENT && e != -EINVAL) || l != 42)
				__builtin_trap();
			/* past the end or the break, every later index answers the same */
			if (ml_pyline_lookup(table, len, first, i + 1 + (instr & 255), &l) != e)
				__builtin_trap();
			if (instr > i && err != e)
				__builtin_trap();
			break;
		}
		if ((uint64_t)i >= (uint64_t)len * 8)
			__builtin_trap();
	}
	if (instr <= i && i < MAX_WALK && (err != want_err || (!err && line != want_line)))
		__builtin_trap();
	return 0;
}
