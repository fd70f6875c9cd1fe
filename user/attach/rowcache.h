/*
 * What probing found in each object file, kept for the next process that maps the same file: a forked
 * DataLoader worker, or a node's other ranks under --match, is probed without reading its libraries'
 * symbols again (libtorch_cpu alone has a million of them, 0.5 s a read). Owned by the session, shared
 * by every tracee's probes; one thread uses it.
 */
#ifndef ML_ROWCACHE_H
#define ML_ROWCACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include "attach/rowfind.h"
#include "lib/u64map.h"

struct elf_syms;

/* A file as opened, and what it was looked for: a change to either is another entry. */
struct rowkey {
	dev_t dev;
	ino_t ino;
	off_t size;
	int64_t mtime_ns;
	unsigned int layers;
	bool as_libc, torch_raw;
};

/* Where one allocator row's function is in the file. */
struct rowat {
	bool ok;
	uint64_t off;
};

/*
 * The outcome for one file: err (0, or -ENOENT for a C library without malloc/free, -ENOEXEC for a file
 * that is no ELF object), whether it has USDT probes of a provider traced, and per allocator row where.
 */
struct rowplan {
	struct rowkey key;
	int err;
	bool usdts;
	struct rowat rows[];
};

/* Zero-initialised is empty. */
struct rowcache {
	struct u64map by_key;
};

/* The key of the file open at fd, looked for as o says. 0 or a negative errno. */
int rowkey__of(int fd, const struct rowfind_opts *o, struct rowkey *out);
/*
 * Fill a new plan from the object's symbols, looked for as o says: each row by file offset (ml_rows_find),
 * whether it has USDT probes of a provider traced, and plan->err = -ENOENT for a C library lacking a
 * required function. 0 or a negative errno.
 */
int rowplan__read(const struct elf_syms *syms, const struct rowfind_opts *o, struct rowplan *plan);
/* The plan kept for key, or NULL. A NULL cache keeps nothing. */
const struct rowplan *rowcache__get(const struct rowcache *c, const struct rowkey *key);
/* A plan for key with every row not found, to fill in; NULL when out of memory. free() it, or put it. */
struct rowplan *rowplan__new(const struct rowkey *key);
/* Keep plan (the cache owns it from now on, or frees it at once when c is NULL or full). 0 or -ENOMEM. */
int rowcache__put(struct rowcache *c, struct rowplan *plan);
void rowcache__clear(struct rowcache *c); /* frees every plan; the cache is empty again */

#endif
