/*
 * Line numbers from CPython 3.11+ location tables. The table is a run of entries, each a first byte with bit 7
 * set (bits 3-6: the kind, bits 0-2: code units covered - 1) and then kind-dependent bytes with bit 7 clear:
 *
 *   0-9    short form: one byte of columns, same line as the previous entry
 *   10-12  one-line form: line + (kind - 10), then start and end column bytes
 *   13     no columns: signed varint line delta
 *   14     long form: signed varint line delta, varints end-line delta, column + 1, end column + 1
 *   15     no location: the instructions have no line, the running line stays as it is
 *
 * Varints are 6-bit groups, lowest first, 0x40 set on all groups but the last; a signed varint keeps the sign in
 * bit 0 of the unsigned value. The running line starts at co_firstlineno.
 */
#include <errno.h>
#include <limits.h>

#include "python/pyline.h"

#define ENTRY_START 0x80
#define VARINT_MORE 0x40
#define VARINT_BITS 0x3f

enum loc_kind {
	LOC_ONE_LINE0 = 10,
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13,
	LOC_LONG = 14,
	LOC_NONE = 15,
};

struct reader {
	const uint8_t *p;
	size_t len, pos;
};

/* One byte inside an entry: a byte with bit 7 set there is the start of the next entry, so this one is cut short. */
static int next_byte(struct reader *r, uint8_t *b)
{
	if (r->pos >= r->len || (r->p[r->pos] & ENTRY_START))
		return -EINVAL;
	*b = r->p[r->pos++];
	return 0;
}

static int read_varint(struct reader *r, uint32_t *out)
{
	uint32_t v = 0;
	unsigned int shift = 0;
	uint8_t b;
	int err;

	do {
		if (shift >= 32)
			return -EINVAL;
		err = next_byte(r, &b);
		if (err)
			return err;
		/* The sixth group lands at bit 30: only its two low bits fit. */
		if (shift > 32 - 6 && ((b & VARINT_BITS) >> (32 - shift)))
			return -EINVAL;
		v |= (uint32_t)(b & VARINT_BITS) << shift;
		shift += 6;
	} while (b & VARINT_MORE);
	*out = v;
	return 0;
}

static int read_svarint(struct reader *r, int64_t *out)
{
	uint32_t v;
	int err = read_varint(r, &v);

	if (err)
		return err;
	*out = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
	return 0;
}

/* The rest of the entry whose first byte was just read: its line delta, or *located = 0 for "no location". */
static int read_entry(struct reader *r, unsigned int kind, int64_t *delta, int *located)
{
	uint32_t skip;
	uint8_t b;
	int i, err;

	*delta = 0;
	*located = 1;
	if (kind == LOC_NONE) {
		*located = 0;
		return 0;
	}
	if (kind == LOC_NO_COLUMNS)
		return read_svarint(r, delta);
	if (kind == LOC_LONG) {
		err = read_svarint(r, delta);
		for (i = 0; !err && i < 3; i++)
			err = read_varint(r, &skip);
		return err;
	}
	if (kind >= LOC_ONE_LINE0 && kind <= LOC_ONE_LINE2) {
		*delta = kind - LOC_ONE_LINE0;
		err = next_byte(r, &b);
		return err ? err : next_byte(r, &b);
	}
	return next_byte(r, &b);
}

int ml_pyline_lookup(const uint8_t *table, size_t len, int firstlineno, uint32_t instr, int *line)
{
	struct reader r = {.p = table, .len = len};
	int64_t cur = firstlineno, delta;
	uint64_t unit = 0;
	int located, err;

	while (r.pos < r.len) {
		uint8_t first = r.p[r.pos++];
		unsigned int units = (first & 7) + 1;

		if (!(first & ENTRY_START))
			return -EINVAL;
		err = read_entry(&r, (first >> 3) & 15, &delta, &located);
		if (err)
			return err;
		cur += delta;
		if (cur < INT_MIN || cur > INT_MAX)
			return -EINVAL;
		if (instr < unit + units) {
			*line = located ? (int)cur : -1;
			return 0;
		}
		unit += units;
	}
	return -ENOENT;
}
