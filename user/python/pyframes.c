/*
 * Python frames. Finding the interpreter: an object mapped by the target that defines _PyRuntime and
 * Py_Version (3.11+) is a CPython runtime; its version picks a layout from user/python/pyoffsets.c, and for
 * 3.13+ the interpreter's own _Py_DebugOffsets must agree with it. The BPF side then walks frames at every
 * allocation (bpf/python.bpf.c) and records code object, instruction index and the code object's line
 * table pointer as a check.
 *
 * Decoding reads the target's memory through /proc/PID/mem: the code object must still have that line
 * table, and every object must have the type it should (the type objects' addresses come from the
 * runtime's symbols), so a freed and reused address decodes to "unknown", never to another function.
 * Everything read is untrusted: lengths are bounded, strings converted and checked.
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
#include "python/pyline.h"
#include "python/pyoffsets.h"
#include "memleak.skel.h"

#define STR_MAX 4096		  /* longest file or function name taken from the target */
#define LINETABLE_MAX (1 << 20)	  /* longest co_linetable */
#define CACHE_MAX 65536		  /* decoded frames kept between reports (made again from their code objects) */
#define CODES_MAX (4 * CACHE_MAX) /* decoded code objects: what outlives the process, so dropped only past this */

/* A code object, known by its address and its line table's (the check the BPF side recorded). */
struct py_code {
	uint64_t code, check;
	uint64_t ident;	 /* the objects the code object refers to, as read: a replaced code object differs */
	uint32_t epoch;	 /* report in which ident was last checked */
	uint32_t gen;	 /* bumped when the address turned out to hold another code object */
	bool ok;	 /* false: could not be decoded (gone, replaced, or not a code object) */
	const char *why; /* when not ok: what stopped the decoding */
	char *filename, *qualname;
	int firstlineno;
	uint32_t firsttraceable; /* instructions before this one belong to no line: frame setup */
	uint8_t *linetable;
	size_t linetable_len;
};

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
	int mem; /* its /proc/PID/mem, opened at the first read; -1 until then */
	bool configured, refused;
	uint32_t epoch; /* reports so far: cached code objects are checked again once per report */
	char version[32];
	const struct ml_py_layout *lay;
	uint64_t type_code, type_str, type_bytes; /* runtime addresses of the type objects */
	struct seen_obj *seen;
	size_t nseen, capseen;
	struct u64map codes;	 /* hash(code, check) -> struct py_code */
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

	*out = p;
	if (!p)
		return -ENOMEM;
	p->skel = skel;
	p->pid = pid;
	p->mem = -1;
	pthread_mutex_init(&p->lock, NULL);
	return 0;
}

static void code_free(struct py_code *c)
{
	if (!c)
		return;
	free(c->filename);
	free(c->qualname);
	free(c->linetable);
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
	for (size_t i = 0; i < p->codes.cap; i++)
		code_free(p->codes.slots[i].val);
	u64map__free_values(&p->codes);
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
	caches_clear(p);
	if (p->mem >= 0)
		close(p->mem);
	pthread_mutex_destroy(&p->lock);
	free(p->seen);
	free(p);
}

void pyframes__trim(struct pyframes *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->epoch++;
	if (p->codes.n > CODES_MAX)
		caches_clear(p);
	else if (p->frames.n > CACHE_MAX || p->nspill > 1024)
		frames_clear(p);
	pthread_mutex_unlock(&p->lock);
}

void pyframes__use_layout(struct pyframes *p, const struct ml_py_layout *lay, const uint64_t types[3])
{
	p->lay = lay;
	p->type_code = types[0];
	p->type_str = types[1];
	p->type_bytes = types[2];
}

/*
 * Exactly len bytes of the target's memory at addr, through /proc/PID/mem: process_vm_readv pins pages, and
 * pinning a code object's page that a fork still shares would copy it into a DataLoader worker. 0 or a
 * negative errno.
 */
static int peek(const struct pyframes *p, uint64_t addr, void *buf, size_t len)
{
	struct pyframes *w = (struct pyframes *)p; /* the fd is a cache, opened once */
	ssize_t n;
	int fd;

	if (!addr)
		return -EFAULT;
	if (w->mem < 0) {
		fd = ml_proc_open(p->pid, "mem");
		if (fd < 0)
			return fd == -ENOENT ? -ESRCH : fd;
		w->mem = fd;
	}
	n = pread(p->mem, buf, len, (off_t)addr);
	if (n < 0)
		return errno == EIO ? -EFAULT : -errno;
	/* An unmapped address fails with EIO; a read of nothing at all means the address space is gone. */
	if (n == 0 && len)
		return -ESRCH;
	return (size_t)n == len ? 0 : -EFAULT;
}

static uint64_t get_u64(const uint8_t *buf, uint16_t off)
{
	uint64_t v;

	memcpy(&v, buf + off, sizeof(v));
	return v;
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
	    peek(p, ver_addr + bias, &version, sizeof(version))) {
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
	if (lay->version >= 0x030d0000 &&
	    (peek(p, rt, dbg, sizeof(dbg)) || ml_py_layout_check_debug(lay, dbg, sizeof(dbg), why, sizeof(why)))) {
		ml_notice("pid %d: CPython %s (%s) does not match the known %s layout (%s); native stacks only", p->pid,
			  p->version, m->path, lay->name, why[0] ? why : "no _Py_DebugOffsets");
		return NULL;
	}
	return lay;
}

/* The runtime addresses of the types a frame's objects are checked against. 0, or -ENOENT said why. */
static int find_types(struct pyframes *p, const struct elf_syms *es, const struct ml_mapping *m, uint64_t bias)
{
	uint64_t sym;

	if (elf_syms__find_object(es, "PyCode_Type", &sym, NULL) || !(p->type_code = sym + bias) ||
	    elf_syms__find_object(es, "PyUnicode_Type", &sym, NULL) || !(p->type_str = sym + bias) ||
	    elf_syms__find_object(es, "PyBytes_Type", &sym, NULL) || !(p->type_bytes = sym + bias)) {
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
static int enable(struct pyframes *p, const struct ml_py_layout *lay, uint64_t rt, const struct ml_mapping *m)
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
	p->lay = lay;
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
	uint64_t rt, bias;

	if (open_runtime(p, maps, m, &es, &rt, &bias))
		return 0;
	lay = runtime_layout(p, es, m, rt, bias);
	if (lay && find_types(p, es, m, bias))
		lay = NULL;
	if (!lay) {
		elf_syms__free(es);
		p->refused = true;
		return 0;
	}
	if (enable(p, lay, rt, m))
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

/*
 * A str object as UTF-8: compact strings only (code object names and file names always are). Characters
 * outside Unicode, and surrogates, become U+FFFD.
 */
static int read_str(const struct pyframes *p, uint64_t addr, char **out)
{
	const struct ml_py_layout *l = p->lay;
	uint8_t hdr[256];
	uint64_t len, data;
	uint32_t state, kind;
	uint8_t *raw = NULL;
	char *s, *o;

	if (l->unicode_compact_size > sizeof(hdr) || peek(p, addr, hdr, l->unicode_compact_size))
		return -EFAULT;
	if (get_u64(hdr, l->ob_type) != p->type_str)
		return -EINVAL;
	len = get_u64(hdr, l->unicode_length);
	memcpy(&state, hdr + l->unicode_state, sizeof(state));
	kind = ML_PY_STATE_KIND(state);
	if (!ML_PY_STATE_COMPACT(state) || (kind != 1 && kind != 2 && kind != 4) || len > STR_MAX)
		return -EINVAL;
	data = addr + (ML_PY_STATE_ASCII(state) ? l->unicode_ascii_size : l->unicode_compact_size);
	raw = malloc(len * kind + 1);
	s = malloc(len * 4 + 1);
	if (!raw || !s) {
		free(raw);
		free(s);
		return -ENOMEM;
	}
	if (len && peek(p, data, raw, len * kind)) {
		free(raw);
		free(s);
		return -EFAULT;
	}
	o = s;
	for (uint64_t i = 0; i < len; i++) {
		uint32_t c;

		if (kind == 1) {
			c = raw[i];
		} else if (kind == 2) {
			uint16_t v;

			memcpy(&v, raw + 2 * i, 2);
			c = v;
		} else {
			memcpy(&c, raw + 4 * i, 4);
		}
		if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
			c = 0xfffd;
		if (c < 0x80) {
			*o++ = (char)(c ? c : '?');
		} else if (c < 0x800) {
			*o++ = (char)(0xc0 | (c >> 6));
			*o++ = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			*o++ = (char)(0xe0 | (c >> 12));
			*o++ = (char)(0x80 | ((c >> 6) & 0x3f));
			*o++ = (char)(0x80 | (c & 0x3f));
		} else {
			*o++ = (char)(0xf0 | (c >> 18));
			*o++ = (char)(0x80 | ((c >> 12) & 0x3f));
			*o++ = (char)(0x80 | ((c >> 6) & 0x3f));
			*o++ = (char)(0x80 | (c & 0x3f));
		}
	}
	*o = '\0';
	free(raw);
	*out = s;
	return 0;
}

static int read_bytes(const struct pyframes *p, uint64_t addr, uint8_t **out, size_t *outlen)
{
	const struct ml_py_layout *l = p->lay;
	uint8_t hdr[64];
	uint64_t len;
	uint8_t *b;

	if (l->bytes_sval > sizeof(hdr) || peek(p, addr, hdr, l->bytes_sval))
		return -EFAULT;
	if (get_u64(hdr, l->ob_type) != p->type_bytes)
		return -EINVAL;
	len = get_u64(hdr, l->bytes_size);
	if (len > LINETABLE_MAX)
		return -EINVAL;
	b = malloc(len ? len : 1);
	if (!b)
		return -ENOMEM;
	if (len && peek(p, addr + l->bytes_sval, b, len)) {
		free(b);
		return -EFAULT;
	}
	*out = b;
	*outlen = len;
	return 0;
}

/*
 * The header of the code object at code, if it still is the one the frame ran: a code object whose line
 * table is the one recorded then. 0; -EINVAL when that no longer holds; -ESRCH when the process is gone
 * (nothing can be checked any more); another negative errno from the read.
 */
static int code_header(const struct pyframes *p, uint64_t code, uint64_t check, uint8_t *co, size_t cap,
		       uint64_t *ident)
{
	const struct ml_py_layout *l = p->lay;
	uint16_t need = 0;
	int err;

	const uint16_t fields[] = {l->code_filename,	l->code_qualname,	l->code_linetable,
				   l->code_firstlineno, l->code_firsttraceable, l->ob_type};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (fields[i] + 8 > need)
			need = fields[i] + 8;
	if (need > cap)
		return -EINVAL;
	err = peek(p, code, co, need);
	/* check 0: a frame the walker did not check (beyond the innermost few): the type must do. */
	if (!err && (get_u64(co, l->ob_type) != p->type_code || (check && get_u64(co, l->code_linetable) != check)))
		err = -EINVAL;
	if (err)
		return err;
	*ident = mix(mix(mix(mix(3, get_u64(co, l->code_filename)), get_u64(co, l->code_qualname)),
			 get_u64(co, l->code_linetable)),
		     get_u64(co, l->code_firstlineno));
	return 0;
}

/* Read a code object. -ENOMEM, or 0 with c->ok telling whether it decoded. */
static int decode_code(const struct pyframes *p, struct py_code *c)
{
	const struct ml_py_layout *l = p->lay;
	uint8_t co[256];
	int32_t first;
	int err;

	c->ok = false;
	c->epoch = p->epoch;
	err = code_header(p, c->code, c->check, co, sizeof(co), &c->ident);
	c->why = err == -ESRCH ? "process exited" : err == -EINVAL ? "code object gone or replaced" : "unreadable";
	if (err)
		return 0;
	memcpy(&first, co + l->code_firstlineno, sizeof(first));
	c->firstlineno = first;
	memcpy(&first, co + l->code_firsttraceable, sizeof(first));
	c->firsttraceable = first > 0 ? (uint32_t)first : 0;
	err = read_str(p, get_u64(co, l->code_filename), &c->filename);
	if (!err)
		err = read_str(p, get_u64(co, l->code_qualname), &c->qualname);
	if (!err)
		err = read_bytes(p, get_u64(co, l->code_linetable), &c->linetable, &c->linetable_len);
	if (err == -ENOMEM)
		return err;
	c->ok = !err;
	c->why = err == -ESRCH ? "process exited" : err ? "names unreadable" : NULL;
	return 0;
}

/* The decoded code object, from the cache or read now; NULL only with *err = -ENOMEM. */
static struct py_code *code_get(struct pyframes *p, uint64_t code, uint64_t check, int *err)
{
	uint64_t key = mix(mix(1, code), check);
	struct py_code *c = u64map__get(&p->codes, key);

	*err = 0;
	if (c && c->code == code && c->check == check) {
		uint8_t co[256];
		uint64_t ident;
		int rc;

		/*
		 * Once a report, check that the address still holds the code object decoded then. One freed
		 * and replaced by another code object (along with its line table, at the same two addresses) is
		 * decoded again under a new generation, so its frames do not take the old names. One freed and
		 * not replaced keeps them: a running frame holds its code object, so every stack that names the
		 * address was taken while the old one lived (a script's main module is freed before its
		 * interpreter finalizes; the process may have exited).
		 */
		if (c->epoch == p->epoch)
			return c;
		rc = code_header(p, code, check, co, sizeof(co), &ident);
		if ((c->ok && (rc || ident == c->ident)) || (!c->ok && rc)) {
			c->epoch = p->epoch;
			return c;
		}
		{
			uint32_t gen = c->gen + 1;

			code_free(c);
			memset(c, 0, sizeof(*c));
			c->gen = gen;
		}
	} else if (c) {
		/* Another identity with the same key: the newer one takes the place (frames own their strings). */
		code_free(c);
		memset(c, 0, sizeof(*c));
	} else {
		c = calloc(1, sizeof(*c));
		if (!c || u64map__put(&p->codes, key, c)) {
			free(c);
			*err = -ENOMEM;
			return NULL;
		}
	}
	c->code = code;
	c->check = check;
	*err = decode_code(p, c);
	return *err ? NULL : c;
}

int pyframes__learn(struct pyframes *p, const struct ml_pyframe_raw *raw, size_t n)
{
	uint64_t t0;
	int err = 0;

	if (!p || !n)
		return 0;
	pthread_mutex_lock(&p->lock);
	t0 = ml_clock_ns(CLOCK_MONOTONIC);
	for (size_t i = 0; p->lay && i < n && !err; i++) {
		uint64_t key = mix(mix(1, raw[i].code), raw[i].check);
		struct py_code *c = u64map__get(&p->codes, key);

		if (c && c->code == raw[i].code && c->check == raw[i].check)
			continue; /* known: checked again at the next report that shows it */
		if (code_get(p, raw[i].code, raw[i].check, &err))
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

	if (p->lay) {
		c = code_get(p, raw->code, raw->check, &err);
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
