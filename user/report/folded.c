/* The folded format: every stack of the final report on one line, for flamegraph.pl and speedscope. */
#include <inttypes.h>
#include "attach/allocators.h"
#include "report/emit.h"

/* A frame's name in folded output: ';' separates frames and ' ' the weight, so neither may appear inside. */
static void put_folded(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		fputc(*p == ';' || *p == ' ' || *p < 0x20 || *p == 0x7f ? '_' : *p, f);
}

/*
 * Folded stacks of the final report, every stack (not only the top N): layer as the root frame, then the
 * frames from the outermost caller down to the allocation site, and outstanding bytes as the weight.
 */
int ml_emit_folded(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		   uint64_t seq, bool final)
{
	bool multi = ml_snapshot_multi(s, r->o.pid);

	if (!final)
		return 0;
	for (size_t i = 0; i < s->nrows; i++) {
		const struct ml_row *row = &s->rows[i];
		const struct ml_frame *const *frames;
		size_t n = stackview__frames(r->sv, row, &frames, NULL);

		if (multi)
			fprintf(r->out, "pid_%u;", row->key.tgid);
		put_folded(r->out, ml_layer_name(row->key.layer));
		for (size_t k = n; k-- > 0;) {
			fputc(';', r->out);
			put_folded(r->out, ml_frame_label(frames[k], r->label, ML_FRAME_LABEL_MAX));
		}
		fprintf(r->out, " %" PRIu64 "\n", row->bytes);
	}
	return 0;
}
