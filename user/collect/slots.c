/* The allocation table's levels: made, mapped, published to the BPF side, searched (see slots.h). */
#include "collect/slots.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>
#include "lib/bpfchunks.h"
#include "lib/bpfstats.h"
#include "lib/log.h"
#include "lib/thread.h"
#include "memleak.skel.h"

struct slots_watch {
	pthread_t thread;
	int stop_fd; /* an eventfd: written to stop the thread */
	int ncpu;
	uint64_t *pcpu, full_seen; /* the per-CPU counters read, and the drops for a full chain seen last */
	unsigned int ahead;	   /* looks in a row that read ML_TABLE_AHEAD percent live (slots__step) */
	bool said;
};

#define SAMPLE 4096 /* slots read to judge the newest level's fill: a percent's precision, 192 KiB read */

static size_t level_bytes(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (len * sizeof(struct ml_slot) + page - 1) / page * page;
}

/* The next level, lv[n], of len slots made, mapped and put in the BPF side's array of maps, its mask told: all
 * of it but the top, which the BPF side reads levels up to, so that publishing it later costs nothing. */
static int make_level(struct slots *t, size_t len)
{
	unsigned int k = t->n;
	size_t bytes;
	void *p;

	t->skel->bss->table_masks[k] = (uint32_t)len - 1;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* The flags of the template in maps.bpf.h: BPF_F_INNER_MAP lets each level have a size of its own. */
	p = ml_bpf_inner_array(bpf_map__fd(t->skel->maps.table), k, sizeof(struct ml_slot), (uint32_t)len,
			       BPF_F_INNER_MAP, &bytes);
	if (!p)
		return -errno;
	t->lv[k] = (struct slots_level){p, len};
	__atomic_store_n(&t->spare, true, __ATOMIC_RELEASE);
	return 0;
}

/* The level made ahead published: the map before the top. */
static void publish(struct slots *t)
{
	unsigned int k = t->n;

	__atomic_store_n(&t->spare, false, __ATOMIC_RELAXED);
	__atomic_store_n(&t->n, k + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	t->skel->bss->table_top = k;
}

int slots__new(struct memleak_bpf *skel, uint64_t max_slots, struct slots **out)
{
	struct slots *t = calloc(1, sizeof(*t));
	int err;

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->skel = skel;
	t->max_slots = max_slots;
	err = make_level(t, max_slots < ML_TABLE_FIRST_SLOTS ? max_slots : ML_TABLE_FIRST_SLOTS);
	if (err) {
		free(t);
		return err;
	}
	publish(t);
	*out = t;
	return 0;
}

static void watch_stop(struct slots *t)
{
	struct slots_watch *w = t->watch;

	if (!w)
		return;
	if (write(w->stop_fd, &(uint64_t){1}, sizeof(uint64_t)) == sizeof(uint64_t))
		pthread_join(w->thread, NULL);
	close(w->stop_fd);
	free(w->pcpu);
	free(w);
	t->watch = NULL;
}

void slots__free(struct slots *t)
{
	if (!t)
		return;
	watch_stop(t);
	for (unsigned int k = 0; k < t->n + t->spare; k++)
		munmap(t->lv[k].v, level_bytes(t->lv[k].len));
	free(t);
}

uint64_t slots__capacity(const struct slots *t)
{
	uint64_t n = 0;

	for (unsigned int k = 0; k < t->n; k++)
		n += t->lv[k].len;
	return n;
}

uint64_t slots__bytes(const struct slots *t)
{
	unsigned int levels = __atomic_load_n(&t->n, __ATOMIC_ACQUIRE);
	uint64_t n = 0;

	levels += __atomic_load_n(&t->spare, __ATOMIC_ACQUIRE);
	for (unsigned int k = 0; k < levels; k++)
		n += level_bytes(t->lv[k].len);
	return n;
}

unsigned int slots__fill(struct slots *t)
{
	const struct slots_level *top = &t->lv[t->n - 1];
	size_t n = top->len < SAMPLE ? top->len : SAMPLE, live = 0;

	for (size_t j = 0; j < n; j++) {
		uint64_t a = __atomic_load_n(&top->v[(t->sample_at + j) & (top->len - 1)].addr, __ATOMIC_RELAXED);

		live += a != ML_SLOT_EMPTY && a != ML_SLOT_TOMB;
	}
	t->sample_at += n;
	return (unsigned int)(live * 100 / n);
}

int slots__prepare(struct slots *t)
{
	uint64_t have = slots__capacity(t), len = t->lv[t->n - 1].len * 4;

	if (t->spare)
		return 0;
	if (have >= t->max_slots || t->n >= ML_TABLE_LEVELS)
		return -ENOSPC;
	if (len > t->max_slots)
		len = t->max_slots;
	return make_level(t, len);
}

int slots__grow(struct slots *t)
{
	int err = slots__prepare(t);

	if (!err)
		publish(t);
	return err;
}

struct ml_slot *slots__find(struct slots *t, uint32_t tgid, uint8_t layer, uint64_t key)
{
	uint32_t start = (uint32_t)ml_slot_hash(tgid, layer, key);

	for (unsigned int k = t->n; k-- > 0;) {
		uint32_t mask = (uint32_t)t->lv[k].len - 1;

		for (uint32_t p = 0, i = start & mask; p < ML_MAX_PROBES; i = ml_slot_next(i, p, mask), p++) {
			struct ml_slot *s = &t->lv[k].v[i];
			uint64_t a = __atomic_load_n(&s->addr, __ATOMIC_ACQUIRE);

			if (a == key && s->tgid == tgid && s->layer == layer)
				return s;
			if (a == ML_SLOT_EMPTY)
				break;
		}
	}
	return NULL;
}

struct ml_slot *slots__claim(struct slots *t, uint32_t tgid, uint8_t layer, uint64_t key)
{
	const struct slots_level *top = &t->lv[t->n - 1];
	uint32_t start = (uint32_t)ml_slot_hash(tgid, layer, key), mask = (uint32_t)top->len - 1;

	for (int attempt = 0; attempt < 3; attempt++) {
		for (uint32_t p = 0, i = start & mask; p < ML_MAX_PROBES; i = ml_slot_next(i, p, mask), p++) {
			struct ml_slot *s = &top->v[i];
			uint64_t a = __atomic_load_n(&s->addr, __ATOMIC_ACQUIRE);

			if (a == key && s->tgid == tgid && s->layer == layer)
				return s;
			if ((a == ML_SLOT_EMPTY || a == ML_SLOT_TOMB) &&
			    __atomic_compare_exchange_n(&s->addr, &a, key, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
				return s;
			if (a == ML_SLOT_EMPTY)
				break;
		}
	}
	return NULL;
}

enum slots_step slots__step(unsigned int *ahead, unsigned int fill, bool dropped)
{
	if (dropped || fill >= ML_TABLE_FILL) {
		*ahead = 0;
		return SLOTS_GROW;
	}
	*ahead = fill >= ML_TABLE_AHEAD ? *ahead + 1 : 0;
	return *ahead >= SLOTS_AHEAD_LOOKS ? SLOTS_PREPARE : SLOTS_WAIT;
}

/*
 * When to look next: soon while the newest level is past half of ML_TABLE_AHEAD, else after SLOTS_IDLE_MS,
 * unless the probes' fastest recording (SLOTS_BURST_PER_S) could fill what is left below ML_TABLE_AHEAD in that
 * time. Looking every 20 ms read 9.6 MB/s of the table, a sixth of the tool's CPU on an idle torch loop.
 */
static int watch_wait_ms(const struct slots *t, unsigned int fill)
{
	const struct slots_level *top = &t->lv[t->n - 1];
	size_t left = fill < ML_TABLE_AHEAD ? top->len / 100 * (ML_TABLE_AHEAD - fill) : 0;

	if (fill * 2 >= ML_TABLE_AHEAD || left < (size_t)SLOTS_BURST_PER_S * SLOTS_IDLE_MS / 1000)
		return SLOTS_WATCH_MS;
	return SLOTS_IDLE_MS;
}

/* One look: the next level made once the newest reads ML_TABLE_AHEAD percent live (slots__step), and published
 * once it is ML_TABLE_FILL percent live or a record found no slot since the last look. Returns the wait for the next.
 */
static int watch_once(struct slots *t, struct slots_watch *w)
{
	uint64_t sum[ML_STAT_SLOTS], full = w->full_seen;
	unsigned int fill = slots__fill(t);
	int err = 0;

	if (!ml_stats_sum(bpf_map__fd(t->skel->maps.stats), w->ncpu, w->pcpu, sum))
		full = sum[ML_STAT_DROP_ALLOCS_FULL];
	switch (slots__step(&w->ahead, fill, full != w->full_seen)) {
	case SLOTS_WAIT: return watch_wait_ms(t, fill);
	case SLOTS_GROW:
		w->full_seen = full;
		err = slots__grow(t);
		if (!err)
			ml_info("allocation table: a level of %zu slots added, %llu slots in all (%llu MiB)",
				t->lv[t->n - 1].len, (unsigned long long)slots__capacity(t),
				(unsigned long long)(slots__bytes(t) >> 20));
		break;
	case SLOTS_PREPARE:
		if (t->spare)
			break;
		err = slots__prepare(t);
		if (!err)
			ml_info(
			    "allocation table: a level of %zu slots made ahead, unused until the newest is %d %% live",
			    t->lv[t->n].len, ML_TABLE_FILL);
		break;
	}
	if (err && err != -ENOSPC && !w->said)
		ml_notice("cannot add a level to the allocation table: %s", strerror(-err));
	w->said |= err && err != -ENOSPC;
	return SLOTS_WATCH_MS;
}

static void *watch_main(void *arg)
{
	struct slots *t = arg;
	struct pollfd p = {.fd = t->watch->stop_fd, .events = POLLIN};
	int wait = SLOTS_WATCH_MS;

	while (poll(&p, 1, wait) == 0)
		wait = watch_once(t, t->watch);
	return NULL;
}

int slots__watch(struct slots *t)
{
	struct slots_watch *w = calloc(1, sizeof(*w));
	int err = -ENOMEM;

	if (!w)
		return -ENOMEM;
	w->stop_fd = -1;
	w->ncpu = libbpf_num_possible_cpus();
	if (w->ncpu <= 0 || !(w->pcpu = calloc((size_t)w->ncpu * ML_STAT_SLOTS, sizeof(uint64_t))))
		goto fail;
	w->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (w->stop_fd < 0) {
		err = -errno;
		goto fail;
	}
	t->watch = w;
	err = ml_thread_start(&w->thread, watch_main, t);
	if (!err)
		return 0;
	t->watch = NULL;
fail:
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	free(w->pcpu);
	free(w);
	return err;
}
