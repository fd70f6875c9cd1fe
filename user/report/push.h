/*
 * Profiles to a store: each traced process's profile (pprof) every interval, sent to a Pyroscope-style
 * /ingest endpoint by a thread of its own (libcurl), and/or written into a directory for any store's
 * uploader. A store that is down never blocks tracing: the queue is bounded (PUSH_QUEUE_MAX profiles,
 * PUSH_QUEUE_BYTES in all), the oldest dropped first and counted.
 */
#ifndef ML_PUSH_H
#define ML_PUSH_H

#include <stddef.h>
#include <stdint.h>

#define PUSH_QUEUE_MAX 64
#define PUSH_QUEUE_BYTES (64u << 20)
#define PUSH_TRIES 3 /* a profile the store refused or did not answer is sent at most this often */

struct pusher_opts {
	const char *url;	     /* --push: the store's base URL (…/ingest is added unless there); NULL: none */
	const char *tenant;	     /* X-Scope-OrgID, or NULL */
	const char *service;	     /* application name; NULL: "memleak-ai" */
	const char *token;	     /* bearer token, or NULL */
	const char *user, *password; /* basic auth, or NULL */
	const char *dir;	     /* --pprof-dir, or NULL */
	uint32_t keep;		     /* profiles kept in dir */
	double max_age_s;	     /* and none older than this; 0: no limit */
};

/* What a profile is of: the labels the store files it under. */
struct push_meta {
	int pid;
	const char *rank, *role, *job; /* NULL: not set */
	uint64_t from_s, until_s;      /* the interval it covers, Unix seconds */
	uint64_t seq;		       /* the report's number */
};

/* failed: profiles tried at least once and never taken; dropped: never tried (a full queue, or left at exit). */
struct push_stats {
	uint64_t sent, failed, dropped, written;
};

struct pusher;

/* --pprof-dir: made if missing (0700); -ENOTDIR when it is not a directory. */
int pusher__make_dir(const char *dir);
/* With o->url, starts the sender thread; o->dir is made already (pusher__make_dir). */
int pusher__new(const struct pusher_opts *o, struct pusher **out);
/* Send (and/or write) one gzipped profile; the pusher takes buf (malloc'd). 0 or a negative errno. */
int pusher__submit(struct pusher *p, const struct push_meta *m, void *buf, size_t len);
/* Waits up to about two seconds for the queue to drain, then drops what is left (counted). NULL-safe. */
void pusher__free(struct pusher *p);
/* The same, with the final counts in *st. */
void pusher__free_after(struct pusher *p, struct push_stats *st);

/* The /ingest URL of one profile, malloc'd (for the tests too). NULL: out of memory. */
char *ml_push_url(const char *base, const char *service, const struct push_meta *m);

#endif
