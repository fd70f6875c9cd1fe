/* Unit tests of the run's findings: rows' and layers' peaks, the peak's rows, and the final view after an exit. */
#include <errno.h>
#include <string.h>
#include "check.h"
#include "judge/findings.h"

#define S 1000000000ULL /* one second of the snapshots' clock */

/* A snapshot at t seconds of rows (layer, stack id, bytes, traits), layer totals summed from them. */
static struct ml_snapshot snap(struct ml_row *rows, size_t n, uint64_t t)
{
	struct ml_snapshot s = {.now_ns = t * S, .rows = rows, .nrows = n};

	for (size_t i = 0; i < n; i++) {
		s.layers[rows[i].key.layer].bytes += rows[i].bytes;
		s.layers[rows[i].key.layer].count += rows[i].count;
	}
	return s;
}

static struct ml_row row(unsigned int layer, uint64_t id, uint64_t bytes, unsigned int traits)
{
	return (struct ml_row){.key = {.tgid = 7, .layer = (uint8_t)layer, .stack_id = id},
			       .bytes = bytes,
			       .count = bytes / 100,
			       .traits = traits};
}

static void keep(struct findings *f, struct ml_row *rows, size_t n, uint64_t t, enum ml_verdict v)
{
	struct ml_judgement j[8] = {};
	size_t order[8];
	struct ml_snapshot s = snap(rows, n, t);

	for (size_t i = 0; i < n; i++) {
		j[i].verdict = v;
		order[i] = n - 1 - i;
	}
	CHECK_EQ_INT(findings__keep(f, &s, j, order, t), 0, "keep a live report");
}

/* A row's peak is its highest bytes, with the count and time then; a layer's, its exact rows' sum. */
static void peaks(void)
{
	struct findings *f;
	struct ml_row a[2] = {row(ML_LAYER_LIBC, 1, 1000, 0), row(ML_LAYER_LIBC, 2, 500, 0)};
	struct ml_row b[2] = {row(ML_LAYER_LIBC, 1, 3000, 0), row(ML_LAYER_LIBC, 2, 100, 0)};
	struct ml_row c[3] = {row(ML_LAYER_LIBC, 1, 2000, 0), row(ML_LAYER_LIBC, 2, 200, 0),
			      row(ML_LAYER_LIBC, 3, 1 << 30, ML_ROW_WEIGHED)};
	struct ml_high h;
	uint64_t freed;
	const struct ml_peak *p;

	CHECK_EQ_INT(findings__new(&f), 0, "findings: new");
	CHECK(!findings__have(f), "nothing kept before the first report");
	keep(f, a, 2, 1, ML_V_NEW);
	keep(f, b, 2, 2, ML_V_GROWING);
	keep(f, c, 3, 3, ML_V_GROWING);
	CHECK(findings__row(f, &b[0].key, &h, &freed), "row 1 known");
	CHECK_EQ_U64(h.bytes, 3000, "row 1's peak bytes");
	CHECK_EQ_U64(h.count, 30, "row 1's count at its peak");
	CHECK_EQ_U64(h.at_ns, 2 * S, "row 1's peak time");
	CHECK(findings__row(f, &a[1].key, &h, &freed) && h.bytes == 500 && h.at_ns == S, "row 2 peaked first");
	p = findings__peak(f);
	CHECK_EQ_U64(p->layers[ML_LAYER_LIBC].bytes, 3100, "libc's peak: exact rows only (the weighed GiB left out)");
	CHECK_EQ_U64(p->layers[ML_LAYER_LIBC].at_ns, 2 * S, "libc's peak time");
	CHECK_EQ_U64(p->total.bytes, 3100, "the total's peak");
	CHECK(p->nrows == 2 && p->rows[0].key.stack_id == 1 && p->rows[0].bytes == 3000,
	      "the peak's rows: those of the report that set it");
	findings__rss_peak(f, 7, 5000);
	findings__rss_peak(f, 8, 4000);
	CHECK(p->rss_hwm == 5000 && p->rss_pid == 7, "the highest VmHWM and its process");
	findings__free(f);
}

/* The peak's rows are taken again only when the total passes the last taken by the margin (5 %). */
static void margin(void)
{
	struct findings *f;
	struct ml_row a[1] = {row(ML_LAYER_LIBC, 1, 10000, 0)};
	struct ml_row b[2] = {row(ML_LAYER_LIBC, 2, 10400, 0), row(ML_LAYER_LIBC, 1, 100, 0)};
	struct ml_row c[1] = {row(ML_LAYER_LIBC, 3, 10600, 0)};

	findings__new(&f);
	keep(f, a, 1, 1, ML_V_NEW);
	keep(f, b, 2, 2, ML_V_NEW);
	CHECK_EQ_U64(findings__peak(f)->total.bytes, 10500, "a higher total is the peak at once");
	CHECK_EQ_U64(findings__peak(f)->rows[0].key.stack_id, 1, "4 % higher: the rows are not taken again");
	keep(f, c, 1, 3, ML_V_NEW);
	CHECK_EQ_U64(findings__peak(f)->rows[0].key.stack_id, 3, "6 % higher: they are");
	findings__free(f);
}

/* Each process's own peaks, from its exact rows, and its VmHWM. */
static void processes(void)
{
	struct findings *f;
	struct ml_row rows[3] = {row(ML_LAYER_LIBC, 1, 4000, 0), row(ML_LAYER_LIBC, 2, 1000, 0),
				 row(ML_LAYER_LIBC, 3, 9000, ML_ROW_WEIGHED)};
	struct ml_proc_total procs[2] = {{.tgid = 7}, {.tgid = 9}};
	struct ml_judgement j[3] = {};
	size_t order[3] = {0, 1, 2};
	struct ml_snapshot s;
	const struct ml_peak *p;

	rows[1].key.tgid = 9;
	s = snap(rows, 3, 5);
	s.procs = procs;
	s.nprocs = 2;
	findings__new(&f);
	CHECK_EQ_INT(findings__keep(f, &s, j, order, 1), 0, "keep two processes' report");
	findings__rss_peak(f, 9, 123456);
	p = findings__peak(f);
	CHECK_EQ_U64(p->nprocs, 2, "two processes' peaks");
	CHECK(p->procs[0].tgid == 7 && p->procs[0].layers[ML_LAYER_LIBC].bytes == 4000,
	      "pid 7: its exact row only (its weighed one left out)");
	CHECK(p->procs[1].tgid == 9 && p->procs[1].layers[ML_LAYER_LIBC].bytes == 1000 && p->procs[1].rss_hwm == 123456,
	      "pid 9: its row and its VmHWM");
	findings__free(f);
}

/* After the exit: the last live report, the counters of now, what the exit freed of each row and in all. */
static void at_exit(void)
{
	struct findings *f;
	struct ml_row live[2] = {row(ML_LAYER_TORCH_CUDA, 1, 8000, 0), row(ML_LAYER_CUDA, 2, 9000, 0)};
	struct ml_row now[1] = {row(ML_LAYER_CUDA, 2, 2000, 0)};
	struct ml_snapshot s = snap(now, 1, 9);
	struct ml_exit_view xv;
	struct ml_high h;
	uint64_t freed;

	findings__new(&f);
	CHECK_EQ_INT(findings__at_exit(f, &s, &xv), -ENOENT, "nothing kept: no view");
	keep(f, live, 2, 4, ML_V_GROWING);
	s.stats[0] = 42;
	CHECK_EQ_INT(findings__at_exit(f, &s, &xv), 0, "the view after the exit");
	CHECK(xv.s.nrows == 2 && xv.s.rows[0].bytes == 8000 && xv.j[0].verdict == ML_V_GROWING,
	      "the live rows and verdicts");
	CHECK(xv.order[0] == 1 && xv.order[1] == 0, "their order");
	CHECK_EQ_U64(xv.s.stats[0], 0, "the live report's counters, not now's: its totals and counters agree");
	CHECK_EQ_U64(xv.live_seq, 4, "the report it comes from");
	CHECK_EQ_U64(xv.freed_bytes, 7000, "freed: the total's layers (cuda: 9000 - 2000; torch_cuda is within it)");
	CHECK(findings__row(f, &live[0].key, &h, &freed) && freed == 8000, "a row gone whole: all of it freed");
	CHECK(findings__row(f, &live[1].key, &h, &freed) && freed == 7000, "a row partly left");
	findings__free(f);
}

int main(void)
{
	peaks();
	margin();
	processes();
	at_exit();
	return SUMMARY("findings");
}
