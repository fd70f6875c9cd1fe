/* The text and JSON of a diff (see diffview.h); diffhtml.c writes its page. */
#include "diff/diffview.h"
#include <errno.h>
#include <math.h>
#include <string.h>
#include "report/format.h"
#include "report/json.h"

/* Frames of a row shown in text: the rest are counted on one line, and JSON has them all. */
#define TEXT_FRAMES 8

void diffview__put_bytes(FILE *f, double b, bool sign)
{
	char buf[32];

	if (!(fabs(b) < 1e18)) { /* a number no run holds, from a file: as it is, not cut to the buffer */
		fprintf(f, sign ? "%+.3g B" : "%.3g B", b);
		return;
	}
	ml_fmt_bytes(buf, sizeof(buf), b);
	fprintf(f, "%s%s", sign && b >= 0 ? "+" : "", buf);
}

static void put_count(FILE *f, double n, bool sign)
{
	char buf[32];

	ml_fmt_count(buf, sizeof(buf), diff_i64(round(n)), sign);
	fputs(buf, f);
}

static void put_run(FILE *f, const char *name, const struct diff_run *r)
{
	char n[32];

	fprintf(f, "%s = ", name);
	ml_put_safe(f, r->path);
	if (r->seq)
		fprintf(f, " (report %llu", (unsigned long long)r->seq);
	else
		fprintf(f, " (%s", r->format);
	ml_fmt_count(n, sizeof(n), diff_i64(r->steps), false);
	if (r->stepped)
		fprintf(f, ", %s steps", n);
	fprintf(f, ", %zu stacks%s)", r->nrows, r->partial ? " listed of more" : "");
}

static const char *unit(const struct diff_result *res)
{
	return res->per_step ? "/step" : "/s";
}

static void text_layers(FILE *f, const struct diff_result *res)
{
	for (size_t i = 0; i < res->nlayers; i++) {
		const struct diff_layer_cmp *c = &res->layers[i];

		fprintf(f, "  ");
		ml_put_safe(f, c->name);
		fprintf(f, ": ");
		diffview__put_bytes(f, c->a_bytes, false);
		fprintf(f, " -> ");
		diffview__put_bytes(f, c->b_bytes, false);
		fprintf(f, " (");
		diffview__put_bytes(f, c->b_bytes - c->a_bytes, true);
		fprintf(f, ")");
		if (res->per_step && c->a && c->b && (c->a->f.stepped || c->b->f.stepped)) {
			fprintf(f, "; growth ");
			diffview__put_bytes(f, c->a->f.per_step, true);
			fprintf(f, "/step -> ");
			diffview__put_bytes(f, c->b->f.per_step, true);
			fprintf(f, "/step");
		}
		fprintf(f, "%s\n", c->over ? "; OVER THE GATE" : "");
	}
}

static void text_item(FILE *f, const struct diff_result *res, const struct diff_item *it, size_t n)
{
	const struct diff_row *row = it->b ? it->b : it->a;
	size_t shown = row->nframes < TEXT_FRAMES ? row->nframes : TEXT_FRAMES;

	fprintf(f, "[%zu] ", n);
	ml_put_safe(f, row->layer);
	fprintf(f, " %s at ", diff__change_name(it->change));
	ml_put_safe(f, row->nframes ? row->frames[row->site] : "(no frames)");
	fprintf(f, ": growth ");
	diffview__put_bytes(f, it->a_rate, true);
	fprintf(f, "%s -> ", unit(res));
	diffview__put_bytes(f, it->b_rate, true);
	fprintf(f, "%s (", unit(res));
	diffview__put_bytes(f, it->b_rate - it->a_rate, true);
	fprintf(f, "%s); held ", unit(res));
	diffview__put_bytes(f, it->a_bytes, false);
	fprintf(f, " -> ");
	diffview__put_bytes(f, it->b_bytes, false);
	fprintf(f, " (");
	diffview__put_bytes(f, it->b_bytes - it->a_bytes, true);
	fprintf(f, "); allocations ");
	put_count(f, it->a ? it->a->f.count : 0, false);
	fprintf(f, " -> ");
	put_count(f, it->b ? it->b->f.count : 0, false);
	fprintf(f, "%s\n", !it->a ? "; not in A" : !it->b ? "; not in B" : "");
	for (size_t i = 0; i < shown; i++) {
		fprintf(f, "    %s ", i ? "  " : "at");
		ml_put_safe(f, row->frames[i]);
		fprintf(f, "\n");
	}
	if (!row->nframes)
		fprintf(f, "    at (no frames)\n");
	if (shown < row->nframes)
		fprintf(f, "      ... %zu more frames (JSON output has them all)\n", row->nframes - shown);
}

static void text_gates(FILE *f, const struct diff_result *res, const struct diffview_opts *o)
{
	if (o->fail_over < 0 && o->fail_over_per_step < 0)
		return;
	fprintf(f, "gate:");
	if (o->fail_over >= 0) {
		fprintf(f, " --fail-over ");
		diffview__put_bytes(f, o->fail_over, false);
	}
	if (o->fail_over_per_step >= 0) {
		fprintf(f, " --fail-over-per-step ");
		diffview__put_bytes(f, o->fail_over_per_step, false);
	}
	if (res->over)
		fprintf(f, ": FAILED, %zu layer%s over it\n", res->over, res->over == 1 ? "" : "s");
	else
		fprintf(f, ": passed\n");
}

int diffview__text(FILE *f, const struct diff_result *res, const struct diffview_opts *o)
{
	char n[32];
	size_t count[DIFF_CHANGES] = {};

	fprintf(f, "memleak-ai diff\n");
	put_run(f, "A", res->a);
	fprintf(f, "\n");
	put_run(f, "B", res->b);
	fprintf(f, "\ngrowth compared per %s", res->per_step ? "step" : "second");
	ml_fmt_count(n, sizeof(n), diff_i64(res->at_steps), false);
	if (res->at_steps)
		fprintf(f, "; bytes held compared at %s steps (the longer run's estimated from its growth per step)",
			n);
	fprintf(f, "\nlayers (A -> B):\n");
	text_layers(f, res);
	for (size_t i = 0; i < res->nitems; i++) {
		const struct diff_item *it = &res->items[i];

		if (!count[it->change]++) {
			size_t all = 0;

			for (size_t k = i; k < res->nitems && res->items[k].change == it->change; k++)
				all++;
			fprintf(f, "\n%s: %zu stack%s\n", diff__change_name(it->change), all, all == 1 ? "" : "s");
		}
		if (count[it->change] <= o->top)
			text_item(f, res, it, count[it->change]);
		else if (count[it->change] == o->top + 1)
			fprintf(f, "... more %s stacks: see -f json\n", diff__change_name(it->change));
	}
	if (!res->nitems)
		fprintf(f, "\nno stack grew, appeared, vanished or shrank\n");
	fprintf(f, "\n%zu stacks in both runs; %zu unchanged\n", res->matched, res->unchanged);
	text_gates(f, res, o);
	return ferror(f) ? -EIO : 0;
}

static void json_run(struct jw *w, const char *key, const struct diff_run *r)
{
	jw_obj_begin(w, key);
	jw_str(w, "path", r->path);
	jw_str(w, "format", r->format);
	if (r->seq)
		jw_u64(w, "report", r->seq);
	if (r->stepped)
		jw_double(w, "steps", r->steps);
	else
		jw_null(w, "steps");
	jw_u64(w, "stacks", r->nrows);
	jw_bool(w, "partial", r->partial);
	jw_obj_end(w);
}

static void json_side(struct jw *w, const char *key, const struct diff_row *row, double bytes, double rate)
{
	if (!row) {
		jw_null(w, key);
		return;
	}
	jw_obj_begin(w, key);
	jw_double(w, "bytes", bytes);
	jw_double(w, "count", row->f.count);
	jw_double(w, "peak_bytes", row->f.peak_bytes);
	jw_double(w, "growth", rate);
	jw_obj_end(w);
}

static void json_item(struct jw *w, const struct diff_item *it)
{
	const struct diff_row *row = it->b ? it->b : it->a;

	jw_obj_begin(w, NULL);
	jw_str(w, "change", diff__change_name(it->change));
	jw_str(w, "layer", row->layer);
	jw_arr_begin(w, "frames");
	for (size_t i = 0; i < row->nframes; i++)
		jw_str(w, NULL, row->frames[i]);
	jw_arr_end(w);
	jw_bool(w, "python", row->python);
	json_side(w, "a", it->a, it->a_bytes, it->a_rate);
	json_side(w, "b", it->b, it->b_bytes, it->b_rate);
	jw_double(w, "bytes_change", it->b_bytes - it->a_bytes);
	jw_double(w, "growth_change", it->b_rate - it->a_rate);
	jw_obj_end(w);
}

static void json_layer_side(struct jw *w, const char *key, const struct diff_layer *l, double bytes)
{
	if (!l) {
		jw_null(w, key);
		return;
	}
	jw_obj_begin(w, key);
	jw_double(w, "bytes", bytes);
	jw_double(w, "count", l->f.count);
	if (l->f.stepped)
		jw_double(w, "per_step", l->f.per_step);
	jw_obj_end(w);
}

/* "layers": each layer of either run, with its bytes, count and growth per step in each, and its gate. */
static void json_layers(struct jw *w, const struct diff_result *res)
{
	jw_obj_begin(w, "layers");
	for (size_t i = 0; i < res->nlayers; i++) {
		const struct diff_layer_cmp *c = &res->layers[i];

		jw_obj_begin(w, c->name);
		json_layer_side(w, "a", c->a, c->a_bytes);
		json_layer_side(w, "b", c->b, c->b_bytes);
		jw_bool(w, "over", c->over);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

static void json_gate(struct jw *w, const char *key, double v)
{
	if (v < 0)
		jw_null(w, key);
	else
		jw_double(w, key, v);
}

int diffview__json(FILE *f, const struct diff_result *res, const struct diffview_opts *o)
{
	struct jw w;

	jw_init(&w, f);
	jw_obj_begin(&w, NULL);
	jw_str(&w, "type", "diff");
	json_run(&w, "a", res->a);
	json_run(&w, "b", res->b);
	jw_str(&w, "growth_per", res->per_step ? "step" : "second");
	if (res->at_steps)
		jw_double(&w, "at_steps", res->at_steps);
	else
		jw_null(&w, "at_steps");
	json_layers(&w, res);
	jw_arr_begin(&w, "stacks");
	for (size_t i = 0; i < res->nitems; i++)
		json_item(&w, &res->items[i]);
	jw_arr_end(&w);
	jw_u64(&w, "matched", res->matched);
	jw_u64(&w, "unchanged", res->unchanged);
	json_gate(&w, "fail_over", o->fail_over);
	json_gate(&w, "fail_over_per_step", o->fail_over_per_step);
	jw_u64(&w, "over", res->over);
	jw_bool(&w, "failed", res->over > 0);
	jw_obj_end(&w);
	fputc('\n', f);
	return jw_finish(&w) ? -ENOMEM : ferror(f) ? -EIO : 0;
}
