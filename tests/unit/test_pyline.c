/* Unit tests of the CPython location-table parser: real tables from 3.11, 3.12 and 3.13, then broken ones. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "python/pyline.h"

struct pyline_vector {
	const char *version, *name;
	int firstlineno;
	size_t len;
	const uint8_t *table;
	size_t nruns;
	const int *runs; /* nruns pairs of (code units, line), -1 for none */
};

static const struct pyline_vector vectors[] = {
#include "pyline_vectors.h"
};

#define N_VECTORS (sizeof(vectors) / sizeof(vectors[0]))

/* Every code unit of one real code object, then the first index past its end. */
static bool check_vector(const struct pyline_vector *v)
{
	uint32_t instr = 0;
	int line, err;

	for (size_t r = 0; r < v->nruns; r++) {
		for (int k = 0; k < v->runs[2 * r]; k++, instr++) {
			line = INT_MIN;
			err = ml_pyline_lookup(v->table, v->len, v->firstlineno, instr, &line);
			if (err || line != v->runs[2 * r + 1]) {
				printf("# %s %s: unit %u: got %d (line %d), want line %d\n", v->version, v->name, instr,
				       err, line, v->runs[2 * r + 1]);
				return false;
			}
		}
	}
	err = ml_pyline_lookup(v->table, v->len, v->firstlineno, instr, &line);
	if (err != -ENOENT) {
		printf("# %s %s: unit %u past the end: got %d\n", v->version, v->name, instr, err);
		return false;
	}
	return ml_pyline_lookup(v->table, v->len, v->firstlineno, UINT32_MAX, &line) == -ENOENT;
}

static int lookup(const uint8_t *t, size_t len, int first, uint32_t instr, int *line)
{
	*line = 12345;
	return ml_pyline_lookup(t, len, first, instr, line);
}

#define LOOKUP(t, first, instr, line) lookup(t, sizeof(t), first, instr, line)

/* ---- an encoder written from the format description, for round trips through random tables ---- */

struct enc {
	uint8_t buf[4096];
	size_t len;
	int units;
	int want[2048];
};

static uint32_t rng_state = 0x2545f491;

static uint32_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 17;
	rng_state ^= rng_state << 5;
	return rng_state;
}

static void put_varint(struct enc *e, uint32_t v)
{
	while (v >= 64) {
		e->buf[e->len++] = 0x40 | (v & 63);
		v >>= 6;
	}
	e->buf[e->len++] = (uint8_t)v;
}

static void put_svarint(struct enc *e, int delta)
{
	put_varint(e, delta < 0 ? ((uint32_t) - (int64_t)delta << 1) | 1 : (uint32_t)delta << 1);
}

/* One entry of n units at line (or none for -1, with line_now unchanged), in a kind able to say so. */
static void put_entry(struct enc *e, int *line_now, int line, int n)
{
	int delta = line - *line_now;
	unsigned int kind;

	if (line < 0) {
		kind = 15;
	} else {
		switch (rng() % 4) {
		case 0: kind = delta == 0 ? rng() % 10 : 13; break;
		case 1: kind = delta >= 0 && delta <= 2 ? 10 + (unsigned int)delta : 14; break;
		case 2: kind = 13; break;
		default: kind = 14; break;
		}
		*line_now = line;
	}
	e->buf[e->len++] = 0x80 | kind << 3 | (unsigned int)(n - 1);
	if (kind < 10) {
		e->buf[e->len++] = rng() & 0x7f;
	} else if (kind < 13) {
		e->buf[e->len++] = rng() & 0x7f;
		e->buf[e->len++] = rng() & 0x7f;
	} else if (kind == 13) {
		put_svarint(e, delta);
	} else if (kind == 14) {
		put_svarint(e, delta);
		put_varint(e, rng() % 3);
		put_varint(e, rng() % 300);
		put_varint(e, rng() % 300);
	}
	for (int i = 0; i < n; i++)
		e->want[e->units++] = line;
}

static bool round_trip(int seed)
{
	static const int spans[] = {1, 3, 1000, 100000, INT_MAX / 4};
	struct enc e = {.len = 0};
	int first = (int)(rng() % 2000), line_now = first, line, err;

	while (e.len < sizeof(e.buf) - 64 && e.units < 2048 - 8) {
		int span = spans[rng() % 5];
		int next = rng() % 8 == 0 ? -1 : (int)(rng() % (uint32_t)span);

		put_entry(&e, &line_now, next, 1 + (int)(rng() % 8));
		if (e.units > 1500)
			break;
	}
	for (int i = 0; i < e.units; i++) {
		err = ml_pyline_lookup(e.buf, e.len, first, (uint32_t)i, &line);
		if (err || line != e.want[i]) {
			printf("# round trip %d: unit %d: got %d (line %d), want %d\n", seed, i, err, line, e.want[i]);
			return false;
		}
	}
	return ml_pyline_lookup(e.buf, e.len, first, (uint32_t)e.units, &line) == -ENOENT;
}

int main(void)
{
	char name[160];
	int line;

	/* ---- real tables ---- */
	{
		bool seen11 = false, seen12 = false, seen13 = false;

		for (size_t i = 0; i < N_VECTORS; i++) {
			const struct pyline_vector *v = &vectors[i];

			seen11 |= !strncmp(v->version, "3.11.", 5);
			seen12 |= !strncmp(v->version, "3.12.", 5);
			seen13 |= !strncmp(v->version, "3.13.", 5);
			snprintf(name, sizeof(name), "%s %s: every code unit, then -ENOENT", v->version, v->name);
			CHECK(check_vector(v), name);
		}
		CHECK(N_VECTORS >= 60 && seen11 && seen12 && seen13, "vectors from 3.11, 3.12 and 3.13");
	}

	/* ---- hand-written tables ---- */
	{
		static const uint8_t short1[] = {0x80, 0x00};
		static const uint8_t short8[] = {0x87, 0x00, 0x80, 0x00};

		CHECK_EQ_INT(ml_pyline_lookup(NULL, 0, 10, 0, &line), -ENOENT, "empty table: -ENOENT");
		CHECK(LOOKUP(short1, 7, 0, &line) == 0 && line == 7, "short form: co_firstlineno");
		CHECK(LOOKUP(short1, 7, 1, &line) == -ENOENT && line == 12345, "index exactly at the end: -ENOENT");
		CHECK_EQ_INT(LOOKUP(short1, 7, UINT32_MAX, &line), -ENOENT, "index UINT32_MAX: -ENOENT");
		CHECK(LOOKUP(short8, 7, 7, &line) == 0 && line == 7, "entry of 8 units: last unit");
		CHECK(LOOKUP(short8, 7, 8, &line) == 0 && line == 7, "entry of 8 units: next entry");
		CHECK_EQ_INT(LOOKUP(short8, 7, 9, &line), -ENOENT, "entry of 8 units: end");
	}
	{
		/* one-line +2, no location, short, no columns -3, long +5, one-line +0 */
		static const uint8_t t[] = {0xe0, 0x01, 0x02, 0xf9, 0x80, 0x10, 0xe8, 0x07,
					    0xf0, 0x0a, 0x01, 0x01, 0x02, 0xd0, 0x00, 0x00};
		static const int want[] = {12, -1, -1, 12, 9, 14, 14};
		bool ok = true;

		/* the first byte 0xe0 is kind 12 with 1 unit; 0xf9 is "no location" over 2 units */
		for (uint32_t i = 0; i < 7; i++)
			ok &= lookup(t, sizeof(t), 10, i, &line) == 0 && line == want[i];
		CHECK(ok, "every kind; no location leaves the running line alone");
		CHECK_EQ_INT(LOOKUP(t, 10, 7, &line), -ENOENT, "every kind: -ENOENT after the last");
	}
	{
		static const uint8_t long_trunc1[] = {0x80, 0x00, 0xf0, 0x02};
		static const uint8_t long_trunc3[] = {0x80, 0x00, 0xf0, 0x02, 0x00, 0x01};
		static const uint8_t long_whole[] = {0x80, 0x00, 0xf0, 0x02, 0x00, 0x01, 0x01};
		static const uint8_t long_cut[] = {0xf0, 0x02, 0x00, 0x80, 0x00};
		static const uint8_t short_trunc[] = {0x80};
		static const uint8_t one_line_trunc[] = {0xd0, 0x05};
		static const uint8_t one_line_cut[] = {0xd0, 0x05, 0x80, 0x00};

		CHECK(LOOKUP(long_trunc1, 3, 0, &line) == 0 && line == 3, "malformed entry after the index: not read");
		CHECK(LOOKUP(long_trunc1, 3, 1, &line) == -EINVAL && line == 12345, "long form cut after the delta");
		CHECK_EQ_INT(LOOKUP(long_trunc3, 3, 1, &line), -EINVAL, "long form without its end column");
		CHECK(LOOKUP(long_whole, 3, 1, &line) == 0 && line == 4, "long form whole");
		CHECK_EQ_INT(LOOKUP(long_cut, 3, 0, &line), -EINVAL, "long form cut short by the next entry");
		CHECK_EQ_INT(LOOKUP(short_trunc, 3, 0, &line), -EINVAL, "short form without its column byte");
		CHECK_EQ_INT(LOOKUP(one_line_trunc, 3, 0, &line), -EINVAL, "one-line form without its end column");
		CHECK_EQ_INT(LOOKUP(one_line_cut, 3, 0, &line), -EINVAL, "one-line form cut short by the next entry");
	}
	{
		static const uint8_t trunc[] = {0xe8, 0x42};
		static const uint8_t trunc_long[] = {0xf0, 0x02, 0x41};
		static const uint8_t six_more[] = {0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x00};
		static const uint8_t seven[] = {0xe8, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x00};
		static const uint8_t max32[] = {0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x03};
		static const uint8_t bit32[] = {0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x04};
		static const uint8_t zero6[] = {0xe8, 0x42, 0x40, 0x40, 0x40, 0x40, 0x00};
		static const uint8_t multi[] = {0xe8, 0x50, 0x1f};

		CHECK_EQ_INT(LOOKUP(trunc, 3, 0, &line), -EINVAL, "varint cut off at the end");
		CHECK_EQ_INT(LOOKUP(trunc_long, 3, 0, &line), -EINVAL, "long form: varint cut off");
		CHECK_EQ_INT(LOOKUP(six_more, 3, 0, &line), -EINVAL, "continuation bit on 6 bytes");
		CHECK_EQ_INT(LOOKUP(seven, 3, 0, &line), -EINVAL, "continuation bit on 7 bytes");
		CHECK(LOOKUP(max32, INT_MAX, 0, &line) == 0 && line == 0, "32-bit varint: -(2^31 - 1) from INT_MAX");
		CHECK_EQ_INT(LOOKUP(bit32, INT_MAX, 0, &line), -EINVAL, "varint with a 33rd bit");
		CHECK(LOOKUP(zero6, 3, 0, &line) == 0 && line == 4, "6-group varint with zero high groups");
		/* 0x50 0x1f: 16 | 31 << 6 = 2000, +1000 */
		CHECK(LOOKUP(multi, 3, 0, &line) == 0 && line == 1003, "two-group varint");
	}
	{
		static const uint8_t no_bit7[] = {0x00};
		static const uint8_t no_bit7_2nd[] = {0x80, 0x00, 0x00, 0x80, 0x00};
		static const uint8_t none_only[] = {0xff};

		CHECK_EQ_INT(LOOKUP(no_bit7, 3, 0, &line), -EINVAL, "no bit 7 at the first entry");
		CHECK(LOOKUP(no_bit7_2nd, 3, 0, &line) == 0 && line == 3, "no bit 7 at the second entry: first fine");
		CHECK_EQ_INT(LOOKUP(no_bit7_2nd, 3, 1, &line), -EINVAL, "no bit 7 at the second entry");
		CHECK(LOOKUP(none_only, 3, 7, &line) == 0 && line == -1, "no location over 8 units");
		CHECK_EQ_INT(LOOKUP(none_only, 3, 8, &line), -ENOENT, "no location: end");
	}
	{
		static const uint8_t plus1[] = {0xe8, 0x02};
		static const uint8_t plus2[] = {0xe0, 0x00, 0x00};
		static const uint8_t big_twice[] = {0xe8, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03,
						    0xe8, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x03};
		static const uint8_t big_neg[] = {0xe8, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x03};
		static const uint8_t long_neg[] = {0xf0, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x03, 0x00, 0x01, 0x01};
		static const uint8_t none_after[] = {0xe0, 0x00, 0x00, 0xf8};

		CHECK_EQ_INT(LOOKUP(plus1, INT_MAX, 0, &line), -EINVAL, "INT_MAX + 1: -EINVAL");
		CHECK(LOOKUP(plus1, INT_MAX - 1, 0, &line) == 0 && line == INT_MAX, "INT_MAX - 1 + 1");
		CHECK(LOOKUP(plus2, INT_MAX - 2, 0, &line) == 0 && line == INT_MAX, "one-line +2 up to INT_MAX");
		CHECK_EQ_INT(LOOKUP(plus2, INT_MAX - 1, 0, &line), -EINVAL, "one-line +2 past INT_MAX");
		CHECK_EQ_INT(LOOKUP(plus2, INT_MAX, 0, &line), -EINVAL, "one-line +2 from INT_MAX");
		CHECK(LOOKUP(none_after, INT_MAX - 2, 1, &line) == 0 && line == -1, "no location after INT_MAX");
		CHECK(LOOKUP(big_twice, 0, 0, &line) == 0 && line == INT_MAX, "+(2^31 - 1) once");
		CHECK_EQ_INT(LOOKUP(big_twice, 0, 1, &line), -EINVAL, "+(2^31 - 1) twice overflows");
		CHECK(LOOKUP(big_twice, INT_MIN, 1, &line) == 0 && line == INT_MAX - 1, "from INT_MIN up twice");
		CHECK(LOOKUP(big_neg, -1, 0, &line) == 0 && line == INT_MIN, "-1 - (2^31 - 1) is INT_MIN");
		CHECK_EQ_INT(LOOKUP(big_neg, -2, 0, &line), -EINVAL, "below INT_MIN");
		CHECK_EQ_INT(LOOKUP(long_neg, -2, 0, &line), -EINVAL, "long form below INT_MIN");
	}

	/* ---- round trips through an encoder written from the format description ---- */
	{
		bool ok = true;

		for (int i = 0; i < 200 && ok; i++)
			ok = round_trip(i);
		CHECK(ok, "200 random tables encoded from the description decode to their lines");
	}
	return SUMMARY("pyline");
}
