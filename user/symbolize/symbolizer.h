/* Turns runtime code addresses of one target process into functions, modules and source lines. */
#ifndef MEMLEAK_AI_SYMBOLIZER_H
#define MEMLEAK_AI_SYMBOLIZER_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/frames.h"

struct symbolizer;

/*
 * -ESRCH when the process is gone. Separate debug files are looked for under debug_dir (NULL: /usr/lib/debug)
 * inside the process's root.
 */
int symbolizer__new(int pid, const char *debug_dir, struct symbolizer **out);
void symbolizer__free(struct symbolizer *s); /* NULL-safe */

/*
 * Re-read the maps and keep an fd of every executable file mapping not seen before, so frames
 * resolve after the target has exited. Known modules (dev + inode + start) are kept; old ones are
 * dropped only where a new executable mapping now covers their addresses.
 * Returns 0, -ESRCH when the process is gone (the old state stays usable), -ENOMEM.
 */
int symbolizer__refresh(struct symbolizer *s);
/* The same from maps the caller has just read of the same process (a rescan reads them once for all its uses). */
struct ml_maps;
int symbolizer__update(struct symbolizer *s, const struct ml_maps *maps);

/*
 * Resolve a return address (symbol and line are looked up at addr - 1, offset is reported from
 * addr; with ML_IP_EXACT set, at the address itself). Functions inlined there come first: *out is the
 * innermost, and each frame's outer leads to the next, the real function last. Cached per address;
 * *out stays valid until symbolizer__free. Unknown addresses give a frame with func NULL. An address outside the known
 * mappings re-reads the maps, at most once per 100 ms; one left unknown that way is tried again on a later call, so a
 * later call for the same address may return a different (resolved) frame. Calling symbolizer__refresh before a batch
 * of new stacks avoids the wait. Returns 0 or -ENOMEM.
 */
int symbolizer__resolve(struct symbolizer *s, uint64_t addr, const struct ml_frame **out);

/*
 * Whether a return address lies in a mapped object (what resolve reports as a frame with a module), without
 * looking up its symbol. An unknown address re-reads the maps as resolve does.
 */
bool symbolizer__in_module(struct symbolizer *s, uint64_t addr);

#endif
