/* CUDA memory by device in the reports (see collect/devsplit.h for how it is split and pinned). */
#include "report/devview.h"
#include <inttypes.h>
#include <string.h>
#include "report/format.h"
#include "report/fragview.h"
#include "report/json.h"

/* The device of slot d: d - 1, or -1 for slot 0 (not known). */
static int device_of(unsigned int d)
{
	return d ? (int)d - 1 : -1;
}

static void text_pins(FILE *f, const struct ml_snapshot *s, const size_t *order, int device)
{
	const char *sep = ", most by";
	char b[32];
	int shown = 0;

	for (size_t i = 0; i < s->npins && shown < ML_PINS_SHOWN; i++) {
		size_t n = s->pins[i].device == device ? ml_place_of(s, order, &s->pins[i].key) : 0;

		if (!n || !s->pins[i].bytes)
			continue;
		ml_fmt_bytes(b, sizeof(b), (double)s->pins[i].bytes);
		fprintf(f, "%s [%zu] (%s)", sep, n, b);
		sep = ",";
		shown++;
	}
}

/* Pinned host memory, where PyTorch's host caching allocator is traced (--torch-raw-alloc): reserved vs handed out. */
static void text_pinned_host(FILE *f, const struct ml_snapshot *s)
{
	const struct ml_layer_total *res = &s->layers[ML_LAYER_CUDA_HOST], *out = &s->layers[ML_LAYER_TORCH_HOST];
	char b1[32], b2[32], b3[32];

	if (!out->count)
		return;
	ml_fmt_bytes(b1, sizeof(b1), (double)res->bytes);
	ml_fmt_bytes(b2, sizeof(b2), (double)out->bytes);
	ml_fmt_bytes(b3, sizeof(b3), (double)res->bytes - (double)out->bytes);
	fprintf(f,
		"pinned host: reserved %s (cudaHostAlloc), handed out %s in %" PRIu64
		" blocks (torch_host, sizes asked), cached %s\n",
		b1, b2, out->count, b3);
}

void ml_text_devices(FILE *f, const struct ml_snapshot *s, const size_t *order)
{
	char b1[32], b2[32], b3[32];

	text_pinned_host(f, s);
	for (unsigned int d = 0; d <= ML_MAX_DEVICES; d++) {
		const struct ml_device_total *t = &s->devices[d];

		if (!t->seen)
			continue;
		ml_fmt_bytes(b1, sizeof(b1), (double)t->reserved);
		ml_fmt_bytes(b2, sizeof(b2), (double)t->allocated);
		ml_fmt_bytes(b3, sizeof(b3), (double)t->reserved - (double)t->allocated);
		if (d)
			fprintf(f, "cuda device %u: ", d - 1);
		else
			fprintf(f, "cuda device unknown: ");
		fprintf(f, "reserved %s, allocated to tensors %s, cached (reserved - allocated) %s", b1, b2, b3);
		if (t->pinned) {
			ml_fmt_bytes(b1, sizeof(b1), (double)t->pinned);
			fprintf(f, "; %s of it cannot be released: free space in segments that live blocks hold", b1);
			text_pins(f, s, order, device_of(d));
		}
		fputc('\n', f);
	}
}

static void json_pins(struct jw *w, const struct ml_snapshot *s, const size_t *order, int device)
{
	int shown = 0;

	jw_arr_begin(w, "pinned_by");
	for (size_t i = 0; i < s->npins && shown < ML_PINS_SHOWN; i++) {
		size_t n;

		if (s->pins[i].device != device || !s->pins[i].bytes)
			continue;
		n = ml_place_of(s, order, &s->pins[i].key);
		jw_obj_begin(w, NULL);
		if (n)
			jw_u64(w, "stack", n);
		else
			jw_null(w, "stack");
		jw_u64(w, "bytes", s->pins[i].bytes);
		jw_obj_end(w);
		shown++;
	}
	jw_arr_end(w);
}

void ml_json_devices(struct jw *w, const struct ml_snapshot *s, const size_t *order)
{
	jw_arr_begin(w, "devices");
	for (unsigned int d = 0; d <= ML_MAX_DEVICES; d++) {
		const struct ml_device_total *t = &s->devices[d];

		if (!t->seen)
			continue;
		jw_obj_begin(w, NULL);
		if (d)
			jw_u64(w, "device", d - 1);
		else
			jw_null(w, "device");
		jw_u64(w, "reserved_bytes", t->reserved);
		jw_u64(w, "allocated_bytes", t->allocated);
		jw_i64(w, "cached_bytes", (int64_t)t->reserved - (int64_t)t->allocated);
		jw_u64(w, "pinned_bytes", t->pinned);
		json_pins(w, s, order, device_of(d));
		jw_obj_end(w);
	}
	jw_arr_end(w);
}
