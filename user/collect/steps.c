/* The step clock's counts per traced process (see steps.h). */
#include "collect/steps.h"
#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/grow.h"

struct steps {
	int map_fd;
	const char *func;
	uint32_t gen;	      /* reads made */
	uint64_t off_ns;      /* the time the clock was not probed, summed, as of the last read */
	double unseen_ns;     /* reads since the last with the clock probed in it: their steps are the next one's */
	struct step_count *v; /* by tgid */
	size_t n, cap;
};

int steps__new(int map_fd, const char *func, struct steps **out)
{
	struct steps *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->map_fd = map_fd;
	s->func = func;
	*out = s;
	return 0;
}

void steps__free(struct steps *s)
{
	if (!s)
		return;
	free(s->v);
	free(s);
}

/* The index tgid has, or would have, in s->v. */
static size_t find(const struct steps *s, int tgid)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].tgid < tgid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct step_count *steps__of(const struct steps *s, int tgid)
{
	size_t i = s ? find(s, tgid) : 0;

	return s && i < s->n && s->v[i].tgid == tgid ? &s->v[i] : NULL;
}

static struct step_count *add(struct steps *s, int tgid)
{
	size_t i = find(s, tgid);

	if (i < s->n && s->v[i].tgid == tgid)
		return &s->v[i];
	if (ml_grow(&s->v, &s->cap, s->n + 1, sizeof(*s->v)))
		return NULL;
	memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof(*s->v));
	s->n++;
	memset(&s->v[i], 0, sizeof(s->v[i]));
	s->v[i].tgid = tgid;
	return &s->v[i];
}

/*
 * Whether the process's next step is overdue: STEPS_LATE mean periods since its last. Not while one step alone gives
 * no period (a step may be long); always when the steps' times are not known.
 */
static bool overdue(const struct step_count *c, uint64_t now_ns, const struct steps_window *w)
{
	uint64_t n = c->count - c->first_count, late;

	if (!c->last_ns)
		return true;
	if (!n || c->last_ns <= c->first_ns)
		return false;
	late = STEPS_LATE * ((c->last_ns - c->first_ns) / n);
	/* sampled, a step is late only once the clock was probed that long in the read's interval */
	if (w->sampled && w->on_ns <= (double)late)
		return false;
	return now_ns > c->last_ns && now_ns - c->last_ns > late;
}

/* Remember a read's time and count, the newest STEPS_KEEP. */
static void keep_read(struct step_count *c, uint64_t now_ns)
{
	if (c->nreads && c->read_ns[c->nreads - 1] >= now_ns)
		return;
	if (c->nreads == STEPS_KEEP) {
		memmove(c->read_ns, c->read_ns + 1, (STEPS_KEEP - 1) * sizeof(c->read_ns[0]));
		memmove(c->read_count, c->read_count + 1, (STEPS_KEEP - 1) * sizeof(c->read_count[0]));
		c->nreads--;
	}
	c->read_ns[c->nreads] = now_ns;
	c->read_count[c->nreads++] = c->count;
}

double steps__count_at(const struct step_count *c, uint64_t t_ns)
{
	unsigned int i = c->nreads;
	uint64_t end;

	if (!c->nreads || t_ns >= c->read_ns[c->nreads - 1] || t_ns >= c->last_ns)
		return (double)c->count;
	while (i > 0 && c->read_ns[i - 1] > t_ns)
		i--;
	if (i == 0)
		return (double)c->read_count[0];
	/* steps made between read i-1 and read i; the newest interval's ended at the last step */
	end = i == c->nreads - 1 && c->last_ns < c->read_ns[i] ? c->last_ns : c->read_ns[i];
	if (end <= c->read_ns[i - 1])
		return (double)c->read_count[i];
	return (double)c->read_count[i - 1] + (double)(c->read_count[i] - c->read_count[i - 1]) *
						  (double)(t_ns - c->read_ns[i - 1]) /
						  (double)(end - c->read_ns[i - 1]);
}

/*
 * A process's new count, from the clock's: its steps since the read before, over the share of the interval it was
 * probed. A read without a step, the next one overdue, is a pause, up to STEPS_PAUSE_MAX_S.
 */
static void update(struct step_count *c, uint64_t raw, uint64_t raw_sampled, uint64_t last_ns, double interval_s,
		   uint64_t now_ns, const struct steps_window *w)
{
	uint64_t d = raw > c->raw ? raw - c->raw : 0,
		 ds = raw_sampled > c->raw_sampled ? raw_sampled - c->raw_sampled : 0;
	uint64_t count;

	c->raw += d;
	c->raw_sampled += ds;
	c->est += (double)d * w->scale;
	c->est_sampled += (double)ds * w->scale;
	c->sampled = (uint64_t)(c->est_sampled + 0.5);
	count = (uint64_t)(c->est + 0.5);
	c->delta = count > c->count ? count - c->count : 0;
	c->count = count;
	if (last_ns > c->last_ns)
		c->last_ns = last_ns;
	if (!c->first_ns) {
		c->first_ns = c->last_ns;
		c->first_count = count;
	}
	keep_read(c, now_ns);
	if (d || !overdue(c, now_ns, w)) {
		c->pause_s = 0;
		return;
	}
	if (c->pause_s < STEPS_PAUSE_MAX_S)
		c->paused_s +=
		    interval_s < STEPS_PAUSE_MAX_S - c->pause_s ? interval_s : STEPS_PAUSE_MAX_S - c->pause_s;
	c->pause_s += interval_s;
}

/* The read's interval: how long of it the clock was probed, and so what one step seen stands for. */
static struct steps_window window(struct steps *s, double interval_s, uint64_t now_ns, uint64_t on_ns)
{
	uint64_t off = now_ns > on_ns ? now_ns - on_ns : 0;
	double len = interval_s * 1e9, gap = off > s->off_ns ? (double)(off - s->off_ns) : 0;
	struct steps_window w = {.scale = 1, .on_ns = len};

	s->off_ns = off;
	if ((gap <= 0 && !s->unseen_ns) || len <= 0)
		return w;
	w.sampled = true;
	w.on_ns = len > gap ? len - gap : 0;
	if (w.on_ns * STEPS_SCALE_MAX <= len) { /* a read between windows (-i 0.5, a window a second) */
		s->unseen_ns += len;
		return w;
	}
	w.scale = (len + s->unseen_ns) / w.on_ns;
	s->unseen_ns = 0;
	return w;
}

int steps__read(struct steps *s, double interval_s, uint64_t now_ns, uint64_t on_ns)
{
	struct steps_window w = window(s, interval_s, now_ns, on_ns);
	uint32_t key = 0, next;
	bool first = true;
	int err;

	s->gen++;
	while (!(err = bpf_map_get_next_key(s->map_fd, first ? NULL : &key, &next))) {
		struct ml_steps v;
		struct step_count *c;

		first = false;
		key = next;
		if (bpf_map_lookup_elem(s->map_fd, &key, &v) || !v.count || key > 0x7fffffff)
			continue; /* deleted meanwhile */
		if (!(c = add(s, (int)key))) {
			err = -ENOMEM;
			break;
		}
		if (c->gen == s->gen)
			continue; /* a walk the map restarted (a key deleted under it): seen already */
		c->gen = s->gen;
		update(c, v.count, v.sampled, v.last_ns, interval_s, now_ns, &w);
		c->whole = v.by_step;
	}
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].gen != s->gen) /* gone from the map (forgotten), or not reached: no step seen this time */
			update(&s->v[i], s->v[i].raw, s->v[i].raw_sampled, 0, interval_s, now_ns, &w);
	return err == -ENOENT ? 0 : err;
}

void steps__keep_bytes(struct steps *s, int tgid, const int64_t bytes[ML_LAYER_MAX])
{
	struct step_count *c = (struct step_count *)steps__of(s, tgid);

	if (!c)
		return;
	if (c->nkept == STEPS_KEEP) {
		memmove(c->kept_steps, c->kept_steps + 1, (STEPS_KEEP - 1) * sizeof(c->kept_steps[0]));
		memmove(c->kept_bytes, c->kept_bytes + 1, (STEPS_KEEP - 1) * sizeof(c->kept_bytes[0]));
		c->nkept--;
	}
	c->kept_steps[c->nkept] = c->count;
	memcpy(c->kept_bytes[c->nkept], bytes, sizeof(c->kept_bytes[0]));
	c->nkept++;
}

bool steps__layer_rate(const struct step_count *c, unsigned int layer, double *per_step, uint64_t *nsteps)
{
	unsigned int last;

	if (!c || c->nkept < 2 || layer >= ML_LAYER_MAX)
		return false;
	last = c->nkept - 1;
	if (c->kept_steps[last] <= c->kept_steps[0])
		return false;
	*nsteps = c->kept_steps[last] - c->kept_steps[0];
	*per_step = (double)(c->kept_bytes[last][layer] - c->kept_bytes[0][layer]) / (double)*nsteps;
	return true;
}

const char *steps__func(const struct steps *s)
{
	return s->func;
}

bool steps__total_rate(const struct steps *s, unsigned int layer, double *per_step, uint64_t *nsteps)
{
	bool any = false;

	*per_step = 0;
	*nsteps = 0;
	for (size_t i = 0; s && i < s->n; i++) {
		double r;
		uint64_t n;

		if (!steps__layer_rate(&s->v[i], layer, &r, &n))
			continue;
		any = true;
		*per_step += r;
		if (n > *nsteps)
			*nsteps = n;
	}
	return any;
}

void steps__forget(struct steps *s, int tgid)
{
	size_t i;
	uint32_t key = (uint32_t)tgid;

	if (!s)
		return;
	(void)bpf_map_delete_elem(s->map_fd, &key);
	i = find(s, tgid);
	if (i < s->n && s->v[i].tgid == tgid) {
		memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof(*s->v));
		s->n--;
	}
}

size_t steps__procs(const struct steps *s, uint64_t *most)
{
	*most = 0;
	for (size_t i = 0; s && i < s->n; i++)
		if (s->v[i].count > *most)
			*most = s->v[i].count;
	return s ? s->n : 0;
}
