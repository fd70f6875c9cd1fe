/*
 * Unit tests of the CUDA out-of-memory report's head: what it reads from PyTorch's message (the target's
 * text, untrusted) and what it refuses to read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "report/json.h"
#include "report/oomview.h"

/* The JSON fields of a raise with this message (msg_len its real length). */
static char *json_of(const char *msg, uint64_t msg_len)
{
	static struct ml_cuda_oom o;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct jw w;

	memset(&o, 0, sizeof(o));
	o.raised = true;
	o.raise.hdr.tgid = 7;
	snprintf(o.raise.msg, sizeof(o.raise.msg), "%s", msg);
	o.raise.msg_len = msg_len;
	jw_init(&w, f);
	jw_obj_begin(&w, NULL);
	ml_json_cuda_oom(&w, &o);
	jw_obj_end(&w);
	CHECK_EQ_INT(jw_finish(&w), 0, "written");
	fclose(f);
	return buf;
}

static void has(const char *msg, const char *want, const char *what)
{
	char *got = json_of(msg, strlen(msg));

	if (!strstr(got, want))
		fprintf(stderr, "  got %s\n", got);
	CHECK(strstr(got, want) != NULL, what);
	free(got);
}

int main(void)
{
	char *cut;

	has("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 64.00 MiB",
	    "\"device\":0,\"function\":\"c10::OutOfMemoryError\",\"bytes\":20971520,\"error\":null", "PyTorch's words");
	has("CUDA out of memory. Tried to allocate 512 bytes. GPU 13 has", "\"device\":13,",
	    "bytes and a two-digit device");
	has("CUDA out of memory. Tried to allocate 1.50 GiB. GPU 1 has", "\"bytes\":1610612736", "GiB with a fraction");
	has("XPU out of memory, please use `empty_cache`",
	    "\"device\":null,\"function\":\"c10::OutOfMemoryError\","
	    "\"bytes\":null",
	    "another device's words: nothing made up");
	has("Tried to allocate -5.00 MiB. GPU -1 has", "\"device\":null", "no negative device");
	has("Tried to allocate 1e300 MiB. GPU 99999999999999999999 has", "\"bytes\":null", "no absurd size");
	has("Tried to allocate 20.00 furlongs. GPU 2", "\"bytes\":null", "an unknown unit");
	has("a \"quoted\"\nline", "\"message\":\"a \\\"quoted\\\"\\nline\",\"message_cut\":false", "escaped, whole");
	cut = json_of("CUDA out of memory.", 5000);
	CHECK(strstr(cut, "\"message_cut\":true") != NULL, "a longer message than was read is said to be cut");
	free(cut);
	return SUMMARY("oomview");
}
