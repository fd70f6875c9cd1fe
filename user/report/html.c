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
	double bytes[TL_MAX][ML_LAYER_MAX];
	unsigned int layers; /* layers ever active */
};

struct html_timeline *html_timeline__new(void)
{
	return calloc(1, sizeof(struct html_timeline));
}

void html_timeline__free(struct html_timeline *h)
{
	free(h);
}

int html_timeline__add(struct html_timeline *h, const struct ml_snapshot *s)
{
	if (!h->n && !h->t0_ns)
		h->t0_ns = s->now_ns;
	if (h->n == TL_MAX) { /* keep every other point: a long run stays bounded, its whole span kept */
		for (size_t i = 0; i < TL_MAX / 2; i++) {
			h->t[i] = h->t[2 * i];
			memcpy(h->bytes[i], h->bytes[2 * i], sizeof(h->bytes[i]));
		}
		h->n = TL_MAX / 2;
	}
	h->t[h->n] = (double)(s->now_ns - h->t0_ns) / 1e9;
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

static int write_data(FILE *f, const struct html_opts *o, const struct html_timeline *tl, const struct ml_snapshot *s,
		      const struct ml_judgement *j, const size_t *order, struct verdicts *v, struct stackview *sv)
{
	const struct ml_frame *const *frames;
	struct node root = {.name = "all"};
	size_t shown = s->nrows < o->top ? s->nrows : o->top, nstack = shown < 8 ? shown : 8;
	struct jw w;
	char *buf = malloc(ML_FRAME_LABEL_MAX);
	int err = 0, n;

	if (!buf)
		return -ENOMEM;

	jw_init(&w, f);
	jw_obj_begin(&w, NULL);
	jw_i64(&w, "pid", o->pid);
	jw_u64(&w, "reports", o->reports);
	jw_double(&w, "duration_s", tl->n ? tl->t[tl->n - 1] : 0);
	jw_double(&w, "time_unix", (double)time(NULL));
	jw_obj_begin(&w, "timeline");
	jw_arr_begin(&w, "t");
	for (size_t i = 0; i < tl->n; i++)
		jw_double(&w, NULL, tl->t[i]);
	jw_arr_end(&w);
	jw_obj_begin(&w, "layers");
	for (unsigned int layer = 0; layer < ML_LAYER_MAX; layer++) {
		if (!(tl->layers & (1U << layer)))
			continue;
		jw_arr_begin(&w, ml_layer_name(layer));
		for (size_t i = 0; i < tl->n; i++)
			jw_double(&w, NULL, tl->bytes[i][layer]);
		jw_arr_end(&w);
	}
	jw_obj_end(&w);
	/* The top stacks' histories, on the timeline's grid (folded older samples leave gaps: null). */
	jw_arr_begin(&w, "stacks");
	for (size_t r = 0; r < nstack; r++) {
		const struct ml_row *row = &s->rows[order[r]];
		double st[ML_HIST_SHORT + ML_HIST_LONG], sb[ML_HIST_SHORT + ML_HIST_LONG];
		size_t n = verdicts__series(v, &row->key, st, sb, ML_HIST_SHORT + ML_HIST_LONG), k = 0;
		size_t nf = stackview__frames(sv, row, &frames, NULL);
		char *label = NULL;

		jw_obj_begin(&w, NULL);
		/* The stack's first Python frame names it best; else the allocation's caller. */
		for (size_t k = 0; k < nf && !label; k++)
			if (frames[k]->kind == ML_FRAME_PYTHON && frames[k]->func &&
			    asprintf(&label, "#%zu %s %s", r + 1, ml_layer_name(row->key.layer),
				     ml_frame_label(frames[k], buf, ML_FRAME_LABEL_MAX)) < 0)
				label = NULL;
		if (!label && asprintf(&label, "#%zu %s %s", r + 1, ml_layer_name(row->key.layer),
				       nf ? ml_frame_label(frames[0], buf, ML_FRAME_LABEL_MAX) : "?") < 0)
			label = NULL;
		if (!label)
			err = -ENOMEM;
		jw_str(&w, "label", label ? label : "?");
		free(label);
		jw_arr_begin(&w, "values");
		for (size_t i = 0; i < tl->n; i++) {
			while (k < n && st[k] < tl->t[i] - 1e-3)
				k++;
			if (k < n && fabs(st[k] - tl->t[i]) <= 1e-3)
				jw_double(&w, NULL, sb[k]);
			else
				jw_null(&w, NULL);
		}
		jw_arr_end(&w);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);

	/* Flame graph of every stack: layer, then frames from the outermost caller to the allocation site. */
	for (size_t i = 0; i < s->nrows && !err; i++) {
		const struct ml_row *row = &s->rows[i];
		size_t n = stackview__frames(sv, row, &frames, NULL);
		struct node *cur = &root;
		char pid[32];

		/* With children followed, each process is a subtree of its own. */
		if (ml_snapshot_multi(s, o->pid)) {
			snprintf(pid, sizeof(pid), "pid %u", row->key.tgid);
			cur = child(cur, pid);
			if (cur)
				cur->value += row->bytes;
		}
		cur = cur ? child(cur, ml_layer_name(row->key.layer)) : NULL;

		root.value += row->bytes;
		if (cur)
			cur->value += row->bytes;
		for (size_t k = n; cur && k-- > 0;) {
			cur = child(cur, ml_frame_label(frames[k], buf, ML_FRAME_LABEL_MAX));
			if (cur)
				cur->value += row->bytes;
		}
		if (!cur)
			err = -ENOMEM;
	}
	tree_json(&w, "flame", &root);
	for (size_t i = 0; i < root.nkids; i++)
		tree_free(&root.kids[i]);
	free(root.kids); /* the root's own name is a literal */

	jw_arr_begin(&w, "table");
	for (size_t r = 0; r < shown; r++) {
		const struct ml_row *row = &s->rows[order[r]];
		const struct ml_judgement *jj = &j[order[r]];
		size_t n = stackview__frames(sv, row, &frames, NULL);

		jw_obj_begin(&w, NULL);
		jw_i64(&w, "pid", row->key.tgid);
		jw_str(&w, "layer", ml_layer_name(row->key.layer));
		jw_str(&w, "verdict", ml_verdict_name(jj->verdict));
		jw_double(&w, "leak_score", jj->leak_score);
		jw_u64(&w, "bytes", row->bytes);
		jw_u64(&w, "count", row->count);
		jw_double(&w, "oldest_age_s",
			  row->oldest_ts_ns <= s->now_ns ? (double)(s->now_ns - row->oldest_ts_ns) / 1e9 : 0);
		jw_double(&w, "growth_bytes_per_s", jj->growth_bytes_per_s);
		jw_arr_begin(&w, "frames");
		for (size_t k = 0; k < n && !err; k++) {
			const struct ml_frame *fr = frames[k];
			char *line = NULL;
			int rc;

			if (fr->kind == ML_FRAME_PYTHON)
				rc = asprintf(&line, "%s:%d in %s", fr->file ? fr->file : "?", fr->line,
					      fr->func ? fr->func : "?");
			else if (fr->file)
				rc = asprintf(&line, "%s (%s) %s:%d", fr->func ? fr->func : "?",
					      fr->module ? fr->module : "?", fr->file, fr->line);
			else
				rc = asprintf(&line, "%s (%s)", fr->func ? fr->func : "?",
					      fr->module ? fr->module : "?");
			if (rc < 0) {
				err = -ENOMEM;
				break;
			}
			jw_str(&w, NULL, line);
			free(line);
		}
		jw_arr_end(&w);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	free(buf);
	n = jw_finish(&w);
	return err ? err : n;
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
