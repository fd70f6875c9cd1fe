/* HTML report: a self-contained page (timeline, flame graph, leak table) with the chart libraries inlined. */
#ifndef ML_HTML_H
#define ML_HTML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ml_snapshot;
struct ml_judgement;
struct verdicts;
struct ledger;
struct stackview;
struct symbolizer;
struct html_timeline;
struct findings;

/* Per-layer outstanding bytes at every report; bounded (halved when full). */
int html_timeline__new(struct html_timeline **out);
void html_timeline__free(struct html_timeline *h);
int html_timeline__add(struct html_timeline *h, const struct ml_snapshot *s, uint64_t seq); /* seq: report's */

struct html_opts {
	int pid;
	uint32_t top;
	uint64_t reports;
	const struct findings *findings; /* the peak marked on the timeline, or NULL */
	bool exited;			 /* the target exited: the rows are its last live report's */
};

/* Write the page for the final snapshot to path (created 0600, never through a symlink). 0 or -errno. */
int ml_html_write(const char *path, const struct html_opts *o, const struct html_timeline *tl,
		  const struct ml_snapshot *s, const struct ml_judgement *j, const size_t *order, struct verdicts *v,
		  struct stackview *sv);

#endif
