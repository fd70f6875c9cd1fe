/*
 * Reading DWARF call frame information: a bounded cursor over a section's bytes (fixed-size, LEB128 and
 * pointer-encoded values), every read checked against the end. The bytes come from the target's files.
 */
#ifndef ML_CFI_READER_H
#define ML_CFI_READER_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Pointer encodings (DW_EH_PE_*). */
#define PE_OMIT 0xff
#define PE_FORMAT_MASK 0x0f
#define PE_APP_MASK 0x70
#define PE_ABSPTR 0x00
#define PE_ULEB128 0x01
#define PE_UDATA2 0x02
#define PE_UDATA4 0x03
#define PE_UDATA8 0x04
#define PE_SLEB128 0x09
#define PE_SDATA2 0x0a
#define PE_SDATA4 0x0b
#define PE_SDATA8 0x0c
#define PE_PCREL 0x10
#define PE_TEXTREL 0x20
#define PE_DATAREL 0x30
#define PE_INDIRECT 0x80

/* A bounded cursor over [p, end). */
struct rd {
	const uint8_t *p, *end;
};

static inline size_t rd_left(const struct rd *r)
{
	return (size_t)(r->end - r->p);
}

static inline int rd_bytes(struct rd *r, size_t n, uint64_t *out, bool is_signed)
{
	uint64_t v = 0;
	size_t i;

	if (rd_left(r) < n)
		return -EINVAL;
	for (i = 0; i < n; i++) /* little-endian */
		v |= (uint64_t)r->p[i] << (8 * i);
	if (is_signed && n < 8 && (v >> (8 * n - 1)) & 1)
		v |= ~0ULL << (8 * n);
	r->p += n;
	*out = v;
	return 0;
}

static inline int rd_u8(struct rd *r, uint8_t *out)
{
	if (!rd_left(r))
		return -EINVAL;
	*out = *r->p++;
	return 0;
}

/*
 * LEB128, at most 10 bytes; the 10th holds bit 63 only (unsigned: 0 or 1; signed: all of it sign, so 0x00
 * or 0x7f): longer or wider encodings are malformed. Signed values are sign-extended from their last byte.
 */
static inline int rd_leb(struct rd *r, bool is_signed, uint64_t *out)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (shift >= 64 || rd_u8(r, &b))
			return -EINVAL;
		if (shift == 63 && (is_signed ? (b & 0x7f) != 0 && (b & 0x7f) != 0x7f : (b & 0x7e) != 0))
			return -EINVAL;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (is_signed && shift < 64 && (b & 0x40))
		v |= ~0ULL << shift;
	*out = v;
	return 0;
}

static inline int rd_uleb(struct rd *r, uint64_t *out)
{
	return rd_leb(r, false, out);
}

static inline int rd_sleb(struct rd *r, int64_t *out)
{
	uint64_t v;
	int err = rd_leb(r, true, &v);

	if (!err)
		*out = (int64_t)v;
	return err;
}

/* Skip a block of bytes led by its ULEB128 length (DWARF expressions, augmentation data). */
static inline int rd_skip_block(struct rd *r)
{
	uint64_t n;

	if (rd_uleb(r, &n) || n > rd_left(r))
		return -EINVAL;
	r->p += n;
	return 0;
}

/* Whether the low nibble of a pointer encoding is a format we can read. */
static inline bool pe_format_ok(uint8_t enc)
{
	switch (enc & PE_FORMAT_MASK) {
	case PE_ABSPTR:
	case PE_ULEB128:
	case PE_UDATA2:
	case PE_UDATA4:
	case PE_UDATA8:
	case PE_SLEB128:
	case PE_SDATA2:
	case PE_SDATA4:
	case PE_SDATA8: return true;
	}
	return false;
}

/*
 * Read an encoded pointer. pcrel is applied when apply is set (base: the section address of the field),
 * datarel is left as read (only accepted where the value is not used), indirection is not followed.
 */
static inline int rd_encoded(struct rd *r, uint8_t enc, bool apply, const uint8_t *sect, uint64_t sect_addr,
			     uint64_t *out)
{
	const uint8_t *at = r->p;
	uint64_t v;
	int64_t s;
	int err;

	switch (enc & PE_FORMAT_MASK) {
	case PE_ABSPTR:
	case PE_UDATA8:
	case PE_SDATA8: err = rd_bytes(r, 8, &v, false); break;
	case PE_UDATA2: err = rd_bytes(r, 2, &v, false); break;
	case PE_SDATA2: err = rd_bytes(r, 2, &v, true); break;
	case PE_UDATA4: err = rd_bytes(r, 4, &v, false); break;
	case PE_SDATA4: err = rd_bytes(r, 4, &v, true); break;
	case PE_ULEB128: err = rd_uleb(r, &v); break;
	case PE_SLEB128:
		err = rd_sleb(r, &s);
		v = (uint64_t)s;
		break;
	default: return -EINVAL;
	}
	if (err)
		return err;
	if (apply && (enc & PE_APP_MASK) == PE_PCREL)
		v += sect_addr + (uint64_t)(at - sect); /* wraps like the loader's arithmetic would */
	*out = v;
	return 0;
}

#endif
