/*
 * Prometheus metrics: each report summed by rank, role and layer (never by stack or pid, whose number has no
 * bound), rendered in the text exposition format and served on /metrics by an HTTP server of its own thread.
 */
#ifndef ML_METRICS_H
#define ML_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ml_snapshot;
struct ml_judgement;
struct ml_rank_view;

/* A traced process as the metrics see it. */
struct ml_metric_proc {
	int pid;
	const char *rank; /* NULL or "": no RANK in its environment */
	const char *role; /* "main" or "worker" */
};

struct ml_metrics_in {
	const struct ml_snapshot *s;
	const struct ml_judgement *j; /* parallel to s->rows */
	const struct ml_metric_proc *procs;
	size_t nprocs;
	unsigned int layers;		  /* the layers traced (bit mask of enum ml_layer) */
	double overhead_ratio;		  /* share of the traced processes' time in probes; < 0: not measured yet */
	const struct steps *steps;	  /* the step clocks (collect/steps.h), or NULL */
	const struct ml_rank_view *ranks; /* ranks that stand apart (judge/ranks.h), or NULL */
	uint64_t reports;
};

/* The text exposition of one report, malloc'd in *out (its length in *len). 0 or -ENOMEM. */
int ml_metrics_render(const struct ml_metrics_in *in, char **out, size_t *len);

struct metrics_server;

/* An address to listen on. */
struct ml_listen {
	struct sockaddr_storage sa;
	socklen_t len;
};

/*
 * HOST:PORT ("127.0.0.1:9400", "[::1]:9400", ":9400" for every address) into an address. -EINVAL with *why
 * saying what is wrong with it (a static string: errno cannot say), or -ENOMEM.
 */
int ml_parse_listen(const char *listen, struct ml_listen *a, const char **why);
/* Listen on a and serve /metrics. */
int metrics_server__new(const struct ml_listen *a, struct metrics_server **out);
/* What /metrics serves from now on; the server takes text (malloc'd). */
void metrics_server__publish(struct metrics_server *m, char *text, size_t len);
/* The port it listens on (the one asked for, or the kernel's pick for port 0). */
int metrics_server__port(const struct metrics_server *m);
void metrics_server__free(struct metrics_server *m); /* NULL-safe */

#endif
