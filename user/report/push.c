/* Profiles to a store: a bounded queue, a sender thread (libcurl), and a directory kept to a number of files. */
#define _GNU_SOURCE
#include "report/push.h"
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/grow.h"
#include "lib/log.h"
#include "lib/thread.h"

#define FILE_PREFIX "memleak-ai-"
#define FILE_SUFFIX ".pb.gz"
#define SEND_TIMEOUT_S 5L

struct item {
	struct push_meta m;
	char *rank, *role, *job; /* owned copies behind m's pointers */
	void *buf;
	size_t len;
	int tries;
};

struct pusher {
	struct pusher_opts o;
	char *auth_header, *tenant_header;
	pthread_t thread;
	bool started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item q[PUSH_QUEUE_MAX]; /* a ring */
	size_t head, n, bytes;
	struct push_stats st;
	bool told_failing;
};

static void item_free(struct item *it)
{
	free(it->rank);
	free(it->role);
	free(it->job);
	free(it->buf);
	*it = (struct item){};
}

/* Percent-encode what a query value must not hold as it is. */
static void put_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c))
			fputc(c, f);
		else
			fprintf(f, "%%%02X", c);
	}
}

char *ml_push_url(const char *base, const char *service, const struct push_meta *m)
{
	size_t blen = strlen(base), len;
	const char *kv[3][2] = {{"rank", m->rank}, {"role", m->role}, {"job", m->job}};
	bool first = true;
	char *out = NULL;
	FILE *f = open_memstream(&out, &len);
	FILE *nf;
	char *nbuf = NULL;
	size_t nlen;

	if (!f)
		return NULL;
	while (blen && base[blen - 1] == '/')
		blen--;
	fwrite(base, 1, blen, f);
	if (blen < 7 || strncmp(base + blen - 7, "/ingest", 7))
		fputs("/ingest", f);
	/* name=SERVICE{rank=1,role=main}: Pyroscope's labels ride in the application name. */
	nf = open_memstream(&nbuf, &nlen);
	if (!nf) {
		fclose(f);
		free(out);
		return NULL;
	}
	fprintf(nf, "%s{", service ? service : "memleak-ai");
	for (int k = 0; k < 3; k++)
		if (kv[k][1] && *kv[k][1]) {
			fprintf(nf, "%s%s=%s", first ? "" : ",", kv[k][0], kv[k][1]);
			first = false;
		}
	fputc('}', nf);
	if (fclose(nf)) {
		fclose(f);
		free(out);
		free(nbuf);
		return NULL;
	}
	fputs("?name=", f);
	put_escaped(f, nbuf);
	free(nbuf);
	fprintf(f, "&from=%" PRIu64 "&until=%" PRIu64 "&format=pprof&spyName=memleak-ai", m->from_s, m->until_s);
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	return out;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

/* One POST; 0 on a 2xx answer, or a negative errno. The sender thread has no caller to print: a notice here,
 * once while the store keeps failing. */
static int send_one(struct pusher *p, CURL *c, const struct item *it)
{
	struct curl_slist *h = NULL;
	char *url = ml_push_url(p->o.url, p->o.service, &it->m);
	long code = 0;
	CURLcode rc;
	int err = 0;

	if (!url)
		return -ENOMEM;
	h = curl_slist_append(h, "Content-Type: application/octet-stream");
	if (p->tenant_header)
		h = curl_slist_append(h, p->tenant_header);
	if (p->auth_header)
		h = curl_slist_append(h, p->auth_header);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, it->buf);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, SEND_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (p->o.user) {
		curl_easy_setopt(c, CURLOPT_USERNAME, p->o.user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, p->o.password ? p->o.password : "");
	}
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (rc != CURLE_OK || code < 200 || code > 299) {
		err = rc != CURLE_OK ? -EIO : -EPROTO;
		if (!p->told_failing)
			ml_notice("--push: the store %s (%s); profiles are queued (at most %d) and retried",
				  rc != CURLE_OK ? "cannot be reached" : "refused a profile",
				  rc != CURLE_OK ? curl_easy_strerror(rc) : "an HTTP status other than 2xx",
				  PUSH_QUEUE_MAX);
		p->told_failing = true;
	} else if (p->told_failing) {
		ml_notice("--push: the store takes profiles again");
		p->told_failing = false;
	}
	curl_slist_free_all(h);
	free(url);
	return err;
}

/* A profile that will not be sent: refused or not answered when it was tried at least once, else dropped unsent. */
static void give_up(struct pusher *p, struct item *it)
{
	if (it->tries)
		p->st.failed++;
	else
		p->st.dropped++;
	item_free(it);
}

static void *sender(void *arg)
{
	struct pusher *p = arg;
	CURL *c = curl_easy_init();

	pthread_mutex_lock(&p->mu);
	while (!p->stop || p->n) {
		struct item it;
		int err;

		if (!p->n) {
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		it = p->q[p->head];
		p->q[p->head] = (struct item){};
		p->head = (p->head + 1) % PUSH_QUEUE_MAX;
		p->n--;
		p->bytes -= it.len;
		pthread_mutex_unlock(&p->mu);
		err = c ? send_one(p, c, &it) : -ENOMEM;
		pthread_mutex_lock(&p->mu);
		if (!err) {
			p->st.sent++;
		} else if (++it.tries < PUSH_TRIES && !p->stop && p->n < PUSH_QUEUE_MAX &&
			   p->bytes + it.len <= PUSH_QUEUE_BYTES) {
			/* Back to the end of the queue, after a pause that does not hold the lock. */
			p->q[(p->head + p->n) % PUSH_QUEUE_MAX] = it;
			p->n++;
			p->bytes += it.len;
			it = (struct item){};
			{
				struct timespec ts;

				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_sec += 1;
				pthread_cond_timedwait(&p->cv, &p->mu, &ts);
			}
		} else {
			give_up(p, &it);
		}
		item_free(&it);
	}
	pthread_mutex_unlock(&p->mu);
	if (c)
		curl_easy_cleanup(c);
	return NULL;
}

int pusher__make_dir(const char *dir)
{
	struct stat st;
	int err;

	if (mkdir(dir, 0700) && errno != EEXIST) {
		err = -errno;
		ml_dbg("mkdir %s: %s", dir, strerror(-err));
		return err;
	}
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return 0;
}

int pusher__new(const struct pusher_opts *o, struct pusher **out)
{
	struct pusher *p = calloc(1, sizeof(*p));
	int err = 0;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->o = *o;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (!o->url)
		goto done;
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		ml_dbg("--push: curl_global_init failed");
		err = -ENOMEM;
		goto done;
	}
	if ((o->tenant && asprintf(&p->tenant_header, "X-Scope-OrgID: %s", o->tenant) < 0) ||
	    (o->token && asprintf(&p->auth_header, "Authorization: Bearer %s", o->token) < 0)) {
		err = -ENOMEM;
		goto done;
	}
	err = ml_thread_start(&p->thread, sender, p);
	p->started = !err;
done:
	if (err)
		pusher__free(p);
	else
		*out = p;
	return err;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Keep the newest o.keep profiles of the directory, none older than o.max_age_s: names sort by time (a
 * fixed-width Unix time first), which is also their age.
 */
static void prune(struct pusher *p)
{
	DIR *d = opendir(p->o.dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;

	if (!d)
		return;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (strncmp(de->d_name, FILE_PREFIX, strlen(FILE_PREFIX)) || l < strlen(FILE_SUFFIX) ||
		    strcmp(de->d_name + l - strlen(FILE_SUFFIX), FILE_SUFFIX))
			continue;
		if (ml_grow(&names, &cap, n + 1, sizeof(*names)) || !(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		unsigned long long stamp = strtoull(names[i] + strlen(FILE_PREFIX), NULL, 10);
		bool old = p->o.max_age_s > 0 && (double)stamp + p->o.max_age_s < (double)time(NULL);

		if (i + p->o.keep >= n && !old)
			continue;
		int dfd = open(p->o.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd >= 0) {
			unlinkat(dfd, names[i], 0);
			close(dfd);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* DIR/memleak-ai-TIME-SEQ-pPID[-rRANK].pb.gz, written under a temporary name and renamed whole. */
static int write_file(struct pusher *p, const struct push_meta *m, const void *buf, size_t len)
{
	char *path = NULL, *tmp = NULL;
	int fd, err = 0;

	if (asprintf(&path, "%s/" FILE_PREFIX "%012" PRIu64 "-%08" PRIu64 "-p%d%s%s" FILE_SUFFIX, p->o.dir, m->until_s,
		     m->seq, m->pid, m->rank ? "-r" : "", m->rank ? m->rank : "") < 0)
		return -ENOMEM;
	if (asprintf(&tmp, "%s.tmp", path) < 0) {
		free(path);
		return -ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len || fsync(fd) || rename(tmp, path))
		err = errno ? -errno : -EIO;
	if (fd >= 0)
		close(fd);
	if (err)
		unlink(tmp);
	free(tmp);
	free(path);
	if (!err)
		prune(p);
	return err;
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *d = s ? strdup(s) : NULL;

	if (s && !d)
		*oom = true;
	return d;
}

int pusher__submit(struct pusher *p, const struct push_meta *m, void *buf, size_t len)
{
	struct item it = {.m = *m, .buf = buf, .len = len};
	bool oom = false;
	int err = 0;

	if (p->o.dir) {
		err = write_file(p, m, buf, len);
		pthread_mutex_lock(&p->mu);
		if (!err)
			p->st.written++;
		pthread_mutex_unlock(&p->mu);
		if (err)
			ml_notice("--pprof-dir %s: cannot write a profile: %s", p->o.dir, strerror(-err));
	}
	if (!p->started) {
		free(buf);
		return err;
	}
	it.rank = dup_or_null(m->rank, &oom);
	it.role = dup_or_null(m->role, &oom);
	it.job = dup_or_null(m->job, &oom);
	it.m.rank = it.rank;
	it.m.role = it.role;
	it.m.job = it.job;
	if (oom) {
		item_free(&it);
		return -ENOMEM;
	}
	pthread_mutex_lock(&p->mu);
	/* Full: the oldest profile goes, so the store gets the newest when it comes back. */
	while (p->n && (p->n >= PUSH_QUEUE_MAX || p->bytes + len > PUSH_QUEUE_BYTES)) {
		p->bytes -= p->q[p->head].len;
		give_up(p, &p->q[p->head]);
		p->head = (p->head + 1) % PUSH_QUEUE_MAX;
		p->n--;
	}
	if (len > PUSH_QUEUE_BYTES) {
		p->st.dropped++;
		item_free(&it);
	} else {
		p->q[(p->head + p->n) % PUSH_QUEUE_MAX] = it;
		p->n++;
		p->bytes += len;
	}
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return err;
}

void pusher__free(struct pusher *p)
{
	struct push_stats st;

	pusher__free_after(p, &st);
}

void pusher__free_after(struct pusher *p, struct push_stats *st)
{
	*st = (struct push_stats){};
	if (!p)
		return;
	if (p->started) {
		/* Let the queue drain for a moment; a store that is down does not hold the exit up for long. */
		for (int i = 0; i < 20; i++) {
			size_t n;

			pthread_mutex_lock(&p->mu);
			n = p->n;
			pthread_mutex_unlock(&p->mu);
			if (!n)
				break;
			usleep(100000);
		}
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		while (p->n) {
			give_up(p, &p->q[p->head]);
			p->head = (p->head + 1) % PUSH_QUEUE_MAX;
			p->n--;
		}
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->thread, NULL);
		curl_global_cleanup();
	}
	*st = p->st;
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->auth_header);
	free(p->tenant_header);
	free(p);
}
