/* Unit tests of the leak verdicts: growing, stable, shrinking, churn and warm-up on known series. */
#include <string.h>
#include "check.h"
#include "judge/verdict.h"

static struct ml_judgement judge(const double *b, size_t n, double oldest, double interval)
{
	double t[32];

	for (size_t i = 0; i < n; i++)
		t[i] = (double)i * interval;
	return ml_judge(t, b, n, oldest, interval);
}

int main(void)
{
	struct ml_judgement j;
	const double leak[] = { 4096, 8192, 12288, 16384, 20480, 24576, 28672 };
	const double leak_noisy[] = { 1000, 3000, 2800, 5000, 7000, 9000, 11000, 13000 };
	const double flat[] = { 50000, 50000, 50000, 50000, 50000, 50000 };
	const double cache[] = { 16384, 32768, 49152, 65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536, 65536 };
	const double wobble[] = { 5000, 7000, 4000, 6000, 5000, 7000, 4000 };
	const double down[] = { 9000, 8000, 7000, 6000, 5000 };

	j = judge(leak, 3, 10, 1);
	CHECK(j.verdict == ML_V_NEW, "three reports: too early to call");
	j = judge(leak, 7, 10, 1);
	CHECK(j.verdict == ML_V_GROWING, "one block per interval: growing");
	CHECK(j.growth_bytes_per_s > 4095 && j.growth_bytes_per_s < 4097, "rate 4096 B/s");
	CHECK(j.growth_per_interval > 4095 && j.growth_per_interval < 4097, "4096 B per interval");
	CHECK(j.monotonic == 1.0 && j.intervals == 6, "evidence: 6 intervals, all up");
	CHECK(j.leak_score > 0.9 && j.leak_score <= 1.0, "strong candidate");
	j = judge(leak_noisy, 8, 10, 1);
	CHECK(j.verdict == ML_V_GROWING && j.leak_score < 0.95, "one dip among seven rises: still growing, lower score");
	j = judge(flat, 6, 10, 1);
	CHECK(j.verdict == ML_V_STABLE && j.leak_score == 0, "flat: stable");
	j = judge(cache, 12, 10, 1);
	CHECK(j.verdict == ML_V_STABLE, "a cache that filled up and stopped: stable, not a leak");
	j = judge(wobble, 7, 10, 1);
	CHECK(j.verdict == ML_V_STABLE, "ups and downs around a level: stable");
	j = judge(wobble, 7, 0.5, 1);
	CHECK(j.verdict == ML_V_CHURN, "nothing older than two reports: churn");
	j = judge(down, 5, 10, 1);
	CHECK(j.verdict == ML_V_SHRINKING && j.growth_bytes_per_s < 0, "shrinking");
	CHECK(!strcmp(ml_verdict_name(ML_V_GROWING), "growing") && !strcmp(ml_verdict_name(ML_V_CHURN), "churn"), "names");
	CHECK(!strcmp(ml_verdict_name(ML_V_IMPORT), "import"), "import's name");

	/* Rows made while importing: their own verdict, below every leak candidate whatever their size. */
	{
		struct verdicts *v = verdicts__new();
		struct ml_row rows[3] = {
			{ .key = { .tgid = 1, .stack_id = 1 }, .bytes = 1 << 20, .count = 1, .traits = ML_ROW_IMPORT },
			{ .key = { .tgid = 1, .stack_id = 2 }, .bytes = 4096, .count = 1 },
			{ .key = { .tgid = 1, .stack_id = 3 }, .bytes = 100, .count = 1 },
		};
		struct ml_snapshot s = { .rows = rows, .nrows = 3, .elapsed_s = 1 };
		const struct ml_judgement *jv = NULL;
		const size_t *order = NULL;
		int err = 0;

		for (int i = 0; i < 8 && !err; i++) {
			s.now_ns = (uint64_t)(i + 1) * 1000000000ULL;
			rows[0].bytes += 1 << 20; /* the import grows while it runs */
			rows[1].bytes += 4096;    /* a leak */
			err = verdicts__update(v, &s, false, &jv, &order);
		}
		CHECK(!err && jv[0].verdict == ML_V_IMPORT && jv[0].leak_score == 0, "an import stack: verdict import");
		CHECK(!err && jv[1].verdict == ML_V_GROWING, "the leak: growing");
		CHECK(!err && order[0] == 1 && order[1] == 0 && order[2] == 2,
		      "the leak first, then by bytes: the import before the small stable row");
		verdicts__free(v);
	}
	return SUMMARY("verdict");
}
