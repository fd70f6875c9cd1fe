/* The one verbosity setting shared by the diagnostics macros. */
#include "lib/log.h"

int ml_log_level;
