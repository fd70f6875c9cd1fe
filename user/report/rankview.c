/* Ranks that stand apart (see rankview.h). */
#include "report/rankview.h"
#include <stdint.h>
#include "attach/allocators.h"
#include "judge/ranks.h"
#include "report/format.h"
#include "report/json.h"
#include "report/stackview.h"

/* The row an apart rank is named at, or NULL. */
static const struct ml_row *row_of(const struct ml_rank_view *v, const struct ml_snapshot *s, size_t i)
{
	return v->row && v->row[i] < s->nrows ? &s->rows[v->row[i]] : NULL;
}

static void put_growth(FILE *f, double g, bool per_step)
{
	char b[32];

	ml_fmt_bytes(b, sizeof(b), g);
	fprintf(f, "%s%s/%s", g >= 0 ? "+" : "", b, per_step ? "step" : "s");
}

void ml_text_ranks(struct reporter *r, const struct ml_snapshot *s)
{
	const struct ml_rank_view *v = r->ranks;
	char b[32];

	for (size_t i = 0; v && i < v->n; i++) {
		const struct rank_apart *a = &v->apart[i];
		const struct ml_row *row = row_of(v, s, i);

		fputs("rank ", r->out);
		ml_put_safe(r->out, a->rank);
		if (a->job) {
			fputs(" of job ", r->out);
			ml_put_safe(r->out, a->job);
		}
		ml_fmt_bytes(b, sizeof(b), (double)a->bytes - a->median_bytes);
		fprintf(r->out, ": +%s %s over the other %zu ranks' median (pid %d), growing ", b,
			ml_layer_name(a->layer), a->others, a->pid);
		put_growth(r->out, a->growth, a->per_step);
		fputs(" against their ", r->out);
		put_growth(r->out, a->median_growth, a->per_step);
		if (row) {
			fputs(", at ", r->out);
			ml_put_row_line(r->out, r->sv, row);
		}
		fputc('\n', r->out);
	}
}

/* Where an apart rank is named: the row's place among the shown stacks (or null), and its own Python line. */
static void json_site(struct jw *w, struct reporter *r, const struct ml_row *row, const struct ml_snapshot *s,
		      const size_t *order, size_t shown)
{
	const struct ml_frame *const *frames;
	size_t n = row ? stackview__frames(r->sv, row, &frames, NULL) : 0, at = SIZE_MAX;

	for (size_t k = 0; row && k < shown; k++)
		if (&s->rows[order[k]] == row)
			at = k;
	if (at == SIZE_MAX)
		jw_null(w, "stack");
	else
		jw_u64(w, "stack", at);
	for (size_t k = 0; k < n; k++)
		if (ml_frame_is_user_code(frames[k])) {
			jw_obj_begin(w, "at");
			jw_str(w, "file", frames[k]->file);
			jw_i64(w, "line", frames[k]->line);
			jw_str(w, "func", frames[k]->func);
			jw_obj_end(w);
			return;
		}
	jw_null(w, "at");
}

void ml_json_ranks(struct jw *w, struct reporter *r, const struct ml_snapshot *s, const size_t *order, size_t shown)
{
	const struct ml_rank_view *v = r->ranks;

	jw_obj_begin(w, "ranks");
	jw_u64(w, "compared", v ? v->compared : 0);
	jw_arr_begin(w, "apart");
	for (size_t i = 0; v && i < v->n; i++) {
		const struct rank_apart *a = &v->apart[i];

		jw_obj_begin(w, NULL);
		jw_str(w, "job", a->job);
		jw_str(w, "rank", a->rank);
		jw_i64(w, "pid", a->pid);
		jw_str(w, "layer", ml_layer_name(a->layer));
		jw_u64(w, "bytes", a->bytes);
		jw_double(w, "median_bytes", a->median_bytes);
		jw_double(w, "over_bytes", (double)a->bytes - a->median_bytes);
		jw_u64(w, "others", a->others);
		jw_double(w, "growth", a->growth);
		jw_double(w, "median_growth", a->median_growth);
		jw_str(w, "per", a->per_step ? "step" : "second");
		json_site(w, r, row_of(v, s, i), s, order, shown);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}
