/* Unit tests of the ranks that diverge (judge/ranks.h): a rank keeping 1 MiB more a step, equal ranks, jobs apart. */
#include <math.h>
#include <stdlib.h>
#include "check.h"
#include "collect/snapshot.h"
#include "judge/ranks.h"
#include "report/metrics.h"

#define MIB (1ULL << 20)

static const char *const names[] = {"0", "1", "2", "3", "4", "5", "6", "7"};

/* Four ranks of a job: 50 MiB of torch_cpu each, give or take noise; rank 3 keeps `extra` bytes more a step. */
static void four_ranks(struct rank_in *in, int report, uint64_t extra, const char *job)
{
	for (int k = 0; k < 4; k++) {
		uint64_t steps = (uint64_t)report * 10;

		in[k] = (struct rank_in){.job = job, .rank = names[k], .pid = 100 + k, .steps = steps};
		in[k].bytes[ML_LAYER_TORCH_CPU] = 50 * MIB + (uint64_t)((k * 7 + report * 3) % 5) * MIB;
		in[k].bytes[ML_LAYER_LIBC] = 10 * MIB;
		if (k == 3)
			in[k].bytes[ML_LAYER_TORCH_CPU] += steps * extra;
	}
}

static void one_apart(void)
{
	struct ranks *r = NULL;
	struct rank_in in[4];
	const struct rank_apart *a = NULL;
	size_t n = 0;
	int first = -1;

	CHECK_EQ_INT(ranks__new(&r), 0, "ranks: new");
	for (int rep = 1; rep <= 6; rep++) {
		four_ranks(in, rep, MIB, "job");
		CHECK_EQ_INT(ranks__update(r, in, 4, rep * 2.0, &a, &n), 0, "ranks: update");
		if (first < 0 && n)
			first = rep;
	}
	CHECK_EQ_INT(ranks__compared(r), 4, "four ranks compared");
	CHECK(n == 1 && a && !strcmp(a->rank, "3") && a->layer == ML_LAYER_TORCH_CPU && a->others == 3 && a->pid == 103,
	      "rank 3, torch_cpu, against the other three: the one apart");
	CHECK(n == 1 && a->per_step && fabs(a->growth - (double)MIB) < 1e-6 && fabs(a->median_growth) < 0.2 * MIB,
	      "it grows 1 MiB a step more than the others' median");
	CHECK(n == 1 && a->bytes - a->median_bytes > 55.0 * MIB, "60 steps on: 60 MiB over the median");
	CHECK(first == 2, "named at the second report (20 MiB over the median)");
	ranks__free(r);
}

static void none_apart(void)
{
	struct ranks *r = NULL;
	struct rank_in in[8];
	const struct rank_apart *a = NULL;
	size_t n = 0, named = 0;

	CHECK_EQ_INT(ranks__new(&r), 0, "ranks: new");
	for (int rep = 1; rep <= 10; rep++) {
		four_ranks(in, rep, 0, "job");
		ranks__update(r, in, 4, rep * 2.0, &a, &n);
		named += n;
	}
	CHECK_EQ_INT(named, 0, "four equal ranks (noise of 4 MiB): none named in 10 reports");
	/* Two ranks have no median to stand apart from. */
	four_ranks(in, 1, 0, "job");
	in[1].bytes[ML_LAYER_TORCH_CPU] = 4096 * MIB;
	ranks__update(r, in, 2, 30, &a, &n);
	CHECK(n == 0 && ranks__compared(r) == 0, "two ranks: not compared");
	/* Two jobs of three ranks: each compared with its own. */
	four_ranks(in, 1, 0, "a");
	four_ranks(in + 3, 1, 0, "b");
	in[3].rank = names[0];
	in[0].bytes[ML_LAYER_TORCH_CPU] = 200 * MIB; /* job a's rank 0 */
	ranks__update(r, in, 6, 32, &a, &n);
	CHECK(ranks__compared(r) == 6 && n == 1 && !strcmp(a->job, "a") && !strcmp(a->rank, "0") && a->others == 2,
	      "two jobs: job a's rank 0 apart from its two, job b's ranks among themselves");
	ranks__free(r);
}

/* Prometheus: the apart rank's bytes over the median, by rank and layer. */
static void metrics_apart(void)
{
	struct rank_apart a = {
	    .rank = "3", .layer = ML_LAYER_TORCH_CPU, .bytes = 80 * MIB, .median_bytes = 20.0 * MIB, .others = 3};
	struct ml_rank_view v = {.apart = &a, .n = 1, .compared = 4};
	struct ml_snapshot snap = {0};
	char *text = NULL;
	size_t len = 0;

	CHECK_EQ_INT(
	    ml_metrics_render(&(struct ml_metrics_in){.s = &snap, .overhead_ratio = -1, .ranks = &v}, &text, &len), 0,
	    "metrics: rendered");
	CHECK(text &&
		  strstr(text,
			 "memleak_ai_rank_over_median_bytes{job=\"\",rank=\"3\",layer=\"torch_cpu\"} 6.29146e+07\n"),
	      "metrics: rank 3's 60 MiB over the median");
	free(text);
}

int main(void)
{
	metrics_apart();
	one_apart();
	none_apart();
	return SUMMARY("ranks");
}
