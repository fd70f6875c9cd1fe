/*
 * collect/cowscan.c on real page tables: this process maps 64 pages and forks; the child writes some of them,
 * the parent writes others, and the scan must count exactly the child's copies, charged to the owner asked,
 * and take them off when the child unmaps them. Needs CAP_SYS_ADMIN (frame numbers), as the tool does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "collect/cowscan.h"

#define PAGES 64
#define PG 4096

static char *area;

/* Pages below 16 belong to owner 7, the rest to nobody known. */
static uint32_t owner(void *ctx, int parent, uint64_t addr)
{
	(void)ctx;
	(void)parent;
	return addr < (uint64_t)(uintptr_t)area + 16 * PG ? 7 : 0;
}

struct sums {
	int pid;
	uint64_t by_owner[8];
	int calls;
};

static void total(void *ctx, int child, uint32_t o, uint64_t bytes, uint64_t first_ns)
{
	struct sums *s = ctx;

	if (child == s->pid && o < 8 && first_ns) {
		s->by_owner[o] = bytes;
		s->calls++;
	}
}

static struct sums sums_of(struct cowscan *c, int pid)
{
	struct sums s = {.pid = pid};

	cowscan__totals(c, total, &s);
	return s;
}

/* The child: at each byte from the parent, one step of writes or unmaps; then it says done. */
static void child(int in, int out)
{
	char step;

	if (write(out, "r", 1) != 1) /* its own start-up writes (its thread's state) are done: a baseline */
		_exit(1);
	while (read(in, &step, 1) == 1) {
		if (step == '1')
			for (int p = 10; p < 30; p++) /* 20 copies: 6 of owner 7's pages, 14 of nobody's */
				area[p * PG] = 2;
		if (step == '2')
			for (int p = 40; p < 50; p++) /* pages the parent wrote first: already its own, no copy */
				area[p * PG] = 3;
		if (step == '3')
			munmap(area + 10 * PG, 4 * PG); /* 4 of owner 7's copies go */
		if (write(out, "k", 1) != 1)
			_exit(1);
	}
	_exit(0);
}

static void step(int to, int from, char s)
{
	char ok;

	if (write(to, &s, 1) != 1 || read(from, &ok, 1) != 1)
		_exit(2);
}

int main(void)
{
	struct cowscan_opts o = {.max_pages = 1 << 20, .max_tracked = 1 << 20};
	struct cowscan *c = NULL;
	int down[2], up[2], pid;
	char ready;
	uint64_t truncated;
	struct sums s;

	area = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED || pipe(down) || pipe(up))
		return 1;
	madvise(area, PAGES * PG, MADV_NOHUGEPAGE);
	for (int p = 0; p < PAGES; p++)
		area[p * PG] = 1;
	pid = fork();
	if (pid == 0) {
		close(down[1]); /* else its reads never see the end */
		close(up[0]);
		child(down[0], up[1]);
	}
	if (read(up[0], &ready, 1) != 1)
		return 1;
	CHECK_EQ_INT(cowscan__new(&o, &c), 0, "made");
	CHECK_EQ_INT(cowscan__add(c, pid, getpid(), &truncated), 0, "the child added");
	CHECK(cowscan__has(c, pid) && truncated == 0, "tracked whole");
	CHECK(cowscan__pass(c, owner, NULL) >= PAGES, "the first pass reads every page (and this one's heap)");
	s = sums_of(c, pid);
	CHECK_EQ_INT(s.calls, 0, "nothing copied yet");

	step(down[1], up[0], '1');
	CHECK(cowscan__pass(c, owner, NULL) > 0, "second pass");
	s = sums_of(c, pid);
	CHECK_EQ_U64(s.by_owner[7], 6 * PG, "owner 7: the child's 6 copies of its pages");
	CHECK_EQ_U64(s.by_owner[0], 14 * PG, "nobody known: the other 14");

	for (int p = 40; p < 50; p++) /* the parent writes: its own copies, not the child's */
		area[p * PG] = 4;
	cowscan__pass(c, owner, NULL);
	step(down[1], up[0], '2');
	cowscan__pass(c, owner, NULL);
	s = sums_of(c, pid);
	CHECK(s.by_owner[7] == 6 * PG && s.by_owner[0] == 14 * PG,
	      "the parent's writes, and the child's later writes there, copy nothing of the child's");

	step(down[1], up[0], '3');
	cowscan__pass(c, owner, NULL);
	s = sums_of(c, pid);
	CHECK_EQ_U64(s.by_owner[7], 2 * PG, "the 4 unmapped copies are taken off");
	CHECK_EQ_U64(s.by_owner[0], 14 * PG, "the others stay");

	o.max_tracked = 8;
	cowscan__free(c);
	CHECK_EQ_INT(cowscan__new(&o, &c), 0, "made with room for 8 pages");
	CHECK(cowscan__add(c, pid, getpid(), &truncated) == 0 && truncated > 0, "the pages past 8 are said");
	cowscan__remove(c, getpid());
	CHECK(!cowscan__has(c, pid), "the parent gone: its child goes too");
	CHECK_EQ_INT(cowscan__add(c, 999999999, getpid(), &truncated), -ESRCH, "no such child");
	cowscan__free(c);
	close(down[1]);
	waitpid(pid, NULL, 0);
	return SUMMARY("cowscan");
}
