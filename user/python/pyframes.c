/*
 * Python frames. Finding the interpreter: an object mapped by the target that defines _PyRuntime and
 * Py_Version (3.11+) is a CPython runtime; its version picks a layout from user/python/pyoffsets.c, and for
 * 3.13+ the interpreter's own _Py_DebugOffsets must agree with it. The BPF side then walks frames at every
 * allocation (bpf/python.bpf.c) and records code object, instruction index and the code object's line
 * table pointer as a check.
 *
 * A captured frame becomes its function, file and line from its code object, decoded by pycode.c (which
 * checks that it still is the one the frame ran), and the frame is cached until the next trim.
 */
#define _GNU_SOURCE
#include "python/pyframes.h"
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/elfsym.h"
#include "lib/grow.h"
#include "lib/hash.h"
#include "lib/log.h"
#include "lib/path.h"
#include "lib/procmaps.h"
#include "lib/u64map.h"
#include "python/pycode.h"
#include "python/pyline.h"
#include "python/pyoffsets.h"
#include "memleak.skel.h"

#define CACHE_MAX 65536		  /* decoded frames kept between reports (made again from their code objects) */
#define CODES_MAX (4 * CACHE_MAX) /* decoded code objects: what outlives the process, so dropped only past this */

struct py_frame {
	uint64_t code, check;
	uint32_t instr, gen;
	struct ml_frame fr;
};

struct seen_obj {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
};

struct pyframes {
	struct memleak_bpf *skel;
	int pid;
	bool configured, refused;
	char version[32];
	struct seen_obj *seen;
	size_t nseen, capseen;
	struct pycodes *codes;	 /* decoded code objects; the layout, once found */
	struct u64map frames;	 /* hash(code, check, instr, generation) -> struct py_frame */
	struct py_frame **spill; /* frames whose key collided with a cached one: kept until the next trim */
	size_t nspill, capspill;
	struct bpf_link *exit_link; /* py_exit on the runtime's Py_FinalizeEx */
	/* pyframes__learn runs in the stack store's reader thread: the caches are shared with the reports' thread. */
	pthread_mutex_t lock;
	uint64_t learned, learn_ns; /* code objects decoded as their stacks arrived, and the time it took */
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	return ml_hash_add(h, v);
}

int pyframes__new(struct memleak_bpf *skel, int pid, struct pyframes **out)
{
	struct pyframes *p = calloc(1, sizeof(*p));

	int err;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	err = pycodes__new(pid, &p->codes);
	if (err) {
		free(p);
		return err;
	}
	p->skel = skel;
	p->pid = pid;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

static void frame_free(struct py_frame *f)
{
	if (!f)
		return;
	free(f->fr.func);
	free(f->fr.file);
	free(f);
}

static void frames_clear(struct pyframes *p)
{
	for (size_t i = 0; i < p->frames.cap; i++) {
		struct py_frame *f = p->frames.slots[i].val;

		if (f) {
			free(f->fr.func);
			free(f->fr.file);
		}
	}
	u64map__free_values(&p->frames);
	for (size_t i = 0; i < p->nspill; i++)
		frame_free(p->spill[i]);
	free(p->spill);
	p->spill = NULL;
	p->nspill = 0;
	p->capspill = 0;
}

static void caches_clear(struct pyframes *p)
{
	pycodes__clear(p->codes);
	frames_clear(p);
}

void pyframes__free(struct pyframes *p)
{
	if (!p)
		return;
	if (p->configured && p->skel) {
		__u32 key = (__u32)p->pid;

		bpf_map_delete_elem(bpf_map__fd(p->skel->maps.pyprocs), &key);
	}
	bpf_link__destroy(p->exit_link);
	frames_clear(p);
	pycodes__free(p->codes);
	pthread_mutex_destroy(&p->lock);
	free(p->seen);
	free(p);
}

void pyframes__trim(struct pyframes *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	pycodes__next_report(p->codes);
	if (pycodes__count(p->codes) > CODES_MAX)
		caches_clear(p);
	else if (p->frames.n > CACHE_MAX || p->nspill > 1024)
		frames_clear(p);
	pthread_mutex_unlock(&p->lock);
}

void pyframes__use_layout(struct pyframes *p, const struct ml_py_layout *lay, const uint64_t types[3])
{
	pycodes__use_layout(p->codes, lay, types);
}

static bool seen_before(struct pyframes *p, const struct ml_mapping *m)
{
	for (size_t i = 0; i < p->nseen; i++)
		if (p->seen[i].inode == m->inode && p->seen[i].dev_major == m->dev_major &&
		    p->seen[i].dev_minor == m->dev_minor)
			return true;
	if (ml_grow(&p->seen, &p->capseen, p->nseen + 1, sizeof(*p->seen)))
		return true; /* not looked at; tried again at the next sync */
	p->seen[p->nseen++] = (struct seen_obj){m->dev_major, m->dev_minor, m->inode};
	return false;
}

/* Load bias of the object behind m: runtime address minus ELF virtual address. */
static int load_bias(const struct elf_syms *es, const struct ml_maps *maps, const struct ml_mapping *m, uint64_t *bias)
{
	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *o = &maps->v[i];
		uint64_t va;

		if (o->inode != m->inode || o->dev_major != m->dev_major || o->dev_minor != m->dev_minor)
			continue;
		if (elf_syms__offset_to_vaddr(es, o->offset, &va))
			continue;
		*bias = elf_syms__is_dyn(es) ? o->start - va : 0;
		return 0;
	}
	return -ENOENT;
}

/* The ELF symbols of m and _PyRuntime's address in the target, if m is an interpreter runtime. 0 or -ENOENT. */
static int open_runtime(const struct pyframes *p, const struct ml_maps *maps, const struct ml_mapping *m,
			struct elf_syms **es, uint64_t *rt, uint64_t *bias)
{
	int fd, err;

	/* Only objects named like an interpreter are opened again: libraries such as libtorch are huge. */
	if (!strstr(ml_base_name(m->path), "python"))
		return -ENOENT;
	fd = ml_maps__open_file(p->pid, m);
	if (fd < 0)
		return -ENOENT;
	err = elf_syms__open(fd, es);
	close(fd);
	if (err)
		return -ENOENT;
	if (elf_syms__find_object(*es, "_PyRuntime", rt, NULL) || load_bias(*es, maps, m, bias)) {
		elf_syms__free(*es);
		return -ENOENT;
	}
	*rt += *bias;
	return 0;
}

/* The layout of the CPython in m (its version in p->version), or NULL, said why, when none we know fits it. */
static const struct ml_py_layout *runtime_layout(struct pyframes *p, const struct elf_syms *es,
						 const struct ml_mapping *m, uint64_t rt, uint64_t bias)
{
	const struct ml_py_layout *lay;
	uint64_t ver_addr, version = 0;
	uint8_t dbg[4096];
	char why[128] = "";

	if (elf_syms__find_object(es, "Py_Version", &ver_addr, NULL) ||
	    pycodes__peek(p->codes, ver_addr + bias, &version, sizeof(version))) {
		ml_notice("pid %d: the CPython runtime in %s is older than 3.11 (no Py_Version): Python frames need "
			  "CPython 3.11 to 3.13; native stacks only",
			  p->pid, m->path);
		return NULL;
	}
	snprintf(p->version, sizeof(p->version), "%u.%u.%u", (unsigned int)(version >> 24) & 0xff,
		 (unsigned int)(version >> 16) & 0xff, (unsigned int)(version >> 8) & 0xff);
	lay = ml_py_layout_find((unsigned int)version);
	if (!lay) {
		ml_notice("pid %d runs CPython %s (%s): Python frames need CPython 3.11 to 3.13; native stacks only",
			  p->pid, p->version, m->path);
		return NULL;
	}
	/* The interpreter describes itself from 3.13 on: any disagreement means a build we do not know. */
	if (lay->version >= 0x030d0000 && (pycodes__peek(p->codes, rt, dbg, sizeof(dbg)) ||
					   ml_py_layout_check_debug(lay, dbg, sizeof(dbg), why, sizeof(why)))) {
		ml_notice("pid %d: CPython %s (%s) does not match the known %s layout (%s); native stacks only", p->pid,
			  p->version, m->path, lay->name, why[0] ? why : "no _Py_DebugOffsets");
		return NULL;
	}
	return lay;
}

/* The runtime addresses of the types a frame's objects are checked against. 0, or -ENOENT said why. */
static int find_types(struct pyframes *p, const struct elf_syms *es, const struct ml_mapping *m, uint64_t bias,
		      uint64_t types[3])
{
	uint64_t sym;

	if (elf_syms__find_object(es, "PyCode_Type", &sym, NULL) || !(types[0] = sym + bias) ||
	    elf_syms__find_object(es, "PyUnicode_Type", &sym, NULL) || !(types[1] = sym + bias) ||
	    elf_syms__find_object(es, "PyBytes_Type", &sym, NULL) || !(types[2] = sym + bias)) {
		ml_notice("pid %d: CPython %s (%s) lacks its type symbols; native stacks only", p->pid, p->version,
			  m->path);
		return -ENOENT;
	}
	return 0;
}

/* What the BPF walker needs of lay to find the threads and frames of the runtime at rt. */
static void fill_pyproc(struct ml_pyproc *pp, const struct ml_py_layout *lay, uint64_t rt)
{
	uint16_t fptr = lay->tstate_current_frame != ML_PY_NONE ? lay->tstate_current_frame : lay->tstate_cframe;
	uint16_t lo = fptr < lay->tstate_thread_id ? fptr : lay->tstate_thread_id;
	uint16_t hi = (fptr > lay->tstate_thread_id ? fptr : lay->tstate_thread_id) + 8;

	pp->runtime = rt;
	pp->runtime_interp_head = lay->runtime_interpreters_head;
	pp->interp_next = lay->interp_next;
	pp->interp_threads_head = lay->interp_threads_head;
	pp->tstate_next = lay->tstate_next;
	pp->tstate_thread_id = lay->tstate_thread_id;
	pp->tstate_cframe = lay->tstate_cframe;
	pp->cframe_current_frame = lay->cframe_current_frame;
	pp->tstate_current_frame = lay->tstate_current_frame;
	pp->frame_code = lay->frame_code;
	pp->frame_previous = lay->frame_previous;
	pp->code_check = lay->code_linetable;
	pp->tstate_block_off = lo;
	pp->tstate_block_len = hi - lo <= 128 ? hi - lo : 0; /* 0: two reads instead */
	pp->frame_instr = lay->frame_instr;
	pp->frame_owner = lay->frame_owner;
	pp->frame_is_entry = lay->frame_is_entry;
	pp->frame_size = lay->frame_size;
	pp->code_adaptive = lay->code_adaptive;
	pp->owner_cstack = lay->owner_cstack;
	pp->instr_is_next = lay->instr_is_next;
}

/* Hands the layout to the BPF walker: 1 once it has it, 0 when refused (said why). */
static int enable(struct pyframes *p, const struct ml_py_layout *lay, const uint64_t types[3], uint64_t rt,
		  const struct ml_mapping *m)
{
	struct ml_pyproc pp = {};
	__u32 key = (__u32)p->pid;

	fill_pyproc(&pp, lay, rt);
	if (lay->frame_size > ML_PY_FRAME_MAX) {
		ml_notice("pid %d: CPython %s frames are larger than the walker reads; native stacks only", p->pid,
			  p->version);
		p->refused = true;
		return 0;
	}
	if (bpf_map_update_elem(bpf_map__fd(p->skel->maps.pyprocs), &key, &pp, BPF_ANY)) {
		ml_notice("pid %d: cannot enable Python frames: %s; native stacks only", p->pid, strerror(errno));
		p->refused = true;
		return 0;
	}
	pthread_mutex_lock(&p->lock); /* the reader thread's pyframes__learn starts with it */
	pycodes__use_layout(p->codes, lay, types);
	p->configured = true;
	pthread_mutex_unlock(&p->lock);
	ml_notice("Python frames: CPython %s in %s (pid %d)", p->version, m->path, p->pid);
	return 1;
}

/*
 * The interpreter's teardown (Py_FinalizeEx) frees what the job kept: a probe there tells user space to take
 * the run's findings first. Without it (a build without the symbol) the last report before exit stands.
 */
static void watch_exit(struct pyframes *p, const struct elf_syms *es, const struct ml_maps *maps,
		       const struct ml_mapping *m)
{
	uint64_t vaddr, size, off;
	char *path = NULL;

	if (!p->skel || elf_syms__find(es, "Py_FinalizeEx", &vaddr, &size) ||
	    elf_syms__vaddr_to_offset(es, vaddr, &off) || ml_maps__attach_path(p->pid, m, &path))
		return;
	p->exit_link = bpf_program__attach_uprobe(p->skel->progs.py_exit, false, p->pid, path, off);
	if (!p->exit_link)
		ml_dbg("pid %d: no probe on Py_FinalizeEx in %s: %s", p->pid, m->path, strerror(errno));
	free(path);
}

/* The CPython version of an object mapped by the target, if it is an interpreter runtime. */
static int probe_runtime(struct pyframes *p, const struct ml_maps *maps, const struct ml_mapping *m)
{
	const struct ml_py_layout *lay;
	struct elf_syms *es = NULL;
	uint64_t rt, bias, types[3];

	if (open_runtime(p, maps, m, &es, &rt, &bias))
		return 0;
	lay = runtime_layout(p, es, m, rt, bias);
	if (lay && find_types(p, es, m, bias, types))
		lay = NULL;
	if (!lay) {
		elf_syms__free(es);
		p->refused = true;
		return 0;
	}
	if (enable(p, lay, types, rt, m))
		watch_exit(p, es, maps, m);
	elf_syms__free(es);
	return p->configured;
}

int pyframes__sync(struct pyframes *p, const struct ml_maps *maps)
{
	if (p->configured)
		return 1;
	if (p->refused)
		return 0;
	for (size_t i = 0; i < maps->n; i++) {
		const struct ml_mapping *m = &maps->v[i];

		if (!m->path || !strchr(m->perms, 'x') || seen_before(p, m))
			continue;
		if (probe_runtime(p, maps, m) || p->refused)
			break;
	}
	return p->configured;
}

int pyframes__learn(struct pyframes *p, const struct ml_pyframe_raw *raw, size_t n)
{
	uint64_t t0;
	int err = 0;

	if (!p || !n)
		return 0;
	pthread_mutex_lock(&p->lock);
	t0 = ml_clock_ns(CLOCK_MONOTONIC);
	for (size_t i = 0; pycodes__layout(p->codes) && i < n && !err; i++) {
		if (pycodes__known(p->codes, raw[i].code, raw[i].check))
			continue; /* known: checked again at the next report that shows it */
		if (pycodes__get(p->codes, raw[i].code, raw[i].check, &err))
			p->learned++;
	}
	p->learn_ns += ml_clock_ns(CLOCK_MONOTONIC) - t0;
	pthread_mutex_unlock(&p->lock);
	return err;
}

void pyframes__learn_stats(struct pyframes *p, uint64_t *codes, uint64_t *ns)
{
	*codes = *ns = 0;
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	*codes = p->learned;
	*ns = p->learn_ns;
	pthread_mutex_unlock(&p->lock);
}

static int resolve_locked(struct pyframes *p, const struct ml_pyframe_raw *raw, const struct ml_frame **out)
{
	struct py_code *c = NULL;
	struct py_frame *f;
	uint32_t gen = 0;
	uint64_t key;
	int err, line = 0;

	if (pycodes__layout(p->codes)) {
		c = pycodes__get(p->codes, raw->code, raw->check, &err);
		if (!c)
			return err;
		gen = c->gen;
	}
	key = mix(mix(mix(mix(2, raw->code), raw->check), raw->instr), gen);
	f = u64map__get(&p->frames, key);
	if (f && f->code == raw->code && f->check == raw->check && f->instr == raw->instr && f->gen == gen) {
		*out = &f->fr;
		return 0;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->code = raw->code;
	f->check = raw->check;
	f->instr = raw->instr;
	f->gen = gen;
	f->fr.kind = ML_FRAME_PYTHON;
	f->fr.addr = raw->code;
	f->fr.offset = raw->instr == ML_PYFRAME_NO_INSTR ? 0 : raw->instr;
	/*
	 * A frame that has not reached its first traceable instruction is being set up (3.11, 3.12), or is
	 * the interpreter's own shim for a specialised call (3.13): tracebacks leave it out, and so do we.
	 */
	if (c && c->ok && (raw->instr == ML_PYFRAME_NO_INSTR || raw->instr < c->firsttraceable)) {
		free(f);
		*out = NULL;
		return 1;
	}
	if (!c || !c->ok)
		f->fr.unresolved = c ? c->why : "no interpreter layout";
	if (c && c->ok) {
		f->fr.func = strdup(c->qualname);
		f->fr.file = strdup(c->filename);
		if (!f->fr.func || !f->fr.file) {
			frame_free(f);
			return -ENOMEM;
		}
		if (ml_pyline_lookup(c->linetable, c->linetable_len, c->firstlineno, raw->instr, &line))
			line = 0;
		f->fr.line = line > 0 ? line : 0;
	}
	if (u64map__get(&p->frames, key) || u64map__put(&p->frames, key, f)) {
		if (ml_grow(&p->spill, &p->capspill, p->nspill + 1, sizeof(*p->spill))) {
			frame_free(f);
			return -ENOMEM;
		}
		p->spill[p->nspill++] = f;
	}
	*out = &f->fr;
	return 0;
}

int pyframes__resolve(struct pyframes *p, const struct ml_pyframe_raw *raw, const struct ml_frame **out)
{
	int rc;

	pthread_mutex_lock(&p->lock);
	rc = resolve_locked(p, raw, out);
	pthread_mutex_unlock(&p->lock);
	return rc;
}
