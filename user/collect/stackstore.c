/* The stack dictionary: stacks by id, each a run of interned frame ids. */
#include "collect/stackstore.h"
#include <bpf/libbpf.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "lib/grow.h"
#include "lib/hash.h"
#include "lib/thread.h"

/*
 * Stacks share their outer frames: each is a path in a tree whose root side is the outermost word (the
 * thread's start, the script's module frame) and whose node for a stack is its innermost word. A node is
 * its parent node and its frame's id, 8 bytes, found again through an index of (parent, frame).
 */
struct node {
	uint32_t parent; /* node number + 1; 0: the root */
	uint32_t frame;
};

/* One stack: its id, its innermost node, and its header. 16 bytes. */
struct stack_ent {
	uint64_t id;
	uint32_t leaf;	   /* node number + 1; 0 for an empty stack */
	uint8_t nr, nr_py; /* ML_MAX_FRAMES and ML_MAX_PYFRAMES fit */
	uint16_t flags;
};

_Static_assert(ML_MAX_FRAMES <= 255 && ML_MAX_PYFRAMES <= 255, "stack counts fit a byte");

/* An open-addressing index of 32-bit entry numbers (+1; 0 = empty), at most half full. */
struct index32 {
	uint32_t *slot;
	size_t cap;
};

struct stackstore {
	uint64_t *frames; /* frame id -> stack word */
	size_t nframes, cap_frames;
	struct index32 fidx;
	struct stack_ent *ents;
	size_t nents, cap_ents;
	struct index32 sidx;
	struct node *nodes;
	size_t nnodes, cap_nodes;
	struct index32 nidx;
	/* The last stack added, outermost word first, with its nodes: the next one's shared outer words need no
	 * lookup (consecutive stacks of a thread mostly differ near the allocation). path_len 0: none. */
	uint64_t path_word[ML_STACK_WORDS];
	uint32_t path_node[ML_STACK_WORDS];
	size_t path_len;
	struct ring_buffer *rb;
	uint64_t received, collisions, malformed;
	/*
	 * The ring is read by a thread of its own: a job's start can make 100,000 new stacks a second, and
	 * the main loop stops for hundreds of milliseconds at a time (unwinding tables for a new library,
	 * a report). lock covers the dictionary, taken per record so a reader never waits long; ring_lock
	 * the ring's consumer side, which the reader thread and a drain share.
	 */
	pthread_mutex_t lock, ring_lock;
	pthread_t reader;
	bool reading, stop;
	int err;		  /* the reader's first failure, told by the next drain */
	size_t batch;		  /* records taken in this hold of the lock */
	stackstore_new_fn on_new; /* told of each stack kept, as it comes */
	void *on_new_ctx;
};

int stackstore__new(struct stackstore **out)
{
	struct stackstore *ss = calloc(1, sizeof(struct stackstore));

	*out = ss;
	if (!ss)
		return -ENOMEM;
	pthread_mutex_init(&ss->lock, NULL);
	pthread_mutex_init(&ss->ring_lock, NULL);
	return 0;
}

void stackstore__free(struct stackstore *ss)
{
	if (!ss)
		return;
	if (ss->reading) {
		__atomic_store_n(&ss->stop, true, __ATOMIC_RELAXED);
		pthread_join(ss->reader, NULL);
	}
	ring_buffer__free(ss->rb);
	pthread_mutex_destroy(&ss->lock);
	pthread_mutex_destroy(&ss->ring_lock);
	free(ss->frames);
	free(ss->fidx.slot);
	free(ss->ents);
	free(ss->sidx.slot);
	free(ss->nodes);
	free(ss->nidx.slot);
	free(ss);
}

/* The slot of key in ix: where its entry is, or the empty slot it would go to. */
static size_t index_find(const struct index32 *ix, uint64_t key,
			 bool (*is)(const struct stackstore *, uint32_t, uint64_t), const struct stackstore *ss)
{
	size_t mask = ix->cap - 1, i = ml_hash64(key) & mask;

	while (ix->slot[i] && !is(ss, ix->slot[i] - 1, key))
		i = (i + 1) & mask;
	return i;
}

static bool frame_is(const struct stackstore *ss, uint32_t n, uint64_t word)
{
	return ss->frames[n] == word;
}

static bool stack_is(const struct stackstore *ss, uint32_t n, uint64_t id)
{
	return ss->ents[n].id == id;
}

/* Room for one more entry (n entries now) in ix, rehashing the keys key_of gives. */
static int index_room(struct index32 *ix, size_t n, uint64_t (*key_of)(const struct stackstore *, uint32_t),
		      bool (*is)(const struct stackstore *, uint32_t, uint64_t), const struct stackstore *ss)
{
	struct index32 nx;

	if ((n + 1) * 2 <= ix->cap)
		return 0;
	nx.cap = ix->cap ? ix->cap * 2 : 1024;
	nx.slot = calloc(nx.cap, sizeof(*nx.slot));
	if (!nx.slot)
		return -ENOMEM;
	for (uint32_t e = 0; e < n; e++)
		nx.slot[index_find(&nx, key_of(ss, e), is, ss)] = e + 1;
	free(ix->slot);
	*ix = nx;
	return 0;
}

static uint64_t node_pack(uint32_t parent, uint32_t frame)
{
	return (uint64_t)parent << 32 | frame;
}

static bool node_is(const struct stackstore *ss, uint32_t n, uint64_t key)
{
	return node_pack(ss->nodes[n].parent, ss->nodes[n].frame) == key;
}

static uint64_t node_key(const struct stackstore *ss, uint32_t n)
{
	return node_pack(ss->nodes[n].parent, ss->nodes[n].frame);
}

/* The node of frame under parent (numbers + 1), made when new; -ENOMEM. */
static int64_t node_id(struct stackstore *ss, uint32_t parent, uint32_t frame)
{
	uint64_t key = node_pack(parent, frame);
	size_t i;

	if (index_room(&ss->nidx, ss->nnodes, node_key, node_is, ss) ||
	    ml_grow(&ss->nodes, &ss->cap_nodes, ss->nnodes + 1, sizeof(*ss->nodes)))
		return -ENOMEM;
	i = index_find(&ss->nidx, key, node_is, ss);
	if (ss->nidx.slot[i])
		return ss->nidx.slot[i];
	if (ss->nnodes >= UINT32_MAX - 1)
		return -ENOMEM;
	ss->nodes[ss->nnodes] = (struct node){.parent = parent, .frame = frame};
	ss->nidx.slot[i] = (uint32_t)++ss->nnodes;
	return (int64_t)ss->nnodes;
}

static uint64_t frame_key(const struct stackstore *ss, uint32_t n)
{
	return ss->frames[n];
}

static uint64_t stack_key(const struct stackstore *ss, uint32_t n)
{
	return ss->ents[n].id;
}

/* The id of a stack word, interned when new; -ENOMEM. */
static int64_t frame_id(struct stackstore *ss, uint64_t word)
{
	size_t i;

	if (index_room(&ss->fidx, ss->nframes, frame_key, frame_is, ss) ||
	    ml_grow(&ss->frames, &ss->cap_frames, ss->nframes + 1, sizeof(*ss->frames)))
		return -ENOMEM;
	i = index_find(&ss->fidx, word, frame_is, ss);
	if (ss->fidx.slot[i])
		return ss->fidx.slot[i] - 1;
	if (ss->nframes >= UINT32_MAX)
		return -ENOMEM;
	ss->frames[ss->nframes] = word;
	ss->fidx.slot[i] = (uint32_t)++ss->nframes;
	return (int64_t)ss->nframes - 1;
}

static const struct stack_ent *find(const struct stackstore *ss, uint64_t id)
{
	size_t i;

	if (!ss->sidx.cap)
		return NULL;
	i = index_find(&ss->sidx, id, stack_is, ss);
	return ss->sidx.slot[i] ? &ss->ents[ss->sidx.slot[i] - 1] : NULL;
}

/*
 * Whether a record under a known id is the stack kept: counts, flags and the innermost word. A stack the
 * kernel's cache evicted comes again with every event that has it, so this stays short of a full compare.
 */
static bool same_stack(const struct stackstore *ss, const struct stack_ent *e, const struct ml_stack *st)
{
	size_t n = e->nr + 2 * (size_t)e->nr_py;

	if (e->nr != st->nr || e->nr_py != st->nr_py || e->flags != st->flags)
		return false;
	return !n || (e->leaf && ss->frames[ss->nodes[e->leaf - 1].frame] == st->ips[0]);
}

static int add_locked(struct stackstore *ss, const void *rec, size_t len)
{
	const struct ml_stack *st = rec;
	const struct stack_ent *known;
	struct stack_ent e;
	size_t words, i;
	uint32_t leaf = 0;

	ss->received++;
	/* The record comes from the kernel, but its counts are checked as if the target had written them. */
	if (len < ML_STACK_HDR || st->nr > ML_MAX_FRAMES || st->nr_py > ML_MAX_PYFRAMES ||
	    ML_STACK_HDR + 8 * ((size_t)st->nr + 2 * (size_t)st->nr_py) > len) {
		ss->malformed++;
		return -EINVAL;
	}
	known = find(ss, st->id);
	if (known) {
		if (!same_stack(ss, known, st))
			ss->collisions++;
		return 1;
	}
	words = st->nr + 2 * (size_t)st->nr_py;
	if (ml_grow(&ss->ents, &ss->cap_ents, ss->nents + 1, sizeof(*ss->ents)) ||
	    index_room(&ss->sidx, ss->nents, stack_key, stack_is, ss))
		return -ENOMEM;
	/* From the outermost word in, so stacks that differ only near the allocation share every other node. */
	for (size_t k = words, p = 0, same = 1; k-- > 0; p++) {
		int64_t f, nd;

		if (same && p < ss->path_len && ss->path_word[p] == st->ips[k]) {
			leaf = ss->path_node[p];
			continue;
		}
		same = 0;
		f = frame_id(ss, st->ips[k]);
		nd = f < 0 ? f : node_id(ss, leaf, (uint32_t)f);
		if (nd < 0) {
			ss->path_len = 0; /* its words past p are another stack's */
			return (int)nd;
		}
		leaf = (uint32_t)nd;
		ss->path_word[p] = st->ips[k];
		ss->path_node[p] = leaf;
	}
	ss->path_len = words;
	e = (struct stack_ent){
	    .id = st->id, .leaf = leaf, .nr = (uint8_t)st->nr, .nr_py = (uint8_t)st->nr_py, .flags = st->flags};
	i = index_find(&ss->sidx, st->id, stack_is, ss);
	ss->ents[ss->nents] = e;
	ss->sidx.slot[i] = (uint32_t)++ss->nents;
	return 0;
}

int stackstore__add(struct stackstore *ss, const void *rec, size_t len)
{
	int err;

	pthread_mutex_lock(&ss->lock);
	err = add_locked(ss, rec, len);
	pthread_mutex_unlock(&ss->lock);
	return err;
}

void stackstore__on_new(struct stackstore *ss, stackstore_new_fn fn, void *ctx)
{
	pthread_mutex_lock(&ss->lock);
	ss->on_new = fn;
	ss->on_new_ctx = ctx;
	pthread_mutex_unlock(&ss->lock);
}

int stackstore__get(struct stackstore *ss, uint64_t id, struct ml_stack *out)
{
	const struct stack_ent *e;
	size_t n;

	pthread_mutex_lock(&ss->lock);
	e = find(ss, id);
	if (!e) {
		pthread_mutex_unlock(&ss->lock);
		return -ENOENT;
	}
	out->id = id;
	out->nr = e->nr;
	out->nr_py = e->nr_py;
	out->flags = e->flags;
	n = e->nr + 2 * (size_t)e->nr_py;
	for (uint32_t nd = e->leaf, k = 0; nd && k < n; nd = ss->nodes[nd - 1].parent, k++)
		out->ips[k] = ss->frames[ss->nodes[nd - 1].frame];
	pthread_mutex_unlock(&ss->lock);
	return 0;
}

/* Records taken under one hold of the lock: a reader of the dictionary waits for a batch at most. */
#define BATCH 4096

static int on_record(void *ctx, void *data, size_t len)
{
	struct stackstore *ss = ctx;
	int err = add_locked(ss, data, len);

	if (!err && ss->on_new)
		ss->on_new(ss->on_new_ctx, data);
	/* A malformed record is counted and skipped; only running out of memory stops the drain. */
	if (err == -ENOMEM)
		return err;
	return ++ss->batch >= BATCH ? -EAGAIN : 0;
}

/*
 * Take up to a batch of what the ring holds, the ring's consumer side and the dictionary both held.
 * Returns 1 when more is left, 0, or the first failure (kept for the next drain to tell).
 */
static int consume_batch(struct stackstore *ss)
{
	int n;

	pthread_mutex_lock(&ss->lock);
	ss->batch = 0;
	n = ring_buffer__consume(ss->rb);
	pthread_mutex_unlock(&ss->lock);
	if (n == -EAGAIN)
		return 1;
	if (n < 0 && !ss->err)
		ss->err = n;
	return ss->err;
}

static int consume(struct stackstore *ss)
{
	int n;

	pthread_mutex_lock(&ss->ring_lock);
	n = consume_batch(ss);
	pthread_mutex_unlock(&ss->ring_lock);
	return n;
}

static void *reader(void *arg)
{
	struct stackstore *ss = arg;
	struct pollfd p = {.fd = ring_buffer__epoll_fd(ss->rb), .events = POLLIN};

	int more = 0;

	while (!__atomic_load_n(&ss->stop, __ATOMIC_RELAXED)) {
		/* With a batch left over, no wait: only a turn for the main thread. The timeout bounds stopping. */
		int n = more ? 1 : poll(&p, 1, 100);

		if (more)
			sched_yield();
		if (n < 0 && errno != EINTR)
			break;
		more = 0;
		if (n > 0) {
			more = consume(ss);
			if (more < 0)
				break;
		}
	}
	return NULL;
}

int stackstore__attach(struct stackstore *ss, int ring_fd)
{
	int err;

	ss->rb = ring_buffer__new(ring_fd, on_record, ss, NULL);
	if (!ss->rb)
		return -errno;
	err = ml_thread_start(&ss->reader, reader, ss);
	if (err)
		return err;
	ss->reading = true;
	return 0;
}

int stackstore__drain(struct stackstore *ss)
{
	int err;

	if (!ss->rb)
		return 0;
	if (!ss->reading) {
		while ((err = consume(ss)) == 1)
			;
		return err;
	}
	/*
	 * The reader is at it when the ring's lock is taken: under a stream of new stacks its consume may not
	 * end while records keep coming, and the report must not wait for it. A stack it has not added yet
	 * shows unresolved in this report only.
	 */
	if (pthread_mutex_trylock(&ss->ring_lock))
		return 0;
	err = consume_batch(ss);
	pthread_mutex_unlock(&ss->ring_lock);
	return err < 0 ? err : 0;
}

/* The flags of stack id (or -ENOENT) and, with word, its innermost word: flags alone read no node. */
static int flags_of(struct stackstore *ss, uint64_t id, uint64_t *word)
{
	const struct stack_ent *e;
	int flags = -ENOENT;

	pthread_mutex_lock(&ss->lock);
	e = find(ss, id);
	if (e) {
		flags = e->flags;
		if (word)
			*word = e->leaf ? ss->frames[ss->nodes[e->leaf - 1].frame] : 0;
	}
	pthread_mutex_unlock(&ss->lock);
	return flags;
}

int stackstore__flags(struct stackstore *ss, uint64_t id)
{
	return flags_of(ss, id, NULL);
}

int stackstore__leaf(struct stackstore *ss, uint64_t id, uint64_t *word)
{
	*word = 0;
	return flags_of(ss, id, word);
}

void stackstore__stats(struct stackstore *ss, struct stackstore_stats *out)
{
	pthread_mutex_lock(&ss->lock);
	*out = (struct stackstore_stats){
	    .stacks = ss->nents,
	    .frames = ss->nframes,
	    .bytes = ss->cap_frames * sizeof(*ss->frames) + ss->fidx.cap * sizeof(*ss->fidx.slot) +
		     ss->cap_ents * sizeof(*ss->ents) + ss->sidx.cap * sizeof(*ss->sidx.slot) +
		     ss->cap_nodes * sizeof(*ss->nodes) + ss->nidx.cap * sizeof(*ss->nidx.slot),
	    .nodes = ss->nnodes,
	    .received = ss->received,
	    .collisions = ss->collisions,
	    .malformed = ss->malformed,
	};
	pthread_mutex_unlock(&ss->lock);
}
