/* The heap census in the reports (see collect/census.h): growing types first, by the rate their count rises. */
#include "report/censusview.h"
#include <inttypes.h>
#include "collect/census.h"
#include "report/format.h"
#include "report/json.h"

void ml_text_census(FILE *f, int pid, const struct ml_heapfrag *fr)
{
	struct census_type top[ML_CENSUS_TEXT_TOP];
	uint64_t chunks, typed;
	size_t n = fr && fr->census ? census__top(fr->census, top, ML_CENSUS_TEXT_TOP, &chunks, &typed) : 0;
	char b[3][32];

	if (fr && fr->census_left_out)
		fprintf(f,
			"heap census: pid %d: this walk stopped part-way (the heap changed while read) and is left "
			"out: growth is judged over whole walks\n",
			pid);
	if (!n)
		return;
	ml_fmt_count(b[0], sizeof(b[0]), (int64_t)chunks, false);
	ml_fmt_count(b[1], sizeof(b[1]), (int64_t)typed, false);
	fprintf(f, "heap census: pid %d %s in-use chunks, %s typed by their C++ vtable", pid, b[0], b[1]);
	if (fr->py.pools) {
		ml_fmt_count(b[0], sizeof(b[0]), (int64_t)fr->py.objects, false);
		ml_fmt_count(b[1], sizeof(b[1]), (int64_t)fr->py.typed, false);
		ml_fmt_count(b[2], sizeof(b[2]), (int64_t)fr->py.pools, false);
		fprintf(f, "; %s Python objects in %s pymalloc pools, %s typed%s", b[0], b[2], b[1],
			fr->py.left_out ? " (pools past the walk's limit left out)" : "");
	}
	fprintf(f, "; %s", top[0].growing ? "growing:" : "none growing; most:");
	for (size_t i = 0; i < n && (i == 0 || top[i].growing == top[0].growing); i++) {
		ml_fmt_count(b[0], sizeof(b[0]), (int64_t)top[i].count, false);
		ml_fmt_bytes(b[1], sizeof(b[1]), (double)top[i].bytes);
		if (top[i].growing) {
			ml_fmt_count(b[2], sizeof(b[2]), (int64_t)(top[i].per_s + 0.5), true);
			fprintf(f, "%s %s/s ", i ? "," : "", b[2]);
		} else {
			fputs(i ? ", " : " ", f);
		}
		ml_put_safe(f, top[i].name);
		fprintf(f, " (%s live, %s)", b[0], b[1]);
	}
	fputc('\n', f);
}

void ml_json_census(struct jw *w, const struct ml_heapfrag *fr)
{
	struct census_type top[ML_CENSUS_JSON_TOP];
	uint64_t chunks, typed;
	size_t n;

	if (!fr || !fr->census)
		return;
	n = census__top(fr->census, top, ML_CENSUS_JSON_TOP, &chunks, &typed);
	jw_obj_begin(w, "census");
	jw_u64(w, "walks", census__walks(fr->census));
	jw_u64(w, "chunks", chunks);
	jw_u64(w, "typed", typed);
	jw_u64(w, "types_known", census__ntypes(fr->census));
	jw_u64(w, "python_objects", fr->py.objects);
	jw_u64(w, "python_typed", fr->py.typed);
	jw_u64(w, "python_pools", fr->py.pools);
	jw_u64(w, "python_pools_left_out", fr->py.left_out);
	jw_u64(w, "python_types_refused", census__py_refused(fr->census));
	jw_arr_begin(w, "types");
	for (size_t i = 0; i < n; i++) {
		jw_obj_begin(w, NULL);
		jw_str(w, "name", top[i].name);
		jw_u64(w, "count", top[i].count);
		jw_u64(w, "bytes", top[i].bytes);
		jw_double(w, "per_s", top[i].per_s);
		jw_bool(w, "growing", top[i].growing);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}
