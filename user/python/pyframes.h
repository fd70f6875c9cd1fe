/* Python frames: finds a CPython interpreter in the target, configures the BPF frame walker, decodes frames. */
#ifndef ML_PYFRAMES_H
#define ML_PYFRAMES_H

#include <stdbool.h>
#include "lib/frames.h"
#include "lib/procmaps.h"

struct memleak_bpf;
struct ml_py_layout;
struct pyframes;

int pyframes__new(struct memleak_bpf *skel, int pid, struct pyframes **out);
void pyframes__free(struct pyframes *p); /* NULL-safe; removes the process from the BPF walker */

/*
 * Look at objects of maps not seen before for a CPython runtime (_PyRuntime and Py_Version). The first
 * one found of a supported version configures the BPF walker for the process and prints a notice; an
 * unsupported or inconsistent interpreter gives a one-line notice and native-only stacks. Returns 1
 * when the walker is configured (now or earlier), 0 when not, or -ENOMEM.
 */
int pyframes__sync(struct pyframes *p, const struct ml_maps *maps);

/*
 * Decode a captured frame: function (qualified name), file and line, read from the target's code object.
 * A frame whose code object is gone, was replaced, or reads as anything but a code object of the function
 * that ran it, decodes to func NULL: never to another function's name. The frame lives until
 * pyframes__free or the next pyframes__trim. Returns 0; 1 with *out NULL for a frame still being set up
 * (before its first traceable instruction), which tracebacks leave out too; or -ENOMEM.
 */
int pyframes__resolve(struct pyframes *p, const struct ml_pyframe_raw *raw, const struct ml_frame **out);

/*
 * Decode the code objects of n captured frames now, as their stack arrives (a module's body is freed once it
 * ran), so that names and line tables stay known after the process has gone: every report reads them from
 * this cache. Known ones cost a lookup. Safe from another thread than the reports'. 0 or -ENOMEM.
 */
int pyframes__learn(struct pyframes *p, const struct ml_pyframe_raw *raw, size_t n);
/* Code objects decoded by pyframes__learn so far, and the time it took. */
void pyframes__learn_stats(struct pyframes *p, uint64_t *codes, uint64_t *ns);

/* Tests: decode with this layout and these type objects (code, str, bytes), no interpreter search. */
void pyframes__use_layout(struct pyframes *p, const struct ml_py_layout *lay, const uint64_t types[3]);

/* Bound the caches: drops them when over their limit. Only between reports (frames handed out die). */
void pyframes__trim(struct pyframes *p);

#endif
