/* A diff as one self-contained HTML page: the runs, the layers and a table per change; no script, no fetch. */
#include <errno.h>
#include <string.h>
#include "diff/diffview.h"
#include "report/format.h"

/* Text from a file as HTML: markup characters as entities, control bytes and invalid UTF-8 as U+FFFD. */
static void html_put(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int n = ml_utf8_len(p);

		if (*p == '&')
			fputs("&amp;", f);
		else if (*p == '<')
			fputs("&lt;", f);
		else if (*p == '>')
			fputs("&gt;", f);
		else if (*p == '"')
			fputs("&quot;", f);
		else if (*p == '\'')
			fputs("&#39;", f);
		else if (!n || *p < 0x20 || *p == 0x7f || (n == 2 && p[0] == 0xc2 && p[1] < 0xa0))
			fputs("&#xfffd;", f);
		else
			fwrite(p, 1, (size_t)n, f);
		p += n ? n : 1;
	}
}

static void html_run(FILE *f, const char *name, const struct diff_run *r)
{
	fprintf(f, "<li><b>%s</b>: <code>", name);
	html_put(f, r->path);
	fprintf(f, "</code> (%s", r->format);
	if (r->seq)
		fprintf(f, ", report %llu", (unsigned long long)r->seq);
	if (r->stepped)
		fprintf(f, ", %.0f steps", r->steps);
	fprintf(f, ", %zu stacks)</li>\n", r->nrows);
}

/* One row per layer of either run: bytes held in each, and growth per step where they count steps. */
static void html_layers(FILE *f, const struct diff_result *res)
{
	fprintf(f, "<h2>Layers</h2>\n<table><tr><th>layer</th><th>held A</th><th>held B</th><th>growth A</th>"
		   "<th>growth B</th></tr>\n");
	for (size_t i = 0; i < res->nlayers; i++) {
		const struct diff_layer_cmp *c = &res->layers[i];
		const struct diff_layer *l[2] = {c->a, c->b};

		fprintf(f, "<tr%s><td>", c->over ? " class=over" : "");
		html_put(f, c->name);
		fprintf(f, "</td><td>");
		diffview__put_bytes(f, c->a_bytes, false);
		fprintf(f, "</td><td>");
		diffview__put_bytes(f, c->b_bytes, false);
		for (int s = 0; s < 2; s++) {
			fprintf(f, "</td><td>");
			if (l[s] && l[s]->f.stepped) {
				diffview__put_bytes(f, l[s]->f.per_step, true);
				fprintf(f, "/step");
			}
		}
		fprintf(f, "</td></tr>\n");
	}
	fprintf(f, "</table>\n");
}

static void html_item(FILE *f, const struct diff_result *res, const struct diff_item *it)
{
	const struct diff_row *row = it->b ? it->b : it->a;
	const char *u = res->per_step ? "/step" : "/s";

	fprintf(f, "<tr><td>");
	html_put(f, row->layer);
	fprintf(f, "</td><td>");
	diffview__put_bytes(f, it->a_rate, true);
	fprintf(f, "%s</td><td>", u);
	diffview__put_bytes(f, it->b_rate, true);
	fprintf(f, "%s</td><td>", u);
	diffview__put_bytes(f, it->a_bytes, false);
	fprintf(f, " (%.0f)</td><td>", it->a ? it->a->f.count : 0);
	diffview__put_bytes(f, it->b_bytes, false);
	fprintf(f, " (%.0f)</td><td><ol>", it->b ? it->b->f.count : 0);
	for (size_t i = 0; i < row->nframes; i++) {
		fprintf(f, i == row->site ? "<li><b>" : "<li>"); /* the row's site: the job's own line */
		html_put(f, row->frames[i]);
		fprintf(f, i == row->site ? "</b></li>" : "</li>");
	}
	fprintf(f, "</ol></td></tr>\n");
}

static void html_table(FILE *f, const struct diff_result *res, enum diff_change c, size_t top)
{
	size_t n = 0, shown = 0;

	for (size_t i = 0; i < res->nitems; i++)
		n += res->items[i].change == c;
	if (!n)
		return;
	fprintf(f,
		"<h2>%s: %zu stack%s</h2>\n<table><tr><th>layer</th><th>growth A</th><th>growth B</th>"
		"<th>held A (allocations)</th><th>held B (allocations)</th><th>frames, innermost first</th></tr>\n",
		diff__change_name(c), n, n == 1 ? "" : "s");
	for (size_t i = 0; i < res->nitems && shown < top; i++)
		if (res->items[i].change == c) {
			html_item(f, res, &res->items[i]);
			shown++;
		}
	fprintf(f, "</table>\n");
	if (shown < n)
		fprintf(f, "<p>%zu more: see <code>-f json</code>.</p>\n", n - shown);
}

int diffview__html(FILE *f, const struct diff_result *res, const struct diffview_opts *o)
{
	fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>memleak-ai diff</title>\n<style>"
		   "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
		   "padding:2px 6px;vertical-align:top}ol{margin:0;padding-left:1.5em;font-family:monospace}"
		   ".over{background:#fdd}</style></head><body>\n<h1>memleak-ai diff</h1>\n<ul>\n");
	html_run(f, "A", res->a);
	html_run(f, "B", res->b);
	fprintf(f, "</ul>\n<p>Growth compared per %s.", res->per_step ? "step" : "second");
	if (res->at_steps)
		fprintf(f, " Bytes held compared at %.0f steps.", res->at_steps);
	fprintf(f, " %zu stacks in both runs, %zu unchanged.", res->matched, res->unchanged);
	if (o->fail_over >= 0 || o->fail_over_per_step >= 0)
		fprintf(f, " Gate: <b>%s</b> (%zu over).", res->over ? "FAILED" : "passed", res->over);
	fprintf(f, "</p>\n");
	html_layers(f, res);
	for (int c = 0; c < DIFF_CHANGES; c++)
		html_table(f, res, (enum diff_change)c, o->top);
	if (!res->nitems)
		fprintf(f, "<p>No stack grew, appeared, vanished or shrank.</p>\n");
	fprintf(f, "</body></html>\n");
	return ferror(f) ? -EIO : 0;
}
