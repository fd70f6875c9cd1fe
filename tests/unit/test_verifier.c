/*
 * The verifier's work per program: the BPF object is loaded as memleak-ai loads it (unwinding tables on, the maps
 * sized from the default options, heap-growth mode's program included), and each program's verified_insns (the
 * instructions the verifier processed, whose limit is 1,000,000) is checked against a ceiling stated below. A
 * change that moves a program towards the limit then fails here instead of passing unnoticed until it no longer
 * loads. Run as root (loading BPF programs needs CAP_BPF and CAP_PERFMON).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "attach/uprobe_multi.h"
#include "check.h"
#include "session/opts.h"
#include "session/session.h"
#include "memleak.skel.h"

#define ML_VERIFIER_LIMIT 1000000U

/*
 * The ceilings, in one place: about 1.25 times the count measured when each was set (in the comment; kernel
 * 6.18, clang 14, libbpf 1.1), rounded up. Raise one only knowingly: the count is the verifier's cost of the
 * program, and its limit is ML_VERIFIER_LIMIT. A program not listed here fails until it states its own.
 */
static const struct {
	const char *prog;
	uint32_t ceiling;
} ceilings[] = {
    {"alloc_enter", 110000},	/* 87670 */
    {"alloc_exit", 76000},	/* 60385 */
    {"free_enter", 3700},	/* 2961 (2702 before the table's steps of 1, 2, 3) */
    {"free_exit", 62},		/* 49: the return trap counted */
    {"torch_malloc", 165000},	/* 131705 */
    {"torch_free", 3700},	/* 2931 (2672 before the table's steps of 1, 2, 3) */
    {"ldso_stop", 22},		/* 17: the trap counted */
    {"ldso_notify", 54},	/* 43 */
    {"py_exit", 57},		/* 45: the stop and the event */
    {"oom_victim", 160},	/* 126 */
    {"follow_fork", 189},	/* 151: the rss layer's entry for the child, tp_cost */
    {"follow_exec", 111},	/* 89: tp_cost */
    {"heap_exit", 182000},	/* 145585 */
    {"calib", 3},		/* 2 */
    {"rss_fault_user", 320},	/* 256 */
    {"rss_fault_kernel", 337},	/* 269 */
    {"rss_page_alloc", 157000}, /* 125050 */
    {"rss_exit", 68000},	/* 54162 (214952 before ml_rss_range and ml_rss_move_key were global functions) */
};

/* The program's ceiling, or -1 when it has none (a new program states its own). */
static long ceiling_of(const char *prog)
{
	for (size_t i = 0; i < sizeof(ceilings) / sizeof(ceilings[0]); i++)
		if (!strcmp(ceilings[i].prog, prog))
			return ceilings[i].ceiling < ML_VERIFIER_LIMIT ? (long)ceilings[i].ceiling : -1;
	return -1;
}

/* Loaded as a run with options o loads it, the unwinder on whatever o says, heap-growth mode's program too. */
static struct memleak_bpf *load(const struct ml_opts *o)
{
	struct memleak_bpf *skel = memleak_bpf__open();
	struct ml_opts with = *o;

	if (!skel)
		return NULL;
	with.unwind_tables = true;
	if (with.max_overhead >= 100)
		with.max_overhead = 2;
	session__configure_bpf(skel, &with, ml_uprobe_multi_supported());
	/* memleak-ai loads these in a second instance, in the background (session/bgobj.c) */
	bpf_program__set_autoload(skel->progs.heap_exit, true);
	bpf_program__set_autoload(skel->progs.torch_malloc, true);
	bpf_program__set_autoload(skel->progs.torch_free, true);
	if (memleak_bpf__load(skel)) {
		memleak_bpf__destroy(skel);
		return NULL;
	}
	return skel;
}

int main(void)
{
	char *argv[] = {"memleak-ai", "-c", "true", NULL};
	struct memleak_bpf *skel;
	struct bpf_program *p;
	struct ml_opts o;
	char name[160];
	int n = 0;

	if (geteuid() != 0) {
		CHECK(0, "verifier: loading the BPF object needs root");
		return SUMMARY("verifier");
	}
	if (ml_opts__parse(3, argv, &o)) {
		CHECK(0, "verifier: the default options parse");
		return SUMMARY("verifier");
	}
	skel = load(&o);
	ml_opts__free(&o);
	CHECK(skel != NULL, "verifier: the BPF object loads with the unwinder on and every program");
	if (!skel)
		return SUMMARY("verifier");
	bpf_object__for_each_program(p, skel->obj)
	{
		const char *prog = bpf_program__name(p);
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		long ceiling = ceiling_of(prog);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len)) {
			snprintf(name, sizeof(name), "verifier: %s's bpf_prog_info is read (%s)", prog,
				 strerror(errno));
			CHECK(0, name);
			continue;
		}
		if (ceiling < 0) {
			snprintf(name, sizeof(name), "verifier: %s (verified in %u instructions) has a ceiling in %s",
				 prog, info.verified_insns, __FILE__);
			CHECK(0, name);
			continue;
		}
		n++;
		snprintf(name, sizeof(name), "verifier: %s verified in %u instructions, ceiling %ld", prog,
			 info.verified_insns, ceiling);
		CHECK(info.verified_insns > 0 && info.verified_insns <= (uint32_t)ceiling, name);
	}
	CHECK_EQ_U64(n, (int)(sizeof(ceilings) / sizeof(ceilings[0])),
		     "verifier: every program with a ceiling is in the object");
	memleak_bpf__destroy(skel);
	return SUMMARY("verifier");
}
