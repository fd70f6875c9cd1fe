/* Report output: the reporter, its table of output formats, and the files reports go to. */
#include "report/report.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include "report/emit.h"

int ml_open_output(const char *path, FILE **out)
{
	int fd, err;

	*out = stdout;
	if (!path)
		return 0;
	/* Reports can name a user's code paths: readable by the owner only; never follow a planted symlink. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		*out = NULL;
		return -errno;
	}
	*out = fdopen(fd, "w");
	if (!*out) {
		err = -errno;
		close(fd);
		return err;
	}
	return 0;
}

int reporter__new(FILE *out, const struct report_opts *o, struct stackview *sv, struct reporter **res)
{
	struct reporter *r = calloc(1, sizeof(*r));

	*res = r;
	if (!r)
		return -ENOMEM;
	r->out = out;
	r->o = *o;
	r->sv = sv;
	return 0;
}

void reporter__free(struct reporter *r)
{
	free(r);
}

/* The output formats, one row each: the name -f takes, and what writes a report in it. */
static const struct {
	const char *name;
	int (*emit)(struct reporter *r, const struct ml_snapshot *s, const struct ml_judgement *jv, const size_t *order,
		    uint64_t seq, bool final);
} formats[] = {
    [ML_FMT_TEXT] = {"text", ml_emit_text},
    [ML_FMT_JSON] = {"json", ml_emit_json},
    [ML_FMT_FOLDED] = {"folded", ml_emit_folded},
    [ML_FMT_PPROF] = {"pprof", ml_emit_pprof},
};

const char *ml_format_name(unsigned int format)
{
	return format < sizeof(formats) / sizeof(formats[0]) ? formats[format].name : NULL;
}

int reporter__emit(struct reporter *r, const struct report_in *in)
{
	int err;

	r->duration_ns = in->duration_ns;
	r->ov = in->ov;
	r->traced = in->traced;
	r->ntraced = in->ntraced;
	r->victims = in->victims;
	r->nvictims = in->nvictims;
	r->cuda_oom = in->cuda_oom;
	r->tables = in->tables;
	r->steps = in->steps;
	r->ranks = in->ranks;
	r->findings = in->findings;
	r->exited = in->exited;
	err = formats[r->o.format].emit(r, in->snap, in->judged, in->order, in->seq, in->final);

	if (err)
		return err;
	if (fflush(r->out) || ferror(r->out))
		return errno ? -errno : -EIO;
	return 0;
}
