/* Prometheus metrics: one report summed by rank, role and layer, and the /metrics endpoint (libmicrohttpd). */
#define _GNU_SOURCE
#include "report/metrics.h"
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "attach/allocators.h"
#include "collect/ledger.h"
#include "collect/steps.h"
#include "judge/ranks.h"
#include "judge/verdict.h"
#include "lib/grow.h"
#include "lib/log.h"
#include "report/report.h"
#include "report/statview.h"

#define MAX_CONNECTIONS 16 /* scrapers at once; more wait */
#define CONN_TIMEOUT_S 10

/* One series group: every process of a rank with one role. */
struct group {
	const char *rank, *role;
	size_t procs;
	uint64_t candidates;
	uint64_t bytes[ML_LAYER_MAX], count[ML_LAYER_MAX];
	int64_t growth[ML_LAYER_MAX];
	double per_step[ML_LAYER_MAX]; /* its stepping processes' growth per step (collect/steps.h) */
	unsigned int stepped;	       /* the layers of which one of them has a per-step rate */
};

static const char *nz(const char *s)
{
	return s ? s : "";
}

static size_t group_of(struct group **g, size_t *n, size_t *cap, const struct ml_metric_proc *p)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(nz((*g)[i].rank), nz(p->rank)) && !strcmp((*g)[i].role, p->role))
			return i;
	if (ml_grow(g, cap, *n + 1, sizeof(**g)))
		return SIZE_MAX;
	(*g)[*n] = (struct group){.rank = nz(p->rank), .role = p->role};
	return (*n)++;
}

static const struct ml_metric_proc *proc_of(const struct ml_metrics_in *in, int tgid)
{
	for (size_t i = 0; i < in->nprocs; i++)
		if (in->procs[i].pid == tgid)
			return &in->procs[i];
	return NULL;
}

/* Label values here are digits, role and layer names, but a rank is read from the target: escape anyway. */
static void label(FILE *f, const char *k, const char *v, bool first)
{
	fprintf(f, "%s%s=\"", first ? "" : ",", k);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void series_start(FILE *f, const char *name, const struct group *g)
{
	fprintf(f, "%s{", name);
	label(f, "rank", g->rank, true);
	label(f, "role", g->role, false);
}

static void per_layer(FILE *f, const char *name, const struct group *g, size_t n, unsigned int layers, int what,
		      double elapsed)
{
	for (size_t i = 0; i < n; i++)
		for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
			if (!(layers & (1U << l)) || !strcmp(ml_layer_name(l), "unknown"))
				continue;
			series_start(f, name, &g[i]);
			label(f, "layer", ml_layer_name(l), false);
			if (what == 0)
				fprintf(f, "} %" PRIu64 "\n", g[i].bytes[l]);
			else if (what == 1)
				fprintf(f, "} %" PRIu64 "\n", g[i].count[l]);
			else
				fprintf(f, "} %.6g\n", elapsed > 0 ? (double)g[i].growth[l] / elapsed : 0.0);
		}
}

/* Sums the snapshot by group: every traced process's group exists, with or without memory. 0 or -ENOMEM. */
static int group_all(const struct ml_metrics_in *in, struct group **g, size_t *n, size_t *cap)
{
	const struct ml_snapshot *s = in->s;

	/* A rank that holds nothing reads 0. */
	for (size_t i = 0; i < in->nprocs; i++) {
		size_t k = group_of(g, n, cap, &in->procs[i]);

		if (k == SIZE_MAX)
			return -ENOMEM;
		(*g)[k].procs++;
	}
	for (size_t i = 0; s && i < s->nprocs; i++) {
		const struct ml_metric_proc *p = proc_of(in, s->procs[i].tgid);
		size_t k;

		if (!p)
			continue; /* exited: its series go with it */
		k = group_of(g, n, cap, p);
		if (k == SIZE_MAX)
			return -ENOMEM;
		for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
			double per_step;
			uint64_t nsteps;

			(*g)[k].bytes[l] += s->procs[i].layers[l].bytes;
			(*g)[k].count[l] += s->procs[i].layers[l].count;
			(*g)[k].growth[l] += s->procs[i].layers[l].growth_bytes;
			if (steps__layer_rate(steps__of(in->steps, s->procs[i].tgid), l, &per_step, &nsteps)) {
				(*g)[k].per_step[l] += per_step;
				(*g)[k].stepped |= 1U << l;
			}
		}
	}
	for (size_t i = 0; s && in->j && i < s->nrows; i++) {
		const struct ml_metric_proc *p;

		if (in->j[i].verdict != ML_V_GROWING || !(p = proc_of(in, s->rows[i].key.tgid)))
			continue;
		(*g)[group_of(g, n, cap, p)].candidates++; /* found above: never grows here */
	}
	return 0;
}

/* Every metric family, with its series per group. */
static void write_families(FILE *f, const struct ml_metrics_in *in, const struct group *g, size_t n)
{
	const struct ml_snapshot *s = in->s;

	family(f, "memleak_ai_outstanding_bytes", "gauge",
	       "Bytes allocated and not freed, summed over a rank's processes.");
	per_layer(f, "memleak_ai_outstanding_bytes", g, n, in->layers, 0, 0);
	family(f, "memleak_ai_outstanding_allocations", "gauge",
	       "Allocations not freed, summed over a rank's processes.");
	per_layer(f, "memleak_ai_outstanding_allocations", g, n, in->layers, 1, 0);
	family(f, "memleak_ai_growth_bytes_per_second", "gauge",
	       "Change of the outstanding bytes over the last report interval.");
	per_layer(f, "memleak_ai_growth_bytes_per_second", g, n, in->layers, 2, s ? s->elapsed_s : 0);
	family(f, "memleak_ai_growth_bytes_per_step", "gauge",
	       "Change of the outstanding bytes per training step (the step clock), over its last reports.");
	for (size_t i = 0; i < n; i++)
		for (unsigned int l = 0; l < ML_LAYER_MAX; l++) {
			if (!(g[i].stepped & (1U << l)))
				continue;
			series_start(f, "memleak_ai_growth_bytes_per_step", &g[i]);
			label(f, "layer", ml_layer_name(l), false);
			fprintf(f, "} %.6g\n", g[i].per_step[l]);
		}
	family(f, "memleak_ai_rank_over_median_bytes", "gauge",
	       "A rank that stands apart from its job's others in a layer: its outstanding bytes over their median.");
	for (size_t i = 0; in->ranks && i < in->ranks->n; i++) {
		const struct rank_apart *a = &in->ranks->apart[i];

		fputs("memleak_ai_rank_over_median_bytes{", f);
		label(f, "job", a->job ? a->job : "", true);
		label(f, "rank", a->rank, false);
		label(f, "layer", ml_layer_name(a->layer), false);
		fprintf(f, "} %.6g\n", (double)a->bytes - a->median_bytes);
	}
	family(f, "memleak_ai_leak_candidates", "gauge", "Stacks whose outstanding memory keeps growing.");
	for (size_t i = 0; i < n; i++) {
		series_start(f, "memleak_ai_leak_candidates", &g[i]);
		fprintf(f, "} %" PRIu64 "\n", g[i].candidates);
	}
	family(f, "memleak_ai_processes", "gauge", "Traced processes.");
	for (size_t i = 0; i < n; i++) {
		series_start(f, "memleak_ai_processes", &g[i]);
		fprintf(f, "} %zu\n", g[i].procs);
	}
	family(f, "memleak_ai_overhead_ratio", "gauge",
	       "Share of the traced processes' time spent in the tool's probes (NaN until measured).");
	if (in->overhead_ratio >= 0)
		fprintf(f, "memleak_ai_overhead_ratio %.6g\n", in->overhead_ratio);
	else
		fprintf(f, "memleak_ai_overhead_ratio NaN\n");
	family(f, "memleak_ai_dropped_events_total", "counter", "Events the tool could not record, by reason.");
	for (size_t i = 0;; i++) {
		unsigned int slot;
		const char *name;

		if (!ml_drop_stat(i, &slot, &name))
			break;
		fprintf(f, "memleak_ai_dropped_events_total{reason=\"%s\"} %" PRIu64 "\n", name,
			s ? s->stats[slot] : 0);
	}
	family(f, "memleak_ai_reports_total", "counter", "Reports made since start.");
	fprintf(f, "memleak_ai_reports_total %" PRIu64 "\n", in->reports);
}

int ml_metrics_render(const struct ml_metrics_in *in, char **out, size_t *len)
{
	struct group *g = NULL;
	size_t n = 0, cap = 0;
	FILE *f;
	int err = -ENOMEM;

	*out = NULL;
	*len = 0;
	if (group_all(in, &g, &n, &cap))
		goto out;
	f = open_memstream(out, len);
	if (!f)
		goto out;
	write_families(f, in, g, n);
	err = fclose(f) ? -ENOMEM : 0;
out:
	free(g);
	if (err) {
		free(*out);
		*out = NULL;
	}
	return err;
}

struct metrics_server {
	struct MHD_Daemon *d;
	pthread_mutex_t mu;
	char *text;
	size_t len;
	int port;
};

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct metrics_server *m = cls;
	struct MHD_Response *r;
	enum MHD_Result ret;
	unsigned int status = MHD_HTTP_OK;

	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		status = MHD_HTTP_METHOD_NOT_ALLOWED;
		r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	} else if (strcmp(url, "/metrics")) {
		static const char nf[] = "memleak-ai serves /metrics only\n";

		status = MHD_HTTP_NOT_FOUND;
		r = MHD_create_response_from_buffer(sizeof(nf) - 1, (void *)nf, MHD_RESPMEM_PERSISTENT);
	} else {
		pthread_mutex_lock(&m->mu);
		r = MHD_create_response_from_buffer(m->len, m->text ? m->text : "", MHD_RESPMEM_MUST_COPY);
		pthread_mutex_unlock(&m->mu);
		if (r)
			MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
						"text/plain; version=0.0.4; charset=utf-8");
	}
	if (!r)
		return MHD_NO;
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

int ml_parse_listen(const char *listen, struct ml_listen *a, const char **why)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
			*res = NULL;
	const char *colon = strrchr(listen, ':');
	char *host = NULL;
	unsigned long long port_num;
	char *end;
	int rc;

	*why = NULL;
	if (!colon || !colon[1]) {
		*why = "expected HOST:PORT (or :PORT for every address)";
		return -EINVAL;
	}
	if (listen[0] == '[') {
		if (colon[-1] != ']') {
			*why = "expected [IPV6]:PORT";
			return -EINVAL;
		}
		host = strndup(listen + 1, (size_t)(colon - listen - 2));
	} else if (colon > listen) {
		host = strndup(listen, (size_t)(colon - listen));
	}
	if (colon > listen && !host)
		return -ENOMEM;
	errno = 0;
	port_num = strtoull(colon + 1, &end, 10);
	if (colon[1] < '0' || colon[1] > '9' || errno || *end || port_num > 65535) {
		*why = "the port must be a number from 0 to 65535";
		free(host);
		return -EINVAL;
	}
	rc = getaddrinfo(host, colon + 1, &hints, &res);
	if (rc || !res || res->ai_addrlen > sizeof(a->sa)) {
		*why = rc ? gai_strerror(rc) : "no address";
		if (res)
			freeaddrinfo(res);
		free(host);
		return -EINVAL;
	}
	memcpy(&a->sa, res->ai_addr, res->ai_addrlen);
	a->len = res->ai_addrlen;
	freeaddrinfo(res);
	free(host);
	return 0;
}

int metrics_server__new(const struct ml_listen *a, struct metrics_server **out)
{
	struct metrics_server *m = calloc(1, sizeof(*m));
	struct sockaddr_storage sa = a->sa;
	const union MHD_DaemonInfo *info;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD; /* errors: the caller's one line */
	uint16_t port;
	sigset_t all, old;
	int err;

	*out = NULL;
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->mu, NULL);
	if (sa.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
					      : ((struct sockaddr_in *)&sa)->sin_port);
	/* The run's signals go to its signalfd: none to the server's thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	m->d = MHD_start_daemon(flags, port, NULL, NULL, answer, m, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)MAX_CONNECTIONS,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)CONN_TIMEOUT_S, MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!m->d) {
		err = errno ? -errno : -EADDRINUSE;
		ml_dbg("MHD_start_daemon on port %u: %s", port, strerror(-err));
		metrics_server__free(m);
		return err;
	}
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	m->port = info ? info->port : port;
	*out = m;
	return 0;
}

void metrics_server__publish(struct metrics_server *m, char *text, size_t len)
{
	char *old;

	pthread_mutex_lock(&m->mu);
	old = m->text;
	m->text = text;
	m->len = len;
	pthread_mutex_unlock(&m->mu);
	free(old);
}

int metrics_server__port(const struct metrics_server *m)
{
	return m->port;
}

void metrics_server__free(struct metrics_server *m)
{
	if (!m)
		return;
	if (m->d)
		MHD_stop_daemon(m->d);
	pthread_mutex_destroy(&m->mu);
	free(m->text);
	free(m);
}
