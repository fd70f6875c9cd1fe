/* What probing found in each object file, kept for the next process that maps it (rowcache.h). */
#include "attach/rowcache.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "attach/allocators.h"
#include "lib/elfsites.h"
#include "lib/elfsym.h"
#include "lib/hash.h"

int rowkey__of(int fd, const struct rowfind_opts *o, struct rowkey *out)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	memset(out, 0, sizeof(*out)); /* the padding too: keys are compared whole */
	out->dev = st.st_dev;
	out->ino = st.st_ino;
	out->size = st.st_size;
	out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	out->layers = o->layers;
	out->as_libc = o->as_libc;
	out->torch_raw = o->torch_raw;
	return 0;
}

static uint64_t hash_of(const struct rowkey *k)
{
	uint64_t h = ml_hash64((uint64_t)k->dev ^ ml_hash64((uint64_t)k->ino));

	h = ml_hash64(h ^ (uint64_t)k->size ^ ml_hash64((uint64_t)k->mtime_ns));
	return ml_hash64(h ^ k->layers ^ ((uint64_t)k->as_libc << 32) ^ ((uint64_t)k->torch_raw << 33));
}

const struct rowplan *rowcache__get(const struct rowcache *c, const struct rowkey *key)
{
	const struct rowplan *p = c ? u64map__get(&c->by_key, hash_of(key)) : NULL;

	/* Two keys of one hash: the later put replaced the earlier, and this one is a miss. */
	return p && !memcmp(&p->key, key, sizeof(*key)) ? p : NULL;
}

struct rowplan *rowplan__new(const struct rowkey *key)
{
	struct rowplan *p = calloc(1, sizeof(*p) + ml_allocators_n * sizeof(p->rows[0]));

	if (p)
		p->key = *key;
	return p;
}

int rowcache__put(struct rowcache *c, struct rowplan *plan)
{
	uint64_t h = hash_of(&plan->key);
	struct rowplan *old;
	int err;

	if (!c) {
		free(plan);
		return 0;
	}
	old = u64map__get(&c->by_key, h);
	err = u64map__put(&c->by_key, h, plan);
	if (err) {
		free(plan);
		return err;
	}
	free(old);
	return 0;
}

void rowcache__clear(struct rowcache *c)
{
	if (c)
		u64map__free_values(&c->by_key);
}

/* Whether the object has probes of a provider in ml_usdts, of a layer traced (most SDT notes are others'). */
static bool has_usdts(const struct elf_syms *syms, const struct rowfind_opts *o)
{
	for (unsigned int j = 0; j < ml_usdts_n; j++)
		if ((o->layers & (1U << ml_usdts[j].layer)) && elf_syms__has_sdt_provider(syms, ml_usdts[j].provider))
			return true;
	return false;
}

int rowplan__read(const struct elf_syms *syms, const struct rowfind_opts *o, struct rowplan *plan)
{
	struct found *found = calloc(ml_allocators_n, sizeof(*found));
	int err;

	if (!found)
		return -ENOMEM;
	err = ml_rows_find(syms, o, found);
	if (err == -ENOENT)
		plan->err = err; /* a C library without malloc/free: a plan like any other */
	for (unsigned int row = 0; row < ml_allocators_n && !err; row++)
		plan->rows[row].ok =
		    found[row].ok && !elf_syms__vaddr_to_offset(syms, found[row].vaddr, &plan->rows[row].off);
	plan->usdts = !err && !o->as_libc && has_usdts(syms, o);
	free(found);
	return err == -ENOENT ? 0 : err;
}
