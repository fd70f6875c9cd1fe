/* What kind of code a resolved frame is in: the job's own, the interpreter's, the import machinery's. */
#ifndef ML_FRAMECLASS_H
#define ML_FRAMECLASS_H

#include <stdbool.h>
#include "lib/frames.h"

/*
 * A Python frame of the job's own code: not frozen importlib, the standard library or an installed package
 * (site-packages, dist-packages). "<string>" (python -c) is the job's own.
 */
bool ml_frame_is_user_code(const struct ml_frame *fr);

/* A native frame of the interpreter itself: in the python executable or libpython. */
bool ml_frame_is_interpreter(const struct ml_frame *fr);

/* A Python frame of the import machinery (importlib, frozen or not). */
bool ml_frame_is_import(const struct ml_frame *fr);

#endif
