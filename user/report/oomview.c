/*
 * The CUDA out-of-memory report's head. The raised message is the target's text (untrusted): it is shown
 * escaped, and the device and the request's size read from it only where PyTorch's wording is found
 * ("Tried to allocate 20.00 MiB. GPU 0 has ..."); a message cut at ML_OOM_MSG bytes says so.
 */
#include "report/oomview.h"
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attach/allocators.h"
#include "report/format.h"
#include "report/json.h"

void ml_oom_stack(const struct ml_cuda_oom *o, __u32 *tgid, __u64 *stack_id, __u64 *caller)
{
	*tgid = o->raised ? o->raise.hdr.tgid : o->fail.hdr.tgid;
	*stack_id = o->raised ? o->raise.stack_id : o->fail.stack_id;
	*caller = o->raised ? o->raise.caller : o->fail.caller;
}

/* The bytes of "Tried to allocate 20.00 MiB" (PyTorch's format_size: bytes, KiB, MiB, GiB), or 0. */
static uint64_t asked_bytes(const char *msg)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	const char *p = strstr(msg, "Tried to allocate ");
	char *end;
	double v;

	if (!p)
		return 0;
	v = strtod(p + strlen("Tried to allocate "), &end);
	if (end == p + strlen("Tried to allocate ") || *end != ' ' || !(v >= 0) || v > 1e15)
		return 0;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strncmp(end + 1, units[i], strlen(units[i])))
			return (uint64_t)llround(ldexp(v, 10 * (int)i));
	return 0;
}

/* The device of "GPU 3 has a total capacity", or -1. */
static int msg_device(const char *msg)
{
	const char *p = strstr(msg, ". GPU ");
	char *end;
	long d;

	if (!p || !isdigit((unsigned char)p[6]))
		return -1;
	d = strtol(p + 6, &end, 10);
	return *end == ' ' && d < 1024 ? (int)d : -1;
}

static int oom_device(const struct ml_cuda_oom *o)
{
	if (o->failed && o->fail.device >= 0)
		return o->fail.device;
	return o->raised ? msg_device(o->raise.msg) : -1;
}

/* The failed call's function, from its allocator row. */
static const char *fail_func(const struct ml_cuda_oom *o)
{
	return o->fail.spec < ml_allocators_n ? ml_allocators[o->fail.spec].func : "a CUDA allocation";
}

static bool msg_cut(const struct ml_oom_raise_event *e)
{
	return e->msg_len > strlen(e->msg);
}

void ml_text_cuda_oom(FILE *f, const struct ml_cuda_oom *o)
{
	__u32 tgid;
	__u64 stack_id, caller;
	int dev = oom_device(o);
	char b[32];

	ml_oom_stack(o, &tgid, &stack_id, &caller);
	fprintf(f, "CUDA out of memory: pid %u", tgid);
	if (dev >= 0)
		fprintf(f, ", device %d", dev);
	if (o->failed) {
		ml_fmt_bytes(b, sizeof(b), (double)o->fail.size);
		fprintf(f, ": %s of %s failed (error %d)", fail_func(o), b, o->fail.error);
	}
	fprintf(f, "%s; this report is the memory at that moment\n", o->raised ? ": c10::OutOfMemoryError raised" : "");
	if (!o->raised)
		return;
	fputs("  \"", f);
	for (const unsigned char *p = (const unsigned char *)o->raise.msg; *p; p++)
		fputc(*p >= 0x20 && *p < 0x7f ? *p : '?', f);
	fprintf(f, "\"%s\n", msg_cut(&o->raise) ? "... (cut)" : "");
}

void ml_json_cuda_oom(struct jw *w, const struct ml_cuda_oom *o)
{
	__u32 tgid;
	__u64 stack_id, caller;
	int dev = oom_device(o);

	ml_oom_stack(o, &tgid, &stack_id, &caller);
	jw_i64(w, "pid", tgid);
	if (dev >= 0)
		jw_i64(w, "device", dev);
	else
		jw_null(w, "device");
	if (o->failed) {
		jw_str(w, "function", fail_func(o));
		jw_u64(w, "bytes", o->fail.size);
		jw_i64(w, "error", o->fail.error);
	} else {
		uint64_t asked = asked_bytes(o->raise.msg);

		jw_str(w, "function", "c10::OutOfMemoryError");
		if (asked)
			jw_u64(w, "bytes", asked);
		else
			jw_null(w, "bytes");
		jw_null(w, "error");
	}
	jw_str(w, "message", o->raised ? o->raise.msg : NULL);
	jw_bool(w, "message_cut", o->raised && msg_cut(&o->raise));
}
