/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Reports from a data file: load (records -> compact tables), aggregate
 * (pcs -> functions, stacks), then print text, folded or JSON.
 *
 * Loading keeps samples as (thread, pcs) and resolves pcs only once all
 * records are in, because symbol records are written at flush, after the
 * samples that use them. Each distinct pc is resolved once (hash map).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <stackprobe/report.h>

#include "userspace/report/outputs.h"
#include "userspace/common/sort_compat.h"

#include <stackprobe/pause.h>
#include <stackprobe/trace.h>

/* ---- small containers -------------------------------------------------- */

#define VEC(T) struct { T *v; size_t n, cap; }

#define VEC_PUSH(vec, val)                                                        \
	(ro_grow((void **)&(vec).v, &(vec).cap, (vec).n + 1, sizeof(*(vec).v))        \
		 ? -ENOMEM                                                        \
		 : ((vec).v[(vec).n++] = (val), 0))

typedef VEC(uint64_t) u64vec;
typedef VEC(uint32_t) u32vec;

struct bkey {
	size_t off, len;
	uint32_t next;		/* next id with the same hash, or UINT32_MAX */
};

/* Map from byte strings (kept in an arena) to u32 ids. */
struct bytemap {
	struct ro_map idx;		/* hash -> first id with that hash */
	VEC(char) arena;
	VEC(struct bkey) keys;		/* by id */
};

/* Find KEY or add it with the next id. *added says which. Returns the id or
 * a negative errno. */
static long bytemap_intern(struct bytemap *m, const void *key, size_t len, bool *added)
{
	uint64_t h = ro_hash(key, len, 0);
	uint32_t id, first = UINT32_MAX;

	*added = false;
	if (ro_map__get(&m->idx, h, &first)) {
		for (id = first; id != UINT32_MAX; id = m->keys.v[id].next)
			if (m->keys.v[id].len == len &&
			    memcmp(m->arena.v + m->keys.v[id].off, key, len) == 0)
				return id;
	}
	if (m->keys.n >= UINT32_MAX - 1)
		return -ENOMEM;
	if (ro_grow((void **)&m->arena.v, &m->arena.cap, m->arena.n + len + 1, 1))
		return -ENOMEM;
	struct bkey k = { .off = m->arena.n, .len = len, .next = first };

	if (len)
		memcpy(m->arena.v + m->arena.n, key, len);
	m->arena.v[m->arena.n + len] = '\0';
	m->arena.n += len + 1;
	id = (uint32_t)m->keys.n;
	if (VEC_PUSH(m->keys, k) || ro_map__put(&m->idx, h, id))
		return -ENOMEM;
	*added = true;
	return id;
}

static const char *bytemap_key(const struct bytemap *m, uint32_t id)
{
	return m->arena.v + m->keys.v[id].off;
}

static void bytemap_free(struct bytemap *m)
{
	ro_map__free(&m->idx);
	free(m->arena.v);
	free(m->keys.v);
}

/* ---- the model ---------------------------------------------------------- */

#define NMETHODS 5

struct thread {
	uint32_t tid;
	char *name;
	uint64_t samples;
	uint64_t truncated;
	uint64_t stack_max;
	uint64_t methods[NMETHODS];
	uint64_t dropped[SPROBE_DROP__COUNT];	/* captures that missed it */
	u64vec win;		/* entry -> exit, ns */
	u64vec lat;		/* signal -> exit, ns */
	u64vec kpause;		/* kernel deliver -> sigreturn, ns */
	u64vec kdelay;		/* kernel generate -> deliver, ns */
	uint64_t koffcpu;
};

struct module {
	uint32_t index;
	char *path;
	char *build_id;		/* hex */
	uint64_t load_bias;
	struct sprobe_df_range *ranges;
	uint32_t nranges;
	/* Frames of the selected samples in it, and how many of them had a
	 * name (built by aggregate()): a module with frames and no name for
	 * any has no symbols, which the text report says. */
	uint64_t frames, named;
};

struct symbol {
	uint32_t name;		/* id in names */
	uint32_t module;
	uint64_t offset;
};

struct sample {
	uint64_t time_ns;
	uint64_t pc_off;	/* into pcs */
	uint64_t window_ns;	/* entry -> exit, 0 if not recorded */
	uint32_t thread;	/* index into threads */
	uint32_t weight;	/* samples it stands for (cpu mode: timer periods), >= 1 */
	uint16_t nframes;
	uint8_t method;
	uint8_t truncated;
};

struct func {
	uint32_t name;		/* id in names */
	uint32_t module;	/* module index or NO_MODULE */
	bool unnamed;		/* module+0xoff or 0xpc: no symbol had a name */
	uint64_t self, total;
	uint64_t mark;		/* last sample counted in total, + 1 */
};

struct stack {
	uint32_t thread;
	uint32_t key;		/* id in stacks map: u32 thread + fids root first */
	uint64_t count;
};

struct sprobe_report {
	uint32_t filter_tid;
	uint32_t top;
	char *source;

	int status;
	char *message;
	uint64_t records;

	bool has_header, has_trailer;
	struct sprobe_df_header header;	/* cmdline owned */
	struct sprobe_df_trailer trailer;
	uint64_t lost[SPROBE_DF__TYPE_COUNT];	/* max of LOST and trailer */

	VEC(struct thread) threads;
	struct ro_map tid_idx;
	VEC(struct module) modules;
	struct ro_map mod_idx;		/* module index -> position */
	struct bytemap names;		/* interned function / symbol names */
	struct ro_map sym_idx;		/* pc -> position in syms */
	VEC(struct symbol) syms;
	VEC(struct sample) samples;	/* all threads; filtered at output */
	u64vec pcs;

	/* capture records (global, not filtered by tid) */
	uint64_t captures, cap_total, cap_captured, cap_dropped;
	uint64_t cap_dropped_reason[SPROBE_DROP__COUNT];
	uint64_t cap_pause_ns;
	u64vec capture_ns;
	uint64_t kwindows;
	/* Both sides of every capture window, for the kernel-vs-self check
	 * (userspace/pause_merge.c) and the trace timeline. */
	VEC(struct sprobe_pause_kwindow) kwv;
	VEC(struct sprobe_pause_swindow) swv;
	/* Zero-pause samples (no window: the kernel must show no signal),
	 * and each capture's probe-side duration by its start time. */
	VEC(struct sprobe_pause_zp_sample) zpv;
	struct ro_map cap_end;

	uint64_t t_min, t_max;	/* monotonic ns seen in records */

	/* aggregation, built by aggregate() */
	bool aggregated;
	VEC(struct func) funcs;
	struct ro_map pc_func;
	struct bytemap stackmap;
	VEC(struct stack) stacks;
	uint64_t nsel;		/* samples passing the filter (weighted) */
	uint64_t nsel_stacks;	/* of them, captured stacks (sample records) */
	u64vec all_win;
};

static const char *const method_names[NMETHODS] = {
	"none", "signal", "vm-readv", "zero-pause", "suspend",
};

static const char *const drop_names[SPROBE_DROP__COUNT] = {
	"none", "exited", "blocked", "timeout", "no-stack", "no-slot", "error",
};

struct sprobe_report *sprobe_report__new(const struct sprobe_report_opts *opts)
{
	struct sprobe_report *r;

	if (opts && opts->sz < sizeof(size_t)) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->top = 25;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, tid) + sizeof(uint32_t))
		r->filter_tid = opts->tid;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, top) + sizeof(uint32_t) &&
	    opts->top)
		r->top = opts->top;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, source) + sizeof(char *) &&
	    opts->source)
		r->source = strdup(opts->source);
	r->message = strdup("");
	r->t_min = UINT64_MAX;
	if (!r->message || (opts && opts->sz >= offsetof(struct sprobe_report_opts, source) +
							sizeof(char *) && opts->source && !r->source)) {
		sprobe_report__free(r);
		errno = ENOMEM;
		return NULL;
	}
	return r;
}

void sprobe_report__free(struct sprobe_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->threads.n; i++) {
		struct thread *t = &r->threads.v[i];

		free(t->name);
		free(t->win.v);
		free(t->lat.v);
		free(t->kpause.v);
		free(t->kdelay.v);
	}
	free(r->threads.v);
	ro_map__free(&r->tid_idx);
	for (size_t i = 0; i < r->modules.n; i++) {
		free(r->modules.v[i].path);
		free(r->modules.v[i].build_id);
		free(r->modules.v[i].ranges);
	}
	free(r->modules.v);
	ro_map__free(&r->mod_idx);
	bytemap_free(&r->names);
	ro_map__free(&r->sym_idx);
	free(r->syms.v);
	free(r->samples.v);
	free(r->pcs.v);
	free(r->capture_ns.v);
	free(r->kwv.v);
	free(r->swv.v);
	free(r->zpv.v);
	ro_map__free(&r->cap_end);
	free(r->funcs.v);
	ro_map__free(&r->pc_func);
	bytemap_free(&r->stackmap);
	free(r->stacks.v);
	free(r->all_win.v);
	free((char *)r->header.cmdline);
	free(r->source);
	free(r->message);
	free(r);
}

int sprobe_report__status(const struct sprobe_report *r)
{
	return r ? r->status : SPROBE_DF_CORRUPT;
}

const char *sprobe_report__message(const struct sprobe_report *r)
{
	return r && r->message ? r->message : "";
}

/* ---- loading ------------------------------------------------------------ */

static void seen_time(struct sprobe_report *r, uint64_t t)
{
	if (!t)
		return;
	if (t < r->t_min)
		r->t_min = t;
	if (t > r->t_max)
		r->t_max = t;
}

/* Index of the thread TID, created on first sight. Returns -ENOMEM. */
static long thread_get(struct sprobe_report *r, uint32_t tid)
{
	uint32_t i;

	if (ro_map__get(&r->tid_idx, tid, &i))
		return i;
	struct thread t = { .tid = tid };

	if (VEC_PUSH(r->threads, t))
		return -ENOMEM;
	i = (uint32_t)(r->threads.n - 1);
	if (ro_map__put(&r->tid_idx, tid, i))
		return -ENOMEM;
	return i;
}

static char *hex(const uint8_t *b, uint32_t n)
{
	char *s = malloc((size_t)n * 2 + 1);

	if (!s)
		return NULL;
	/* Not sprintf: the macOS 13+ SDK marks it deprecated (-Werror). */
	static const char digits[] = "0123456789abcdef";

	for (uint32_t i = 0; i < n; i++) {
		s[2 * i] = digits[b[i] >> 4];
		s[2 * i + 1] = digits[b[i] & 15];
	}
	s[2 * n] = '\0';
	return s;
}

static int load_record(struct sprobe_report *r, const struct sprobe_df_record *rec)
{
	long ti;
	bool added;

	switch (rec->type) {
	case SPROBE_DF_HEADER: {
		char *cmd = malloc((size_t)rec->header.cmdline_len + 1);

		if (!cmd)
			return -ENOMEM;
		memcpy(cmd, rec->header.cmdline, rec->header.cmdline_len);
		cmd[rec->header.cmdline_len] = '\0';
		free((char *)r->header.cmdline);
		r->header = rec->header;
		r->header.cmdline = cmd;
		r->has_header = true;
		break;
	}
	case SPROBE_DF_THREAD: {
		char *name = strdup(rec->thread.name);

		ti = thread_get(r, rec->thread.tid);
		if (ti < 0 || !name) {
			free(name);
			return -ENOMEM;
		}
		free(r->threads.v[ti].name);	/* renamed: last name wins */
		r->threads.v[ti].name = name;
		break;
	}
	case SPROBE_DF_MODULE: {
		const struct sprobe_df_module *m = &rec->module;
		struct module mod = { .index = m->index, .load_bias = m->load_bias,
				      .nranges = m->nranges };
		uint32_t pos;

		mod.path = strdup(m->path);
		mod.build_id = hex(m->build_id, m->build_id_len);
		mod.ranges = calloc(m->nranges ? m->nranges : 1, sizeof(*mod.ranges));
		if (!mod.path || !mod.build_id || !mod.ranges) {
			free(mod.path);
			free(mod.build_id);
			free(mod.ranges);
			return -ENOMEM;
		}
		if (m->nranges)
			memcpy(mod.ranges, m->ranges, m->nranges * sizeof(*mod.ranges));
		if (ro_map__get(&r->mod_idx, m->index, &pos)) {
			/* Same index again (re-announced): replace. */
			free(r->modules.v[pos].path);
			free(r->modules.v[pos].build_id);
			free(r->modules.v[pos].ranges);
			r->modules.v[pos] = mod;
			break;
		}
		if (VEC_PUSH(r->modules, mod) ||
		    ro_map__put(&r->mod_idx, m->index, (uint32_t)(r->modules.n - 1))) {
			free(mod.path);
			free(mod.build_id);
			free(mod.ranges);
			return -ENOMEM;
		}
		break;
	}
	case SPROBE_DF_SYMBOL: {
		const struct sprobe_df_symbol *s = &rec->symbol;
		long name = bytemap_intern(&r->names, s->name, s->name_len, &added);
		struct symbol sym = { .module = s->module, .offset = s->offset };

		if (name < 0)
			return (int)name;
		sym.name = (uint32_t)name;
		if (VEC_PUSH(r->syms, sym) ||
		    ro_map__put(&r->sym_idx, s->pc, (uint32_t)(r->syms.n - 1)))
			return -ENOMEM;
		break;
	}
	case SPROBE_DF_SAMPLE: {
		const struct sprobe_df_sample *s = &rec->sample;
		struct sample smp = {
			.time_ns = s->time_ns, .pc_off = r->pcs.n, .nframes = (uint16_t)s->nframes,
			.method = s->method < NMETHODS ? (uint8_t)s->method : 0,
			.truncated = !!(s->flags & SPROBE_DF_SAMPLE_TRUNCATED),
			.weight = s->weight ? s->weight : 1,
		};
		struct thread *t;

		ti = thread_get(r, s->tid);
		if (ti < 0)
			return -ENOMEM;
		smp.thread = (uint32_t)ti;
		if (ro_grow((void **)&r->pcs.v, &r->pcs.cap, r->pcs.n + s->nframes, 8))
			return -ENOMEM;
		if (s->nframes)
			memcpy(r->pcs.v + r->pcs.n, s->pcs, s->nframes * sizeof(uint64_t));
		r->pcs.n += s->nframes;
		if (VEC_PUSH(r->samples, smp))
			return -ENOMEM;
		t = &r->threads.v[ti];
		t->samples += smp.weight;
		t->truncated += smp.truncated ? smp.weight : 0;
		t->methods[smp.method] += smp.weight;
		if (s->stack_used > t->stack_max)
			t->stack_max = s->stack_used;
		if (s->method == SPROBE_METHOD_ZERO_PAUSE) {
			/* Read while blocked, no signal: a 0 ns pause. Its
			 * entry/exit bracket the probe's reads; the kernel
			 * must show no signal for it (zero-pause check). */
			struct sprobe_pause_zp_sample z = { .tid = (pid_t)s->tid,
							    .start_ns = s->time_ns,
							    .end_ns = s->exit_ns };
			if (VEC_PUSH(r->zpv, z) || VEC_PUSH(t->win, 0))
				return -ENOMEM;
		} else if (s->entry_ns && s->exit_ns >= s->entry_ns) {
			struct sprobe_pause_swindow sw = { .tid = (pid_t)s->tid, .signal_ns = s->signal_ns,
							   .entry_ns = s->entry_ns, .exit_ns = s->exit_ns };
			if (VEC_PUSH(r->swv, sw))
				return -ENOMEM;
			r->samples.v[r->samples.n - 1].window_ns = s->exit_ns - s->entry_ns;
			if (VEC_PUSH(t->win, s->exit_ns - s->entry_ns))
				return -ENOMEM;
		}
		if (s->signal_ns && s->exit_ns >= s->signal_ns &&
		    VEC_PUSH(t->lat, s->exit_ns - s->signal_ns))
			return -ENOMEM;
		seen_time(r, s->time_ns);
		seen_time(r, s->exit_ns);
		break;
	}
	case SPROBE_DF_CAPTURE: {
		const struct sprobe_df_capture *c = &rec->capture;

		r->captures++;
		r->cap_total += c->threads_total;
		r->cap_captured += c->threads_captured;
		r->cap_dropped += c->threads_dropped;
		for (int i = 0; i < SPROBE_DROP__COUNT; i++)
			r->cap_dropped_reason[i] += c->dropped[i];
		r->cap_pause_ns += c->pause_ns;
		if (VEC_PUSH(r->capture_ns, c->capture_ns))
			return -ENOMEM;
		if (c->time_ns &&
		    ro_map__put(&r->cap_end, c->time_ns,
			       c->capture_ns < UINT32_MAX - 1 ? (uint32_t)c->capture_ns : UINT32_MAX - 1))
			return -ENOMEM;
		for (uint32_t i = 0; i < c->ndropped_tids; i++) {
			uint32_t reason = c->dropped_tids[i].reason;

			ti = thread_get(r, c->dropped_tids[i].tid);
			if (ti < 0)
				return -ENOMEM;
			r->threads.v[ti].dropped[reason < SPROBE_DROP__COUNT ? reason
									     : SPROBE_DROP_ERROR]++;
		}
		seen_time(r, c->time_ns);
		seen_time(r, c->time_ns + c->capture_ns);
		break;
	}
	case SPROBE_DF_KWINDOW: {
		const struct sprobe_df_kwindow *k = &rec->kwindow;
		struct thread *t;

		ti = thread_get(r, k->tid);
		if (ti < 0)
			return -ENOMEM;
		t = &r->threads.v[ti];
		r->kwindows++;
		struct sprobe_pause_kwindow kw = {
			.tid = (pid_t)k->tid, .generate_ns = k->generate_ns, .deliver_ns = k->deliver_ns,
			.sigreturn_ns = k->sigreturn_ns, .offcpu_ns = k->offcpu_ns,
			.flags = (k->generate_ns ? 0 : SPROBE_PAUSE_KW_NO_GENERATE) |
				 (k->sigreturn_ns ? 0 : SPROBE_PAUSE_KW_INCOMPLETE),
		};
		if (k->deliver_ns && VEC_PUSH(r->kwv, kw))
			return -ENOMEM;
		if (k->deliver_ns && k->sigreturn_ns >= k->deliver_ns &&
		    VEC_PUSH(t->kpause, k->sigreturn_ns - k->deliver_ns))
			return -ENOMEM;
		if (k->generate_ns && k->deliver_ns >= k->generate_ns &&
		    VEC_PUSH(t->kdelay, k->deliver_ns - k->generate_ns))
			return -ENOMEM;
		t->koffcpu += k->offcpu_ns;
		break;
	}
	case SPROBE_DF_LOST:
		for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
			if (rec->lost.lost[i] > r->lost[i])
				r->lost[i] = rec->lost.lost[i];
		break;
	case SPROBE_DF_TRAILER:
		r->trailer = rec->trailer;
		r->has_trailer = true;
		for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
			if (rec->trailer.lost[i] > r->lost[i])
				r->lost[i] = rec->trailer.lost[i];
		break;
	}
	return 0;
}

int sprobe_report__load(struct sprobe_report *r, struct sprobe_datafile_reader *rd)
{
	struct sprobe_df_record rec;
	int rc;

	if (!r || !rd)
		return -EINVAL;
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		int err = load_record(r, &rec);

		if (err)
			return err;
		r->records++;
	}
	r->status = sprobe_datafile_reader__status(rd);
	free(r->message);
	r->message = strdup(sprobe_datafile_reader__error(rd));
	r->aggregated = false;
	if (!r->message)
		return -ENOMEM;
	return rc;
}

int sprobe_report__load_file(struct sprobe_report *r, const char *path)
{
	struct sprobe_datafile_reader *rd;
	int rc;

	if (!r || !path)
		return -EINVAL;
	rd = sprobe_datafile_reader__open(path);
	if (!rd)
		return -errno;
	rc = sprobe_report__load(r, rd);
	sprobe_datafile_reader__free(rd);
	return rc;
}

/* ---- aggregation -------------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

static const struct module *module_of(const struct sprobe_report *r, uint64_t pc)
{
	for (size_t i = 0; i < r->modules.n; i++) {
		const struct module *m = &r->modules.v[i];

		for (uint32_t j = 0; j < m->nranges; j++)
			if (pc >= m->ranges[j].start && pc < m->ranges[j].end)
				return m;
	}
	return NULL;
}

/* Function id of PC: its symbol's name, else module+0xoff, else 0xpc. */
static long func_of(struct sprobe_report *r, uint64_t pc)
{
	uint32_t id, si;
	long name;
	uint32_t module = SPROBE_DF_NO_MODULE;
	bool added, named = false;

	if (ro_map__get(&r->pc_func, pc, &id))
		return id;
	if (ro_map__get(&r->sym_idx, pc, &si) && r->names.keys.v[r->syms.v[si].name].len) {
		name = r->syms.v[si].name;
		module = r->syms.v[si].module;
		named = true;
	} else {
		const struct module *m = module_of(r, pc);
		char buf[512];

		if (m) {
			snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, base_name(m->path),
				 pc - m->load_bias);
			module = m->index;
		} else {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, pc);
		}
		name = bytemap_intern(&r->names, buf, strlen(buf), &added);
		if (name < 0)
			return name;
	}
	/* Functions are keyed by name: one per distinct name. funcs is
	 * indexed by name id, grown on demand. */
	if (ro_grow((void **)&r->funcs.v, &r->funcs.cap, r->names.keys.n, sizeof(struct func)))
		return -ENOMEM;
	while (r->funcs.n < r->names.keys.n) {
		r->funcs.v[r->funcs.n] = (struct func){ .name = (uint32_t)r->funcs.n,
							.module = SPROBE_DF_NO_MODULE };
		r->funcs.n++;
	}
	if (r->funcs.v[name].module == SPROBE_DF_NO_MODULE) {
		r->funcs.v[name].module = module;
		r->funcs.v[name].unnamed = !named;
	}
	if (ro_map__put(&r->pc_func, pc, (uint32_t)name))
		return -ENOMEM;
	return name;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* qsort(NULL, 0, ...) is undefined behaviour: empty vectors have no array. */
static void sort_u64(u64vec *v)
{
	if (v->n > 1)
		qsort(v->v, v->n, sizeof(uint64_t), cmp_u64);
}

static bool selected(const struct sprobe_report *r, uint32_t tid)
{
	return !r->filter_tid || r->filter_tid == tid;
}

static int aggregate(struct sprobe_report *r)
{
	uint32_t key[1 + SPROBE_MAX_FRAMES];
	bool added;

	if (r->aggregated)
		return 0;
	/* Rebuild from scratch (load may have added records). */
	for (size_t i = 0; i < r->funcs.n; i++)
		r->funcs.v[i].self = r->funcs.v[i].total = r->funcs.v[i].mark = 0;
	bytemap_free(&r->stackmap);
	memset(&r->stackmap, 0, sizeof(r->stackmap));
	r->stacks.n = 0;
	r->all_win.n = 0;
	r->nsel = 0;
	r->nsel_stacks = 0;
	for (size_t i = 0; i < r->modules.n; i++)
		r->modules.v[i].frames = r->modules.v[i].named = 0;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		const struct thread *t = &r->threads.v[s->thread];
		const uint64_t *pcs = s->nframes ? r->pcs.v + s->pc_off : NULL;
		long fid, sid;

		if (!selected(r, t->tid))
			continue;
		r->nsel += s->weight;
		r->nsel_stacks++;
		key[0] = s->thread;
		for (uint32_t i = 0; i < s->nframes; i++) {
			fid = func_of(r, pcs[i]);
			if (fid < 0)
				return (int)fid;
			struct func *f = &r->funcs.v[fid];
			uint32_t mpos;

			if (f->module != SPROBE_DF_NO_MODULE &&
			    ro_map__get(&r->mod_idx, f->module, &mpos)) {
				r->modules.v[mpos].frames++;
				r->modules.v[mpos].named += !f->unnamed;
			}
			if (i == 0)
				f->self += s->weight;
			if (f->mark != si + 1) {	/* recursion counts once */
				f->mark = si + 1;
				f->total += s->weight;
			}
			key[1 + s->nframes - 1 - i] = (uint32_t)fid;	/* root first */
		}
		sid = bytemap_intern(&r->stackmap, key, (1 + s->nframes) * sizeof(uint32_t), &added);
		if (sid < 0)
			return (int)sid;
		if (added) {
			struct stack st = { .thread = s->thread, .key = (uint32_t)sid };

			if (VEC_PUSH(r->stacks, st))
				return -ENOMEM;
		}
		r->stacks.v[sid].count += s->weight;
	}
	for (size_t i = 0; i < r->threads.n; i++) {
		struct thread *t = &r->threads.v[i];

		if (!selected(r, t->tid))
			continue;
		for (size_t j = 0; j < t->win.n; j++)
			if (VEC_PUSH(r->all_win, t->win.v[j]))
				return -ENOMEM;
		sort_u64(&t->win);
		sort_u64(&t->lat);
		sort_u64(&t->kpause);
		sort_u64(&t->kdelay);
	}
	sort_u64(&r->all_win);
	sort_u64(&r->capture_ns);
	r->aggregated = true;
	return 0;
}

uint64_t sprobe_report__samples(const struct sprobe_report *r)
{
	uint64_t n = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < r->threads.n; i++)
		if (selected(r, r->threads.v[i].tid))
			n += r->threads.v[i].samples;
	return n;
}

/* Nearest-rank percentile of a sorted vector (p in 0..100). */
static uint64_t pct(const u64vec *v, unsigned p)
{
	size_t rank;

	if (!v->n)
		return 0;
	rank = (v->n * p + 99) / 100;
	if (rank == 0)
		rank = 1;
	return v->v[rank - 1];
}

static uint64_t sum(const u64vec *v)
{
	uint64_t s = 0;

	for (size_t i = 0; i < v->n; i++)
		s += v->v[i];
	return s;
}

static uint64_t wall_ns(const struct sprobe_report *r)
{
	uint64_t start = r->has_header && r->header.start_mono_ns ? r->header.start_mono_ns
								  : r->t_min;
	uint64_t end = r->has_trailer && r->trailer.end_mono_ns ? r->trailer.end_mono_ns
							       : r->t_max;

	if (start == UINT64_MAX || end <= start)
		return 0;
	return end - start;
}

static uint64_t lost_total(const struct sprobe_report *r)
{
	uint64_t n = 0;

	for (int i = 0; i < SPROBE_DF__TYPE_COUNT; i++)
		n += r->lost[i];
	return n;
}

uint64_t sprobe_report__records(const struct sprobe_report *r)
{
	return r ? r->records : 0;
}

uint64_t sprobe_report__lost(const struct sprobe_report *r)
{
	return r ? lost_total(r) : 0;
}

uint64_t sprobe_report__threads_dropped(const struct sprobe_report *r)
{
	return r ? r->cap_dropped : 0;
}

static const char *status_name(int st)
{
	switch (st) {
	case SPROBE_DF_COMPLETE:
		return "complete";
	case SPROBE_DF_CUT_SHORT:
		return "cut_short";
	case SPROBE_DF_CORRUPT:
		return "corrupt";
	default:
		return "unread";
	}
}

static const char *func_name(const struct sprobe_report *r, uint32_t fid)
{
	return bytemap_key(&r->names, r->funcs.v[fid].name);
}

static const char *module_name(const struct sprobe_report *r, uint32_t index)
{
	uint32_t pos;

	if (index != SPROBE_DF_NO_MODULE && ro_map__get(&r->mod_idx, index, &pos))
		return r->modules.v[pos].path;
	return NULL;
}

/* Sort helpers for the function tables (sprobe_qsort_r: no global state). */
struct fsort {
	const struct sprobe_report *r;
	bool by_total;
};

static int cmp_func(const void *a, const void *b, void *arg)
{
	const struct fsort *c = arg;
	const struct func *fa = &c->r->funcs.v[*(const uint32_t *)a];
	const struct func *fb = &c->r->funcs.v[*(const uint32_t *)b];
	uint64_t ka = c->by_total ? fa->total : fa->self;
	uint64_t kb = c->by_total ? fb->total : fb->self;

	if (ka != kb)
		return ka > kb ? -1 : 1;
	ka = c->by_total ? fa->self : fa->total;
	kb = c->by_total ? fb->self : fb->total;
	if (ka != kb)
		return ka > kb ? -1 : 1;
	return strcmp(func_name(c->r, fa->name), func_name(c->r, fb->name));
}

/* Function ids with at least one sample, sorted. Caller frees. */
static uint32_t *sorted_funcs(const struct sprobe_report *r, bool by_total, size_t *n)
{
	uint32_t *ids = malloc((r->funcs.n ? r->funcs.n : 1) * sizeof(uint32_t));

	*n = 0;
	if (!ids)
		return NULL;
	for (size_t i = 0; i < r->funcs.n; i++)
		if (r->funcs.v[i].total)
			ids[(*n)++] = (uint32_t)i;
	struct fsort ctx = { .r = r, .by_total = by_total };

	if (*n > 1)
		sprobe_qsort_r(ids, *n, sizeof(uint32_t), cmp_func, &ctx);
	return ids;
}

/* ---- text --------------------------------------------------------------- */

static double pcnt(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static double us(uint64_t ns)
{
	return (double)ns / 1000.0;
}

/* A duration for prose lines: "850 ns", "12.3 us", "4.56 ms", "1.234 s".
 * buf must hold 32 bytes; returns buf. */
static const char *dur(char *buf, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, 32, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, 32, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, 32, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, 32, "%.3f s", (double)ns / 1e9);
	return buf;
}

static void print_cmdline(FILE *o, const struct sprobe_report *r)
{
	for (uint32_t i = 0; i < r->header.cmdline_len; i++) {
		unsigned char c = (unsigned char)r->header.cmdline[i];

		if (c == '\0')
			fputc(i + 1 < r->header.cmdline_len ? ' ' : '\n', o);
		else
			fputc(c < 0x20 || c == 0x7f ? '?' : c, o);
	}
	if (!r->header.cmdline_len || r->header.cmdline[r->header.cmdline_len - 1] != '\0')
		fputc('\n', o);
}

static const char *thread_label(const struct thread *t)
{
	return t->name && *t->name ? t->name : "?";
}

/* ---- kernel vs self-reported windows ------------------------------------ */

/* The kernel's word on the selected threads' zero-pause samples: each is
 * checked over its whole capture round (start .. start + capture_ns of the
 * capture record with that start; its own reads' end when that record is
 * missing). */
static int zp_check(const struct sprobe_report *r, struct sprobe_pause_zp_check *out)
{
	struct sprobe_pause_zp_sample *zs = malloc((r->zpv.n + 1) * sizeof(*zs));
	size_t nz = 0;
	int err;

	if (!zs)
		return -ENOMEM;
	for (size_t i = 0; i < r->zpv.n; i++) {
		struct sprobe_pause_zp_sample z = r->zpv.v[i];
		uint32_t dur;

		if (!selected(r, (uint32_t)z.tid))
			continue;
		if (ro_map__get(&r->cap_end, z.start_ns, &dur) && z.start_ns + dur > z.end_ns)
			z.end_ns = z.start_ns + dur;
		zs[nz++] = z;
	}
	err = sprobe_pause_zp__check(r->kwv.v, r->kwv.n, zs, nz, r->lost[SPROBE_DF_KWINDOW], out);
	free(zs);
	return err;
}

/* Match the selected threads' kernel windows with their self-reported ones
 * (see userspace/pause_merge.c). NULL with errno on failure; a report
 * without kernel windows gets NULL with errno ENOENT. */
static struct sprobe_pause_merge *pause_check(const struct sprobe_report *r)
{
	struct sprobe_pause_kwindow *kw;
	struct sprobe_pause_swindow *sw;
	size_t nk = 0, ns = 0;

	if (!r->kwv.n) {
		errno = ENOENT;
		return NULL;
	}
	kw = malloc((r->kwv.n + 1) * sizeof(*kw));
	sw = malloc((r->swv.n + 1) * sizeof(*sw));
	if (!kw || !sw) {
		free(kw);
		free(sw);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < r->kwv.n; i++)
		if (selected(r, (uint32_t)r->kwv.v[i].tid))
			kw[nk++] = r->kwv.v[i];
	for (size_t i = 0; i < r->swv.n; i++)
		if (selected(r, (uint32_t)r->swv.v[i].tid))
			sw[ns++] = r->swv.v[i];
	struct sprobe_pause_merge_opts mo = {
		.sz = sizeof(mo),
		.wall_ns = wall_ns(r),
		.kernel_lost = r->lost[SPROBE_DF_KWINDOW],
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, sw, ns, &mo);
	free(kw);
	free(sw);
	return m;
}

static void text_drops(FILE *o, const struct sprobe_report *r)
{
	uint64_t lt = lost_total(r);
	bool any_thread = false;

	fprintf(o, "\nDrops\n");
	fprintf(o, "  records lost in the stream (queue full): %" PRIu64, lt);
	if (lt) {
		const char *sep = " (";

		for (int i = 1; i < SPROBE_DF__TYPE_COUNT; i++)
			if (r->lost[i]) {
				fprintf(o, "%s%s %" PRIu64, sep, sprobe_df_type__name(i), r->lost[i]);
				sep = ", ";
			}
		fputc(')', o);
	}
	fputc('\n', o);
	fprintf(o, "  threads not captured: %" PRIu64 " of %" PRIu64 " thread-captures",
		r->cap_dropped, r->cap_total);
	if (r->cap_dropped) {
		const char *sep = " (";

		for (int i = 1; i < SPROBE_DROP__COUNT; i++)
			if (r->cap_dropped_reason[i]) {
				fprintf(o, "%s%s %" PRIu64, sep, drop_names[i], r->cap_dropped_reason[i]);
				sep = ", ";
			}
		fputc(')', o);
	}
	fputc('\n', o);
	for (size_t i = 0; i < r->threads.n; i++) {
		const struct thread *t = &r->threads.v[i];
		uint64_t d = 0;

		if (!selected(r, t->tid))
			continue;
		for (int k = 1; k < SPROBE_DROP__COUNT; k++)
			d += t->dropped[k];
		if (!d)
			continue;
		if (!any_thread)
			fprintf(o, "  dropped threads:\n  %8s  %-16s %8s  reasons\n", "tid", "name", "drops");
		any_thread = true;
		fprintf(o, "  %8u  %-16s %8" PRIu64 " ", t->tid, thread_label(t), d);
		for (int k = 1; k < SPROBE_DROP__COUNT; k++)
			if (t->dropped[k])
				fprintf(o, " %s=%" PRIu64, drop_names[k], t->dropped[k]);
		fputc('\n', o);
	}
}

/* Threads by samples, most first; ties by tid. */
static int cmp_thread(const void *a, const void *b, void *arg)
{
	const struct sprobe_report *r = arg;
	const struct thread *x = &r->threads.v[*(const uint32_t *)a];
	const struct thread *y = &r->threads.v[*(const uint32_t *)b];

	if (x->samples != y->samples)
		return x->samples > y->samples ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/*
 * Sampled modules none of whose frames has a name. Names come from the
 * symbol records the agent wrote, so such a module had no symbols for any
 * of them when it was recorded: no symbol table, or one that covers none
 * of the code the samples hit. Say so, with the package that fixes it,
 * rather than leave the reader guessing at "libc.so.6+0x891f4". A module
 * with some names gets no line: frames without one happen with full
 * symbols too (PLT stubs), and the file does not say which symbol table
 * named the others (libc's .dynsym names read but not start_thread).
 */
static void text_symbols(FILE *o, const struct sprobe_report *r)
{
	bool first = true;

	for (size_t i = 0; i < r->modules.n; i++) {
		const struct module *m = &r->modules.v[i];
		const char *b = base_name(m->path);
		bool libc = strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0;

		if (!m->frames || m->named)
			continue;
		fprintf(o, "  %s  %s: no symbols (%s)\n", first ? "symbols:" : "        ", b,
			libc ? "install libc6-dbg for names"
			     : "no symbol table; install its debug package (-dbgsym) or build with -g");
		first = false;
	}
}

static int write_text(struct sprobe_report *r, FILE *o)
{
	uint64_t wall = wall_ns(r);
	uint64_t nsel = r->nsel;
	size_t nf;
	uint32_t *ids;

	fprintf(o, "stackprobe report%s%s\n", r->source ? ": " : "", r->source ? r->source : "");
	if (r->has_header) {
		time_t secs = (time_t)(r->header.start_realtime_ns / 1000000000u);
		struct tm tm;
		char when[64] = "?";

		if (gmtime_r(&secs, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
		fprintf(o, "  command:  ");
		print_cmdline(o, r);
		fprintf(o, "  pid %u, %s mode, %u Hz, started %s, wall time %.3f s\n", r->header.pid,
			r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall", r->header.freq_hz,
			when, (double)wall / 1e9);
	}
	if (r->status == SPROBE_DF_COMPLETE)
		fprintf(o, "  file:     complete (%" PRIu64 " records, trailer present)\n", r->records);
	else
		fprintf(o, "  file:     %s: %s\n",
			r->status == SPROBE_DF_CUT_SHORT ? "CUT SHORT" : "ERROR", r->message);
	if (r->filter_tid)
		fprintf(o, "  filter:   tid %u only\n", r->filter_tid);
	fprintf(o, "  samples:  %" PRIu64 " in %" PRIu64 " captures; %" PRIu64
		   " records lost in the stream; %" PRIu64 " thread-captures dropped\n",
		nsel, r->captures, lost_total(r), r->cap_dropped);
	if (r->nsel_stacks != nsel)
		fprintf(o, "  weights:  the %" PRIu64 " samples come from %" PRIu64 " captured stacks,\n"
			   "            each counted for the CPU timer periods it covers\n",
			nsel, r->nsel_stacks);

	text_symbols(o, r);

	for (int pass = 0; pass < 2; pass++) {
		ids = sorted_funcs(r, pass == 1, &nf);
		if (!ids)
			return -ENOMEM;
		fprintf(o, "\nTop functions by %s samples\n", pass ? "total" : "self");
		fprintf(o, "  %8s %7s %8s %7s  %s\n", "self", "self%", "total", "total%", "function");
		for (size_t i = 0; i < nf && i < r->top; i++) {
			const struct func *f = &r->funcs.v[ids[i]];

			if (pass == 0 && !f->self)
				break;
			fprintf(o, "  %8" PRIu64 " %6.2f%% %8" PRIu64 " %6.2f%%  %s\n", f->self,
				pcnt(f->self, nsel), f->total, pcnt(f->total, nsel),
				func_name(r, ids[i]));
		}
		if (!nf)
			fprintf(o, "  (no samples)\n");
		free(ids);
	}

	fprintf(o, "\nThreads (by samples)\n");
	fprintf(o, "  %8s  %-16s %8s %7s %9s %9s %9s %7s %10s %s\n", "tid", "name", "samples",
		"share", "win-p50", "win-p99", "win-max", "pause%", "stack-max", "methods");
	uint32_t *order = malloc((r->threads.n ? r->threads.n : 1) * sizeof(uint32_t));

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < r->threads.n; i++)
		order[i] = (uint32_t)i;
	if (r->threads.n > 1)
		sprobe_qsort_r(order, r->threads.n, sizeof(uint32_t), cmp_thread, r);
	for (size_t oi = 0; oi < r->threads.n; oi++) {
		const struct thread *t = &r->threads.v[order[oi]];

		if (!selected(r, t->tid))
			continue;
		if (!t->win.n) {
			/* Seen only in drop lists or kernel windows, or no
			 * window timestamps: say so instead of printing 0s. */
			fprintf(o, "  %8u  %-16s %8" PRIu64 " %6.2f%% %9s %9s %9s %7s %10" PRIu64 " ",
				t->tid, thread_label(t), t->samples, pcnt(t->samples, nsel), "-", "-",
				"-", "-", t->stack_max);
		} else {
			fprintf(o, "  %8u  %-16s %8" PRIu64 " %6.2f%% %7.1fus %7.1fus %7.1fus %6.3f%% "
				   "%10" PRIu64 " ",
				t->tid, thread_label(t), t->samples, pcnt(t->samples, nsel),
				us(pct(&t->win, 50)), us(pct(&t->win, 99)), us(pct(&t->win, 100)),
				pcnt(sum(&t->win), wall), t->stack_max);
		}
		for (int m = 0; m < NMETHODS; m++)
			if (t->methods[m])
				fprintf(o, " %s=%" PRIu64, method_names[m], t->methods[m]);
		if (t->truncated)
			fprintf(o, " truncated=%" PRIu64, t->truncated);
		fputc('\n', o);
	}
	free(order);

	fprintf(o, "\nPause (capture window: handler entry -> exit, per sampled thread)\n");
	if (r->all_win.n) {
		uint64_t total = sum(&r->all_win);

		char b1[32], b2[32], b3[32];

		fprintf(o, "  overall: %zu windows, median %s, p99 %s, max %s\n", r->all_win.n,
			dur(b1, pct(&r->all_win, 50)), dur(b2, pct(&r->all_win, 99)),
			dur(b3, pct(&r->all_win, 100)));
		fprintf(o, "  total pause %.3f ms = %.4f%% of %.3f s wall time\n", (double)total / 1e6,
			pcnt(total, wall), (double)wall / 1e9);
		if (r->captures && !r->filter_tid)
			fprintf(o, "  capture, probe side (all threads of one capture): median %s, "
				   "p99 %s, max %s\n",
				dur(b1, pct(&r->capture_ns, 50)), dur(b2, pct(&r->capture_ns, 99)),
				dur(b3, pct(&r->capture_ns, 100)));
	} else {
		fprintf(o, "  (no windows recorded)\n");
	}
	{
		uint64_t m[NMETHODS] = { 0 };

		for (size_t i = 0; i < r->threads.n; i++)
			if (selected(r, r->threads.v[i].tid))
				for (int k = 0; k < NMETHODS; k++)
					m[k] += r->threads.v[i].methods[k];
		fprintf(o, "  capture methods:");
		for (int k = 0; k < NMETHODS; k++)
			if (m[k])
				fprintf(o, " %s %" PRIu64 " (%.1f%%)", method_names[k], m[k], pcnt(m[k], nsel));
		if (!nsel)
			fprintf(o, " (none)");
		fputc('\n', o);
		if (m[SPROBE_METHOD_ZERO_PAUSE])
			fprintf(o, "  zero-pause: %" PRIu64 " samples read while blocked, without a "
				   "signal: counted above as 0 ns windows\n",
				m[SPROBE_METHOD_ZERO_PAUSE]);
	}
	if (r->kwindows) {
		/* Every window seen from both sides: the kernel's (eBPF) and
		 * the handler's own, matched and compared. */
		struct sprobe_pause_merge *m = pause_check(r);
		fputc('\n', o);
		if (m)
			sprobe_pause_merge__print(m, o);
		else
			fprintf(o, "Pause check: cannot match %" PRIu64 " kernel windows (%s)\n",
				r->kwindows, strerror(errno));
		sprobe_pause_merge__free(m);
		struct sprobe_pause_zp_check zc;
		if (r->zpv.n && zp_check(r, &zc) == 0)
			sprobe_pause_zp__print(&zc, o);
	}
	text_drops(o, r);
	return 0;
}

/* ---- folded ------------------------------------------------------------- */

/* Folded frames may not contain ';' (the separator) or a newline; the
 * count is the last space-separated field, so spaces are fine. */
static void folded_frame(FILE *o, const char *s)
{
	for (; *s; s++) {
		char c = *s;

		fputc(c == ';' ? ':' : (c == '\n' || c == '\r') ? ' ' : c, o);
	}
}

static int write_folded(struct sprobe_report *r, FILE *o)
{
	for (size_t i = 0; i < r->stacks.n; i++) {
		const struct stack *st = &r->stacks.v[i];
		const struct thread *t = &r->threads.v[st->thread];
		const uint32_t *key = (const uint32_t *)bytemap_key(&r->stackmap, st->key);
		size_t n = r->stackmap.keys.v[st->key].len / sizeof(uint32_t) - 1;
		char label[64];

		/* The thread is the root frame: "name-tid" ("thread-tid" when
		 * the file has no name for it). */
		snprintf(label, sizeof(label), "-%u", t->tid);
		folded_frame(o, t->name && *t->name ? t->name : "thread");
		fputs(label, o);
		for (size_t k = 0; k < n; k++) {
			uint32_t fid;

			memcpy(&fid, key + 1 + k, sizeof(fid));
			fputc(';', o);
			folded_frame(o, func_name(r, fid));
		}
		fprintf(o, " %" PRIu64 "\n", st->count);
	}
	return 0;
}

/* ---- json --------------------------------------------------------------- */


static void jdist(FILE *o, const u64vec *v, uint64_t wall)
{
	uint64_t total = sum(v);

	fprintf(o, "{\"count\": %zu, \"median_ns\": %" PRIu64 ", \"p99_ns\": %" PRIu64
		   ", \"max_ns\": %" PRIu64 ", \"total_ns\": %" PRIu64 ", \"share_of_wall\": %.9f}",
		v->n, pct(v, 50), pct(v, 99), pct(v, 100), total,
		wall ? (double)total / (double)wall : 0.0);
}

static void jlost(FILE *o, const uint64_t *lost)
{
	uint64_t t = 0;

	fputc('{', o);
	for (int i = 1; i < SPROBE_DF__TYPE_COUNT; i++) {
		fprintf(o, "\"%s\": %" PRIu64 ", ", sprobe_df_type__name(i), lost[i]);
		t += lost[i];
	}
	fprintf(o, "\"total\": %" PRIu64 "}", t);
}

static void jpdist(FILE *o, const char *name, const struct sprobe_pause_dist *d, bool last)
{
	fprintf(o, "\"%s\": {\"count\": %" PRIu64 ", \"median_ns\": %" PRIu64
		   ", \"p99_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64 ", \"total_ns\": %" PRIu64 "}%s",
		name, d->count, d->median, d->p99, d->max, d->total, last ? "" : ", ");
}

static void jpsummary(FILE *o, const struct sprobe_pause_summary *s)
{
	fprintf(o, "{\"tid\": %d, \"matched\": %u, \"kernel_only\": %u, \"self_only\": %u, ",
		(int)s->tid, s->matched, s->kernel_only, s->self_only);
	jpdist(o, "delivery", &s->delivery, false);
	jpdist(o, "kernel_pause", &s->kernel_pause, false);
	jpdist(o, "self_pause", &s->self_pause, false);
	jpdist(o, "kernel_minus_self", &s->difference, false);
	jpdist(o, "offcpu", &s->offcpu, false);
	fprintf(o, "\"pause_share\": %.9f}", s->pause_share);
}

/* "pause_check": null without kernel windows, else the overall and
 * per-thread comparison of kernel and self-reported windows. */
static void json_pause_check(const struct sprobe_report *r, FILE *o)
{
	struct sprobe_pause_merge *m = pause_check(r);
	size_t n = 0;

	if (!m) {
		fputs("null", o);
		return;
	}
	fputs("{\n    \"overall\": ", o);
	jpsummary(o, sprobe_pause_merge__overall(m));
	fputs(",\n    \"threads\": [", o);
	const struct sprobe_pause_summary *t = sprobe_pause_merge__threads(m, &n);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",\n      " : "\n      ", o);
		jpsummary(o, &t[i]);
	}
	fputs("\n    ]", o);
	struct sprobe_pause_zp_check zc;
	if (zp_check(r, &zc) == 0)
		fprintf(o, ",\n    \"zero_pause\": {\"samples\": %" PRIu64 ", \"confirmed\": %" PRIu64
			   ", \"signalled\": %" PRIu64 ", \"outside\": %" PRIu64 "}",
			zc.samples, zc.confirmed, zc.signalled, zc.outside);
	fputs("\n  }", o);
	sprobe_pause_merge__free(m);
}

/* ---- trace (Chrome trace-event JSON, Perfetto) --------------------------- */

static int write_trace(struct sprobe_report *r, FILE *o)
{
	char pname[256];
	size_t n = 0;

	if (r->has_header && r->header.cmdline_len) {
		n = r->header.cmdline_len < sizeof(pname) - 1 ? r->header.cmdline_len : sizeof(pname) - 1;
		memcpy(pname, r->header.cmdline, n);
		for (size_t i = 0; i < n; i++)
			if (pname[i] == '\0')
				pname[i] = ' ';
	}
	pname[n] = '\0';
	struct sprobe_trace_opts to = { .sz = sizeof(to),
					/* a hostile header may hold any pid */
					.pid = r->has_header && (pid_t)r->header.pid > 0 ? (pid_t)r->header.pid : 1,
					.process_name = n ? pname : NULL };
	struct sprobe_trace *t = sprobe_trace__new(o, &to);
	if (!t)
		return -errno;
	/* A hostile file may hold items the trace cannot show (tid 0, a
	 * window ending before it starts): they are skipped (-EINVAL); only
	 * -ENOMEM and -EIO end the trace. */
#define TRACE_ITEM(call) do { int e_ = (call); if (e_ && e_ != -EINVAL) err = e_; } while (0)
	int err = 0;
	for (size_t i = 0; i < r->threads.n && !err; i++)
		if (selected(r, r->threads.v[i].tid) && r->threads.v[i].name)
			TRACE_ITEM(sprobe_trace__thread_name(t, (pid_t)r->threads.v[i].tid,
							     r->threads.v[i].name));
	for (size_t i = 0; i < r->kwv.n && !err; i++)
		if (selected(r, (uint32_t)r->kwv.v[i].tid))
			TRACE_ITEM(sprobe_trace__kernel_window(t, &r->kwv.v[i]));
	for (size_t i = 0; i < r->swv.n && !err; i++)
		if (selected(r, (uint32_t)r->swv.v[i].tid))
			TRACE_ITEM(sprobe_trace__self_window(t, &r->swv.v[i]));
	const char *names[SPROBE_MAX_FRAMES];
	for (size_t i = 0; i < r->samples.n && !err; i++) {
		const struct sample *sm = &r->samples.v[i];
		uint32_t tid = r->threads.v[sm->thread].tid;
		size_t nf = sm->nframes < SPROBE_MAX_FRAMES ? sm->nframes : SPROBE_MAX_FRAMES;

		if (!selected(r, tid))
			continue;
		for (size_t f = 0; f < nf; f++) {
			long fid = func_of(r, r->pcs.v[sm->pc_off + f]);
			if (fid == -ENOMEM) {
				err = -ENOMEM;
				break;
			}
			names[f] = fid >= 0 ? func_name(r, (uint32_t)fid) : NULL;
		}
		if (!err)
			TRACE_ITEM(sprobe_trace__sample(t, (pid_t)tid, sm->time_ns, names, nf,
							 sm->weight));
	}
#undef TRACE_ITEM
	int ferr = sprobe_trace__finish(t);
	sprobe_trace__free(t);
	return err ? err : ferr;
}

static int write_json(struct sprobe_report *r, FILE *o)
{
	uint64_t wall = wall_ns(r);
	size_t nf;
	uint32_t *ids;
	bool first;

	fprintf(o, "{\n  \"format\": \"stackprobe-report\",\n  \"version\": 1,\n  \"source\": ");
	if (r->source)
		ro_json_str(o, r->source);
	else
		fputs("null", o);
	fprintf(o, ",\n  \"status\": \"%s\",\n  \"status_message\": ", status_name(r->status));
	ro_json_str(o, r->message);
	fprintf(o, ",\n  \"records\": %" PRIu64 ",\n  \"filter_tid\": ", r->records);
	if (r->filter_tid)
		fprintf(o, "%u", r->filter_tid);
	else
		fputs("null", o);
	fputs(",\n  \"header\": ", o);
	if (r->has_header) {
		fprintf(o, "{\"pid\": %u, \"mode\": \"%s\", \"freq_hz\": %u, \"start_realtime_ns\": %" PRIu64
			   ", \"start_mono_ns\": %" PRIu64 ", \"cmdline\": [",
			r->header.pid, r->header.mode == SPROBE_DF_MODE_CPU ? "cpu" : "wall",
			r->header.freq_hz, r->header.start_realtime_ns, r->header.start_mono_ns);
		for (uint32_t i = 0; i < r->header.cmdline_len;) {
			const char *arg = r->header.cmdline + i;

			if (i)
				fputs(", ", o);
			ro_json_str(o, arg);
			i += (uint32_t)strlen(arg) + 1;
		}
		fputs("]}", o);
	} else {
		fputs("null", o);
	}
	fputs(",\n  \"trailer\": ", o);
	if (r->has_trailer)
		fprintf(o, "{\"end_realtime_ns\": %" PRIu64 ", \"end_mono_ns\": %" PRIu64
			   ", \"records\": %" PRIu64 "}",
			r->trailer.end_realtime_ns, r->trailer.end_mono_ns, r->trailer.records);
	else
		fputs("null", o);
	fprintf(o, ",\n  \"wall_ns\": %" PRIu64 ",\n  \"samples\": %" PRIu64 ",\n  \"captured_stacks\": %" PRIu64 ",\n",
		wall, r->nsel, r->nsel_stacks);

	fprintf(o, "  \"captures\": {\"count\": %" PRIu64 ", \"threads_total\": %" PRIu64
		   ", \"threads_captured\": %" PRIu64 ", \"threads_dropped\": %" PRIu64
		   ", \"pause_ns\": %" PRIu64 ", \"capture_ns\": ",
		r->captures, r->cap_total, r->cap_captured, r->cap_dropped, r->cap_pause_ns);
	jdist(o, &r->capture_ns, wall);
	fputs("},\n  \"methods\": {", o);
	for (int k = 0; k < NMETHODS; k++) {
		uint64_t m = 0;

		for (size_t i = 0; i < r->threads.n; i++)
			if (selected(r, r->threads.v[i].tid))
				m += r->threads.v[i].methods[k];
		fprintf(o, "%s\"%s\": %" PRIu64, k ? ", " : "", method_names[k], m);
	}
	fputs("},\n  \"pause\": ", o);
	jdist(o, &r->all_win, wall);

	fputs(",\n  \"drops\": {\"stream_lost\": ", o);
	jlost(o, r->lost);
	fputs(", \"threads_not_captured\": {", o);
	for (int k = 1; k < SPROBE_DROP__COUNT; k++)
		fprintf(o, "\"%s\": %" PRIu64 ", ", drop_names[k], r->cap_dropped_reason[k]);
	fprintf(o, "\"total\": %" PRIu64 "}},\n", r->cap_dropped);

	fputs("  \"threads\": [", o);
	first = true;
	for (size_t i = 0; i < r->threads.n; i++) {
		const struct thread *t = &r->threads.v[i];

		if (!selected(r, t->tid))
			continue;
		fprintf(o, "%s\n    {\"tid\": %u, \"name\": ", first ? "" : ",", t->tid);
		first = false;
		if (t->name)
			ro_json_str(o, t->name);
		else
			fputs("null", o);
		fprintf(o, ", \"samples\": %" PRIu64 ", \"share\": %.6f, \"truncated\": %" PRIu64
			   ", \"stack_max_bytes\": %" PRIu64 ", \"methods\": {",
			t->samples, r->nsel ? (double)t->samples / (double)r->nsel : 0.0, t->truncated,
			t->stack_max);
		for (int k = 0; k < NMETHODS; k++)
			fprintf(o, "%s\"%s\": %" PRIu64, k ? ", " : "", method_names[k], t->methods[k]);
		fputs("}, \"window\": ", o);
		jdist(o, &t->win, wall);
		fputs(", \"latency\": ", o);
		jdist(o, &t->lat, wall);
		fputs(", \"dropped\": {", o);
		for (int k = 1; k < SPROBE_DROP__COUNT; k++)
			fprintf(o, "%s\"%s\": %" PRIu64, k > 1 ? ", " : "", drop_names[k], t->dropped[k]);
		fputs("}, \"kernel\": ", o);
		if (t->kpause.n || t->kdelay.n) {
			fputs("{\"deliver_to_sigreturn\": ", o);
			jdist(o, &t->kpause, wall);
			fputs(", \"generate_to_deliver\": ", o);
			jdist(o, &t->kdelay, wall);
			fprintf(o, ", \"offcpu_ns\": %" PRIu64 "}", t->koffcpu);
		} else {
			fputs("null", o);
		}
		fputc('}', o);
	}
	fputs("\n  ],\n  \"functions\": [", o);
	ids = sorted_funcs(r, false, &nf);
	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < nf; i++) {
		const struct func *f = &r->funcs.v[ids[i]];
		const char *mod = module_name(r, f->module);

		fprintf(o, "%s\n    {\"name\": ", i ? "," : "");
		ro_json_str(o, func_name(r, ids[i]));
		fputs(", \"module\": ", o);
		if (mod)
			ro_json_str(o, mod);
		else
			fputs("null", o);
		fprintf(o, ", \"self\": %" PRIu64 ", \"total\": %" PRIu64 "}", f->self, f->total);
	}
	free(ids);
	fputs("\n  ],\n  \"stacks\": [", o);
	for (size_t i = 0; i < r->stacks.n; i++) {
		const struct stack *st = &r->stacks.v[i];
		const uint32_t *key = (const uint32_t *)bytemap_key(&r->stackmap, st->key);
		size_t n = r->stackmap.keys.v[st->key].len / sizeof(uint32_t) - 1;

		fprintf(o, "%s\n    {\"tid\": %u, \"count\": %" PRIu64 ", \"frames\": [", i ? "," : "",
			r->threads.v[st->thread].tid, st->count);
		for (size_t k = 0; k < n; k++) {
			uint32_t fid;

			memcpy(&fid, key + 1 + k, sizeof(fid));
			if (k)
				fputs(", ", o);
			ro_json_str(o, func_name(r, fid));
		}
		fputs("]}", o);
	}
	fputs("\n  ],\n  \"modules\": [", o);
	for (size_t i = 0; i < r->modules.n; i++) {
		const struct module *m = &r->modules.v[i];

		fprintf(o, "%s\n    {\"index\": %u, \"path\": ", i ? "," : "", m->index);
		ro_json_str(o, m->path);
		fputs(", \"build_id\": ", o);
		ro_json_str(o, m->build_id);
		fprintf(o, ", \"load_bias\": %" PRIu64 ", \"ranges\": [", m->load_bias);
		for (uint32_t k = 0; k < m->nranges; k++)
			fprintf(o, "%s[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", k ? ", " : "",
				m->ranges[k].start, m->ranges[k].end, m->ranges[k].file_offset);
		fputs("]}", o);
	}
	fprintf(o, "\n  ],\n  \"kernel_windows\": %" PRIu64 ",\n  \"pause_check\": ", r->kwindows);
	json_pause_check(r, o);
	fprintf(o, "\n}\n");
	return 0;
}

int sprobe_report__write(struct sprobe_report *r, FILE *out, enum sprobe_report_format fmt)
{
	int err;

	if (!r || !out)
		return -EINVAL;
	err = aggregate(r);
	if (err)
		return err;
	switch (fmt) {
	case SPROBE_REPORT_TEXT:
		err = write_text(r, out);
		break;
	case SPROBE_REPORT_FOLDED:
		err = write_folded(r, out);
		break;
	case SPROBE_REPORT_JSON:
		err = write_json(r, out);
		break;
	case SPROBE_REPORT_PPROF:
		err = sprobe_report__write_pprof(r, out);
		break;
	case SPROBE_REPORT_SPEEDSCOPE:
		err = sprobe_report__write_speedscope(r, out);
		break;
	case SPROBE_REPORT_SVG:
		err = sprobe_report__write_svg(r, out);
		break;
	case SPROBE_REPORT_TRACE:
		err = write_trace(r, out);
		break;
	default:
		return -EINVAL;
	}
	if (err)
		return err;
	if (fflush(out) != 0 || ferror(out))
		return -EIO;
	return 0;
}

int sprobe_report_format__parse(const char *name)
{
	if (!name)
		return -EINVAL;
	if (!strcmp(name, "text"))
		return SPROBE_REPORT_TEXT;
	if (!strcmp(name, "folded"))
		return SPROBE_REPORT_FOLDED;
	if (!strcmp(name, "json"))
		return SPROBE_REPORT_JSON;
	if (!strcmp(name, "pprof"))
		return SPROBE_REPORT_PPROF;
	if (!strcmp(name, "speedscope"))
		return SPROBE_REPORT_SPEEDSCOPE;
	if (!strcmp(name, "svg"))
		return SPROBE_REPORT_SVG;
	if (!strcmp(name, "trace"))
		return SPROBE_REPORT_TRACE;
	return -EINVAL;
}

/* ---- access for the other writers (report_pprof.c, ...) ----------------- */

int sprobe_report__info(const struct sprobe_report *r, struct sprobe_report_info *info)
{
	struct sprobe_report_info i = { .sz = sizeof(i) };
	size_t n;

	if (!r || !info || info->sz < sizeof(size_t))
		return -EINVAL;
	i.has_header = r->has_header;
	if (r->has_header) {
		i.pid = r->header.pid;
		i.mode = r->header.mode;
		i.freq_hz = r->header.freq_hz;
		i.start_realtime_ns = r->header.start_realtime_ns;
		i.cmdline = r->header.cmdline;
		i.cmdline_len = r->header.cmdline_len;
	}
	i.wall_ns = wall_ns(r);
	i.samples = sprobe_report__samples(r);
	i.lost = lost_total(r);
	i.threads_dropped = r->cap_dropped;
	i.status = r->status;
	i.message = r->message ? r->message : "";
	i.source = r->source;
	/* Copy only what the caller's struct has room for (older callers). */
	n = info->sz < sizeof(i) ? info->sz : sizeof(i);
	memcpy((char *)info + sizeof(size_t), (char *)&i + sizeof(size_t), n - sizeof(size_t));
	return 0;
}

int sprobe_report__foreach_sample(struct sprobe_report *r, sprobe_report_sample_fn fn, void *ctx)
{
	if (!r || !fn)
		return -EINVAL;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		const struct thread *t = &r->threads.v[s->thread];
		/* The folded report's thread label, so every stack format
		 * names threads alike. */
		struct sprobe_report_sample out = {
			.tid = t->tid, .thread_name = t->name && *t->name ? t->name : "thread",
			.time_ns = s->time_ns, .window_ns = s->window_ns, .method = s->method,
			.truncated = s->truncated,
			.pcs = s->nframes ? r->pcs.v + s->pc_off : NULL, .nframes = s->nframes,
			.weight = s->weight,
		};
		int rc;

		if (!selected(r, t->tid))
			continue;
		rc = fn(&out, ctx);
		if (rc)
			return rc;
	}
	return 0;
}

int sprobe_report__resolve(struct sprobe_report *r, uint64_t pc, struct sprobe_report_frame *f)
{
	long fid;
	uint32_t si;

	if (!r || !f)
		return -EINVAL;
	fid = func_of(r, pc);
	if (fid < 0)
		return (int)fid;
	memset(f, 0, sizeof(*f));
	f->name = func_name(r, (uint32_t)fid);
	f->symbolized = ro_map__get(&r->sym_idx, pc, &si) && r->names.keys.v[r->syms.v[si].name].len;
	if (f->symbolized) {
		f->module_index = r->syms.v[si].module;
	} else {
		const struct module *m = module_of(r, pc);

		f->module_index = m ? m->index : SPROBE_DF_NO_MODULE;
	}
	f->module = module_name(r, f->module_index);
	return 0;
}

size_t sprobe_report__module_count(const struct sprobe_report *r)
{
	return r ? r->modules.n : 0;
}

int sprobe_report__module(const struct sprobe_report *r, size_t i, struct sprobe_report_module *m)
{
	const struct module *mod;

	if (!r || !m || i >= r->modules.n)
		return -EINVAL;
	mod = &r->modules.v[i];
	*m = (struct sprobe_report_module){
		.index = mod->index, .path = mod->path, .build_id = mod->build_id,
		.load_bias = mod->load_bias, .ranges = mod->ranges, .nranges = mod->nranges,
	};
	return 0;
}
