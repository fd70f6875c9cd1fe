/*
 * libFuzzer target: .eh_frame and .debug_frame come from the target's mapped objects (and debug files), so any
 * bytes must parse or be rejected cleanly, read either way.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "unwind/ehframe.h"

static void check(int rc, struct ml_unwind_table *t)
{
	size_t i;

	if (rc == 0) {
		for (i = 0; i < t->n; i++) {
			if (i && t->rows[i].pc <= t->rows[i - 1].pc)
				abort(); /* rows must be strictly sorted */
			if (ml_unwind_lookup(t, t->rows[i].pc) != &t->rows[i])
				abort();
		}
		ml_unwind_lookup(t, 0);
		ml_unwind_lookup(t, 0x1000);
		ml_unwind_lookup(t, UINT64_MAX);
	}
	ml_unwind_table_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ml_unwind_table t;

	check(ml_ehframe_parse(data, size, 0x1000, &t), &t);
	check(ml_debugframe_parse(data, size, &t), &t);
	return 0;
}
