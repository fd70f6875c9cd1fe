/*
 * C heap fragmentation in the reports: how much of a process's glibc heap is free but resident, and the
 * stacks of the in-use blocks just above the free runs, which keep them from being trimmed.
 */
#define _GNU_SOURCE
#include "report/fragview.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "attach/allocators.h"
#include "lib/clock.h"
#include "report/format.h"
#include "report/json.h"
#include "report/stackview.h"

uint64_t ml_frag_named(const struct ml_heapfrag *fr)
{
	uint64_t n = 0;

	for (size_t i = 0; fr && i < fr->nstacks; i++)
		n += fr->stacks[i].charged;
	return n;
}

bool ml_row_possible_frag(struct stackview *sv, const struct ml_row *row)
{
	struct ml_resolver res;

	if (!(row->traits & ML_ROW_BRK) || stackview__proc(sv, (int)row->key.tgid, &res))
		return false;
	return res.frag && res.frag->free_resident_bytes > 0;
}

/* The frames of a holder stack, through a row of its key. */
static size_t holder_frames(struct stackview *sv, const struct ml_frag_stack *st, const struct ml_frame *const **out)
{
	struct ml_row row = {.key = st->key, .bytes = st->bytes, .count = st->count};

	return stackview__frames(sv, &row, out, NULL);
}

/* How a holder stack is named in one line: the job's own Python line, else the allocation's caller. */
static void put_name(FILE *f, const struct ml_frame *const *frames, size_t n, char *buf)
{
	const struct ml_frame *pick = n ? frames[0] : NULL;

	for (size_t k = 0; k < n; k++)
		if (ml_frame_is_user_code(frames[k])) {
			pick = frames[k];
			break;
		}
	if (!pick) {
		fputs("[no frames captured]", f);
		return;
	}
	ml_put_safe(f, ml_frame_label(pick, buf, ML_FRAME_LABEL_MAX));
	if (pick != frames[0]) {
		fputs(" via ", f);
		ml_put_safe(f, ml_frame_label(frames[0], buf, ML_FRAME_LABEL_MAX));
	}
}

/*
 * What one arena for all threads (MALLOC_ARENA_MAX=1) would save: the arenas' free resident memory but the
 * largest arena's. Merged, the threads share one free pool, which still needs as much as the busiest arena
 * holds now; the rest was kept apart only because other threads could not reuse it. An estimate that assumes
 * the threads' peaks do not coincide.
 */
static uint64_t arena_merge_bytes(const struct ml_heapfrag *fr)
{
	uint64_t sum = 0, max = 0;

	for (size_t i = 0; i < fr->narenas; i++) {
		sum += fr->arenas[i].free_resident_bytes;
		if (fr->arenas[i].free_resident_bytes > max)
			max = fr->arenas[i].free_resident_bytes;
	}
	return sum - max;
}

/*
 * When free resident memory is a large part of the heap (a quarter, and 8 MiB at least): what would return it.
 * A preloaded jemalloc gives back wholly free pages by itself, after its decay time (10 s by default): what
 * malloc_trim(0) would return once, it returns all along. Free space in partly used pages stays with either.
 */
static void text_remedies(FILE *f, const struct ml_heapfrag *fr)
{
	uint64_t merge = arena_merge_bytes(fr);
	char b[2][32];

	if (fr->free_resident_bytes < (8ULL << 20) || fr->free_resident_bytes < fr->heap_bytes / 4)
		return;
	ml_fmt_bytes(b[0], sizeof(b[0]), (double)merge);
	ml_fmt_bytes(b[1], sizeof(b[1]), (double)fr->trimmable_bytes);
	fputs("  what would return it:", f);
	if (merge)
		fprintf(f, " MALLOC_ARENA_MAX=1 about %s (the %zu arenas' free memory but the largest's);", b[0],
			fr->narenas);
	fprintf(f, " a preloaded jemalloc about %s, after its decay time (whole free pages, as malloc_trim(0))\n",
		b[1]);
}

/* With thread arenas, a line for each that holds free resident memory: where malloc_trim(0) would help. */
static void text_arenas(FILE *f, const struct ml_heapfrag *fr)
{
	char b[2][32];

	if (fr->narenas < 2)
		return;
	for (size_t i = 0; i < fr->narenas; i++) {
		const struct ml_arena_frag *a = &fr->arenas[i];

		if (!a->free_resident_bytes)
			continue;
		ml_fmt_bytes(b[0], sizeof(b[0]), (double)a->free_resident_bytes);
		ml_fmt_bytes(b[1], sizeof(b[1]), (double)a->trimmable_bytes);
		if (a->arena)
			fprintf(f, "  arena at 0x%" PRIx64, a->arena);
		else
			fputs("  main arena", f);
		fprintf(f, ": %s free but resident in %u heap%s, malloc_trim(0) would return %s\n", b[0], a->heaps,
			a->heaps == 1 ? "" : "s", b[1]);
	}
}

/* Heap walks that stopped twice: the bytes they left and why, most telling reason first. */
static void text_broken(FILE *f, const struct ml_heapfrag *fr)
{
	unsigned int n[3] = {fr->corrupt, fr->unreadable, fr->broken - fr->corrupt - fr->unreadable};
	static const char *const why[3] = {"at a corrupt chunk header (read twice alike)",
					   "at a header on a page not resident", "as the heap changed while read"};
	const char *sep = ":";
	char b[32];

	if (!fr->broken)
		return;
	ml_fmt_bytes(b, sizeof(b), (double)fr->unwalked_bytes);
	fprintf(f, " [%u heap walk%s stopped, %s not walked", fr->broken, fr->broken == 1 ? "" : "s", b);
	for (int i = 0; i < 3; i++)
		if (n[i]) {
			fprintf(f, "%s %u %s", sep, n[i], why[i]);
			sep = ",";
		}
	fputc(']', f);
}

void ml_text_frag(FILE *f, struct stackview *sv, int pid, const struct ml_heapfrag *fr)
{
	char b[5][32];
	char *buf = malloc(ML_FRAME_LABEL_MAX);
	const struct ml_frame *const *frames;
	size_t n;

	if (!fr || !buf || (!fr->heaps && !fr->broken && !fr->capped)) {
		free(buf);
		return;
	}
	ml_fmt_bytes(b[0], sizeof(b[0]), (double)fr->free_resident_bytes);
	ml_fmt_bytes(b[1], sizeof(b[1]), (double)fr->heap_bytes);
	ml_fmt_bytes(b[2], sizeof(b[2]), (double)fr->in_use_bytes);
	ml_fmt_bytes(b[3], sizeof(b[3]), (double)fr->top_bytes);
	fprintf(f, "C heap: pid %d %s free but resident (heap %s in %u part%s, %s in use, top %s)", pid, b[0], b[1],
		fr->heaps, fr->heaps == 1 ? "" : "s", b[2], b[3]);
	if (fr->trimmable_bytes) {
		ml_fmt_bytes(b[0], sizeof(b[0]), (double)fr->trimmable_bytes);
		fprintf(f, "; malloc_trim(0) would return %s", b[0]);
	}
	if (fr->nstacks) {
		ml_fmt_bytes(b[0], sizeof(b[0]), (double)fr->stacks[0].bytes);
		fprintf(f, "; held by %s of blocks from ", b[0]);
		n = holder_frames(sv, &fr->stacks[0], &frames);
		put_name(f, frames, n, buf);
	} else if (fr->unknown_count) {
		ml_fmt_bytes(b[0], sizeof(b[0]), (double)fr->unknown_bytes);
		fprintf(f, "; held by %s of blocks the tool has no record of", b[0]);
	}
	if (fr->capped)
		fputs(" [partial: the read budget ran out]", f);
	text_broken(f, fr);
	fputc('\n', f);
	for (size_t i = 0; i < fr->nstacks && i < ML_FRAG_TEXT_TOP; i++) {
		const struct ml_frag_stack *st = &fr->stacks[i];

		ml_fmt_bytes(b[0], sizeof(b[0]), (double)st->charged);
		ml_fmt_bytes(b[1], sizeof(b[1]), (double)st->bytes);
		fprintf(f, "  holds %s: %s in %" PRIu64 " %s block%s from ", b[0], b[1], st->count,
			ml_layer_name(st->key.layer), st->count == 1 ? "" : "s");
		n = holder_frames(sv, st, &frames);
		put_name(f, frames, n, buf);
		fputc('\n', f);
	}
	if (fr->nstacks > ML_FRAG_TEXT_TOP)
		fprintf(f, "  ... and %zu more holding stacks\n", fr->nstacks - ML_FRAG_TEXT_TOP);
	text_arenas(f, fr);
	text_remedies(f, fr);
	if (fr->unknown_count) {
		ml_fmt_bytes(b[0], sizeof(b[0]), (double)fr->unknown_charged);
		ml_fmt_bytes(b[1], sizeof(b[1]), (double)fr->unknown_bytes);
		fprintf(f,
			"  holds %s: %s in %" PRIu64 " blocks from before attach, or freed into glibc's caches "
			"(no record)\n",
			b[0], b[1], fr->unknown_count);
	}
	free(buf);
}

void ml_json_frag(struct jw *w, struct stackview *sv, const struct ml_heapfrag *fr)
{
	if (!fr || (!fr->heaps && !fr->broken && !fr->capped))
		return;
	jw_obj_begin(w, "fragmentation");
	jw_u64(w, "heap_bytes", fr->heap_bytes);
	jw_u64(w, "in_use_bytes", fr->in_use_bytes);
	jw_u64(w, "free_bytes", fr->free_bytes);
	jw_u64(w, "free_resident_bytes", fr->free_resident_bytes);
	jw_u64(w, "top_bytes", fr->top_bytes);
	jw_u64(w, "unheld_bytes", fr->unheld_bytes);
	jw_u64(w, "trimmable_bytes", fr->trimmable_bytes);
	jw_u64(w, "arena_max_1_bytes", arena_merge_bytes(fr));
	jw_u64(w, "jemalloc_bytes", fr->trimmable_bytes);
	jw_arr_begin(w, "arenas");
	for (size_t i = 0; i < fr->narenas; i++) {
		jw_obj_begin(w, NULL);
		jw_bool(w, "main", !fr->arenas[i].arena);
		jw_u64(w, "heaps", fr->arenas[i].heaps);
		jw_u64(w, "heap_bytes", fr->arenas[i].heap_bytes);
		jw_u64(w, "free_resident_bytes", fr->arenas[i].free_resident_bytes);
		jw_u64(w, "trimmable_bytes", fr->arenas[i].trimmable_bytes);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_u64(w, "heaps", fr->heaps);
	jw_u64(w, "broken_walks", fr->broken);
	jw_u64(w, "corrupt_walks", fr->corrupt);
	jw_u64(w, "unreadable_walks", fr->unreadable);
	jw_u64(w, "unwalked_bytes", fr->unwalked_bytes);
	jw_bool(w, "capped", fr->capped);
	jw_u64(w, "read_bytes", fr->read_bytes);
	jw_u64(w, "chunks", fr->chunks);
	jw_double(w, "scan_ms", (double)fr->scan_ns / 1e6);
	jw_double(w, "age_s", fr->walked_ns ? (double)(ml_clock_ns(CLOCK_MONOTONIC) - fr->walked_ns) / 1e9 : 0);
	jw_u64(w, "charged_bytes", ml_frag_named(fr));
	jw_obj_begin(w, "unrecorded");
	jw_u64(w, "charged_bytes", fr->unknown_charged);
	jw_u64(w, "bytes", fr->unknown_bytes);
	jw_u64(w, "count", fr->unknown_count);
	jw_obj_end(w);
	jw_u64(w, "holders_total", fr->nstacks);
	jw_arr_begin(w, "holders");
	for (size_t i = 0; i < fr->nstacks && i < ML_FRAG_JSON_TOP; i++) {
		const struct ml_frag_stack *st = &fr->stacks[i];
		const struct ml_frame *const *frames;
		size_t n = holder_frames(sv, st, &frames);

		jw_obj_begin(w, NULL);
		jw_str(w, "layer", ml_layer_name(st->key.layer));
		jw_u64(w, "charged_bytes", st->charged);
		jw_u64(w, "bytes", st->bytes);
		jw_u64(w, "count", st->count);
		ml_json_frames(w, frames, n);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

size_t ml_place_of(const struct ml_snapshot *s, const size_t *order, const struct ml_agg_key *k)
{
	for (size_t i = 0; i < s->nrows; i++)
		if (!memcmp(&s->rows[order[i]].key, k, sizeof(*k)))
			return i + 1;
	return 0;
}

void ml_text_victim(FILE *f, const struct ml_victim *v, const struct ml_snapshot *s, const size_t *order)
{
	size_t n = v->pinner.layer < ML_LAYER_MAX ? ml_place_of(s, order, &v->pinner) : 0;
	char b[3][32];

	ml_fmt_bytes(b[0], sizeof(b[0]), (double)v->free_bytes);
	ml_fmt_bytes(b[1], sizeof(b[1]), (double)v->walked_bytes);
	ml_fmt_bytes(b[2], sizeof(b[2]), (double)v->pinned_bytes);
	fputs("    victim, not a leak candidate: ", f);
	if (v->key.layer == ML_LAYER_RSS && v->free_bytes * 8 < v->walked_bytes)
		fprintf(f, "pages of the C heap it touched first (%s), the blocks in them counted in the C heap's rows",
			b[1]);
	else if (v->filled_bytes) {
		ml_fmt_bytes(b[2], sizeof(b[2]), (double)v->filled_bytes);
		fprintf(f, "fresh heap it reached that other rows' blocks took (%s of the %s), most by ", b[2], b[1]);
		if (n)
			fprintf(f, "[%zu]", n);
		else
			fputs("a row not shown", f);
	} else if (n)
		fprintf(f,
			"fresh heap taken because [%zu] pins the freed space (%s of the %s it took is free again; "
			"[%zu]'s blocks hold %s of free memory there)",
			n, b[0], b[1], n, b[2]);
	else
		fprintf(f,
			"fresh heap taken because blocks the tool has no record of (made before attach, or between "
			"sampling windows) pin the freed space (%s of the %s it took is free again)",
			b[0], b[1]);
	fputc('\n', f);
}

void ml_json_victim(struct jw *w, const struct ml_victim *v, const struct ml_snapshot *s, const size_t *order)
{
	size_t n = v->pinner.layer < ML_LAYER_MAX ? ml_place_of(s, order, &v->pinner) : 0;

	jw_obj_begin(w, "victim");
	jw_u64(w, "walked_bytes", v->walked_bytes);
	jw_u64(w, "free_bytes", v->free_bytes);
	jw_u64(w, "pinned_bytes", v->pinned_bytes);
	jw_u64(w, "filled_bytes", v->filled_bytes);
	if (n)
		jw_u64(w, "pinned_by", n);
	else
		jw_str(w, "pinned_by", NULL);
	jw_obj_end(w);
}

void ml_text_victims(FILE *f, const struct ml_victim *v, size_t n, const struct ml_snapshot *s, const size_t *order)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t free = 0;
		size_t pin = 0, rows = 0;
		char b[32];

		if (i && v[i - 1].key.tgid == v[i].key.tgid)
			continue; /* by key: a process's victims are together */
		fprintf(f, "fragmentation: pid %u:", v[i].key.tgid);
		for (size_t k = i; k < n && v[k].key.tgid == v[i].key.tgid; k++) {
			size_t at = ml_place_of(s, order, &v[k].key);

			free += v[k].free_bytes;
			if (at)
				fprintf(f, "%s[%zu]", rows++ ? ", " : " rows ", at);
			if (!pin && v[k].pinner.layer < ML_LAYER_MAX)
				pin = ml_place_of(s, order, &v[k].pinner);
		}
		ml_fmt_bytes(b, sizeof(b), (double)free);
		fprintf(f, " took fresh heap of which %s is free again: growth counted as fragmentation", b);
		if (pin)
			fprintf(f, " caused by [%zu]", pin);
		fputc('\n', f);
	}
}
