/*
 * Unwinding tables for the BPF side: each executable file a traced process maps gets its .eh_frame and
 * .debug_frame turned into rows in a shared BPF array (once per file, however many processes map it), and
 * each process gets the list of its mappings that have a table. Tables no traced process maps are evicted.
 */
#ifndef MEMLEAK_AI_UNWIND_H
#define MEMLEAK_AI_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/procmaps.h"
#include "memleak.h"

struct memleak_bpf;
struct unwinder;

/* What a sync may spend building tables beyond those that come first, before a thread takes the rest. */
#define UNWIND_SYNC_MS 200

struct unwind_opts {
	const char *debug_dir; /* where separate debug files are looked for; NULL: the default */
	uint64_t mem;	       /* the most the row and index arrays may hold (--unwind-mem) */
	bool background;       /* build what a sync has no time for in a thread; false: every table at once */
	uint32_t sync_ms;      /* with background: how long a sync builds before files past the first rank wait */
};

/* The tables built in the background so far. */
struct unwind_loading {
	uint32_t pending;    /* files whose table is not built yet */
	uint32_t background; /* tables the thread built */
	uint64_t queued;     /* files ever queued */
	double all_loaded_s; /* the last time the queue ran empty: seconds from the first file queued then; <0: never */
};

/* Row and index capacity for a memory budget. */
void unwind_capacity(uint64_t mem, uint32_t *rows, uint32_t *index);

/* After load: the row and index arrays start empty and grow a chunk at a time as tables are placed. */
int unwinder__new(struct memleak_bpf *skel, const struct unwind_opts *o, struct unwinder **out);
void unwinder__free(struct unwinder *u); /* NULL-safe */

/*
 * Bring the tables of pid's executable file mappings in (building those of files not seen before, or queueing
 * them: see unwind.c) and publish its mapping list to BPF. Files whose table cannot be built (no .eh_frame, not
 * x86-64, no room) or is not built yet are left out of the list: their frames fall back to frame pointers.
 * Returns the number of mappings with a table now, -ENOMEM, or -errno from the map update.
 */
int unwinder__sync(struct unwinder *u, int pid, const struct ml_maps *maps);
/*
 * The same for a process stopped until this returns (-c's stops at its loader's reports): only the tables that
 * allocations come from are built now, the rest by the builder thread, since every ms here is the target's.
 */
int unwinder__sync_held(struct unwinder *u, int pid, const struct ml_maps *maps);

/* Where background building stands; unwinder__wait returns once nothing is pending. */
void unwinder__loading(struct unwinder *u, struct unwind_loading *out);
/* Once a report: tables that waited 5 s raise the builder to normal priority (uwbuild__hurry). */
void unwinder__tick(struct unwinder *u);
void unwinder__wait(struct unwinder *u);

/* pid is gone or ran exec: its list goes, and tables no other process maps are evicted. */
void unwinder__forget(struct unwinder *u, int pid);

/* One table, for the report and benchmarks. */
struct unwind_file_info {
	const char *path;
	uint32_t rows, pages; /* rows and index entries in the BPF maps */
	uint64_t bytes;	      /* their memory */
	uint64_t build_ns;    /* time to parse and convert */
	uint32_t users;	      /* processes mapping it */
	bool debug_file;      /* a separate debug file was found (and searched for .debug_frame) */
};

size_t unwinder__n_files(struct unwinder *u);
int unwinder__file(struct unwinder *u, size_t i, struct unwind_file_info *out); /* 0 or -ENOENT */

/* Totals: rows in use and capacity, files left without a table for want of room. */
void unwinder__usage(struct unwinder *u, uint64_t *rows_used, uint64_t *rows_cap, uint64_t *no_room);

/* Kernel memory the row and index chunks created so far hold (mapped once in this process). */
uint64_t unwinder__memory(const struct unwinder *u);

/* Row i and index entry i as the BPF side reads them; NULL where no table was ever placed. */
const struct ml_urow *unwinder__row(const struct unwinder *u, uint32_t i);
const uint32_t *unwinder__index(const struct unwinder *u, uint32_t i);

#endif
