/* Text formatting shared by the report's views: sizes, counts and names from the target. */
#include "report/format.h"
#include <inttypes.h>

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

/* Names come from the target: print control bytes and escapes as \xNN, so they cannot forge report lines. */
void ml_put_safe(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
	}
}
