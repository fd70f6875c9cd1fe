/* The tool's cost in a report: its text lines and its "overhead" and "modes" JSON objects. */
#include "report/costview.h"
#include <inttypes.h>
#include "attach/allocators.h"
#include "collect/cost.h"
#include "report/json.h"

void ml_cost_parts(const struct ml_overhead *ov, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (unsigned int l = 0; l < ML_LAYER_MAX && n < len; l++)
		if (ov->layer_pct[l] >= ML_COST_PART_MIN)
			n += (size_t)snprintf(buf + n, len - n, "%s%s %.1f%%", n ? ", " : "", ml_layer_name(l),
					      ov->layer_pct[l]);
	if (n < len && ov->other_pct >= ML_COST_PART_MIN)
		snprintf(buf + n, len - n, "%sother %.1f%%", n ? ", " : "", ov->other_pct);
}

/* The cost line, the C heap's mode and what the budget shed. */
void ml_text_overhead(FILE *f, const struct ml_overhead *ov)
{
	if (ov->measured)
		fprintf(
		    f,
		    "overhead: %.1f%% of the traced processes' time (%.1f%% since attach; budget %g%%): %.0f probe "
		    "hits/s at %.2f us (a return %.2f us more%s), BPF %.1f ms/s; memleak-ai itself %.1f%% of a CPU\n",
		    ov->pct, ov->pct_since_attach, ov->budget_pct, ov->hits_per_s, ov->hit_ns / 1000, ov->ret_ns / 1000,
		    ov->calibrated ? "" : "; not calibrated yet", ov->bpf_ns_per_s / 1e6, ov->self_cpu_pct);
	if (ov->heap_mode)
		fprintf(f,
			"libc: heap-growth mode since report #%" PRIu64 " (probing every malloc cost %.1f%%, decided "
			"%.2f s after attach): the C heap falls back to the address space each stack added (program "
			"break beyond its peak, anonymous mmap)%s, not malloc blocks\n",
			ov->heap_since_report, ov->full_pct, ov->decided_after_s,
			ov->rss_fallback ? " and the resident pages each stack touched (the rss layer)" : "");
	if (ov->heap_window_one_in) {
		fprintf(f,
			"libc: sampled in windows, its probes on 1/%u of the time (%" PRIu64 " windows): each block "
			"recorded stands for %.1f (the work done outside windows too)",
			ov->heap_window_one_in, ov->heap_windows, ov->heap_window_weight);
		if (ov->heap_window_unchecked)
			fprintf(f, "; not glibc, so a block stays recorded until a window sees it released or its "
				   "address handed out again\n");
		else
			fprintf(f,
				", and glibc's chunk headers, read between windows, found %" PRIu64 " of %" PRIu64
				" checks released since\n",
				ov->heap_freed, ov->heap_swept);
	}
	for (int st = 0; st < ML_SHED_N; st++) {
		if (!(ov->shed & (1U << st)))
			continue;
		fprintf(f, "budget: %s shed since report #%" PRIu64 " (it cost %.1f%%", ml_shed_name((enum ml_shed)st),
			ov->shed_report[st], ov->shed_pct[st]);
		if (st == ML_SHED_RSS_SAMPLING)
			fprintf(f, "; sampling interval doubled %u times", ov->rss_doublings);
		if (st == ML_SHED_TORCH_CPU_SAMPLING)
			fprintf(f, "; its allocations traced 1/%u of the time, each record standing for %u",
				1U << ov->tensor_halvings, 1U << ov->tensor_halvings);
		if (st == ML_SHED_STEP_SAMPLING)
			fprintf(f, "; its probe on 1/%u of the time, the steps estimated from those seen",
				1U << ov->step_halvings);
		fprintf(f, ")\n");
	}
	if (ov->over_unshed) {
		char parts[ML_COST_PARTS_LEN];

		ml_cost_parts(ov, parts, sizeof(parts));
		fprintf(f,
			"budget: over it, and nothing left to shed: %s stay (tensor probes go only at five times the "
			"budget, as they name leaks in Python code; CUDA calls, heap growth and following never)\n",
			parts);
	}
}

/* The "overhead" object: the tool's cost, as measured. */
static void json_cost(struct jw *w, const struct ml_overhead *ov)
{
	jw_obj_begin(w, "overhead");
	jw_bool(w, "measured", ov->measured);
	jw_double(w, "pct", ov->pct);
	jw_double(w, "pct_since_attach", ov->pct_since_attach);
	jw_double(w, "budget_pct", ov->budget_pct);
	jw_double(w, "hits_per_s", ov->hits_per_s);
	jw_double(w, "hit_ns", ov->hit_ns);
	jw_double(w, "ret_ns", ov->ret_ns);
	jw_double(w, "bpf_ns_per_s", ov->bpf_ns_per_s);
	jw_double(w, "cpu_per_s", ov->cpu_per_s);
	jw_double(w, "tool_cpu_pct", ov->self_cpu_pct);
	jw_bool(w, "calibrated", ov->calibrated);
	jw_obj_begin(w, "layer_pct");
	for (unsigned int l = 0; l < ML_LAYER_MAX; l++)
		if (ov->layer_pct[l] > 0)
			jw_double(w, ml_layer_name(l), ov->layer_pct[l]);
	jw_obj_end(w);
	jw_double(w, "other_pct", ov->other_pct);
	if (ov->decided_after_s > 0)
		jw_double(w, "decided_after_s", ov->decided_after_s);
	jw_obj_end(w);
}

/* The "modes" object: the C heap's mode and each step the budget shed. */
static void json_modes(struct jw *w, const struct ml_overhead *ov)
{
	jw_obj_begin(w, "modes");
	jw_str(w, "libc", ov->heap_mode ? "heap_growth" : "full");
	if (ov->heap_mode) {
		jw_arr_begin(w, "libc_fallback");
		jw_str(w, NULL, "heap_growth");
		if (ov->rss_fallback)
			jw_str(w, NULL, "rss");
		jw_arr_end(w);
		jw_double(w, "libc_full_pct", ov->full_pct);
		jw_u64(w, "libc_since_report", ov->heap_since_report);
		if (ov->heap_window_one_in) {
			jw_obj_begin(w, "libc_windows");
			jw_u64(w, "one_in", ov->heap_window_one_in);
			jw_u64(w, "windows", ov->heap_windows);
			jw_double(w, "weight", ov->heap_window_weight);
			jw_u64(w, "checked", ov->heap_swept);
			jw_u64(w, "released", ov->heap_freed);
			jw_str(w, "releases", ov->heap_window_unchecked ? "in_windows" : "chunk_headers");
			jw_obj_end(w);
		}
	}
	jw_bool(w, "over_budget_unshed", ov->over_unshed);
	jw_arr_begin(w, "shed");
	for (int st = 0; st < ML_SHED_N; st++) {
		if (!(ov->shed & (1U << st)))
			continue;
		jw_obj_begin(w, NULL);
		jw_str(w, "step", ml_shed_name((enum ml_shed)st));
		jw_u64(w, "since_report", ov->shed_report[st]);
		jw_double(w, "pct", ov->shed_pct[st]);
		if (st == ML_SHED_RSS_SAMPLING)
			jw_u64(w, "doublings", ov->rss_doublings);
		if (st == ML_SHED_TORCH_CPU_SAMPLING || st == ML_SHED_STEP_SAMPLING)
			jw_u64(w, "one_in",
			       1U << (st == ML_SHED_STEP_SAMPLING ? ov->step_halvings : ov->tensor_halvings));
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

void ml_json_overhead(struct jw *w, const struct ml_overhead *ov)
{
	json_cost(w, ov);
	json_modes(w, ov);
}
