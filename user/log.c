/* The one verbosity setting shared by the diagnostics macros. */
#include "log.h"

int ml_log_level;
