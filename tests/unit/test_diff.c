/*
 * Unit tests of `memleak-ai diff` (user/diff/): the JSON Lines reader on crafted files (lines of other types,
 * a cut last line, bad lines, stacks merged by their Python lines), the judgement of grown, appeared, vanished
 * and shrunk rows with its margins and gates, bytes compared at equal steps, the pprof reader on profiles it
 * must refuse, and hostile names in text, JSON and HTML.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "diff/compare.h"
#include "diff/diffload.h"
#include "diff/diffview.h"
#include "diff/jsonin.h"
#include "diff/pprofin.h"
#include "profile.pb-c.h"

#define KIB 1024.0
#define MIB (1024.0 * 1024.0)

/* A stack of two native frames under the Python line train.py:LINE, through site-packages. */
#define PY_STACK(native, line)                                                                                         \
	"{\"layer\":\"torch_cpu\",\"bytes\":1000,\"count\":2,\"growth_bytes_per_s\":10,"                               \
	"\"per_step\":{\"bytes\":100,\"count\":0.1,\"steps\":50},\"frames\":["                                         \
	"{\"kind\":\"native\",\"func\":\"" native "\",\"module\":\"/lib/libc.so.6\"},"                                 \
	"{\"kind\":\"python\",\"func\":\"forward\",\"file\":\"/venv/lib/python3.12/site-packages/m.py\",\"line\":9},"  \
	"{\"kind\":\"python\",\"func\":\"<module>\",\"file\":\"/job/train.py\",\"line\":" #line "}]}"

static const char *const jsonl =
    "{\"type\":\"hello\",\"seq\":0}\n"
    "\n"
    "{\"type\":\"report\",\"seq\":1,\"steps\":null,\"stacks\":[],\"totals\":{}}\n"
    "{\"type\":\"report\",\"seq\":2,\"steps\":{\"clock\":\"x\",\"most\":50},"
    "\"stats\":{\"stacks_total\":9,\"stacks_shown\":3},"
    "\"totals\":{\"torch_cpu\":{\"bytes\":2000,\"count\":4,\"per_step\":{\"bytes\":200,\"steps\":50}}},"
    "\"stacks\":[" PY_STACK("malloc", 88) "," PY_STACK("posix_memalign", 88) "," PY_STACK(
	"malloc", 90) "]}\n"
		      "{\"type\":\"report\",\"seq\":3,\"stac";

static struct diff_run *read_json(const char *text, enum diff_pick pick, int *err, char **why)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	struct diff_run *r = NULL;

	*why = NULL;
	if (!f || diffrun__new("t.jsonl", "json", &r)) {
		*err = -ENOMEM;
		return NULL;
	}
	*err = jsonin__read(f, pick, r, why);
	fclose(f);
	return r;
}

static void json_lines(void)
{
	char *why;
	int err;
	struct diff_run *r = read_json(jsonl, DIFF_FIRST, &err, &why);
	const struct diff_row *row;

	CHECK(!err && r->seq == 1 && !r->stepped && !r->nrows, "first: report 1, past a line of another type");
	diffrun__free(r);
	r = read_json(jsonl, DIFF_LAST, &err, &why);
	CHECK(!err && r->seq == 2, "last: report 2; the cut line after it is left");
	CHECK(r->stepped && r->steps == 50 && r->partial && r->smallest == 1000,
	      "its step clock, 50 steps, and 3 of 9 stacks listed");
	CHECK_EQ_U64(r->nrows, 2, "two rows: the stacks at train.py:88 merge whatever native frames they had");
	row = diffrun__find(
	    r, "torch_cpu\n/venv/lib/python3.12/site-packages/m.py:9 in forward\n/job/train.py:88 in <module>");
	CHECK(row && row->f.bytes == 2000 && row->f.count == 4 && row->f.per_step == 200 && row->f.per_s == 20 &&
		  row->f.stepped,
	      "the merged row: bytes, count and both rates summed");
	CHECK(row && row->python && row->nframes == 2 && row->site == 1 && !strcmp(row->layer, "torch_cpu") &&
		  !strcmp(row->frames[row->site], "/job/train.py:88 in <module>"),
	      "its frames are its Python lines; its site the job's own line, not site-packages'");
	CHECK(diffrun__layer(r, "torch_cpu") && diffrun__layer(r, "torch_cpu")->f.per_step == 200,
	      "the layer's total and its growth per step");
	diffrun__free(r);

	r = read_json("{\"type\":\"report\",\"seq\":1,\"stacks\":[]}\n{\"type\": oops}\n{\"type\":\"report\"}\n",
		      DIFF_LAST, &err, &why);
	CHECK(err == -EINVAL && why && strstr(why, "line 2 is not JSON"), "a bad line: its number");
	free(why);
	diffrun__free(r);
	r = read_json("{\"type\":\"other\"}\n", DIFF_LAST, &err, &why);
	CHECK(err == -EINVAL && why && strstr(why, "no report"), "no report in it: said");
	free(why);
	diffrun__free(r);
	r = read_json("{\"type\":\"report\",\"seq\":4,\"stacks\":[{\"bytes\":5,\"frames\":[]}]}\n", DIFF_LAST, &err,
		      &why);
	CHECK(err == -EINVAL && why && strstr(why, "report 4: stack 1 has no layer"), "a stack without a layer");
	free(why);
	diffrun__free(r);
}

static struct diff_figs figs(double bytes, double per_step)
{
	return (struct diff_figs){.bytes = bytes, .peak_bytes = bytes, .per_step = per_step, .stepped = true};
}

static void add(struct diff_run *r, const char *line, double bytes, double per_step)
{
	struct diff_frame fr = {.python = true, .func = "<module>", .file = "/job/train.py", .line = atoi(line)};
	struct diff_figs f = figs(bytes, per_step);

	if (diffrun__add(r, "torch_cpu", &fr, 1, &f))
		CHECK(false, "a row added");
}

static const struct diff_item *item_at(const struct diff_result *res, int line)
{
	char want[64];

	snprintf(want, sizeof(want), "/job/train.py:%d in <module>", line);
	for (size_t i = 0; i < res->nitems; i++) {
		const struct diff_row *row = res->items[i].b ? res->items[i].b : res->items[i].a;

		if (!strcmp(row->frames[0], want))
			return &res->items[i];
	}
	return NULL;
}

/* Two runs of 1,000 and 2,000 steps. */
static void two_runs(struct diff_run **a, struct diff_run **b)
{
	diffrun__new("a", "json", a);
	diffrun__new("b", "json", b);
	(*a)->stepped = (*b)->stepped = true;
	(*a)->steps = 1000, (*b)->steps = 2000;
	add(*a, "10", 1 * MIB, 0), add(*b, "10", 1 * MIB, 0);		       /* the same */
	add(*b, "20", 128 * MIB, 64 * KIB);				       /* a new leak */
	add(*a, "30", 8 * MIB, 0);					       /* gone */
	add(*a, "40", 40 * MIB, 40 * KIB), add(*b, "40", 100 * MIB, 52 * KIB); /* a leak in both, noise apart */
	add(*a, "50", 4 * MIB, 0), add(*b, "50", 64 * KIB, 0);		       /* freed */
	add(*b, "60", 2 * MIB, 0);					       /* new, held, not growing */
	add(*a, "70", 256, 0), add(*b, "70", 133 * KIB, 8 * KIB);	       /* transient buffers' slope */
	add(*a, "80", 133 * KIB, 8 * KIB), add(*b, "80", 256, 0);	       /* ... in A, caught there */
	add(*a, "90", 1 * MIB, -4 * KIB), add(*b, "90", 12 * MIB, 4 * KIB);    /* passing buffers, peaks below */
	(*a)->rows[(*a)->nrows - 1].f.peak_bytes = 12 * MIB;
	diffrun__add_layer(*a, "torch_cpu", &(struct diff_figs){.bytes = 53 * MIB, .per_step = 40 * KIB, .stepped = 1});
	diffrun__add_layer(*b, "torch_cpu",
			   &(struct diff_figs){.bytes = 231 * MIB, .per_step = 116 * KIB, .stepped = 1});
	diffrun__add_layer(*b, "libc", &(struct diff_figs){.bytes = 4 * MIB, .per_step = 4 * KIB, .stepped = 1});
}

static void judged(void)
{
	struct diff_opts o = {.min_bytes = MIB, .min_rate = 4 * KIB, .fail_over = -1, .fail_over_per_step = 10 * KIB};
	struct diff_run *a, *b;
	struct diff_result res;
	const struct diff_item *it;

	two_runs(&a, &b);
	CHECK_EQ_INT(diff__compare(a, b, &o, &res), 0, "compared");
	CHECK(res.per_step && res.at_steps == 1000, "per step, bytes at the shorter run's 1,000 steps");
	CHECK_EQ_U64(res.nitems, 4, "four named: grown, appeared, vanished, shrunk");
	it = item_at(&res, 20);
	CHECK(it && it->change == DIFF_GROWN && !it->a && it->b_rate == 64 * KIB, "the new leak: grown");
	CHECK(it && fabs(it->b_bytes - 65.5 * MIB) < 1, "its bytes at 1,000 steps: 128 MiB less 1,000 x 64 KiB");
	CHECK(it == &res.items[0], "grown rows first");
	it = item_at(&res, 60);
	CHECK(it && it->change == DIFF_APPEARED, "held and not growing, new: appeared");
	it = item_at(&res, 30);
	CHECK(it && it->change == DIFF_VANISHED, "gone: vanished");
	it = item_at(&res, 50);
	CHECK(it && it->change == DIFF_SHRUNK, "4 MiB to 64 KiB: shrunk");
	CHECK(!item_at(&res, 40), "40 -> 52 KiB/step and 40 MiB -> 48 MiB at equal steps: not doubled, not named");
	CHECK(!item_at(&res, 70), "8 KiB a step over 1,000 steps holding 133 KiB: not borne out, not named");
	CHECK(!item_at(&res, 80), "the same in A, none in B: the fall not borne out either, not named shrunk");
	CHECK(!item_at(&res, 90), "1 MiB -> 8 MiB at equal steps, -4 -> +4 KiB a step, but A once held 12 MiB: "
				  "what B holds, A held too, not named grown");
	CHECK(!item_at(&res, 10) && res.unchanged == 5 && res.matched == 6, "five unchanged of six matched");
	CHECK(res.nlayers == 2 && !strcmp(res.layers[0].name, "torch_cpu") && res.layers[0].over &&
		  !strcmp(res.layers[1].name, "libc") && !res.layers[1].a && !res.layers[1].over,
	      "the gate on layers: torch_cpu 76 KiB a step more is over 10 KiB; libc, in B only, 4 KiB is not");
	CHECK(res.nlayers == 2 && fabs(res.layers[0].b_bytes - (231 * MIB - 1000 * 116 * KIB)) < 1,
	      "a layer's bytes at equal steps too");
	CHECK_EQ_U64(res.over, 1, "one layer over the gate");
	diff__result_free(&res);

	b->partial = true, b->smallest = 16 * MIB;
	o.same_run = true;
	CHECK_EQ_INT(diff__compare(a, b, &o, &res), 0, "compared as two reports of one run");
	CHECK(res.at_steps == 0, "one run: bytes as they are");
	CHECK(!item_at(&res, 30), "8 MiB not in a report listing none under 16 MiB: not known gone, not named");
	it = item_at(&res, 40);
	CHECK(it && it->change == DIFF_GROWN && it->b_bytes == 100 * MIB, "40 MiB -> 100 MiB held: grown");
	diff__result_free(&res);
	diffrun__free(a);
	diffrun__free(b);
}

static char *render(int (*view)(FILE *, const struct diff_result *, const struct diffview_opts *),
		    const struct diff_result *res)
{
	struct diffview_opts vo = {.top = 10, .fail_over = -1, .fail_over_per_step = 10 * KIB};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f) {
		CHECK_EQ_INT(view(f, res, &vo), 0, "written");
		fclose(f);
	}
	return buf;
}

static void hostile_names(void)
{
	struct diff_opts o = {.min_bytes = MIB, .min_rate = 4 * KIB, .fail_over = -1, .fail_over_per_step = 10 * KIB};
	struct diff_frame fr = {
	    .python = true, .func = "f\x1b[2J</td><script>\"\n", .file = "/job/a\xff.py", .line = 3};
	struct diff_figs f = figs(2 * MIB, 8 * KIB);
	struct diff_run *a, *b;
	struct diff_result res;
	char *text, *json, *html;
	json_t *doc;

	f.count = 32;
	diffrun__new("a\x1b[1m", "json", &a);
	diffrun__new("b", "json", &b);
	a->stepped = b->stepped = true;
	diffrun__add(b, "torch_cpu", &fr, 1, &f);
	diff__compare(a, b, &o, &res);
	text = render(diffview__text, &res);
	json = render(diffview__json, &res);
	html = render(diffview__html, &res);
	CHECK(text && !strchr(text, '\x1b') && strstr(text, "\\x1b[2J</td><script>\" ") && strstr(text, "a\\xff.py") &&
		  strstr(text, "A = a\\x1b[1m"),
	      "text: escape bytes and bytes that are not UTF-8 as \\xNN; the newline in a name made a space");
	CHECK(text && strstr(text, "grown at /job/a\\xff.py:3") && strstr(text, "+8.0 KiB/step") &&
		  strstr(text, "; allocations 0 -> 32; not in A\n") &&
		  strstr(text, "gate: --fail-over-per-step 10.0 KiB: passed"),
	      "text: the grown row, its rate, and the gate under it");
	doc = json ? json_loads(json, 0, NULL) : NULL;
	CHECK(doc && !strcmp(json_string_value(json_object_get(doc, "type")), "diff") &&
		  json_array_size(json_object_get(doc, "stacks")) == 1 &&
		  !strcmp(json_string_value(json_array_get(
			      json_object_get(json_array_get(json_object_get(doc, "stacks"), 0), "frames"), 0)),
			  "/job/a\xef\xbf\xbd.py:3 in f\x1b[2J</td><script>\" "),
	      "JSON: valid, the name kept as data (invalid UTF-8 as U+FFFD)");
	CHECK(doc && json_is_false(json_object_get(doc, "failed")) &&
		  json_number_value(json_object_get(doc, "fail_over_per_step")) == 10 * KIB,
	      "JSON: the gate and that it passed");
	json_decref(doc);
	CHECK(html && !strstr(html, "<script>") && !strchr(html, '\x1b') &&
		  strstr(html, "&#xfffd;[2J&lt;/td&gt;&lt;script&gt;&quot;") && strstr(html, "/job/a&#xfffd;.py"),
	      "HTML: markup as entities, control and invalid bytes as U+FFFD; no script");
	free(text);
	free(json);
	free(html);
	diff__result_free(&res);
	diffrun__free(a);
	diffrun__free(b);
}

static int load_text(const char *content, size_t len, char **why)
{
	char path[] = "/tmp/test_diff.XXXXXX";
	int fd = mkstemp(path), err;
	struct diff_run *r = NULL;

	if (fd < 0 || write(fd, content, len) != (ssize_t)len)
		return -EIO;
	close(fd);
	err = diff__load(path, DIFF_LAST, &r, why);
	unlink(path);
	diffrun__free(r);
	return err;
}

static void bad_files(void)
{
	static const uint8_t gz_cut[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x4b, 0x4c};
	struct diff_run *r = NULL;
	char *why = NULL;
	int err;

	err = diff__load("/tmp", DIFF_LAST, &r, &why);
	CHECK(err == -EISDIR && why && strstr(why, "a directory"), "a directory: said");
	free(why);
	err = diff__load("/nonexistent/x.jsonl", DIFF_LAST, &r, &why);
	CHECK(err == -ENOENT && !r, "a missing file: ENOENT");
	err = load_text((const char *)gz_cut, sizeof(gz_cut), &why);
	CHECK(err == -EINVAL && why && strstr(why, "gzip stream is damaged"), "a gzip stream cut short");
	free(why);
	err = load_text("hello, world\n", 13, &why);
	CHECK(err == -EINVAL && why, "text that is neither: refused with a reason");
	free(why);
	err = load_text("", 0, &why);
	CHECK(err == -EINVAL && why && strstr(why, "inuse_space"), "an empty file: not a memory profile");
	free(why);
}

/* A raw (not gzipped) profile of one sample: 4,096 bytes of libc at a.py:7 in f. Its first byte is 0x0a. */
static uint8_t *raw_profile(size_t *len)
{
	static char *strings[] = {"", "inuse_space", "bytes", "layer", "libc", "f", "a.py"};
	Perftools__Profiles__ValueType vt = PERFTOOLS__PROFILES__VALUE_TYPE__INIT, *vtp = &vt;
	Perftools__Profiles__Function fn = PERFTOOLS__PROFILES__FUNCTION__INIT, *fnp = &fn;
	Perftools__Profiles__Line ln = PERFTOOLS__PROFILES__LINE__INIT, *lnp = &ln;
	Perftools__Profiles__Location loc = PERFTOOLS__PROFILES__LOCATION__INIT, *locp = &loc;
	Perftools__Profiles__Label lab = PERFTOOLS__PROFILES__LABEL__INIT, *labp = &lab;
	Perftools__Profiles__Sample sm = PERFTOOLS__PROFILES__SAMPLE__INIT, *smp = &sm;
	Perftools__Profiles__Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
	uint64_t loc_id = 1;
	int64_t value = 4096;
	uint8_t *buf;

	vt.type = 1, vt.unit = 2;
	fn.id = 1, fn.name = 5, fn.filename = 6;
	ln.function_id = 1, ln.line = 7;
	loc.id = 1, loc.n_line = 1, loc.line = &lnp;
	lab.key = 3, lab.str = 4;
	sm.n_location_id = 1, sm.location_id = &loc_id, sm.n_value = 1, sm.value = &value, sm.n_label = 1;
	sm.label = &labp;
	p.n_sample_type = 1, p.sample_type = &vtp, p.n_sample = 1, p.sample = &smp, p.n_location = 1;
	p.location = &locp, p.n_function = 1, p.function = &fnp, p.n_string_table = 7, p.string_table = strings;
	*len = perftools__profiles__profile__get_packed_size(&p);
	buf = malloc(*len);
	if (buf)
		perftools__profiles__profile__pack(&p, buf);
	return buf;
}

/* path as a pipe's read end, a child writing the bytes to it: what `<(zcat run.jsonl.gz)` hands over. */
static struct diff_run *load_piped(const void *bytes, size_t len, char **why, int *err)
{
	struct diff_run *r = NULL;
	char path[32];
	int fds[2];
	pid_t pid;

	if (pipe(fds) || (pid = fork()) < 0) {
		*err = -errno;
		return NULL;
	}
	if (!pid) {
		close(fds[0]);
		_exit(write(fds[1], bytes, len) == (ssize_t)len ? 0 : 1);
	}
	close(fds[1]);
	snprintf(path, sizeof(path), "/dev/fd/%d", fds[0]);
	*err = diff__load(path, DIFF_LAST, &r, why);
	close(fds[0]);
	waitpid(pid, NULL, 0);
	return r;
}

static void pipes_and_raw_profiles(void)
{
	size_t len = 0;
	uint8_t *raw = raw_profile(&len);
	char *why = NULL;
	int err;
	struct diff_run *r = raw ? load_piped(raw, len, &why, &err) : NULL;
	const struct diff_row *row = r ? diffrun__find(r, "libc\na.py:7 in f") : NULL;
	static const char lines[] = "\n\n  {\"type\":\"report\",\"seq\":7,\"stacks\":[]}\n";

	CHECK(raw && raw[0] == 0x0a, "a raw profile begins with 0x0a, a newline");
	CHECK(r && !err && !strcmp(r->format, "pprof") && r->nrows == 1 && row && row->f.bytes == 4096 && row->python,
	      "a raw profile through a pipe: read whole, its leading newline kept (no rewind)");
	diffrun__free(r);
	free(raw);
	r = load_piped(lines, strlen(lines), &why, &err);
	CHECK(r && !err && r->seq == 7 && !strcmp(r->format, "json"), "JSON Lines through a pipe, after blank lines");
	diffrun__free(r);
}

int main(void)
{
	json_lines();
	judged();
	hostile_names();
	bad_files();
	pipes_and_raw_profiles();
	return SUMMARY("diff");
}
