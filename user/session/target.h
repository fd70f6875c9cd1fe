/* The traced process: checks that it exists, starts it for -c, and tells when it exits. */
#ifndef ML_TARGET_H
#define ML_TARGET_H

#include <stdbool.h>

struct target {
	int pid;
	int pidfd;     /* readable once the process has exited */
	bool spawned;  /* started by us (-c): reaped by us */
	int go_fd;     /* -c: writing here lets the child exec */
	int status_fd; /* -c: the child reports a failed exec here; EOF means exec succeeded */
	int exit_status;
	bool stopped; /* -c: held at its first instruction after exec */
	bool reaped;
};

/* Checks the privileges and kernel features memleak-ai needs; prints a one-line reason and returns -errno. */
int ml_check_system(void);
/*
 * The oldest kernel the BPF object loads on: it calls bpf_loop and bpf_find_vma (5.17). Whether a release string
 * ("6.18.0-1-amd64") is at least that, its major and minor in *major and *minor; one that does not parse passes.
 */
#define ML_KERNEL_MAJOR 5
#define ML_KERNEL_MINOR 17
bool ml_kernel_release_ok(const char *release, unsigned int *major, unsigned int *minor);

int target__open_pid(struct target *t, int pid);
/* Fork a child that waits, so that probes can be in place before its first instruction. */
int target__spawn(struct target *t, char *const argv[]);
/*
 * Let the spawned child exec. It is then held at the new image's first instruction until target__resume(),
 * so probes can be placed on it. Returns 0, or -errno when exec failed (the child has exited then).
 */
int target__release(struct target *t, const char *what);
void target__resume(struct target *t);
/*
 * Let a held child run until it stops with SIGSTOP (sent by the loader probe), passing its other signals
 * on. 0 when stopped so; -ETIMEDOUT when it had to be stopped after timeout_ms; -ECHILD when it exited.
 */
int target__run_until_stop(struct target *t, int timeout_ms);
bool target__alive(struct target *t);
/* Reap a spawned child if it exited; NULL-safe on a closed target. */
void target__close(struct target *t);

#endif
