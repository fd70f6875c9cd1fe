/* The traced process: checks that it exists, starts it for -c, and tells when it exits. */
#define _GNU_SOURCE
#include "session/target.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/log.h"
#include "session/opts.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static bool has_cap(const struct __user_cap_data_struct d[2], int cap)
{
	return d[cap / 32].effective & (1U << (cap % 32));
}

/* Tests point this at a fake sysfs to play a kernel without BTF or uprobes. */
static const char *sysfs_root(void)
{
	const char *s = getenv("MEMLEAK_AI_SYSFS");

	return s && *s ? s : "/sys";
}

static bool sysfs_exists(const char *rel)
{
	char *p;
	bool ok;

	if (asprintf(&p, "%s/%s", sysfs_root(), rel) < 0)
		return false;
	ok = access(p, R_OK) == 0;
	free(p);
	return ok;
}

bool ml_kernel_release_ok(const char *release, unsigned int *major, unsigned int *minor)
{
	*major = *minor = 0;
	if (sscanf(release, "%u.%u", major, minor) != 2)
		return true; /* unknown: the load says what is missing */
	return *major > ML_KERNEL_MAJOR || (*major == ML_KERNEL_MAJOR && *minor >= ML_KERNEL_MINOR);
}

/* The running kernel's release against the minimum; tests play another with MEMLEAK_AI_KERNEL_RELEASE. */
static int check_release(void)
{
	const char *rel = getenv("MEMLEAK_AI_KERNEL_RELEASE");
	unsigned int major, minor;
	struct utsname u;

	if ((!rel || !*rel) && !uname(&u))
		rel = u.release;
	if (!rel || ml_kernel_release_ok(rel, &major, &minor))
		return 0;
	ml_err("this kernel is Linux %u.%u: memleak-ai needs %u.%u or newer (bpf_loop, bpf_find_vma)", major, minor,
	       ML_KERNEL_MAJOR, ML_KERNEL_MINOR);
	return -EOPNOTSUPP;
}

int ml_check_system(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2] = {};

	if (syscall(SYS_capget, &h, d)) {
		ml_err("cannot read own capabilities: %s", strerror(errno));
		return -errno;
	}
	/*
	 * CAP_BPF + CAP_PERFMON once sufficed; kernels since 2025 (6.18 here, and stable backports) want
	 * CAP_SYS_ADMIN again for uprobes, and reading another user's maps wants CAP_SYS_PTRACE.
	 */
	if (!has_cap(d, CAP_SYS_ADMIN)) { /* it implies CAP_BPF and CAP_PERFMON */
		ml_err("needs root: CAP_SYS_ADMIN, which this kernel requires for uprobes (run it with sudo)");
		return -EPERM;
	}
	if (check_release())
		return -EOPNOTSUPP;
	if (!sysfs_exists("kernel/btf/vmlinux")) {
		ml_err("this kernel has no BTF (%s/kernel/btf/vmlinux missing): needs CONFIG_DEBUG_INFO_BTF=y",
		       sysfs_root());
		return -EOPNOTSUPP;
	}
	if (!sysfs_exists("bus/event_source/devices/uprobe/type")) {
		ml_err("this kernel has no uprobe support (%s/bus/event_source/devices/uprobe missing): needs "
		       "CONFIG_UPROBE_EVENTS=y",
		       sysfs_root());
		return -EOPNOTSUPP;
	}
	return 0;
}

static int read_tgid(int pid, int *tgid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	int err = -ESRCH;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &cap, f) > 0) {
		uint64_t v;
		char *nl;

		if (strncmp(line, "Tgid:", 5))
			continue;
		nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		if (ml_parse_u64(line + 5 + strspn(line + 5, " \t"), 1, 0x3fffffff, &v) == 0) {
			*tgid = (int)v;
			err = 0;
		} else {
			err = -EINVAL;
		}
		break;
	}
	free(line);
	fclose(f);
	return err;
}

int target__open_pid(struct target *t, int pid)
{
	int tgid = 0, err;

	memset(t, 0, sizeof(*t));
	t->pidfd = t->go_fd = t->status_fd = -1;
	err = read_tgid(pid, &tgid);
	if (err == -ESRCH) {
		ml_err("no process with pid %d", pid);
		return err;
	}
	if (err) {
		ml_err("cannot read /proc/%d/status: %s", pid, strerror(-err));
		return err;
	}
	if (tgid != pid)
		ml_notice("pid %d is a thread of process %d; tracing the whole process", pid, tgid);
	t->pid = tgid;
	t->pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
	if (t->pidfd < 0) {
		err = -errno;
		if (err == -ESRCH)
			ml_err("no process with pid %d", tgid);
		else
			ml_err("cannot open pid %d: %s", tgid, strerror(-err));
		return err;
	}
	return 0;
}

int target__spawn(struct target *t, char *const argv[])
{
	int go[2], st[2], err;
	pid_t pid;

	memset(t, 0, sizeof(*t));
	t->pidfd = t->go_fd = t->status_fd = -1;
	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(st, O_CLOEXEC)) {
		err = -errno;
		close(go[0]);
		close(go[1]);
		return err;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(go[0]), close(go[1]), close(st[0]), close(st[1]);
		ml_err("cannot fork: %s", strerror(-err));
		return err;
	}
	if (pid == 0) {
		char c;
		int e;

		close(go[1]);
		close(st[0]);
		/* Wait until the probes are attached; EOF means the tracer gave up. */
		if (read(go[0], &c, 1) != 1)
			_exit(127);
		signal(SIGPIPE, SIG_DFL); /* ignored in memleak-ai, and an ignored signal stays ignored across exec */
		/* Stop right after exec, so that probes go on the new image before its first instruction. */
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(127);
		execvp(argv[0], argv);
		e = errno;
		if (write(st[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(st[1]);
	t->pid = pid;
	t->spawned = true;
	t->go_fd = go[1];
	t->status_fd = st[0];
	t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (t->pidfd < 0) {
		err = -errno;
		target__close(t);
		return err;
	}
	return 0;
}

int target__release(struct target *t, const char *what)
{
	ssize_t n;
	int e = 0, status;

	if (!t->spawned || t->go_fd < 0)
		return 0;
	if (write(t->go_fd, "g", 1) != 1)
		return -errno;
	close(t->go_fd);
	t->go_fd = -1;
	/*
	 * The child stops with SIGTRAP once exec succeeded, or exits when it failed. A signal that reached it
	 * before the exec (Ctrl-C, say) stops it too: pass that on and wait for the exec.
	 */
	for (;;) {
		if (waitpid(t->pid, &status, 0) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!WIFSTOPPED(status) || WSTOPSIG(status) == SIGTRAP)
			break;
		if (ptrace(PTRACE_CONT, t->pid, NULL, (void *)(long)WSTOPSIG(status)))
			return -errno;
	}
	if (WIFSTOPPED(status)) {
		t->stopped = true;
		close(t->status_fd);
		t->status_fd = -1;
		return 0;
	}
	t->exit_status = status;
	t->reaped = true;
	do {
		n = read(t->status_fd, &e, sizeof(e));
	} while (n < 0 && errno == EINTR);
	close(t->status_fd);
	t->status_fd = -1;
	if (n == (ssize_t)sizeof(e)) {
		ml_err("cannot run '%s': %s", what, strerror(e));
		return -e;
	}
	ml_err("'%s' exited before it started", what);
	return -ECHILD;
}

int target__run_until_stop(struct target *t, int timeout_ms)
{
	int status, sig = 0;
	bool forced = false;

	if (!t->stopped)
		return -EINVAL;
	for (int waited = 0;;) {
		pid_t r;

		if (ptrace(PTRACE_CONT, t->pid, NULL, (void *)(long)sig))
			return -errno;
		sig = 0;
		for (;;) {
			r = waitpid(t->pid, &status, WNOHANG);
			if (r == t->pid || (r < 0 && errno != EINTR))
				break;
			if (waited >= timeout_ms && !forced) {
				/* It never reached the stop point: stop it ourselves, so it can be let go. */
				kill(t->pid, SIGSTOP);
				forced = true;
			}
			usleep(1000);
			waited++;
		}
		if (r < 0)
			return -errno;
		if (!WIFSTOPPED(status)) {
			t->stopped = false;
			t->reaped = true;
			t->exit_status = status;
			return -ECHILD;
		}
		if (WSTOPSIG(status) == SIGSTOP)
			return forced ? -ETIMEDOUT : 0;
		sig = WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status); /* its own signals go on to it */
	}
}

void target__resume(struct target *t)
{
	if (t->stopped && ptrace(PTRACE_DETACH, t->pid, NULL, NULL) == 0)
		t->stopped = false;
}

bool target__alive(struct target *t)
{
	struct pollfd p = {.fd = t->pidfd, .events = POLLIN};

	return t->pidfd >= 0 && poll(&p, 1, 0) == 0;
}

void target__close(struct target *t)
{
	if (t->go_fd >= 0)
		close(t->go_fd); /* an unreleased child sees EOF and exits without running anything */
	if (t->status_fd >= 0)
		close(t->status_fd);
	target__resume(t);
	if (t->spawned && t->pid > 0 && !t->reaped) {
		int status;

		if (waitpid(t->pid, &status, t->go_fd >= 0 ? 0 : WNOHANG) == t->pid)
			t->exit_status = status;
	}
	if (t->pidfd >= 0)
		close(t->pidfd);
	t->go_fd = t->status_fd = t->pidfd = -1;
}
