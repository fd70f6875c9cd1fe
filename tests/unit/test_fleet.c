/* Unit tests: fleet labels (environment, cgroup), the Prometheus exposition, the /ingest URL of a pushed profile. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "collect/ledger.h"
#include "judge/verdict.h"
#include "lib/proclabels.h"
#include "lib/procmem.h"
#include "report/metrics.h"
#include "report/push.h"

static void environ_labels(void)
{
	static const char env[] = "PATH=/usr/bin\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0"
				  "TORCHELASTIC_RUN_ID=job-42\0SECRET=hunter2\0XRANK=9\0RANKS=7";
	struct ml_labels l = {};

	CHECK(!ml_labels__parse_environ(env, sizeof(env) - 1, &l), "environ: parsed");
	CHECK_EQ_STR(l.rank, "3", "environ: RANK, not XRANK or RANKS");
	CHECK_EQ_STR(l.local_rank, "1", "environ: LOCAL_RANK");
	CHECK_EQ_STR(l.world_size, "8", "environ: WORLD_SIZE");
	CHECK_EQ_STR(l.job, "job-42", "environ: TORCHELASTIC_RUN_ID");
	ml_labels__clear(&l);

	static const char bad[] = "RANK=1x\0WORLD_SIZE=\0LOCAL_RANK=12345678901\0TORCHELASTIC_RUN_ID=a\nb";
	CHECK(!ml_labels__parse_environ(bad, sizeof(bad) - 1, &l), "environ: bad values parsed");
	CHECK(!l.rank && !l.world_size && !l.local_rank, "environ: ranks that are not numbers are left out");
	CHECK_EQ_STR(l.job, "a\nb", "environ: a job id is data, control bytes and all (outputs escape it)");
	ml_labels__clear(&l);

	/* The last definition wins, as getenv sees it; a later bad one removes an earlier good one. */
	static const char twice[] = "RANK=1\0RANK=2\0TORCHELASTIC_RUN_ID=x\0TORCHELASTIC_RUN_ID=";
	CHECK(!ml_labels__parse_environ(twice, sizeof(twice) - 1, &l), "environ: twice parsed");
	CHECK(l.rank && !strcmp(l.rank, "2") && !l.job, "environ: the last definition counts");
	ml_labels__clear(&l);

	char *big = malloc(300);
	memcpy(big, "TORCHELASTIC_RUN_ID=", 20);
	memset(big + 20, 'a', 257);
	CHECK(!ml_labels__parse_environ(big, 277, &l) && !l.job,
	      "environ: a job id over 256 bytes is left out, not cut");
	free(big);
	ml_labels__clear(&l);
}

static void cgroup_labels(void)
{
	const char *id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char text[512];
	struct ml_labels l = {};

	snprintf(text, sizeof(text), "12:memory:/kubepods/burstable/pod1234/%s\n0::/kubepods/pod1234/%s\n", id, id);
	CHECK(!ml_labels__parse_cgroup(text, &l) && l.container && !strcmp(l.container, id),
	      "cgroup: kubepods v1 path");
	ml_labels__clear(&l);
	snprintf(text, sizeof(text), "0::/system.slice/docker-%s.scope\n", id);
	CHECK(!ml_labels__parse_cgroup(text, &l) && l.container && !strcmp(l.container, id), "cgroup: docker scope");
	ml_labels__clear(&l);
	CHECK(!ml_labels__parse_cgroup("0::/user.slice/session-1.scope\n", &l) && !l.container, "cgroup: no container");
	ml_labels__clear(&l);
	snprintf(text, sizeof(text), "0::/x/%sf\n", id); /* 65 digits: not an id */
	CHECK(!ml_labels__parse_cgroup(text, &l) && !l.container, "cgroup: 65 hex digits are not an id");
	ml_labels__clear(&l);
	CHECK(!ml_labels__parse_cgroup("garbage without colons", &l) && !l.container, "cgroup: garbage");
	ml_labels__clear(&l);
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p += n)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void metrics_text(void)
{
	struct ml_row rows[3] = {};
	struct ml_judgement j[3] = {};
	struct ml_proc_total procs[3] = {};
	struct ml_snapshot s = {.rows = rows, .nrows = 3, .procs = procs, .nprocs = 3, .elapsed_s = 2};
	/* rank 1: a main and its worker; rank 0: a main; pid 40 exited (no longer traced) */
	struct ml_metric_proc mp[3] = {{10, "1", "main"}, {11, "1", "worker"}, {20, "0", "main"}};
	char *text = NULL;
	size_t len = 0;

	procs[0].tgid = 10;
	procs[0].layers[0] = (struct ml_layer_total){.bytes = 1000, .count = 4, .growth_bytes = 600, .active = true};
	procs[1].tgid = 11;
	procs[1].layers[0] = (struct ml_layer_total){.bytes = 24, .count = 1, .growth_bytes = 0, .active = true};
	procs[2].tgid = 40;
	procs[2].layers[0] = (struct ml_layer_total){.bytes = 5000, .count = 5, .active = true};
	rows[0].key.tgid = 10;
	j[0].verdict = ML_V_GROWING;
	rows[1].key.tgid = 11;
	j[1].verdict = ML_V_GROWING;
	rows[2].key.tgid = 40;
	j[2].verdict = ML_V_GROWING;
	s.stats[ML_STAT_DROP_STACK] = 7;
	CHECK(!ml_metrics_render(
		  &(struct ml_metrics_in){
		      .s = &s, .j = j, .procs = mp, .nprocs = 3, .layers = 1, .overhead_ratio = 0.015, .reports = 5},
		  &text, &len),
	      "metrics: rendered");
	CHECK(text && strlen(text) == len, "metrics: length");
	CHECK(has_line(text, "memleak_ai_outstanding_bytes{rank=\"1\",role=\"main\",layer=\"libc\"} 1000"),
	      "metrics: bytes of rank 1's main");
	CHECK(has_line(text, "memleak_ai_outstanding_bytes{rank=\"1\",role=\"worker\",layer=\"libc\"} 24"),
	      "metrics: its worker apart");
	CHECK(has_line(text, "memleak_ai_outstanding_bytes{rank=\"0\",role=\"main\",layer=\"libc\"} 0"),
	      "metrics: a rank holding nothing reads 0");
	CHECK(has_line(text, "memleak_ai_outstanding_allocations{rank=\"1\",role=\"main\",layer=\"libc\"} 4"),
	      "metrics: allocations");
	CHECK(has_line(text, "memleak_ai_growth_bytes_per_second{rank=\"1\",role=\"main\",layer=\"libc\"} 300"),
	      "metrics: growth per second over the interval");
	CHECK(has_line(text, "memleak_ai_leak_candidates{rank=\"1\",role=\"main\"} 1"),
	      "metrics: candidates of rank 1");
	CHECK(has_line(text, "memleak_ai_leak_candidates{rank=\"0\",role=\"main\"} 0"), "metrics: none for rank 0");
	CHECK(!strstr(text, "5000") && !strstr(text, "pid"),
	      "metrics: an exited process's series are gone, no pid label");
	CHECK(!strstr(text, "layer=\"cuda\""), "metrics: only the layers traced");
	CHECK(has_line(text, "memleak_ai_overhead_ratio 0.015"), "metrics: overhead");
	CHECK(has_line(text, "memleak_ai_dropped_events_total{reason=\"stack_unavailable\"} 7"), "metrics: drops");
	CHECK(has_line(text, "memleak_ai_reports_total 5"), "metrics: reports");
	CHECK(has_line(text, "# TYPE memleak_ai_leak_candidates gauge"), "metrics: types");
	free(text);

	/* Before the first report: the processes at zero, the overhead unknown. */
	CHECK(!ml_metrics_render(&(struct ml_metrics_in){.procs = mp, .nprocs = 1, .layers = 1, .overhead_ratio = -1},
				 &text, &len) &&
		  has_line(text, "memleak_ai_leak_candidates{rank=\"1\",role=\"main\"} 0") &&
		  has_line(text, "memleak_ai_overhead_ratio NaN"),
	      "metrics: before the first report");
	free(text);

	/* A rank read from a target is escaped (it is digits by construction, but the writer does not rely on it). */
	struct ml_metric_proc odd = {10, "a\"b\\c", "main"};
	CHECK(!ml_metrics_render(&(struct ml_metrics_in){.procs = &odd, .nprocs = 1, .layers = 1, .overhead_ratio = -1},
				 &text, &len) &&
		  strstr(text, "rank=\"a\\\"b\\\\c\""),
	      "metrics: label values escaped");
	free(text);
}

static void rollup(void)
{
	static const char text[] =
	    "561e577ab000-7ffca4212000 ---p 00000000 00:00 0                  [rollup]\n"
	    "Rss:                1712 kB\nPss:                 776 kB\nPss_Dirty:           112 kB\n"
	    "Pss_Anon:            112 kB\nPrivate_Dirty:       113 kB\nAnonymous:           111 kB\n"
	    "Swap:                  0 kB\n";
	struct ml_procmem m;

	CHECK(!ml_procmem__parse(text, &m) && m.rss == 1712 * 1024 && m.pss == 776 * 1024 &&
		  m.private_dirty == 113 * 1024 && m.anon == 111 * 1024,
	      "smaps_rollup: Rss, Pss (not Pss_Dirty), Private_Dirty, Anonymous");
	CHECK_EQ_INT(ml_procmem__parse("Rss: 1 kB\nPss: 1 kB\nAnonymous: 1 kB\n", &m), -EINVAL,
		     "smaps_rollup: a field missing");
	CHECK_EQ_INT(ml_procmem__parse("Rss: x kB\nPss: 1 kB\nAnonymous: 1 kB\nPrivate_Dirty: 1 kB\n", &m), -EINVAL,
		     "smaps_rollup: a malformed number");
	CHECK_EQ_INT(
	    ml_procmem__parse("Rss: 99999999999999999999 kB\nPss: 1 kB\nAnonymous: 1 kB\nPrivate_Dirty: 1 kB\n", &m),
	    -EINVAL, "smaps_rollup: out of range");
	/* statm: resident 300 pages of which 120 file or shared: RSS and RssAnon as /proc/PID/status gives them */
	m = (struct ml_procmem){.pss = 7, .private_dirty = 9};
	CHECK(!ml_procmem__parse_statm("4000 300 120 10 0 500 0\n", 4096, &m) && m.rss == 300 * 4096 &&
		  m.anon == 180 * 4096 && m.pss == 7 && m.private_dirty == 9,
	      "statm: rss and anon in bytes, the rollup's fields left as they were");
	CHECK_EQ_INT(ml_procmem__parse_statm("4000 300 120 10 0 500\n", 4096, &m), -EINVAL, "statm: a field missing");
	CHECK_EQ_INT(ml_procmem__parse_statm("4000 300 301 10 0 500 0\n", 4096, &m), -EINVAL,
		     "statm: more shared than resident");
	CHECK_EQ_INT(ml_procmem__parse_statm("4000 300 1 10 0 500 0 9\n", 4096, &m), -EINVAL, "statm: trailing fields");
	CHECK_EQ_INT(ml_procmem__parse_statm("1 18446744073709551615 1 1 0 1 0\n", 4096, &m), -EINVAL,
		     "statm: out of range");
	CHECK(!ml_procmem__read_statm(getpid(), &m) && m.rss > 0 && m.anon <= m.rss, "statm: this process's own read");
}

static void push_url(void)
{
	struct push_meta m = {.pid = 5, .rank = "1", .role = "main", .from_s = 100, .until_s = 110};
	char *u = ml_push_url("http://127.0.0.1:4040/", NULL, &m);

	CHECK_EQ_STR(u,
		     "http://127.0.0.1:4040/ingest?name=memleak-ai%7Brank%3D1%2Crole%3Dmain%7D&from=100"
		     "&until=110&format=pprof&spyName=memleak-ai",
		     "push: the /ingest URL, labels in the name");
	free(u);
	m.rank = NULL;
	m.job = "j 1";
	u = ml_push_url("https://store/pyro/ingest", "train", &m);
	CHECK_EQ_STR(u,
		     "https://store/pyro/ingest?name=train%7Brole%3Dmain%2Cjob%3Dj%201%7D&from=100&until=110"
		     "&format=pprof&spyName=memleak-ai",
		     "push: a URL ending in /ingest kept, a service named, no rank, escaped");
	free(u);
}

int main(void)
{
	environ_labels();
	cgroup_labels();
	metrics_text();
	push_url();
	rollup();
	return SUMMARY("fleet");
}
