/*
 * Unit tests of the step clock (collect/steps.h) on a real BPF hash map, as the probe fills it: counts, pauses and
 * their cap, per-step growth of a layer, forgetting; and the verdicts it drives: a leak that pauses with its job
 * stays growing through the pause, its growth read per step.
 */
#include <bpf/bpf.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "collect/steps.h"
#include "judge/verdict.h"
#include "report/metrics.h"

#define MIB 1048576.0

static void set_count_at(int fd, uint32_t tgid, uint64_t count, uint64_t last_ns)
{
	struct ml_steps v = {.count = count, .last_ns = last_ns};

	bpf_map_update_elem(fd, &tgid, &v, BPF_ANY);
}

/* A count whose last step's time is not known (0): every read without a step is a pause. */
static void set_count(int fd, uint32_t tgid, uint64_t count)
{
	set_count_at(fd, tgid, count, 0);
}

/*
 * Steps of 12 s read every 5 s: a read without a step is no pause while the next step is due (STEPS_LATE periods);
 * once it is overdue, it is.
 */
static void long_steps(int fd)
{
	struct steps *s = NULL;
	const struct step_count *c;
	const uint64_t sec = 1000000000ULL;
	uint64_t now = 100 * sec;
	bool paused = false;

	CHECK_EQ_INT(steps__new(fd, "f", &s), 0, "long steps: new");
	for (int i = 0; i < 12; i++, now += 5 * sec) {
		uint64_t count = 1 + (now - 100 * sec) / (12 * sec);

		set_count_at(fd, 500, count, 100 * sec + (count - 1) * 12 * sec);
		steps__read(s, 5, now, now);
		c = steps__of(s, 500);
		paused |= c && c->pause_s > 0;
	}
	c = steps__of(s, 500);
	CHECK(c && c->count == 5 && !paused && c->paused_s == 0, "12-s steps, a read every 5 s: never a pause");
	for (int i = 0; i < 10; i++, now += 5 * sec)
		steps__read(s, 5, now, now);
	c = steps__of(s, 500);
	CHECK(c && c->pause_s > 0 && c->pause_s < 50, "no step for 50 s: a pause once the step was 36 s overdue");
	steps__forget(s, 500);
	steps__free(s);
}

static void counts_and_pauses(int fd)
{
	struct steps *s = NULL;
	const struct step_count *c;
	double per_step = 0;
	uint64_t n = 0, most = 0;
	int64_t b[ML_LAYER_MAX] = {0};

	CHECK_EQ_INT(steps__new(fd, "train_step", &s), 0, "steps: new");
	CHECK(steps__of(s, 100) == NULL, "no process steps before the first read");
	set_count(fd, 100, 10);
	CHECK_EQ_INT(steps__read(s, 2, 0, 0), 0, "read 1");
	c = steps__of(s, 100);
	CHECK(c && c->count == 10 && c->delta == 10 && c->paused_s == 0, "10 steps, all since the read before");
	b[ML_LAYER_TORCH_CPU] = 10 * (int64_t)MIB;
	steps__keep_bytes(s, 100, b);
	CHECK(!steps__layer_rate(steps__of(s, 100), ML_LAYER_TORCH_CPU, &per_step, &n), "one read: no rate yet");
	set_count(fd, 100, 30);
	CHECK_EQ_INT(steps__read(s, 2, 0, 0), 0, "read 2");
	c = steps__of(s, 100);
	CHECK(c && c->count == 30 && c->delta == 20, "20 more");
	b[ML_LAYER_TORCH_CPU] = 30 * (int64_t)MIB;
	steps__keep_bytes(s, 100, b);
	CHECK(steps__layer_rate(steps__of(s, 100), ML_LAYER_TORCH_CPU, &per_step, &n) && per_step == MIB && n == 20,
	      "torch_cpu: 1 MiB a step over 20 steps");
	CHECK(steps__layer_rate(steps__of(s, 100), ML_LAYER_LIBC, &per_step, &n) && per_step == 0,
	      "libc: nothing a step");
	/* A pause: the clock stands still for up to STEPS_PAUSE_MAX_S, then runs again. */
	for (int i = 0; i < 10; i++)
		steps__read(s, 2, 0, 0);
	c = steps__of(s, 100);
	CHECK(c && c->delta == 0 && c->paused_s == 20 && c->pause_s == 20, "10 reads without a step: 20 s paused");
	for (int i = 0; i < 60; i++)
		steps__read(s, 2, 0, 0);
	c = steps__of(s, 100);
	CHECK(c && c->paused_s == STEPS_PAUSE_MAX_S && c->pause_s == 140, "a pause counts 120 s at most");
	set_count(fd, 100, 31);
	steps__read(s, 2, 0, 0);
	c = steps__of(s, 100);
	CHECK(c && c->delta == 1 && c->pause_s == 0 && c->paused_s == STEPS_PAUSE_MAX_S, "a step ends the pause");
	/* A second process: the node's rate is the sum of theirs. */
	set_count(fd, 200, 5);
	steps__read(s, 2, 0, 0);
	b[ML_LAYER_TORCH_CPU] = 0;
	steps__keep_bytes(s, 200, b);
	set_count(fd, 200, 15);
	steps__read(s, 2, 0, 0);
	b[ML_LAYER_TORCH_CPU] = 5 * (int64_t)MIB;
	steps__keep_bytes(s, 200, b);
	CHECK(steps__total_rate(s, ML_LAYER_TORCH_CPU, &per_step, &n) && per_step == 1.5 * MIB && n == 20,
	      "two processes: 1 MiB and 0.5 MiB a step, 1.5 MiB in all; the most steps spanned 20");
	CHECK(steps__procs(s, &most) == 2 && most == 31, "2 processes, 31 steps the most");
	steps__forget(s, 100);
	uint32_t key = 100;
	struct ml_steps v;
	CHECK(steps__of(s, 100) == NULL && bpf_map_lookup_elem(fd, &key, &v) != 0, "forgotten, here and in the map");
	CHECK(steps__procs(s, &most) == 1 && most == 15, "1 process left");
	steps__free(s);
}

/*
 * A row of tgid that holds bytes, judged at a report every 2 s. With phases, tensor sampling's last on phase closed
 * before each report, 0.8 s before until the epoch's end, then 0.1 s less each time: its samples are timed there, not
 * at the reports the pauses count, and each report of the pause has its phase a little later than the last's.
 */
static const struct ml_judgement *judge_at(struct verdicts *v, struct ml_row *row, int seq, bool phases)
{
	const struct ml_judgement *j = NULL;
	const size_t *order;
	struct ml_snapshot snap = {
	    .rows = row, .nrows = 1, .elapsed_s = 2, .now_ns = (uint64_t)(seq + 1) * 2000000000ULL};

	if (phases)
		verdicts__tensor_phase(v, snap.now_ns - (uint64_t)(seq < 6    ? 8
								   : seq < 14 ? 13 - seq
									      : 0) *
							    100000000ULL);
	return verdicts__update(v, &snap, false, 0, &j, &order) ? NULL : j;
}

/*
 * A leak of 1 MiB a step, 10 steps a report, then a pause of 14 reports (28 s) between epochs: growing before the
 * pause and in every report of it, at 1 MiB a step. The same row without a step clock reads stable in the pause.
 */
static void pause_keeps_a_leak(int fd, bool phases)
{
	struct verdicts *v = NULL, *plain = NULL;
	struct steps *s = NULL;
	struct ml_row row = {.key = {.tgid = 300, .layer = ML_LAYER_TORCH_CPU, .stack_id = 7}}, prow;
	const struct ml_judgement *j = NULL, *pj = NULL;
	bool paused_growing = true, plain_stable = false;
	uint64_t steps = 0;

	CHECK(!verdicts__new(&v) && !verdicts__new(&plain) && !steps__new(fd, "f", &s), "verdicts and steps");
	verdicts__steps(v, s);
	for (int seq = 0; seq < 20; seq++) {
		bool epoch = seq < 6;

		if (epoch)
			steps += 10;
		set_count(fd, 300, steps);
		steps__read(s, 2, 0, 0);
		row.bytes = (uint64_t)(steps * MIB);
		row.count = steps;
		row.records = row.count;
		row.raw_bytes = row.bytes;
		row.oldest_ts_ns = 1;
		prow = row;
		j = judge_at(v, &row, seq, phases);
		pj = judge_at(plain, &prow, seq, phases);
		if (seq == 5)
			CHECK(j && j->verdict == ML_V_GROWING && fabs(j->bytes_per_step - MIB) < 1 &&
				  fabs(j->count_per_step - 1) < 1e-9 && j->steps == 50,
			      "growing at the epoch's end: 1 MiB and 1 allocation a step, over 50 steps");
		if (!epoch && (!j || j->verdict != ML_V_GROWING))
			paused_growing = false;
		if (!epoch && pj && pj->verdict != ML_V_GROWING)
			plain_stable = true;
	}
	CHECK(paused_growing, phases ? "phases: growing in every report of the 28-s pause"
				     : "growing in every report of the 28-s pause");
	CHECK(j && j->bytes_per_step == MIB && j->steps == 50, "still 1 MiB a step over its 50 steps");
	CHECK(plain_stable, "without the step clock the pause reads as a leak that stopped");
	verdicts__free(v);
	verdicts__free(plain);
	steps__free(s);
}

/*
 * Tensor sampling's phases close 0.2 s or 1.6 s before the reports, in turn; the job makes 5 steps a second and keeps
 * 1 MiB a step. A sample holds the bytes of its phase's close: read against the steps then (steps__count_at), the
 * row grows 1 MiB a step exactly; against the report's steps it read 0.97 MiB a step (least squares over the 8).
 */
static void phase_steps(int fd)
{
	const uint64_t sec = 1000000000ULL;
	struct verdicts *v = NULL;
	struct steps *s = NULL;
	struct ml_row row = {.key = {.tgid = 310, .layer = ML_LAYER_TORCH_CPU, .stack_id = 9}, .oldest_ts_ns = 1};
	const struct ml_judgement *j = NULL;
	const struct step_count *c;
	const size_t *order;

	CHECK(!verdicts__new(&v) && !steps__new(fd, "f", &s), "phase steps: verdicts and steps");
	verdicts__steps(v, s);
	set_count_at(fd, 310, 5, 1 * sec); /* a read before the first phase: 5 steps at 1 s, and a first report */
	steps__read(s, 1, 1 * sec, 1 * sec);
	verdicts__update(v, &(struct ml_snapshot){.elapsed_s = 1, .now_ns = 1 * sec}, false, 0, &j, &order);
	for (int k = 1; k <= 8; k++) {
		uint64_t now = (uint64_t)k * 2 * sec, close = now - (k % 2 ? 200000000ULL : 1600000000ULL);
		double at_close = 10.0 * k - 5.0 * (double)(now - close) / (double)sec;
		struct ml_snapshot snap = {.rows = &row, .nrows = 1, .elapsed_s = 2, .now_ns = now};

		set_count_at(fd, 310, (uint64_t)(10 * k), now);
		steps__read(s, 2, now, now);
		row.bytes = (uint64_t)(at_close * MIB);
		row.count = row.records = (uint64_t)at_close;
		row.raw_bytes = row.bytes;
		verdicts__tensor_phase(v, close);
		if (verdicts__update(v, &snap, false, 0, &j, &order))
			j = NULL;
	}
	c = steps__of(s, 310);
	CHECK(c && fabs(steps__count_at(c, 15 * sec) - 75) < 1e-9 && steps__count_at(c, 16 * sec) == 80 &&
		  steps__count_at(c, 99 * sec) == 80 && steps__count_at(c, 0) == 5,
	      "the count at a moment: between two reads, at a read, after the last, before the first kept");
	CHECK(j && fabs(j->bytes_per_step - MIB) < 1 && fabs(j->count_per_step - 1) < 1e-6,
	      "phases closing 0.2 s and 1.6 s before the reports: 1 MiB and one tensor a step, exactly");
	verdicts__free(v);
	steps__forget(s, 310);
	steps__free(s);
}

/*
 * A tensor-sampled row: 10 steps a report, of which 2 or 3 fall in the on phases, in turn; each step keeps 1 MiB.
 * Its weighed bytes swing with the turn (weights 4 and 3.3); its records over the steps made in the phases
 * (struct ml_steps.sampled) read 1 MiB a step exactly.
 */
static void sampled_steps(int fd)
{
	struct verdicts *v = NULL;
	struct steps *s = NULL;
	struct ml_row row = {.key = {.tgid = 320, .layer = ML_LAYER_TORCH_CPU, .stack_id = 11},
			     .oldest_ts_ns = 1,
			     .traits = ML_ROW_WEIGHED};
	const struct ml_judgement *j = NULL;
	const size_t *order;
	uint64_t sampled = 0;

	CHECK(!verdicts__new(&v) && !steps__new(fd, "f", &s), "sampled steps: verdicts and steps");
	verdicts__steps(v, s);
	for (int k = 1; k <= 8; k++) {
		struct ml_steps val = {.count = (uint64_t)(10 * k), .last_ns = (uint64_t)k * 2000000000ULL};
		struct ml_snapshot snap = {.rows = &row, .nrows = 1, .elapsed_s = 2, .now_ns = val.last_ns};
		uint32_t tgid = 320;

		sampled += k % 2 ? 2 : 3;
		val.sampled = sampled;
		bpf_map_update_elem(fd, &tgid, &val, BPF_ANY);
		steps__read(s, 2, snap.now_ns, snap.now_ns);
		row.records = row.weighed_records = sampled;
		row.raw_bytes = row.weighed_raw_bytes = (uint64_t)(sampled * MIB);
		row.count = (uint64_t)(sampled * (k % 2 ? 4.0 : 3.3));
		row.bytes = (uint64_t)(row.count * MIB);
		verdicts__tensor_phase(v, snap.now_ns - 300000000ULL);
		if (verdicts__update(v, &snap, false, 0, &j, &order))
			j = NULL;
	}
	CHECK(j && fabs(j->bytes_per_step - MIB) < 1 && fabs(j->count_per_step - 1) < 1e-6 && j->steps == 18,
	      "records over the steps in the phases: 1 MiB and one tensor a step, over 18 sampled steps");
	verdicts__free(v);
	steps__forget(s, 320);
	steps__free(s);
}

/*
 * Few sampled steps: one a report over six reports, each step's 1 MiB recorded, weighed as 3 MiB. Sampled by whole
 * steps (struct ml_steps: by_step) five read 1 MiB a step from the records; sampled in time, where a phase may cut
 * a step from its tensor, five are too few and the row reads its weighed bytes over all its steps.
 */
static void few_sampled_steps(int fd, bool whole)
{
	struct verdicts *v = NULL;
	struct steps *s = NULL;
	struct ml_row row = {.key = {.tgid = 330, .layer = ML_LAYER_TORCH_CPU, .stack_id = 12},
			     .oldest_ts_ns = 1,
			     .traits = ML_ROW_WEIGHED};
	const struct ml_judgement *j = NULL;
	const size_t *order;

	CHECK(!verdicts__new(&v) && !steps__new(fd, "f", &s), "few sampled steps: verdicts and steps");
	verdicts__steps(v, s);
	for (int k = 1; k <= 6; k++) {
		struct ml_steps val = {.count = (uint64_t)(10 * k),
				       .last_ns = (uint64_t)k * 2000000000ULL,
				       .sampled = (uint64_t)k,
				       .by_step = whole};
		struct ml_snapshot snap = {.rows = &row, .nrows = 1, .elapsed_s = 2, .now_ns = val.last_ns};
		uint32_t tgid = 330;

		bpf_map_update_elem(fd, &tgid, &val, BPF_ANY);
		steps__read(s, 2, snap.now_ns, snap.now_ns);
		row.records = row.weighed_records = (uint64_t)k;
		row.raw_bytes = row.weighed_raw_bytes = (uint64_t)k * MIB;
		row.count = 3 * (uint64_t)k;
		row.bytes = row.count * MIB;
		verdicts__tensor_phase(v, snap.now_ns - 300000000ULL);
		if (verdicts__update(v, &snap, false, 0, &j, &order))
			j = NULL;
	}
	if (whole)
		CHECK(j && fabs(j->bytes_per_step - MIB) < 1 && j->steps == 5,
		      "five steps sampled whole: 1 MiB a step from the records");
	else
		CHECK(j && j->steps > 5 && fabs(j->bytes_per_step - MIB) > MIB / 2,
		      "five steps sampled in time: too few, the weighed bytes over all steps instead");
	verdicts__free(v);
	steps__forget(s, 330);
	steps__free(s);
}

/*
 * Few whole steps sampled a report, unevenly in time (0 to 4 a 5-s report, as under load at 1 in 16): each keeps a
 * 1 MiB tensor, recorded and weighed as 16. Timed, the weighed bytes jump and halt, and the row did not read growing;
 * against the steps sampling saw it rises by one record a step, and is a candidate from the fourth report that saw
 * one (the seventh), through the pause after (no step: the samples restated). A row whose records stay put is not.
 */
static void uneven_whole_steps(int fd, bool leak)
{
	static const int per_report[] = {1, 0, 3, 1, 0, 0, 4, 1, 0, 0, 0, 0};
	struct verdicts *v = NULL;
	struct steps *s = NULL;
	struct ml_row row = {.key = {.tgid = 340, .layer = ML_LAYER_TORCH_CPU, .stack_id = 13},
			     .oldest_ts_ns = 1,
			     .traits = ML_ROW_WEIGHED};
	const struct ml_judgement *j = NULL;
	const size_t *order;
	uint64_t sampled = 0, count = 0, kept = 0;
	int growing = 0, first = 0;

	CHECK(!verdicts__new(&v) && !steps__new(fd, "f", &s), "uneven whole steps: verdicts and steps");
	verdicts__steps(v, s);
	for (int k = 1; k <= 12; k++) {
		uint64_t now = (uint64_t)k * 5000000000ULL;
		bool paused = k > 8;
		struct ml_steps val = {.by_step = 1};
		struct ml_snapshot snap = {.rows = &row, .nrows = 1, .elapsed_s = 5, .now_ns = now};
		uint32_t tgid = 340;

		count += paused ? 0 : 60;
		sampled += (uint64_t)per_report[k - 1];
		kept = leak ? sampled : (sampled ? 1 : 0);
		val.count = count, val.sampled = sampled;
		val.last_ns = paused ? 8 * 5000000000ULL : now;
		bpf_map_update_elem(fd, &tgid, &val, BPF_ANY);
		steps__read(s, 5, now, now);
		row.records = row.weighed_records = kept;
		row.raw_bytes = row.weighed_raw_bytes = kept * (uint64_t)MIB;
		row.count = 16 * kept;
		row.bytes = row.count * (uint64_t)MIB;
		verdicts__tensor_phase(v, now - 300000000ULL);
		if (verdicts__update(v, &snap, false, 0, &j, &order))
			j = NULL;
		if (j && j->verdict == ML_V_GROWING && !first)
			first = k;
		growing += j && j->verdict == ML_V_GROWING;
	}
	if (leak)
		CHECK(
		    first == 7 && growing == 6,
		    "a tensor kept a step: growing from the fourth report with a new sampled step, through the pause");
	else
		CHECK(growing == 0, "one record kept: never growing");
	verdicts__free(v);
	steps__forget(s, 340);
	steps__free(s);
}

/* Prometheus: a rank's per-step growth of torch_cpu, and none for a rank that does not step. */
static void metrics_per_step(int fd)
{
	struct steps *s = NULL;
	struct ml_proc_total procs[2] = {{.tgid = 400}, {.tgid = 401}};
	struct ml_snapshot snap = {.procs = procs, .nprocs = 2};
	struct ml_metric_proc mp[2] = {{400, "0", "main"}, {401, "1", "main"}};
	int64_t b[ML_LAYER_MAX] = {0};
	char *text = NULL;
	size_t len = 0;

	CHECK_EQ_INT(steps__new(fd, "f", &s), 0, "metrics: steps");
	set_count(fd, 400, 100);
	steps__read(s, 2, 0, 0);
	steps__keep_bytes(s, 400, b);
	set_count(fd, 400, 200);
	steps__read(s, 2, 0, 0);
	b[ML_LAYER_TORCH_CPU] = 100 * (int64_t)MIB;
	steps__keep_bytes(s, 400, b);
	procs[0].layers[ML_LAYER_TORCH_CPU] = (struct ml_layer_total){.bytes = 100 * (uint64_t)MIB, .active = true};
	CHECK_EQ_INT(ml_metrics_render(&(struct ml_metrics_in){.s = &snap,
							       .procs = mp,
							       .nprocs = 2,
							       .layers = 1U << ML_LAYER_TORCH_CPU,
							       .overhead_ratio = -1,
							       .steps = s},
				       &text, &len),
		     0, "metrics: rendered");
	CHECK(text && strstr(text, "memleak_ai_growth_bytes_per_step{rank=\"0\",role=\"main\",layer=\"torch_cpu\"} "
				   "1.04858e+06\n"),
	      "rank 0: 1 MiB a step of torch_cpu");
	CHECK(text && !strstr(text, "memleak_ai_growth_bytes_per_step{rank=\"1\""), "rank 1 steps not: no series");
	free(text);
	steps__forget(s, 400);
	steps__free(s);
}

/*
 * The clock sampled by the budget (probed 1/8 of each second): a read's steps stand for the whole interval's, and
 * a read without one is a pause only when the clock was probed long enough in it to see one.
 */
static void clock_sampled(int fd)
{
	struct steps *s = NULL;
	const struct step_count *c;
	const uint64_t sec = 1000000000ULL;
	uint64_t now = 50 * sec, on = now - sec / 2, raw = 4500;

	CHECK_EQ_INT(steps__new(fd, "f", &s), 0, "sampled clock: new");
	set_count_at(fd, 600, raw, now - sec / 8);
	steps__read(s, 5, now, on);
	c = steps__of(s, 600);
	CHECK(c && c->count == 5000 && c->delta == 5000, "4,500 steps seen in 4.5 s probed of 5 stand for 5,000");
	for (int i = 0; i < 4; i++) {
		now += 5 * sec;
		on += 5 * sec / 8;
		raw += 625;
		set_count_at(fd, 600, raw, now - sec / 2);
		steps__read(s, 5, now, on);
	}
	c = steps__of(s, 600);
	CHECK(c && c->count == 25000 && c->delta == 5000 && c->paused_s == 0,
	      "probed 1/8 of the time: 625 seen a read stand for 5,000; no pause between windows");
	now += 5 * sec;
	on += 5 * sec / 8;
	steps__read(s, 5, now, on);
	c = steps__of(s, 600);
	CHECK(c && c->delta == 0 && c->pause_s == 5, "no step in 625 ms probed: a pause (1-ms steps)");
	steps__forget(s, 600);
	/* 2.5-s steps probed 1/32 of the time: 312 ms probed a read cannot tell a pause */
	now += 5 * sec;
	on += 5 * sec;
	set_count_at(fd, 601, 10, now - sec);
	steps__read(s, 5, now, on);
	set_count_at(fd, 601, 12, now + 4 * sec);
	now += 5 * sec;
	on += 5 * sec;
	steps__read(s, 5, now, on);
	now += 10 * sec;
	on += 10 * sec / 32;
	steps__read(s, 10, now, on);
	c = steps__of(s, 601);
	CHECK(c && c->delta == 0 && c->pause_s == 0, "2.5-s steps, 11 s since the last, 312 ms probed: no pause");
	now += 10 * sec;
	on += 10 * sec;
	steps__read(s, 10, now, on);
	c = steps__of(s, 601);
	CHECK(c && c->pause_s == 10, "then 10 s probed without one: a pause");
	steps__forget(s, 601);
	/* reads every 0.5 s, a window of 125 ms a second: a read between windows waits for the next one's steps */
	set_count_at(fd, 602, 1000, now);
	steps__read(s, 0.5, now, on);
	now += sec / 2;
	steps__read(s, 0.5, now, on);
	c = steps__of(s, 602);
	CHECK(c && c->count == 1000 && c->delta == 0 && c->pause_s == 0, "a read with the clock never probed: no step");
	now += sec / 2;
	on += sec / 8;
	set_count_at(fd, 602, 1125, now);
	steps__read(s, 0.5, now, on);
	c = steps__of(s, 602);
	CHECK(c && c->count == 2000 && c->delta == 1000, "125 steps in 125 ms probed stand for both reads' second");
	steps__forget(s, 602);
	steps__free(s);
}

int main(void)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "steps", sizeof(uint32_t), sizeof(struct ml_steps), 64, NULL);

	if (fd < 0) {
		SKIP("steps", "cannot create a BPF hash map (not root?)");
		return SUMMARY("steps");
	}
	counts_and_pauses(fd);
	pause_keeps_a_leak(fd, false);
	pause_keeps_a_leak(fd, true); /* timed at tensor sampling's phases */
	metrics_per_step(fd);
	long_steps(fd);
	phase_steps(fd);
	sampled_steps(fd);
	few_sampled_steps(fd, true);
	few_sampled_steps(fd, false);
	uneven_whole_steps(fd, true);
	uneven_whole_steps(fd, false);
	clock_sampled(fd);
	close(fd);
	return SUMMARY("steps");
}
