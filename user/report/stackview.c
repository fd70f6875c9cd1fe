/* The frames of a row as every output shows them: native frames resolved, Python frames spliced in. */
#include "report/stackview.h"
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/hash.h"
#include "lib/path.h"
#include "python/pyframes.h"
#include "report/format.h"
#include "report/json.h"

/* The interpreter's eval loop: one native frame per run of Python frames. */
#define EVAL_LOOP "_PyEval_EvalFrameDefault"

struct stackview {
	struct ledger *l;
	stackview_lookup_fn lookup;
	void *ctx;
	struct symbolizer *sym; /* of the row being resolved */
	struct pyframes *py;
	struct ml_rawstack raw;
	/* Inlined functions make more frames than words: out grows to the longest row seen. */
	const struct ml_frame **out;
	size_t cap;
	struct ml_frame unknown[ML_MAX_FRAMES + 1 + ML_MAX_PYFRAMES]; /* frames nothing could be said about, by word */
};

static int reserve(struct stackview *sv, size_t need)
{
	const struct ml_frame **o;
	size_t cap = sv->cap ? sv->cap : ML_MAX_FRAMES + 1 + ML_MAX_PYFRAMES;

	while (cap < need)
		cap *= 2;
	if (cap == sv->cap)
		return 0;
	o = realloc(sv->out, cap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	sv->out = o;
	sv->cap = cap;
	return 0;
}

int stackview__new(struct ledger *l, stackview_lookup_fn lookup, void *ctx, struct stackview **out)
{
	struct stackview *sv = calloc(1, sizeof(*sv));

	*out = NULL;
	if (!sv)
		return -ENOMEM;
	sv->l = l;
	sv->lookup = lookup;
	sv->ctx = ctx;
	if (reserve(sv, 1)) {
		stackview__free(sv);
		return -ENOMEM;
	}
	*out = sv;
	return 0;
}

void stackview__free(struct stackview *sv)
{
	if (!sv)
		return;
	free(sv->out);
	free(sv);
}

/* Resolve the next stacks with this process's symbolizer and Python decoder; false when it is not known. */
static bool use_process(struct stackview *sv, uint32_t tgid)
{
	struct ml_resolver res = {};
	bool known = !sv->lookup(sv->ctx, (int)tgid, &res);

	sv->sym = known ? res.sym : NULL;
	sv->py = known ? res.py : NULL;
	return known;
}

int stackview__proc(struct stackview *sv, int tgid, struct ml_resolver *out)
{
	*out = (struct ml_resolver){};
	return sv->lookup(sv->ctx, tgid, out);
}

const char *stackview__heap(struct stackview *sv, int tgid)
{
	struct ml_resolver res = {};

	return sv->lookup(sv->ctx, tgid, &res) ? NULL : res.heap;
}

/* How many of the frame-pointer frames (after the caller) are shown: up to the first in no mapped object. */
static size_t native_shown(struct stackview *sv, const uint64_t *ips, size_t n)
{
	if (!sv->sym)
		return n;
	for (size_t k = 0; k < n; k++)
		if (!symbolizer__in_module(sv->sym, ips[k]))
			return k;
	return n;
}

uint64_t stackview__canon(void *ctx, uint32_t tgid, uint64_t stack_id, unsigned int *traits)
{
	struct stackview *sv = ctx;
	struct ml_row row = {.key = {.tgid = tgid, .stack_id = stack_id}};
	struct ml_rawstack *r = &sv->raw;
	uint64_t how = 0;
	size_t nn;

	if (!use_process(sv, tgid) || ledger__stack(sv->l, &row, r))
		return 0;
	nn = native_shown(sv, r->ips, r->nr);
	for (size_t k = 0; k < nn; k++)
		how = ml_hash_add(how, r->ips[k]);
	how = ml_hash_add(how, (0x5a5a0000ULL | nn));
	for (size_t k = 0; k < r->nr_py; k++) {
		const struct ml_frame *fr = NULL;

		how = ml_hash_add(how, r->py[k].code ^ ((uint64_t)r->py[k].instr << 47));
		how = ml_hash_add(how, r->py[k].check ^ r->py[k].entry);
		/* Import-time memory: importlib anywhere on the Python stack (the code is live: it just ran). */
		if (!(*traits & ML_ROW_IMPORT) && sv->py && !pyframes__resolve(sv->py, &r->py[k], &fr) && fr &&
		    ml_frame_is_import(fr))
			*traits |= ML_ROW_IMPORT;
	}
	how = ml_hash_add(how, r->flags);
	return how ? how : 1;
}

static const struct ml_frame *native(struct stackview *sv, size_t slot, uint64_t addr)
{
	const struct ml_frame *fr = NULL;

	if (sv->sym && !symbolizer__resolve(sv->sym, addr, &fr) && fr)
		return fr;
	/* unresolved: the address as the symbolizer would take it, without the exact-pc flag of a stack word */
	addr &= ~ML_IP_EXACT;
	sv->unknown[slot] = (struct ml_frame){.kind = ML_FRAME_NATIVE, .addr = addr, .offset = addr};
	return &sv->unknown[slot];
}

/* The decoded Python frame, or NULL for one to leave out (still being set up). */
static const struct ml_frame *python(struct stackview *sv, size_t slot, const struct ml_pyframe_raw *raw)
{
	const struct ml_frame *fr = NULL;
	int rc = sv->py ? pyframes__resolve(sv->py, raw, &fr) : -ENOENT;

	if (rc == 1)
		return NULL;
	if (!rc && fr)
		return fr;
	sv->unknown[slot] = (struct ml_frame){.kind = ML_FRAME_PYTHON,
					      .addr = raw->code,
					      .unresolved = rc == -ENOMEM ? "out of memory"
							    : sv->py	  ? "unreadable"
									  : "no Python decoder for its process"};
	return &sv->unknown[slot];
}

size_t stackview__frames(struct stackview *sv, const struct ml_row *row, const struct ml_frame *const **out,
			 unsigned int *flags)
{
	struct ml_rawstack *r = &sv->raw;
	size_t n = 0, pi = 0, nn, lead;

	use_process(sv, row->key.tgid);
	ledger__stack(sv->l, row, r);
	/* Native frames up to the first one outside every mapped object (the caller always stays). */
	lead = row->key.caller && r->nr ? 1 : 0;
	nn = lead + native_shown(sv, r->ips + lead, r->nr - lead);
	for (size_t k = 0; k < nn; k++) {
		const struct ml_frame *fr;

		/* room for this word's frames (inlined ones too) and every Python frame left */
		if (reserve(sv, n + ML_MAX_FRAMES + 1 + r->nr_py))
			break;
		fr = native(sv, k, r->ips[k]);
		for (; fr->outer && n + 1 < sv->cap; fr = fr->outer)
			sv->out[n++] = fr; /* functions inlined at this address, innermost first */
		if (pi < r->nr_py && fr->func && !strcmp(fr->func, EVAL_LOOP)) {
			/* This eval-loop call ran the Python frames up to the next one marked as its outermost. */
			bool last;

			do {
				last = r->py[pi].entry;
				sv->out[n] = python(sv, nn + pi, &r->py[pi]);
				n += sv->out[n] != NULL;
				pi++;
			} while (!last && pi < r->nr_py);
			continue;
		}
		sv->out[n++] = fr;
	}
	for (; pi < r->nr_py; pi++) {
		sv->out[n] = python(sv, nn + pi, &r->py[pi]);
		n += sv->out[n] != NULL;
	}
	*out = sv->out;
	if (flags)
		*flags = r->flags;
	return n;
}

const char *ml_frame_unresolved(const struct ml_frame *fr)
{
	return fr->unresolved ? fr->unresolved : "unknown";
}

void ml_put_row_line(FILE *f, struct stackview *sv, const struct ml_row *row)
{
	const struct ml_frame *const *frames;
	size_t n = stackview__frames(sv, row, &frames, NULL);
	char label[ML_FRAME_LABEL_MAX];

	for (size_t k = 0; k < n; k++)
		if (ml_frame_is_user_code(frames[k])) {
			ml_put_safe(f, frames[k]->file);
			fprintf(f, ":%d in ", frames[k]->line);
			ml_put_safe(f, frames[k]->func);
			return;
		}
	ml_put_safe(f, n ? ml_frame_label(frames[0], label, sizeof(label)) : "[no frames]");
}

uint64_t stackview__site(struct stackview *sv, const struct ml_row *r)
{
	const struct ml_frame *const *f;
	size_t n = stackview__frames(sv, r, &f, NULL);
	uint64_t h = 0;
	bool python = false;

	for (size_t i = 0; i < n; i++) {
		if (f[i]->kind != ML_FRAME_PYTHON)
			continue;
		python = true;
		h = ml_hash_str(f[i]->func, ml_hash_add(ml_hash_str(f[i]->file, h), (uint64_t)f[i]->line));
	}
	return python ? h : ml_key_hash(&r->key);
}

size_t stackview__unresolved(struct stackview *sv, const struct ml_snapshot *s, const size_t *order, size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		const struct ml_frame *const *frames;
		size_t nf = stackview__frames(sv, &s->rows[order ? order[i] : i], &frames, NULL);

		for (size_t k = 0; k < nf; k++)
			bad += frames[k]->kind == ML_FRAME_PYTHON && !frames[k]->func;
	}
	return bad;
}

const char *ml_frame_label(const struct ml_frame *fr, char *buf, size_t len)
{
	if (fr->kind == ML_FRAME_PYTHON) {
		const char *file = ml_base_name(fr->file);

		if (!fr->func) {
			snprintf(buf, len, "[python: unresolved, %s]", ml_frame_unresolved(fr));
			return buf;
		}
		if (fr->line > 0)
			snprintf(buf, len, "%s (%s:%d)", fr->func, file ? file : "?", fr->line);
		else
			snprintf(buf, len, "%s (%s)", fr->func, file ? file : "?");
		return buf;
	}
	if (fr->func)
		return fr->func;
	snprintf(buf, len, "0x%llx", (unsigned long long)fr->addr);
	return buf;
}

void ml_json_frames(struct jw *w, const struct ml_frame *const *frames, size_t n)
{
	jw_arr_begin(w, "frames");
	for (size_t k = 0; k < n; k++) {
		const struct ml_frame *fr = frames[k];

		jw_obj_begin(w, NULL);
		if (fr->kind == ML_FRAME_PYTHON && !fr->func) {
			/* Never a null frame: what could not be decoded says why (stats.python counts them). */
			char why[96];

			snprintf(why, sizeof(why), "<unresolved: %s>", ml_frame_unresolved(fr));
			jw_str(w, "kind", "python");
			jw_str(w, "func", why);
			jw_str(w, "file", "<unresolved>");
			jw_null(w, "line");
			jw_str(w, "unresolved", ml_frame_unresolved(fr));
			jw_u64(w, "code", fr->addr);
			jw_obj_end(w);
			continue;
		}
		if (fr->kind == ML_FRAME_PYTHON) {
			jw_str(w, "kind", "python");
			jw_str(w, "func", fr->func);
			jw_str(w, "file", fr->file);
			if (fr->line > 0)
				jw_i64(w, "line", fr->line);
			else
				jw_null(w, "line");
			jw_u64(w, "code", fr->addr);
			jw_obj_end(w);
			continue;
		}
		jw_str(w, "kind", "native");
		jw_str(w, "func", fr->func);
		jw_str(w, "module", fr->module);
		jw_u64(w, "offset", fr->offset);
		jw_str(w, "file", fr->file);
		if (fr->line > 0)
			jw_i64(w, "line", fr->line);
		else
			jw_null(w, "line");
		jw_u64(w, "addr", fr->addr);
		jw_bool(w, "inlined", fr->inlined);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}
