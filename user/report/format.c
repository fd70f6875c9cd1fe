/* Text formatting shared by the report's views: sizes, counts and names from the target. */
#include "report/format.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void ml_fmt_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = bytes < 0 ? -bytes : bytes;
	unsigned int u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%s%.0f B", bytes < 0 ? "-" : "", v);
	else
		snprintf(buf, len, "%s%.1f %s", bytes < 0 ? "-" : "", v, units[u]);
}

void ml_fmt_count(char *buf, size_t len, int64_t n, bool sign)
{
	char digits[32];
	uint64_t v = n < 0 ? -(uint64_t)n : (uint64_t)n;
	int nd = snprintf(digits, sizeof(digits), "%" PRIu64, v);
	size_t o = 0;

	if ((n < 0 || sign) && o + 1 < len)
		buf[o++] = n < 0 ? '-' : '+';
	for (int i = 0; i < nd && o + 1 < len; i++) {
		buf[o++] = digits[i];
		if ((nd - i - 1) % 3 == 0 && i + 1 < nd && o + 1 < len)
			buf[o++] = ',';
	}
	if (len)
		buf[o] = 0;
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when the bytes there are not valid UTF-8. */
int ml_utf8_len(const unsigned char *p)
{
	int n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/*
 * Names come from the target: print control bytes (C1 too), escapes and bytes that are not UTF-8 as \xNN, so
 * they cannot forge report lines or drive a terminal.
 */
void ml_put_safe(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int n = ml_utf8_len(p);

		if (n == 1 && *p >= 0x20 && *p != 0x7f && *p != '\\')
			fputc(*p, f);
		else if (n > 1 && !(p[0] == 0xc2 && p[1] < 0xa0))
			fwrite(p, 1, (size_t)n, f);
		else
			n = 0;
		if (!n) {
			n = p[0] == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0 ? 2 : 1;
			for (int i = 0; i < n; i++)
				fprintf(f, "\\x%02x", p[i]);
		}
		p += n;
	}
}

bool ml_utf8_valid(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int n = ml_utf8_len(p);

		if (!n)
			return false;
		p += n;
	}
	return true;
}

char *ml_utf8_dup(const char *s)
{
	size_t len = strlen(s), o = 0;
	char *out = malloc(len * 3 + 1); /* at worst every byte becomes U+FFFD's three */

	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int n = ml_utf8_len(p);

		if (n) {
			memcpy(out + o, p, (size_t)n);
			o += (size_t)n;
			p += n;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			p++;
		}
	}
	out[o] = '\0';
	return out;
}
