/* HTML report: a self-contained page (timeline, flame graph, leak table) with the chart libraries inlined. */
#define _GNU_SOURCE
#include "report/html.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "attach/allocators.h"
#include "collect/ledger.h"
#include "judge/findings.h"
#include "judge/verdict.h"
#include "lib/grow.h"
#include "report/json.h"
#include "report/stackview.h"

extern const unsigned char ml_html_head[], ml_html_tail[];
extern const unsigned long ml_html_head_len, ml_html_tail_len;

#define TL_MAX 4096

struct html_timeline {
	uint64_t t0_ns;
	size_t n;
	double t[TL_MAX];
	uint64_t seq[TL_MAX]; /* the report's number */
	double bytes[TL_MAX][ML_LAYER_MAX];
	unsigned int layers; /* layers ever active */
};

int html_timeline__new(struct html_timeline **out)
{
	*out = calloc(1, sizeof(struct html_timeline));
	return *out ? 0 : -ENOMEM;
}

void html_timeline__free(struct html_timeline *h)
{
	free(h);
}

int html_timeline__add(struct html_timeline *h, const struct ml_snapshot *s, uint64_t seq)
{
	if (!h->n && !h->t0_ns)
		h->t0_ns = s->now_ns;
	if (h->n == TL_MAX) { /* keep every other point: a long run stays bounded, its whole span kept */
		for (size_t i = 0; i < TL_MAX / 2; i++) {
			h->t[i] = h->t[2 * i];
			h->seq[i] = h->seq[2 * i];
			memcpy(h->bytes[i], h->bytes[2 * i], sizeof(h->bytes[i]));
		}
		h->n = TL_MAX / 2;
	}
	h->t[h->n] = (double)(s->now_ns - h->t0_ns) / 1e9;
	h->seq[h->n] = seq;
	for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
		h->bytes[h->n][l] = (double)s->layers[l].bytes;
		if (s->layers[l].active)
			h->layers |= 1U << l;
	}
	h->n++;
	return 0;
}

/* A flame-graph tree node: children in a growable array, found by name. */
struct node {
	char *name;
	uint64_t value;
	struct node *kids;
	size_t nkids, capkids;
};

static struct node *child(struct node *n, const char *name)
{
	for (size_t i = 0; i < n->nkids; i++)
		if (!strcmp(n->kids[i].name, name))
			return &n->kids[i];
	if (ml_grow(&n->kids, &n->capkids, n->nkids + 1, sizeof(*n->kids)))
		return NULL;
	memset(&n->kids[n->nkids], 0, sizeof(struct node));
	n->kids[n->nkids].name = strdup(name);
	if (!n->kids[n->nkids].name)
		return NULL;
	return &n->kids[n->nkids++];
}

static void tree_json(struct jw *w, const char *key, const struct node *n)
{
	jw_obj_begin(w, key);
	jw_str(w, "name", n->name);
	jw_u64(w, "value", n->value);
	jw_arr_begin(w, "children");
	for (size_t i = 0; i < n->nkids; i++)
		tree_json(w, NULL, &n->kids[i]);
	jw_arr_end(w);
	jw_obj_end(w);
}

static void tree_free(struct node *n)
{
	for (size_t i = 0; i < n->nkids; i++)
		tree_free(&n->kids[i]);
	free(n->kids);
	free(n->name);
}

/* What the page's data is written from, and the first error (the rest is then written with less in it). */
struct page {
	struct jw w;
	const struct html_opts *o;
	const struct html_timeline *tl;
	const struct ml_snapshot *s;
	struct stackview *sv;
	char *buf; /* ML_FRAME_LABEL_MAX bytes for a frame's label */
	int err;
};

/* The per-layer outstanding bytes at every report. */
static void timeline_layers(struct page *p)
{
	const struct html_timeline *tl = p->tl;

	jw_arr_begin(&p->w, "t");
	for (size_t i = 0; i < tl->n; i++)
		jw_double(&p->w, NULL, tl->t[i]);
	jw_arr_end(&p->w);
	jw_obj_begin(&p->w, "layers");
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		if (!(tl->layers & (1U << layer)))
			continue;
		jw_arr_begin(&p->w, ml_layer_name(layer));
		for (size_t i = 0; i < tl->n; i++)
			jw_double(&p->w, NULL, tl->bytes[i][layer]);
		jw_arr_end(&p->w);
	}
	jw_obj_end(&p->w);
}

/* A top stack's label: its first Python frame names it best; else the allocation's caller. */
static char *stack_label(struct page *p, const struct ml_row *row, size_t rank)
{
	const struct ml_frame *const *frames;
	size_t nf = stackview__frames(p->sv, row, &frames, NULL);
	char *label = NULL;

	for (size_t k = 0; k < nf && !label; k++)
		if (frames[k]->kind == ML_FRAME_PYTHON && frames[k]->func &&
		    asprintf(&label, "#%zu %s %s", rank, ml_layer_name(row->key.layer),
			     ml_frame_label(frames[k], p->buf, ML_FRAME_LABEL_MAX)) < 0)
			label = NULL;
	if (!label && asprintf(&label, "#%zu %s %s", rank, ml_layer_name(row->key.layer),
			       nf ? ml_frame_label(frames[0], p->buf, ML_FRAME_LABEL_MAX) : "?") < 0)
		label = NULL;
	return label;
}

/* A top stack's history, on the timeline's grid (folded older samples, and restated ones, leave gaps: null). */
static void timeline_stack(struct page *p, struct verdicts *v, const struct ml_row *row, size_t rank)
{
	const struct html_timeline *tl = p->tl;
	uint64_t sq[ML_HIST_SHORT + ML_HIST_LONG];
	double sb[ML_HIST_SHORT + ML_HIST_LONG];
	size_t n = verdicts__series(v, &row->key, sq, sb, ML_HIST_SHORT + ML_HIST_LONG), k = 0;
	char *label;

	jw_obj_begin(&p->w, NULL);
	label = stack_label(p, row, rank);
	if (!label)
		p->err = -ENOMEM;
	jw_str(&p->w, "label", label ? label : "?");
	free(label);
	jw_arr_begin(&p->w, "values");
	for (size_t i = 0; i < tl->n; i++) {
		while (k < n && sq[k] < tl->seq[i])
			k++;
		if (k < n && sq[k] == tl->seq[i])
			jw_double(&p->w, NULL, sb[k]);
		else
			jw_null(&p->w, NULL);
	}
	jw_arr_end(&p->w);
	jw_obj_end(&p->w);
}

/* The "timeline" object: every layer's bytes and the histories of the top 8 stacks. */
static void timeline_json(struct page *p, const size_t *order, struct verdicts *v)
{
	size_t shown = p->s->nrows < p->o->top ? p->s->nrows : p->o->top, nstack = shown < 8 ? shown : 8;

	jw_obj_begin(&p->w, "timeline");
	timeline_layers(p);
	jw_arr_begin(&p->w, "stacks");
	for (size_t r = 0; r < nstack; r++)
		timeline_stack(p, v, &p->s->rows[order[r]], r + 1);
	jw_arr_end(&p->w);
	jw_obj_end(&p->w);
}

/* Flame graph of every stack: layer, then frames from the outermost caller to the allocation site. */
static void flame_build(struct page *p, struct node *root)
{
	const struct ml_snapshot *s = p->s;

	for (size_t i = 0; i < s->nrows && !p->err; i++) {
		const struct ml_row *row = &s->rows[i];
		const struct ml_frame *const *frames;
		size_t n = stackview__frames(p->sv, row, &frames, NULL);
		struct node *cur = root;
		char pid[32];

		/* With children followed, each process is a subtree of its own. */
		if (ml_snapshot_multi(s, p->o->pid)) {
			snprintf(pid, sizeof(pid), "pid %u", row->key.tgid);
			cur = child(cur, pid);
			if (cur)
				cur->value += row->bytes;
		}
		cur = cur ? child(cur, ml_layer_name(row->key.layer)) : NULL;

		root->value += row->bytes;
		if (cur)
			cur->value += row->bytes;
		for (size_t k = n; cur && k-- > 0;) {
			cur = child(cur, ml_frame_label(frames[k], p->buf, ML_FRAME_LABEL_MAX));
			if (cur)
				cur->value += row->bytes;
		}
		if (!cur)
			p->err = -ENOMEM;
	}
}

/* The "flame" tree, as far as it could be built. */
static void flame_json(struct page *p)
{
	struct node root = {.name = "all"};

	flame_build(p, &root);
	tree_json(&p->w, "flame", &root);
	for (size_t i = 0; i < root.nkids; i++)
		tree_free(&root.kids[i]);
	free(root.kids); /* the root's own name is a literal */
}

/* A frame as the leak table shows it; NULL when out of memory. */
static char *table_frame(const struct ml_frame *fr)
{
	char *line = NULL;
	int rc;

	if (fr->kind == ML_FRAME_PYTHON && !fr->func)
		rc = asprintf(&line, "<unresolved: %s>", ml_frame_unresolved(fr));
	else if (fr->kind == ML_FRAME_PYTHON)
		rc = asprintf(&line, "%s:%d in %s", fr->file ? fr->file : "?", fr->line, fr->func);
	else if (fr->file)
		rc = asprintf(&line, "%s (%s) %s:%d", fr->func ? fr->func : "?", fr->module ? fr->module : "?",
			      fr->file, fr->line);
	else
		rc = asprintf(&line, "%s (%s)", fr->func ? fr->func : "?", fr->module ? fr->module : "?");
	return rc < 0 ? NULL : line;
}

/* One row of the leak table: its verdict, size and age, and its frames. */
static void table_row(struct page *p, const struct ml_row *row, const struct ml_judgement *jj)
{
	const struct ml_snapshot *s = p->s;
	const struct ml_frame *const *frames;
	size_t n = stackview__frames(p->sv, row, &frames, NULL);

	jw_obj_begin(&p->w, NULL);
	jw_i64(&p->w, "pid", row->key.tgid);
	jw_str(&p->w, "layer", ml_layer_name(row->key.layer));
	jw_str(&p->w, "verdict", ml_verdict_name(jj->verdict));
	jw_double(&p->w, "leak_score", jj->leak_score);
	jw_u64(&p->w, "bytes", row->bytes);
	jw_u64(&p->w, "count", row->count);
	jw_double(&p->w, "oldest_age_s",
		  row->oldest_ts_ns <= s->now_ns ? (double)(s->now_ns - row->oldest_ts_ns) / 1e9 : 0);
	jw_double(&p->w, "growth_bytes_per_s", jj->growth_bytes_per_s);
	jw_arr_begin(&p->w, "frames");
	for (size_t k = 0; k < n && !p->err; k++) {
		char *line = table_frame(frames[k]);

		if (!line) {
			p->err = -ENOMEM;
			break;
		}
		jw_str(&p->w, NULL, line);
		free(line);
	}
	jw_arr_end(&p->w);
	jw_obj_end(&p->w);
}

/* The "peak" object: the high-water mark on the timeline's clock, marked on its chart. Absent without one. */
static void peak_json(struct page *p)
{
	const struct ml_peak *pk = findings__peak(p->o->findings);
	double at;

	if (!pk || !pk->total.at_ns)
		return;
	at = pk->total.at_ns > p->tl->t0_ns ? (double)(pk->total.at_ns - p->tl->t0_ns) / 1e9 : 0;
	jw_obj_begin(&p->w, "peak");
	jw_double(&p->w, "at_s", at);
	jw_u64(&p->w, "bytes", pk->total.bytes);
	jw_u64(&p->w, "rss_hwm_bytes", pk->rss_hwm);
	jw_obj_end(&p->w);
}

static int write_data(FILE *f, const struct html_opts *o, const struct html_timeline *tl, const struct ml_snapshot *s,
		      const struct ml_judgement *j, const size_t *order, struct verdicts *v, struct stackview *sv)
{
	struct page p = {.o = o, .tl = tl, .s = s, .sv = sv, .buf = malloc(ML_FRAME_LABEL_MAX)};
	size_t shown = s->nrows < o->top ? s->nrows : o->top;
	int n;

	if (!p.buf)
		return -ENOMEM;
	jw_init(&p.w, f);
	jw_obj_begin(&p.w, NULL);
	jw_i64(&p.w, "pid", o->pid);
	jw_u64(&p.w, "reports", o->reports);
	jw_double(&p.w, "duration_s", tl->n ? tl->t[tl->n - 1] : 0);
	jw_double(&p.w, "time_unix", (double)time(NULL));
	jw_bool(&p.w, "exited", o->exited);
	timeline_json(&p, order, v);
	peak_json(&p);
	flame_json(&p);
	jw_arr_begin(&p.w, "table");
	for (size_t r = 0; r < shown; r++)
		table_row(&p, &s->rows[order[r]], &j[order[r]]);
	jw_arr_end(&p.w);
	jw_obj_end(&p.w);
	free(p.buf);
	n = jw_finish(&p.w);
	return p.err ? p.err : n;
}

int ml_html_write(const char *path, const struct html_opts *o, const struct html_timeline *tl,
		  const struct ml_snapshot *s, const struct ml_judgement *j, const size_t *order, struct verdicts *v,
		  struct stackview *sv)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600), err;
	FILE *f;

	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		return err;
	}
	fwrite(ml_html_head, 1, ml_html_head_len, f);
	err = write_data(f, o, tl, s, j, order, v, sv);
	fwrite(ml_html_tail, 1, ml_html_tail_len, f);
	if (fclose(f) && !err)
		err = -errno;
	return err;
}
