/* memleak-ai: the options, then one run (user/session/session.c); or `memleak-ai diff` of two runs. */
#define _GNU_SOURCE
#include <bpf/libbpf.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "lib/log.h"
#include "session/diffcmd.h"
#include "session/opts.h"
#include "session/session.h"

/*
 * libbpf's warnings always reach stderr (a default run prints none); its info and debug lines need -vv. One warning
 * is a race the tool handles, a probe attached to a traced process that exited meanwhile (ESRCH): the
 * attach's caller takes it for the exit it is, and it is shown at -v only.
 */
static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list args)
{
	char *msg = NULL;
	int n;

	if (level != LIBBPF_WARN && ml_log_level < 2)
		return 0;
	if (level != LIBBPF_WARN || ml_log_level >= 1)
		return vfprintf(stderr, fmt, args);
	n = vasprintf(&msg, fmt, args);
	if (n < 0)
		return 0;
	/*
	 * A target gone while its probe went on: no process (ESRCH), or no longer its /proc/PID/map_files or
	 * /proc/PID/root path (ENOENT: a process under -c exited as its loader's probe went on).
	 */
	if (!strstr(msg, "No such process") && !strstr(msg, "ESRCH") && /* libbpf after 1.1 names errors */
	    !(strstr(msg, "'/proc/") && (strstr(msg, "No such file or directory") || strstr(msg, "ENOENT"))))
		fputs(msg, stderr);
	free(msg);
	return n;
}

int main(int argc, char **argv)
{
	struct ml_opts o;
	struct rlimit rl;
	int err;

	if (argc > 1 && !strcmp(argv[1], "diff"))
		return diffcmd__main(argc - 1, argv + 1);
	err = ml_opts__parse(argc, argv, &o);
	if (err) {
		ml_opts__free(&o);
		return err > 0 ? 0 : 2;
	}
	ml_log_level = o.verbose;
	libbpf_set_print(libbpf_log);
	/* One open file per probed link and per symbolized library: a large job needs more than 1024. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	err = session__run(&o);
	ml_opts__free(&o);
	return err;
}
