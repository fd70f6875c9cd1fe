/*
 * Unit tests for finding the allocator table's C++ rows by their demangled names, and for the rowcache that
 * keeps what was found per file. The symbols are this test's own functions, named as libc10's are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach/allocators.h"
#include "attach/planahead.h"
#include "attach/rowcache.h"
#include "attach/rowfind.h"
#include "check.h"
#include "lib/elfsym.h"
#include "lib/procmaps.h"

/*
 * c10::alloc_cpu(unsigned long) and c10::free_cpu(void*), and a decoy whose mangled name holds "alloc_cpu"
 * with a length that does not spell it. "3c10" ends in digits, so alloc_cpu's length follows digits.
 */
void c10_alloc_cpu(unsigned long n) __asm__("_ZN3c109alloc_cpuEm");
void c10_alloc_cpu2(unsigned long n) __asm__("_ZN3c1010alloc_cpu2Em");
void c10_free_cpu(void *p) __asm__("_ZN3c108free_cpuEPv");

__attribute__((noinline, used)) void c10_alloc_cpu2(unsigned long n)
{
	__asm__ volatile("" ::"r"(n));
}

__attribute__((noinline, used)) void c10_alloc_cpu(unsigned long n)
{
	__asm__ volatile("" ::"r"(n + 1));
}

__attribute__((noinline, used)) void c10_free_cpu(void *p)
{
	__asm__ volatile("" ::"r"(p));
}

/* A step function as --step names one: a C symbol, and a C++ one by its signature. */
__attribute__((noinline, used)) void my_train_step(int n)
{
	__asm__ volatile("" ::"r"(n));
}

void ns_step(int n) __asm__("_ZN2ns4stepEi");
__attribute__((noinline, used)) void ns_step(int n)
{
	__asm__ volatile("" ::"r"(n + 1));
}

static unsigned int row_of(const char *func)
{
	for (unsigned int row = 0; row < ml_allocators_n; row++)
		if (!strcmp(ml_allocators[row].func, func))
			return row;
	return ml_allocators_n;
}

static const struct rowfind_opts torch_cpu = {.path = "self", .layers = 1U << ML_LAYER_TORCH_CPU};

static void test_demangled_rows(const struct elf_syms *syms)
{
	unsigned int a = row_of("c10::alloc_cpu(unsigned long)"), f = row_of("c10::free_cpu(void*)");
	struct found *found = calloc(ml_allocators_n, sizeof(*found));
	uint64_t want_a = 0, want_f = 0, decoy = 0;
	struct rowfind_opts cuda_only = torch_cpu;

	CHECK(a < ml_allocators_n && f < ml_allocators_n, "rows: alloc_cpu and free_cpu are in the table");
	CHECK(!elf_syms__find(syms, "_ZN3c109alloc_cpuEm", &want_a, NULL), "rows: alloc_cpu's symbol is here");
	CHECK(!elf_syms__find(syms, "_ZN3c108free_cpuEPv", &want_f, NULL), "rows: free_cpu's symbol is here");
	CHECK(!elf_syms__find(syms, "_ZN3c1010alloc_cpu2Em", &decoy, NULL), "rows: the decoy's symbol is here");
	CHECK_EQ_INT(ml_rows_find(syms, &torch_cpu, found), 0, "rows: looked for");
	CHECK(found[a].ok && found[a].vaddr == want_a, "rows: alloc_cpu found at its own symbol, not the decoy's");
	CHECK(found[f].ok && found[f].vaddr == want_f, "rows: free_cpu found");
	CHECK(want_a != decoy, "rows: the decoy is another function");

	/* A layer not traced: its rows are not looked for. */
	memset(found, 0, ml_allocators_n * sizeof(*found));
	cuda_only.layers = 1U << ML_LAYER_TORCH_CUDA;
	CHECK_EQ_INT(ml_rows_find(syms, &cuda_only, found), 0, "rows: looked for, torch_cuda only");
	CHECK(!found[a].ok && !found[f].ok, "rows: torch_cpu rows not looked for when the layer is off");
	free(found);
}

/* The step clock's row: the default looked for unless --step none, and in its place the function --step names. */
static void test_step_row(const struct elf_syms *syms)
{
	unsigned int row = row_of(ML_STEP_DEFAULT);
	struct found *found = calloc(ml_allocators_n, sizeof(*found));
	struct rowfind_opts o = {.path = "self", .layers = 1U << ML_LAYER_TORCH_CUDA, .step = "my_train_step"};
	uint64_t want = 0, want_cc = 0;

	CHECK(row < ml_allocators_n && ml_allocators[row].spec.kind == ML_KIND_STEP, "step: the table's row");
	CHECK(!elf_syms__find(syms, "my_train_step", &want, NULL), "step: my_train_step's symbol is here");
	CHECK(!elf_syms__find(syms, "_ZN2ns4stepEi", &want_cc, NULL), "step: ns::step(int)'s symbol is here");
	CHECK_EQ_INT(ml_rows_find(syms, &o, found), 0, "step: looked for by symbol");
	CHECK(found[row].ok && found[row].vaddr == want, "step: my_train_step found, whatever layers are traced");
	memset(found, 0, ml_allocators_n * sizeof(*found));
	o.step = "ns::step(int)";
	CHECK_EQ_INT(ml_rows_find(syms, &o, found), 0, "step: looked for by its demangled name");
	CHECK(found[row].ok && found[row].vaddr == want_cc, "step: ns::step(int) found");
	memset(found, 0, ml_allocators_n * sizeof(*found));
	o.step = NULL;
	CHECK_EQ_INT(ml_rows_find(syms, &o, found), 0, "step: --step none");
	CHECK(!found[row].ok, "step: no step clock, none looked for");
	memset(found, 0, ml_allocators_n * sizeof(*found));
	o.step = "no_such_step";
	CHECK(ml_rows_find(syms, &o, found) == 0 && !found[row].ok, "step: a function the object lacks: not found");
	free(found);
}

static void test_rowcache(int fd, const struct elf_syms *syms)
{
	unsigned int a = row_of("c10::alloc_cpu(unsigned long)");
	struct rowfind_opts other = torch_cpu;
	struct rowcache c = {};
	struct rowkey k, k2, k3;
	struct rowplan *p, *q;
	uint64_t vaddr = 0, off = 0;

	CHECK_EQ_INT(rowkey__of(fd, &torch_cpu, &k), 0, "rowcache: a key");
	CHECK_EQ_INT(rowkey__of(fd, &torch_cpu, &k2), 0, "rowcache: the key again");
	CHECK(!memcmp(&k, &k2, sizeof(k)), "rowcache: one file, one key");
	other.layers |= 1U << ML_LAYER_LIBC;
	CHECK_EQ_INT(rowkey__of(fd, &other, &k3), 0, "rowcache: a key for other layers");
	CHECK(memcmp(&k, &k3, sizeof(k)), "rowcache: other layers, another key");
	CHECK(rowcache__get(&c, &k) == NULL, "rowcache: empty at first");

	p = rowplan__new(&k);
	CHECK(p != NULL, "rowcache: a plan");
	if (!p)
		return;
	CHECK_EQ_INT(rowplan__read(syms, &torch_cpu, p), 0, "rowcache: plan read");
	CHECK_EQ_INT(p->err, 0, "rowcache: the plan says the object is usable");
	CHECK(!p->usdts, "rowcache: no USDT probes in this test");
	elf_syms__find(syms, "_ZN3c109alloc_cpuEm", &vaddr, NULL);
	elf_syms__vaddr_to_offset(syms, vaddr, &off);
	CHECK(p->rows[a].ok && p->rows[a].off == off && off != 0, "rowcache: alloc_cpu by its file offset");
	CHECK_EQ_INT(rowcache__put(&c, p), 0, "rowcache: put");
	CHECK(rowcache__get(&c, &k) == p, "rowcache: the plan kept for its key");
	CHECK(rowcache__get(&c, &k3) == NULL, "rowcache: not for another key");

	/* A plan put again for the same key replaces the first (which the cache frees). */
	q = rowplan__new(&k);
	CHECK(q != NULL, "rowcache: a second plan");
	if (q) {
		q->err = -ENOENT;
		CHECK_EQ_INT(rowcache__put(&c, q), 0, "rowcache: put again");
		CHECK(rowcache__get(&c, &k) == q && rowcache__get(&c, &k)->err == -ENOENT, "rowcache: replaced");
	}
	/* A NULL cache keeps nothing and frees what it is given. */
	CHECK_EQ_INT(rowcache__put(NULL, rowplan__new(&k3)), 0, "rowcache: put in no cache");
	CHECK(rowcache__get(NULL, &k) == NULL, "rowcache: a NULL cache has nothing");
	rowcache__clear(&c);
	CHECK(rowcache__get(&c, &k) == NULL, "rowcache: empty once cleared");
}

/* Names found in one pass as each alone; one missing leaves the others found; lookups need a sorted table. */
static void test_find_each(const struct elf_syms *syms)
{
	struct elf_sym_want w[] = {{.name = "_ZN3c108free_cpuEPv"},
				   {.name = "no_such_function_here"},
				   {.name = "_ZN3c109alloc_cpuEm"},
				   {.name = "main"}};
	uint64_t v = 0, off;

	CHECK_EQ_INT(elf_syms__find_each(syms, w, 4), 0, "find_each: one pass");
	CHECK(w[0].found && !elf_syms__find(syms, w[0].name, &v, NULL) && v == w[0].vaddr, "find_each: free_cpu");
	CHECK(!w[1].found && w[1].vaddr == 0, "find_each: a missing name is not found");
	CHECK(w[2].found && !elf_syms__find(syms, w[2].name, &v, NULL) && v == w[2].vaddr, "find_each: alloc_cpu");
	CHECK(w[3].found && !elf_syms__find(syms, "main", &v, NULL) && v == w[3].vaddr && v != w[2].vaddr,
	      "find_each: main");
	CHECK(elf_syms__lookup(syms, w[2].vaddr, &off) == NULL, "find_each: no address lookup in an unsorted table");
}

/* The plan of the object at path as probing keys it (torch_cpu's rows, as a C library or not), or NULL. */
static const struct rowplan *planned(const struct rowcache *c, const char *path, bool as_libc)
{
	struct rowfind_opts o = {.path = path, .layers = torch_cpu.layers | 1U << ML_LAYER_LIBC, .as_libc = as_libc};
	struct rowkey k;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = fd < 0 ? -errno : rowkey__of(fd, &o, &k);

	if (fd >= 0)
		close(fd);
	return err ? NULL : rowcache__get(c, &k);
}

/* This process's objects planned side by side (planahead__now, as at -c's loader stops): each one's plan kept. */
static void test_plan_now(void)
{
	struct plan_opts o = {.pid = getpid(), .layers = torch_cpu.layers | 1U << ML_LAYER_LIBC};
	struct rowcache c = {};
	struct ml_maps maps = {};
	const struct rowplan *self, *libc = NULL;
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	o.rows = &c;
	CHECK(n > 0 && !ml_maps__read(getpid(), &maps), "plan now: this process's maps");
	if (n <= 0)
		return;
	exe[n] = '\0';
	CHECK_EQ_INT(planahead__now(&o, &maps), 0, "plan now: planned");
	self = planned(&c, exe, false);
	CHECK(self && !self->err && self->rows[row_of("c10::alloc_cpu(unsigned long)")].ok,
	      "plan now: this test's alloc_cpu found, kept under its file's key");
	for (size_t i = 0; i < maps.n && !libc; i++)
		if (maps.v[i].path && planahead__as_libc(maps.v[i].path))
			libc = planned(&c, maps.v[i].path, true);
	CHECK(libc && !libc->err && libc->rows[row_of("malloc")].ok, "plan now: the C library's malloc found");
	CHECK_EQ_INT(planahead__now(&o, &maps), 0, "plan now: again");
	CHECK(planned(&c, exe, false) == self, "plan now: a file planned before is taken from the cache");
	ml_maps__clear(&maps);
	rowcache__clear(&c);
}

int main(void)
{
	struct elf_syms *syms = NULL;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0, "open /proc/self/exe");
	if (fd < 0)
		return 1;
	CHECK_EQ_INT(elf_syms__open(fd, &syms), 0, "this test's symbols");
	if (syms) {
		test_demangled_rows(syms);
		test_step_row(syms);
		test_rowcache(fd, syms);
	}
	elf_syms__free(syms);
	/* As probing plans them: unsorted, .symtab's repeats of .dynsym kept; the same rows. */
	syms = NULL;
	CHECK_EQ_INT(elf_syms__open_as(fd, ELF_SYMS_FUNCS, &syms), 0, "this test's symbols, unsorted");
	if (syms) {
		test_demangled_rows(syms);
		test_find_each(syms);
	}
	elf_syms__free(syms);
	close(fd);
	test_plan_now();
	c10_alloc_cpu(1);
	c10_alloc_cpu2(1);
	c10_free_cpu(NULL);
	my_train_step(1);
	ns_step(1);
	return SUMMARY("rowfind");
}
