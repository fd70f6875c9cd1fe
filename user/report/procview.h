/* The per-process parts of a report (text and JSON): labels, the process tree, OOM kills, resident memory. */
#ifndef ML_PROCVIEW_H
#define ML_PROCVIEW_H

#include <stdio.h>
#include "collect/ledger.h"

struct jw;
struct stackview;

/* " (comm, role, rank R of W, job J, container ID)" after a process's pid; nothing when it is not known. */
void ml_text_labels(FILE *f, struct stackview *sv, int tgid);
/* The snapshot's processes in tree order, each followed by its children a level deeper. 0 or -ENOMEM. */
int ml_proc_tree(struct stackview *sv, const struct ml_snapshot *s, size_t *order, unsigned int *depth);
/* An "OOM: pid N ..." line for each process of the report (and root) the OOM killer chose. */
void ml_text_oom(FILE *f, struct stackview *sv, const struct ml_snapshot *s, int root);
/* A "memory: pid N RSS ..." line for each traced process whose memory was read. */
void ml_text_memory(FILE *f, struct stackview *sv, const struct ml_snapshot *s, const int *traced, size_t n);
/* A process's labels, exit reason and memory on its processes[] object (p: its totals, or NULL for none). */
void ml_json_proc(struct jw *w, struct stackview *sv, int pid, const struct ml_proc_total *p);

#endif
