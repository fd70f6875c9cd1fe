/* Test helper shared by the unit tests that read gzipped profiles back (test_ledger, test_pprof). */
#ifndef ML_TEST_GUNZIP_H
#define ML_TEST_GUNZIP_H
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

/* The gunzipped bytes of a gzip stream (NULL when it is not one), and their length. */
static inline uint8_t *gunzip(const char *in, size_t len, size_t *out_len)
{
	z_stream z = {.next_in = (Bytef *)in, .avail_in = (uInt)len};
	size_t cap = 1 << 16;
	uint8_t *out = malloc(cap);
	int rc = Z_OK;

	if (!out || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return NULL;
	}
	while (rc == Z_OK) {
		z.next_out = out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		rc = inflate(&z, Z_NO_FLUSH);
		if (rc == Z_OK && !z.avail_out && !(out = realloc(out, cap *= 2)))
			rc = Z_MEM_ERROR;
	}
	*out_len = z.total_out;
	inflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	return out;
}

#endif
