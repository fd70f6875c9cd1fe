/*
 * Unit tests of the budget's shed decisions (session/shed.c): synthetic samples under and over the budget, which
 * step goes next, and how many halvings at once.
 */
#include "check.h"
#include "session/shed.h"

/* A sample in heap-growth mode with a 2 % budget: total pct and the parts named, the rest "other". */
static struct ml_overhead info(double pct, double libc, double torch_cpu, unsigned int windows_one_in)
{
	struct ml_overhead in = {.pct = pct, .budget_pct = 2, .heap_mode = true, .heap_window_one_in = windows_one_in};

	in.layer_pct[ML_LAYER_LIBC] = libc;
	in.layer_pct[ML_LAYER_TORCH_CPU] = torch_cpu;
	return in;
}

static void under_and_over(void)
{
	struct ml_overhead in = info(1.5, 0.5, 0.5, 8);
	struct shed_sample s = {.info = &in, .rss_cost = true, .rss_pct = 0.4};

	CHECK_EQ_INT(shed__next(&s), ML_SHED_N, "1.5 % under a 2 % budget: nothing shed");
	in = info(4.0, 0.2, 0.3, 8);
	s.rss_pct = 3.0;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_RSS_SAMPLING, "4 %, the rss layer 3 % of it: its sampling doubles");
	CHECK_EQ_INT(shed__halvings(&s, s.rss_pct, RSS_SHED_DOUBLINGS), 2,
		     "2 % over: two doublings save 2.25 % of the rss layer's 3 %, one would save 1.5 %");
	in.rss_doublings = RSS_SHED_DOUBLINGS;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_RSS_FAULTS, "rss sampled down to one page in 64: its faults go next");
	in.shed = 1U << ML_SHED_RSS_FAULTS, s.rss_cost = false, s.rss_pct = 0;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_N, "the rss layer gone and the rest kept: nothing left to shed");
}

/*
 * A sample taken while the C heap's windows cost most (libc 7.8 % of 10.1 %, the DataLoader workers' run of
 * dataloader_cow.py): the windows shorten themselves, so the cost the rss layer's sampling must cover is what is
 * over the budget less them, 0.3 %, and one doubling does it. Counting them in doubled it six times at once.
 */
static void windows_not_covered_by_rss(void)
{
	struct ml_overhead in = info(10.1, 7.8, 0.1, 8);
	struct shed_sample s = {.info = &in, .rss_cost = true, .rss_pct = 1.7};

	CHECK_EQ_INT(shed__next(&s), ML_SHED_RSS_SAMPLING, "10.1 %, windows 7.8 %, rss 1.7 %: rss sampling doubles");
	CHECK_EQ_INT(shed__halvings(&s, s.rss_pct, RSS_SHED_DOUBLINGS), 1,
		     "one doubling: the windows' 7.8 % is not the rss layer's to cover");
	in.heap_window_one_in = 0;
	CHECK_EQ_INT(shed__halvings(&s, s.rss_pct, RSS_SHED_DOUBLINGS), RSS_SHED_DOUBLINGS,
		     "without windows the C heap's 7.8 % counts: every doubling left, and still over");
	in = info(8.9, 6.9, 0.1, 8);
	in.shed = 1U << ML_SHED_TORCH_CPU_SAMPLING, in.tensor_halvings = TENSOR_SHED_HALVINGS;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_N, "8.9 %, of which windows 6.9 % and tensors 0.1 % kept: 1.9 %, none");
}

/* Tensor sampling goes first whenever over; the tensor layers' probes only at five times the budget. */
static void tensors(void)
{
	struct ml_overhead in = info(3.0, 0.2, 2.0, 8);
	struct shed_sample s = {.info = &in, .tensor_sampling = true, .alloc_side_pct = 1.2};

	CHECK_EQ_INT(shed__next(&s), ML_SHED_TORCH_CPU_SAMPLING, "torch_cpu's allocation side 1.2 %: sampled first");
	CHECK_EQ_INT(shed__halvings(&s, s.alloc_side_pct, TENSOR_SHED_HALVINGS), 2,
		     "0.8 % over, the windows' 0.2 % aside: two halvings save 0.9 % of 1.2 %, one 0.6 %");
	s.tensor_sampling = false;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_N, "torch_cpu at 2 %, under five budgets: its probes stay");
	in = info(12.0, 0.2, 11.0, 8);
	CHECK_EQ_INT(shed__next(&s), ML_SHED_TORCH_CPU, "torch_cpu at 11 %, over five budgets: its probes go");
	CHECK(shed__part(&s, ML_SHED_TORCH_CPU) == 11.0, "what it saves: its 11 %");
	s.rss_cost = true, s.rss_pct = 0.04;
	CHECK(shed__part(&s, ML_SHED_RSS_SAMPLING) == 0, "a step under 0.05 % saves nothing worth its loss");
}

/*
 * The step clock (a trap a step: 1.1 % at a thousand steps a second) is sampled after the tensor probes are shed
 * and before the rss layer's faults, halving while it can; under an eighth of the budget every step counts.
 */
static void step_clock(void)
{
	struct ml_overhead in = info(2.4, 0, 0, 0);
	struct shed_sample s = {.info = &in, .rss_cost = true, .rss_pct = 0.9, .step_sampling = true};

	in.shed = 1U << ML_SHED_TORCH_CPU | 1U << ML_SHED_TORCH_CPU_SAMPLING, in.tensor_halvings = TENSOR_SHED_HALVINGS;
	in.rss_doublings = RSS_SHED_DOUBLINGS, in.step_pct = 1.1;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_STEP_SAMPLING, "2.4 %, the clock 1.1 %, rss 0.9 %: the clock sampled");
	CHECK_EQ_INT(shed__halvings(&s, in.step_pct, STEP_SHED_HALVINGS), 1, "0.4 % over: one halving saves 0.55 %");
	in.shed |= 1U << ML_SHED_STEP_SAMPLING, in.step_halvings = 1, in.step_pct = 0.55, in.pct = 2.3;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_STEP_SAMPLING, "still over: it halves again");
	in.step_halvings = STEP_SHED_HALVINGS, in.step_pct = 0.04;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_RSS_FAULTS, "probed 1/32 of the time: the rss layer's faults next");
	in = info(2.2, 0, 0, 0);
	in.step_pct = 0.2;
	s.rss_cost = false;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_N, "the clock at 0.2 %, under an eighth of the budget: every step counts");
	in.step_pct = 1.1;
	s.step_sampling = false;
	CHECK_EQ_INT(shed__next(&s), ML_SHED_N, "no uprobe_multi links: the clock cannot be sampled");
}

int main(void)
{
	under_and_over();
	windows_not_covered_by_rss();
	tensors();
	step_clock();
	return SUMMARY("shed");
}
