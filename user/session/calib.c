/*
 * The probe-cost calibration: the floor a trap costs, whatever its program does, measured on this machine as
 * the traced processes pay it (see calib.h). A thread of its own times a child of memleak-ai without probes and
 * with empty ones; a kill and the child's reaping end it on every path.
 */
#define _GNU_SOURCE
#include "session/calib.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "attach/uprobe_multi.h"
#include "lib/clock.h"
#include "lib/elfsym.h"
#include "lib/log.h"
#include "lib/thread.h"

#define CALIB_CALLS 2000 /* malloc + free pairs a timing (about 20 ms with probes) */
#define CALIB_REPS 3	 /* timings of each setup, the fastest kept: a preempted run only ever adds */

enum calib_state { CALIB_IDLE, CALIB_RUNNING, CALIB_DONE };

/* The child that is timed: its pipes (commands in, timings out) and where its malloc and free are probed. */
struct calib_child {
	pid_t pid;
	int cmd, res;
	char *path;
	uint64_t off[3]; /* probe 0: malloc, 1: free, 2: malloc's return */
};

struct calib {
	pthread_t thread;
	_Atomic int state;
	int prog; /* uprobe_multi kernels: a do-nothing program of its own, loaded before the object (-1: none) */
	const struct bpf_program *obj_prog; /* otherwise the object's (progs.calib) */
	int stop; /* an eventfd: calib__free's word to stop waiting for the child (-1: none, it waits it out) */
	struct calib_child child;
	struct calib_figures fig; /* written by the thread before it says CALIB_DONE */
};

int calib__new(struct calib **out)
{
	struct calib *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->prog = -1;
	c->child.cmd = c->child.res = -1;
	c->stop = eventfd(0, EFD_CLOEXEC);
	*out = c;
	return 0;
}

void calib__free(struct calib *c)
{
	if (!c)
		return;
	if (atomic_load(&c->state) != CALIB_IDLE) {
		if (c->stop >= 0 && eventfd_write(c->stop, 1))
			ml_dbg("cannot stop the probe-cost calibration: %s", strerror(errno));
		pthread_join(c->thread, NULL);
	}
	if (c->stop >= 0)
		close(c->stop);
	if (c->prog >= 0)
		close(c->prog);
	free(c);
}

/*
 * Work between the pairs: a target does some between its allocator calls, which leaves the trap's code and
 * data colder than a tight loop of calls would (the floor a target paid in `make bench` rose by a sixth with
 * work between its pairs). Reading this much memory a line at a time evicts the first-level caches.
 */
#define CALIB_COOL_BYTES (256 * 1024)

/* CPU ns a malloc + free pair and the work after it (CPU time, not wall time: other load must not count). */
static double time_calls(const volatile unsigned char *cool)
{
	uint64_t t0 = ml_clock_ns(CLOCK_THREAD_CPUTIME_ID);
	unsigned int sum = 0;

	for (int i = 0; i < CALIB_CALLS; i++) {
		void *p = malloc(64);

		asm volatile("" : : "r"(p) : "memory");
		free(p);
		for (size_t b = 0; cool && b < CALIB_COOL_BYTES; b += 64)
			sum += cool[b];
	}
	asm volatile("" : : "r"(sum));
	return (double)(ml_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / CALIB_CALLS;
}

/*
 * The calibration probes the C library's own malloc and free (the functions whose probes cost the most),
 * in a child of memleak-ai, as the probes run in the traced processes. How a hit is handled depends on
 * the probed instruction (one the kernel emulates, or one stepped out of line), so no stand-in would do.
 * The child answers each 'm' on cmd with the ns a malloc + free pair and the work after it take: the fastest
 * of CALIB_REPS timings after a warm-up (which also sets up the out-of-line area of a new probe). The same
 * work in every timing, the differences are the traps'.
 */
static void calib_child(int cmd, int res)
{
	unsigned char *cool = calloc(1, CALIB_COOL_BYTES); /* NULL: timed without the work, a tight loop */
	char c;

	while (read(cmd, &c, 1) == 1 && c == 'm') {
		double v, best;

		time_calls(cool);
		best = time_calls(cool);
		for (int i = 1; i < CALIB_REPS; i++)
			if ((v = time_calls(cool)) < best)
				best = v;
		if (write(res, &best, sizeof(best)) != sizeof(best))
			break;
	}
	_exit(0);
}

/*
 * One timing from the child, waited for CALIB_ANSWER_MS at most, or until exit says stop: a child forked while
 * another thread held the allocator's lock (curl's threads under AddressSanitizer, with --push) never answers,
 * and calibration then fails (1 us a hit) instead of holding memleak-ai's exit up.
 */
#define CALIB_ANSWER_MS 10000

static int ask(const struct calib *c, double *out)
{
	struct pollfd p[2] = {{.fd = c->child.res, .events = POLLIN}, {.fd = c->stop, .events = POLLIN}};

	if (write(c->child.cmd, "m", 1) != 1)
		return -EIO;
	if (poll(p, 2, CALIB_ANSWER_MS) < 1)
		return -ETIMEDOUT;
	if (p[1].revents)
		return -ECANCELED;
	return read(c->child.res, out, sizeof(*out)) == sizeof(*out) ? 0 : -EIO;
}

/* Where malloc and free of this process live: file and offsets, for a probe. */
static int find_allocator(char **path, uint64_t *off_malloc, uint64_t *off_free)
{
	struct elf_syms *es = NULL;
	uint64_t vm, vf;
	Dl_info info;
	int fd, err;

	if (!dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info) || !info.dli_fname)
		return -ENOENT;
	fd = open(info.dli_fname, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = elf_syms__open(fd, &es);
	close(fd);
	if (err)
		return err;
	err = elf_syms__find(es, "malloc", &vm, NULL);
	if (!err)
		err = elf_syms__find(es, "free", &vf, NULL);
	if (!err)
		err = elf_syms__vaddr_to_offset(es, vm, off_malloc);
	if (!err)
		err = elf_syms__vaddr_to_offset(es, vf, off_free);
	elf_syms__free(es);
	if (err)
		return err;
	*path = strdup(info.dli_fname);
	return *path ? 0 : -ENOMEM;
}

/* Probe 0: malloc, 1: free, 2: malloc's return, in the child, as the traced processes' probes are made. */
static int calib_attach(struct calib *c, int i, struct bpf_link **l, int *lfd)
{
	uint64_t cookie = 0, off = c->child.off[i];

	if (c->prog >= 0) {
		*lfd = ml_uprobe_multi_attach(c->prog, c->child.path, &off, &cookie, 1, i == 2, c->child.pid);
		return *lfd < 0 ? *lfd : 0;
	}
	*l = bpf_program__attach_uprobe(c->obj_prog, i == 2, c->child.pid, c->child.path, off);
	return *l ? 0 : -errno;
}

/*
 * The calibration's child, forked by the thread that starts the calibration, before the thread that times it
 * exists: a child forked while another thread of memleak-ai held the allocator's lock (the BPF object being
 * loaded meanwhile) could block in its first malloc for good (seen with AddressSanitizer's allocator).
 */
static int calib_fork(struct calib *c)
{
	int cmd[2], res[2], err;

	err = find_allocator(&c->child.path, &c->child.off[0], &c->child.off[1]);
	if (err)
		return err;
	c->child.off[2] = c->child.off[0];
	if (pipe2(cmd, O_CLOEXEC))
		return -errno;
	if (pipe2(res, O_CLOEXEC)) {
		err = -errno;
		close(cmd[0]);
		close(cmd[1]);
		return err;
	}
	c->child.pid = fork();
	if (c->child.pid == 0) {
		close(cmd[1]);
		close(res[0]);
		calib_child(cmd[0], res[1]);
	}
	err = c->child.pid < 0 ? -errno : 0;
	close(cmd[0]);
	close(res[1]);
	c->child.cmd = cmd[1];
	c->child.res = res[0];
	return err;
}

/* ns a malloc + free pair in the child: without probes, with entry probes on both, and a return probe too. */
static int time_probes(struct calib *c, double *base, double *entry, double *ret)
{
	struct bpf_link *l[3] = {};
	int lfd[3] = {-1, -1, -1};
	int err = ask(c, base);

	for (int i = 0; i < 3 && !err; i++) {
		err = calib_attach(c, i, &l[i], &lfd[i]);
		if (!err && i >= 1)
			err = ask(c, i == 1 ? entry : ret);
	}
	for (int i = 0; i < 3; i++) {
		bpf_link__destroy(l[i]);
		if (lfd[i] >= 0)
			close(lfd[i]);
	}
	return err;
}

/* The child ends (its command pipe closed; killed too, in case it hangs where it was forked) and is reaped. */
static void calib_end(struct calib *c)
{
	if (c->child.cmd >= 0)
		close(c->child.cmd);
	if (c->child.res >= 0)
		close(c->child.res);
	if (c->child.pid > 0) {
		kill(c->child.pid, SIGKILL); /* not reaped yet: the pid is still its */
		waitpid(c->child.pid, NULL, 0);
	}
	c->child.cmd = c->child.res = -1;
	c->child.pid = 0;
	free(c->child.path);
	c->child.path = NULL;
}

static void *calib_thread(void *arg)
{
	struct calib *c = arg;
	double base = 0, entry = 0, ret = 0;

	c->fig.err = time_probes(c, &base, &entry, &ret);
	calib_end(c);
	if (!c->fig.err) {
		/* Two entry traps a pair; a return probe traps at entry too (the same breakpoint), its own
		 * trap is the difference. */
		c->fig.base_ns = base;
		c->fig.hit_ns = entry > base ? (entry - base) / 2 : 0;
		c->fig.ret_ns = ret > entry ? ret - entry : 0;
	}
	atomic_store(&c->state, CALIB_DONE);
	return NULL;
}

static int start(struct calib *c)
{
	int err;

	err = calib_fork(c);
	if (err) {
		calib_end(c);
		return err;
	}
	atomic_store(&c->state, CALIB_RUNNING);
	err = ml_thread_start(&c->thread, calib_thread, c);
	if (err) {
		atomic_store(&c->state, CALIB_IDLE);
		calib_end(c);
		return err;
	}
	return 0;
}

int calib__start_multi(struct calib *c)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, lo, .expected_attach_type = ML_BPF_TRACE_UPROBE_MULTI);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "ml_calib", "GPL", insns, 2, &lo);

	if (fd < 0)
		return fd;
	c->prog = fd;
	return start(c);
}

int calib__start(struct calib *c, const struct bpf_program *prog)
{
	if (c->prog >= 0 || atomic_load(&c->state) != CALIB_IDLE)
		return 0;
	c->obj_prog = prog;
	return start(c);
}

int calib__take(struct calib *c, struct calib_figures *ret)
{
	int st = atomic_load(&c->state);

	if (st == CALIB_RUNNING)
		return -EAGAIN;
	if (st != CALIB_DONE)
		return 0;
	pthread_join(c->thread, NULL);
	atomic_store(&c->state, CALIB_IDLE);
	*ret = c->fig;
	return 1;
}
