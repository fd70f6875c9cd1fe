/*
 * The reporter's options: its format and what it shows. Apart from report.h so that the format writers
 * (emit.h) read them without depending on report.c, which calls them.
 */
#ifndef ML_REPORTOPTS_H
#define ML_REPORTOPTS_H

#include <stdbool.h>
#include <stdint.h>

enum ml_format { ML_FMT_TEXT, ML_FMT_JSON, ML_FMT_FOLDED, ML_FMT_PPROF };

struct report_opts {
	enum ml_format format;
	uint32_t top;
	int pid;
	bool native; /* text: every native frame, not only those outside the interpreter */
};

#endif
