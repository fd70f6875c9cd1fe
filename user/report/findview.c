/* The run's findings in a report: the target's exit, the peak, each row's peak and what the exit freed. */
#include "report/findview.h"
#include <inttypes.h>
#include "attach/allocators.h"
#include "report/format.h"
#include "report/json.h"
#include "report/stackview.h"

#define PEAK_ROWS_TEXT 3  /* rows of the peak's moment the text names */
#define PEAK_PROCS_TEXT 8 /* processes whose own peaks the text names (JSON: all) */

static const char exit_note[] = "an exiting interpreter frees objects that a live job would keep: the rows and "
				"verdicts are those of the last report made while the process lived";

static double at_s(uint64_t at_ns, uint64_t start_ns)
{
	return at_ns > start_ns ? (double)(at_ns - start_ns) / 1e9 : 0;
}

void ml_text_exit(FILE *f, const struct ml_exit_view *xv, uint64_t start_ns)
{
	char b[32];

	if (!xv)
		return;
	ml_fmt_bytes(b, sizeof(b), (double)xv->freed_bytes);
	fprintf(f,
		"the target exited: rows and verdicts as of report #%" PRIu64 " (%.1f s), before its exit freed %s\n",
		xv->live_seq, at_s(xv->live_ns, start_ns), b);
	fprintf(f, "  (%s)\n", exit_note);
}

void ml_json_exit(struct jw *w, const struct ml_exit_view *xv, uint64_t start_ns)
{
	if (!xv)
		return;
	jw_obj_begin(w, "exited");
	jw_u64(w, "live_report", xv->live_seq);
	jw_double(w, "live_at_s", at_s(xv->live_ns, start_ns));
	jw_u64(w, "freed_bytes", xv->freed_bytes);
	jw_str(w, "note", exit_note);
	jw_obj_end(w);
}

/* Each layer's peak, "LAYER SIZE at T s", the first after lead and the others after ", "; whether any was. */
static bool text_highs(FILE *f, const struct ml_high *layers, uint64_t start_ns, const char *lead)
{
	const char *sep = lead;
	char b[32];

	for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
		if (!layers[l].at_ns)
			continue;
		ml_fmt_bytes(b, sizeof(b), (double)layers[l].bytes);
		fprintf(f, "%s%s %s at %.1f s", sep, ml_layer_name(l), b, at_s(layers[l].at_ns, start_ns));
		sep = ", ";
	}
	return sep != lead;
}

/* "  pid N: libc 1.0 MiB at 3.0 s, ...; resident high-water mark 80.0 MiB" */
static void text_proc_peak(FILE *f, const struct ml_proc_peak *pp, uint64_t start_ns)
{
	char b[32];

	fprintf(f, "  pid %d:", pp->tgid);
	text_highs(f, pp->layers, start_ns, " ");
	ml_fmt_bytes(b, sizeof(b), (double)pp->rss_hwm);
	fprintf(f, "; resident high-water mark %s\n", pp->rss_hwm ? b : "not read");
}

void ml_text_peak(FILE *f, struct stackview *sv, const struct findings *fd, uint64_t start_ns)
{
	const struct ml_peak *p = findings__peak(fd);
	char b[32];

	if (!p || !p->total.at_ns)
		return;
	ml_fmt_bytes(b, sizeof(b), (double)p->total.bytes);
	fprintf(f, "peak: %s at %.1f s", b, at_s(p->total.at_ns, start_ns));
	if (text_highs(f, p->layers, start_ns, " ("))
		fputc(')', f);
	if (p->rss_hwm) {
		ml_fmt_bytes(b, sizeof(b), (double)p->rss_hwm);
		fprintf(f, "; resident high-water mark %s (pid %d)", b, p->rss_pid);
	}
	fputc('\n', f);
	for (size_t i = 0; p->nprocs > 1 && i < p->nprocs && i < PEAK_PROCS_TEXT; i++)
		text_proc_peak(f, &p->procs[i], start_ns);
	for (size_t i = 0; i < p->nrows && i < PEAK_ROWS_TEXT; i++) {
		ml_fmt_bytes(b, sizeof(b), (double)p->rows[i].bytes);
		fprintf(f, "  at the peak: %s %s at ", ml_layer_name(p->rows[i].key.layer), b);
		ml_put_row_line(f, sv, &p->rows[i]);
		fputc('\n', f);
	}
}

/* The "layers" object of a peak: each layer's highest bytes, count then, and when. */
static void json_highs(struct jw *w, const struct ml_high *layers, uint64_t start_ns)
{
	jw_obj_begin(w, "layers");
	for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
		if (!layers[l].at_ns)
			continue;
		jw_obj_begin(w, ml_layer_name(l));
		jw_u64(w, "bytes", layers[l].bytes);
		jw_u64(w, "count", layers[l].count);
		jw_double(w, "at_s", at_s(layers[l].at_ns, start_ns));
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

static void json_proc_peaks(struct jw *w, const struct ml_peak *p, uint64_t start_ns)
{
	jw_arr_begin(w, "processes");
	for (size_t i = 0; i < p->nprocs; i++) {
		jw_obj_begin(w, NULL);
		jw_i64(w, "pid", p->procs[i].tgid);
		jw_u64(w, "rss_hwm_bytes", p->procs[i].rss_hwm);
		json_highs(w, p->procs[i].layers, start_ns);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

void ml_json_peak(struct jw *w, struct stackview *sv, const struct findings *fd, uint64_t start_ns)
{
	const struct ml_peak *p = findings__peak(fd);

	if (!p || !p->total.at_ns)
		return;
	jw_obj_begin(w, "peak");
	jw_u64(w, "bytes", p->total.bytes);
	jw_u64(w, "count", p->total.count);
	jw_double(w, "at_s", at_s(p->total.at_ns, start_ns));
	json_highs(w, p->layers, start_ns);
	jw_u64(w, "rss_hwm_bytes", p->rss_hwm);
	jw_i64(w, "rss_hwm_pid", p->rss_pid);
	jw_double(w, "keep_ms", (double)p->keep_ns / 1e6);
	json_proc_peaks(w, p, start_ns);
	jw_arr_begin(w, "stacks");
	for (size_t i = 0; i < p->nrows; i++) {
		const struct ml_frame *const *frames;
		size_t n = stackview__frames(sv, &p->rows[i], &frames, NULL);

		jw_obj_begin(w, NULL);
		jw_i64(w, "pid", p->rows[i].key.tgid);
		jw_str(w, "layer", ml_layer_name(p->rows[i].key.layer));
		jw_u64(w, "bytes", p->rows[i].bytes);
		jw_u64(w, "count", p->rows[i].count);
		ml_json_frames(w, frames, n);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

void ml_text_row_peak(FILE *f, const struct findings *fd, const struct ml_row *row, bool exited, uint64_t start_ns)
{
	struct ml_high peak;
	uint64_t freed;
	char b[32];

	if (!findings__row(fd, &row->key, &peak, &freed) || (!exited && peak.bytes <= row->bytes))
		return;
	ml_fmt_bytes(b, sizeof(b), (double)peak.bytes);
	fprintf(f, "    peak %s in %" PRIu64 " %s at %.1f s", b, peak.count,
		row->key.layer == ML_LAYER_RSS ? "pages" : "allocations", at_s(peak.at_ns, start_ns));
	if (exited) {
		ml_fmt_bytes(b, sizeof(b), (double)freed);
		fprintf(f, "; freed at exit %s", b);
	}
	fputc('\n', f);
}

void ml_json_row_peak(struct jw *w, const struct findings *fd, const struct ml_row *row, bool exited, uint64_t start_ns)
{
	struct ml_high peak;
	uint64_t freed;

	if (!findings__row(fd, &row->key, &peak, &freed))
		return;
	jw_u64(w, "peak_bytes", peak.bytes);
	jw_u64(w, "peak_count", peak.count);
	jw_double(w, "peak_at_s", at_s(peak.at_ns, start_ns));
	if (exited)
		jw_u64(w, "freed_at_exit_bytes", freed);
}
