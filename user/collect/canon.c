/* The stack ids rows are keyed by: stacks that read the same once cut are one, kept while they are in use. */
#include "collect/canon.h"
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include "lib/hash.h"
#include "lib/u64map.h"
#include "memleak.h"

struct canon {
	canon_fn fn;
	void *ctx;
	struct u64map ids;   /* mix(tgid, stack id) -> struct canon_ent, for the stacks of the last pass */
	struct u64map shown; /* mix(tgid, how it reads) -> struct shown_ent: the stack rows read that way use */
	uint32_t pass;	     /* passes so far: an entry not seen in one is dropped */
};

struct canon_ent {
	uint32_t tgid, pass;
	uint64_t raw, how, canon;
	unsigned int traits;
};

struct shown_ent {
	uint32_t tgid, pass; /* pass: the last sweep a live stack was shown by it */
	uint64_t how, first;
};

int canon__new(struct canon **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void canon__free(struct canon *c)
{
	if (!c)
		return;
	u64map__free_values(&c->ids);
	u64map__free_values(&c->shown);
	free(c);
}

void canon__set(struct canon *c, canon_fn fn, void *ctx)
{
	c->fn = fn;
	c->ctx = ctx;
}

void canon__begin(struct canon *c)
{
	c->pass++;
}

static uint64_t canon_key(uint32_t tgid, uint64_t id)
{
	uint64_t h = ml_hash_add(id, tgid);

	return h ? h : 1;
}

/* The stack rows show a captured one as: the first one in use that reads the same. */
static uint64_t shown_as(struct canon *c, uint32_t tgid, uint64_t id, uint64_t how)
{
	uint64_t key = canon_key(tgid, how);
	struct shown_ent *e = u64map__get(&c->shown, key);

	if (e && (e->tgid != tgid || e->how != how))
		return id; /* a colliding key: shown as itself */
	if (e)
		return e->first;
	e = malloc(sizeof(*e));
	if (!e || u64map__put(&c->shown, key, e)) {
		free(e);
		return id;
	}
	*e = (struct shown_ent){.tgid = tgid, .pass = c->pass, .how = how, .first = id};
	return id;
}

uint64_t canon__of(struct canon *c, uint32_t tgid, uint64_t id, unsigned int *traits)
{
	uint64_t key = canon_key(tgid, id);
	struct canon_ent *e;

	*traits = 0;
	if (!c->fn || id == ML_STACK_NONE)
		return id;
	e = u64map__get(&c->ids, key);
	if (e && (e->tgid != tgid || e->raw != id))
		return id; /* a colliding key: shown as itself */
	if (!e) {
		unsigned int t = 0;
		uint64_t how = c->fn(c->ctx, tgid, id, &t);

		e = malloc(sizeof(*e));
		if (!e || u64map__put(&c->ids, key, e)) {
			free(e);
			*traits = t;
			return id;
		}
		*e = (struct canon_ent){
		    .tgid = tgid, .raw = id, .how = how, .canon = how ? shown_as(c, tgid, id, how) : id, .traits = t};
	}
	e->pass = c->pass;
	*traits = e->traits;
	return e->canon;
}

/* An id entry seen in this pass stays, and keeps the way of reading it is shown by. */
static bool keep_id(void *ctx, uint64_t key, void *val)
{
	struct canon *c = ctx;
	struct canon_ent *e = val;
	struct shown_ent *se;

	if (e->pass != c->pass) {
		free(e);
		return false;
	}
	se = e->how ? u64map__get(&c->shown, canon_key(e->tgid, e->how)) : NULL;
	if (se && se->first == e->canon)
		se->pass = c->pass;
	return true;
}

/* A way of reading stays while a live stack is shown by it (one dropped is only learnt again). */
static bool keep_shown(void *ctx, uint64_t key, void *val)
{
	struct canon *c = ctx;
	struct shown_ent *se = val;

	if (se->pass == c->pass)
		return true;
	free(se);
	return false;
}

/* In place: rebuilding both maps each report was a fifth of the tool's CPU on 480,000 stacks of torch's import. */
void canon__sweep(struct canon *c)
{
	u64map__sweep(&c->ids, keep_id, c);
	u64map__sweep(&c->shown, keep_shown, c);
}
