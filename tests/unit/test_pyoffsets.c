/*
 * Unit tests for the CPython offset table: lookups, _Py_DebugOffsets parsing of untrusted bytes,
 * and, for each CPython installed with its internal headers, tests/unit/pyoffsets_probe.c built
 * against that interpreter and run (run from the repository root).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "python/pyoffsets.h"

#define PROBE_SRC "tests/unit/pyoffsets_probe.c"
#define TABLE_SRC "user/python/pyoffsets.c"

/* ---- lookups ---- */

static void test_find(void)
{
	static const unsigned int unknown[] = {0x030a0df0, 0x030e00f0, 0x030e0000, 0x020712f0, 0x040b0000,
					       0,	   0xffffffff, 0x0b030000, 0x0003000b};
	const struct ml_py_layout *l;
	size_t i;

	l = ml_py_layout_find(0x030b0700);
	CHECK(l && l->version == 0x030b0000 && !strcmp(l->name, "3.11"), "find 3.11.7");
	l = ml_py_layout_find(0x030c01f0);
	CHECK(l && l->version == 0x030c0000 && !strcmp(l->name, "3.12"), "find 3.12.1");
	l = ml_py_layout_find(0x030d00f0);
	CHECK(l && l->version == 0x030d0000 && !strcmp(l->name, "3.13"), "find 3.13.0");
	l = ml_py_layout_find(0x030d0ac2);
	CHECK(l && l->version == 0x030d0000, "find 3.13.10rc2");
	for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		char name[64];

		snprintf(name, sizeof(name), "find 0x%08x: NULL", unknown[i]);
		CHECK(ml_py_layout_find(unknown[i]) == NULL, name);
	}
}

/* Properties every entry must have, whatever the headers say. */
static void test_table_shape(void)
{
	static const unsigned int versions[] = {0x030b0000, 0x030c0000, 0x030d0000};
	size_t i;

	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		const struct ml_py_layout *l = ml_py_layout_find(versions[i]);
		char name[96];
		bool cframe, direct;

		if (!l) {
			CHECK(false, "table has 3.11, 3.12, 3.13");
			continue;
		}
		cframe = l->tstate_cframe != ML_PY_NONE && l->cframe_current_frame != ML_PY_NONE;
		direct = l->tstate_current_frame != ML_PY_NONE;
		snprintf(name, sizeof(name), "%s: exactly one way to the current frame", l->name);
		CHECK(cframe != direct &&
			  (cframe || (l->tstate_cframe == ML_PY_NONE && l->cframe_current_frame == ML_PY_NONE)),
		      name);
		snprintf(name, sizeof(name), "%s: frame fields lie within frame_size", l->name);
		CHECK(l->frame_code + 8 <= l->frame_size && l->frame_previous + 8 <= l->frame_size &&
			  l->frame_func + 8 <= l->frame_size && l->frame_instr + 8 <= l->frame_size &&
			  l->frame_owner < l->frame_size &&
			  (l->frame_is_entry == ML_PY_NONE || l->frame_is_entry < l->frame_size),
		      name);
		snprintf(name, sizeof(name), "%s: is_entry and FRAME_OWNED_BY_CSTACK exclude each other", l->name);
		CHECK((l->frame_is_entry == ML_PY_NONE) == (l->owner_cstack != 0xff), name);
		snprintf(name, sizeof(name), "%s: code units, str and bytes sizes", l->name);
		CHECK(l->code_units == 2 && l->unicode_ascii_size < l->unicode_compact_size &&
			  l->unicode_state + 4 <= l->unicode_ascii_size && l->bytes_size < l->bytes_sval &&
			  l->ob_type == 8,
		      name);
		snprintf(name, sizeof(name), "%s: instruction pointer is the current instruction", l->name);
		CHECK(l->instr_is_next == 0, name);
	}
}

/* ---- _Py_DebugOffsets from untrusted bytes ---- */

#define DEBUG_313_SIZE 584

static void put_header(unsigned char *buf, uint64_t version)
{
	memcpy(buf, "xdebugpy", 8);
	memcpy(buf + 8, &version, sizeof(version));
}

static void test_check_debug(void)
{
	const struct ml_py_layout *l311 = ml_py_layout_find(0x030b0000), *l312 = ml_py_layout_find(0x030c0000),
				  *l313 = ml_py_layout_find(0x030d0000);
	unsigned char buf[DEBUG_313_SIZE + 64];
	char why[128];
	int err, i, bad = 0;

	memset(buf, 0, sizeof(buf));
	put_header(buf, 0x030d00f0);
	CHECK_EQ_INT(ml_py_layout_check_debug(l311, buf, sizeof(buf), why, sizeof(why)), -ENOENT,
		     "check_debug 3.11: -ENOENT");
	CHECK_EQ_INT(ml_py_layout_check_debug(l312, buf, sizeof(buf), why, sizeof(why)), -ENOENT,
		     "check_debug 3.12: -ENOENT");
	CHECK_EQ_INT(ml_py_layout_check_debug(NULL, buf, sizeof(buf), why, sizeof(why)), -EINVAL,
		     "check_debug no layout");
	CHECK_EQ_INT(ml_py_layout_check_debug(l313, NULL, 0, why, sizeof(why)), -EINVAL, "check_debug NULL buffer");
	CHECK_EQ_INT(ml_py_layout_check_debug(l313, buf, 15, why, sizeof(why)), -EINVAL, "check_debug 15 bytes");
	CHECK_EQ_INT(ml_py_layout_check_debug(l313, buf, DEBUG_313_SIZE - 1, why, sizeof(why)), -EINVAL,
		     "check_debug one byte short");

	/* all offsets 0: the first described field disagrees */
	err = ml_py_layout_check_debug(l313, buf, DEBUG_313_SIZE, why, sizeof(why));
	CHECK(err == -EPROTO && !strcmp(why, "runtime_state.interpreters_head: 632 != 0"),
	      "check_debug on zeros: -EPROTO naming the field, table value first");
	CHECK_EQ_INT(ml_py_layout_check_debug(l313, buf, DEBUG_313_SIZE, NULL, 0), -EPROTO, "check_debug without why");
	CHECK(ml_py_layout_check_debug(l313, buf, DEBUG_313_SIZE, why, 1) == -EPROTO && why[0] == '\0',
	      "check_debug with a 1-byte why");

	put_header(buf, 0x030e00f0);
	CHECK_EQ_INT(ml_py_layout_check_debug(l313, buf, sizeof(buf), why, sizeof(why)), -EINVAL,
		     "check_debug 3.14: -EINVAL");
	put_header(buf, 0x030c01f0);
	CHECK_EQ_INT(ml_py_layout_check_debug(l313, buf, sizeof(buf), why, sizeof(why)), -EINVAL,
		     "check_debug 3.12: -EINVAL");
	put_header(buf, 0x030d00f0);
	buf[7] = 'Y';
	CHECK_EQ_INT(ml_py_layout_check_debug(l313, buf, sizeof(buf), why, sizeof(why)), -EINVAL,
		     "check_debug no cookie");

	/* random contents behind a valid header: a verdict, never a crash or a read past len */
	srand(1);
	for (i = 0; i < 2000; i++) {
		size_t len = 16 + (size_t)rand() % (sizeof(buf) - 16), j;
		unsigned char *p = malloc(len);

		if (!p)
			break;
		for (j = 0; j < len; j++)
			p[j] = (unsigned char)rand();
		put_header(p, 0x030d0000 | (unsigned int)(rand() & 0xffff));
		err = ml_py_layout_check_debug(l313, p, len, why, sizeof(why));
		if (len < DEBUG_313_SIZE ? err != -EINVAL : err != -EPROTO)
			bad++;
		free(p);
	}
	CHECK_EQ_INT(bad, 0, "check_debug on random bytes: -EINVAL when short, else -EPROTO");
}

/* ---- the probe, built and run against each installed CPython ---- */

struct interp {
	const char *name, *inc, *libdir, *lib;
};

static const struct interp interps[] = {
    {"pyenv 3.11.7", "/root/.pyenv/versions/3.11.7/include/python3.11", "/root/.pyenv/versions/3.11.7/lib",
     "python3.11"},
    {"pyenv 3.12.1", "/root/.pyenv/versions/3.12.1/include/python3.12", "/root/.pyenv/versions/3.12.1/lib",
     "python3.12"},
    {"pyenv 3.13.0", "/root/.pyenv/versions/3.13.0/include/python3.13", "/root/.pyenv/versions/3.13.0/lib",
     "python3.13"},
    {"debian 3.11", "/usr/include/python3.11", "/usr/lib/x86_64-linux-gnu", "python3.11"},
};

static bool installed(const struct interp *in)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/Python.h", in->inc);
	if (access(p, R_OK))
		return false;
	snprintf(p, sizeof(p), "%s/internal/pycore_frame.h", in->inc);
	if (access(p, R_OK))
		return false;
	snprintf(p, sizeof(p), "%s/lib%s.so", in->libdir, in->lib);
	return !access(p, R_OK);
}

/* Runs cmd, echoing its output as "# " lines when quiet is false; counts ok / not ok lines. */
static int run(const char *cmd, bool quiet, int *n_ok, int *n_not_ok)
{
	char line[1024];
	FILE *f = popen(cmd, "r");
	int st;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (n_ok && !strncmp(line, "ok ", 3))
			(*n_ok)++;
		if (n_not_ok && !strncmp(line, "not ok", 6))
			(*n_not_ok)++;
		if (!quiet || !strncmp(line, "not ok", 6))
			printf("#   %s%s", line, strchr(line, '\n') ? "" : "\n");
	}
	st = pclose(f);
	return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_probe(const struct interp *in, const char *dir, int idx)
{
	char exe[256], cmd[2048], name[160];
	int rc, n_ok = 0, n_not_ok = 0;

	if (!installed(in)) {
		snprintf(name, sizeof(name), "probe %s", in->name);
		SKIP(name, "this interpreter is not installed");
		return;
	}
	snprintf(exe, sizeof(exe), "%s/probe%d", dir, idx);
	snprintf(cmd, sizeof(cmd),
		 "cc -std=gnu11 -g -O0 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers "
		 "-DPy_BUILD_CORE -I%s -Iuser " PROBE_SRC " " TABLE_SRC " -L%s -l%s -lpthread -o %s 2>&1",
		 in->inc, in->libdir, in->lib, exe);
	rc = run(cmd, false, NULL, NULL);
	snprintf(name, sizeof(name), "probe %s builds", in->name);
	CHECK_EQ_INT(rc, 0, name);
	if (rc)
		return;
	snprintf(cmd, sizeof(cmd), "LD_LIBRARY_PATH=%s timeout 300 %s 2>&1", in->libdir, exe);
	rc = run(cmd, true, &n_ok, &n_not_ok);
	printf("# probe %s: exit %d, %d ok, %d not ok\n", in->name, rc, n_ok, n_not_ok);
	snprintf(name, sizeof(name), "probe %s: table agrees with its headers and runtime", in->name);
	CHECK(rc == 0 && n_not_ok == 0 && n_ok > 0, name);
	unlink(exe);
}

int main(void)
{
	char dir[] = "/tmp/ml_pyoffsets.XXXXXX";
	size_t i;

	test_find();
	test_table_shape();
	test_check_debug();

	if (access(PROBE_SRC, R_OK) || access(TABLE_SRC, R_OK)) {
		CHECK(false, "run from the repository root (" PROBE_SRC " not found)");
	} else if (!mkdtemp(dir)) {
		CHECK(false, "mkdtemp");
	} else {
		for (i = 0; i < sizeof(interps) / sizeof(interps[0]); i++)
			test_probe(&interps[i], dir, (int)i);
		rmdir(dir);
	}
	return SUMMARY("pyoffsets");
}
