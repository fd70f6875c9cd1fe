/* The kinds of code a frame is in (see frameclass.h): by its file and module names alone. */
#include "lib/frameclass.h"
#include <string.h>
#include "lib/path.h"

bool ml_frame_is_user_code(const struct ml_frame *fr)
{
	const char *f = fr->file;

	if (fr->kind != ML_FRAME_PYTHON || !fr->func || !f)
		return false;
	if (!strncmp(f, "<frozen ", 8) || strstr(f, "/site-packages/") || strstr(f, "/dist-packages/"))
		return false;
	/* the standard library: PREFIX/lib/pythonX.Y/ (lib64 too) */
	for (const char *p = strstr(f, "/lib"); p; p = strstr(p + 1, "/lib")) {
		const char *q = p + 4;

		if (!strncmp(q, "64", 2))
			q += 2;
		if (!strncmp(q, "/python", 7))
			return false;
	}
	return true;
}

bool ml_frame_is_interpreter(const struct ml_frame *fr)
{
	const char *m = ml_base_name(fr->module);

	if (fr->kind != ML_FRAME_NATIVE || !m)
		return false;
	return !strncmp(m, "python", 6) || !strncmp(m, "libpython", 9);
}

bool ml_frame_is_import(const struct ml_frame *fr)
{
	const char *f = fr->file;

	if (fr->kind != ML_FRAME_PYTHON || !f)
		return false;
	return !strncmp(f, "<frozen importlib.", 18) || strstr(f, "/importlib/") != NULL;
}
