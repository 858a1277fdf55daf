/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The report model: the tables a data file is loaded into (load.c), and the
 * aggregation over them (pcs -> functions, stacks, distributions) that every
 * writer reads, plus the public accessors the pprof, speedscope and SVG
 * writers use (outputs.h).
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

#include <stackprobe/pause.h>
#include <stackprobe/report.h>
#include <stackprobe/trace.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/report_internal.h"

/* Find KEY or add it with the next id. *added says which. Returns the id or
 * a negative errno. */
long sprobe_rep__bytemap_intern(struct bytemap *m, const void *key, size_t len, bool *added)
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

const char *sprobe_rep__bytemap_key(const struct bytemap *m, uint32_t id)
{
	return m->arena.v + m->keys.v[id].off;
}

static void bytemap_free(struct bytemap *m)
{
	ro_map__free(&m->idx);
	free(m->arena.v);
	free(m->keys.v);
}

const char *const sprobe_rep__method_names[NMETHODS] = {
	"none", "signal", "vm-readv", "zero-pause", "suspend", "perf-event",
};

const char *const sprobe_rep__drop_names[SPROBE_DROP__COUNT] = {
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
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, pid) + sizeof(uint32_t))
		r->filter_pid = opts->pid;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, top) + sizeof(uint32_t) &&
	    opts->top)
		r->top = opts->top;
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, source) + sizeof(char *) &&
	    opts->source)
		r->source = strdup(opts->source);
	if (opts && opts->sz >= offsetof(struct sprobe_report_opts, labels) + sizeof(char *) &&
	    opts->labels && !(r->labels = strdup(opts->labels))) {
		sprobe_report__free(r);
		errno = ENOMEM;
		return NULL;
	}
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
	ro_map__free(&r->tid_any);
	for (size_t i = 0; i < r->procs.n; i++) {
		struct process *p = &r->procs.v[i];

		free(p->name);
		free(p->exe);
		free(p->note);
		free(p->cmdline);
		free(p->exit_note);
	}
	free(r->procs.v);
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
	sprobe_rep__inline_free(r);
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
	free(r->labels);
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

/* ---- aggregation -------------------------------------------------------- */

const char *sprobe_rep__base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

/* Position of the module of KEY (its process's), or -1. */
static long module_of(const struct sprobe_report *r, uint64_t key)
{
	uint32_t proc = key_proc(key);
	uint64_t pc = key_pc(key);

	for (size_t i = 0; i < r->modules.n; i++) {
		const struct module *m = &r->modules.v[i];

		if (m->proc != proc)
			continue;
		for (uint32_t j = 0; j < m->nranges; j++)
			if (pc >= m->ranges[j].start && pc < m->ranges[j].end)
				return (long)i;
	}
	return -1;
}

/* True when the symbol name is the agent's name for a function known only
 * by its CFI range (symbolize.h, source "eh-frame"): the base name of its
 * module, "+0x", lowercase hex digits, nothing else. No C, C++ or Rust
 * symbol contains '+', so a real symbol never matches. Such a function is
 * one row, but its module still has no symbol table (the "symbols:" hint). */
bool sprobe_rep__cfi_name(const struct sprobe_report *r, uint32_t module, uint32_t id)
{
	const char *b, *p = sprobe_rep__bytemap_key(&r->names, id);
	size_t bl, len = r->names.keys.v[id].len;

	if (module == SPROBE_DF_NO_MODULE || module >= r->modules.n)
		return false;
	b = sprobe_rep__base_name(r->modules.v[module].path);
	bl = strlen(b);
	if (!p || len <= bl + 3 || memcmp(p, b, bl) != 0 || memcmp(p + bl, "+0x", 3) != 0)
		return false;
	for (size_t i = bl + 3; i < len; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return true;
}

/* Function id of a pc key: its symbol's name, else module+0xoff, else
 * 0xpc. */
long sprobe_rep__func_of(struct sprobe_report *r, uint64_t key)
{
	uint32_t id, si;
	long name;
	uint32_t module = SPROBE_DF_NO_MODULE;
	bool added, named = false;
	uint64_t pc = key_pc(key);

	if (ro_map__get(&r->pc_func, key, &id))
		return id;
	if (ro_map__get(&r->sym_idx, key, &si) && r->names.keys.v[r->syms.v[si].name].len) {
		name = r->syms.v[si].name;
		module = r->syms.v[si].module;
		named = !sprobe_rep__cfi_name(r, module, (uint32_t)name);
	} else {
		long mp = module_of(r, key);
		char buf[512];

		if (mp >= 0) {
			const struct module *m = &r->modules.v[mp];

			snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, sprobe_rep__base_name(m->path),
				 pc - m->load_bias);
			module = (uint32_t)mp;
		} else {
			snprintf(buf, sizeof(buf), "0x%" PRIx64, pc);
		}
		name = sprobe_rep__bytemap_intern(&r->names, buf, strlen(buf), &added);
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
	if (ro_map__put(&r->pc_func, key, (uint32_t)name))
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

bool sprobe_rep__thread_selected(const struct sprobe_report *r, uint32_t ti)
{
	const struct thread *t = &r->threads.v[ti];

	if (r->filter_tid && r->filter_tid != t->tid)
		return false;
	return !r->filter_pid || r->procs.v[t->proc].pid == r->filter_pid;
}

bool sprobe_rep__selected(const struct sprobe_report *r, uint32_t tid)
{
	uint32_t ti;

	if (r->filter_tid && r->filter_tid != tid)
		return false;
	if (!r->filter_pid)
		return true;
	return ro_map__get(&r->tid_any, tid, &ti) && sprobe_rep__thread_selected(r, ti);
}

const char *sprobe_rep__proc_name(const struct sprobe_report *r, uint32_t p, char *buf, size_t len)
{
	const struct process *pr = &r->procs.v[p];

	if (pr->name && *pr->name)
		return pr->name;
	if (pr->cmdline && *pr->cmdline)
		return sprobe_rep__base_name(pr->cmdline);
	snprintf(buf, len, "pid %u", pr->pid);
	return buf;
}

/* Drop the frames of the agent's library from every sample loaded since
 * the last call (see struct module.agent): the stacks are the program's,
 * as perf shows them. In place; pcs of later samples move down. */
static int elide_agent_frames(struct sprobe_report *r)
{
	bool any = false;
	uint64_t out;

	for (size_t i = 0; i < r->modules.n && !any; i++)
		any = r->modules.v[i].agent;
	if (!any) {
		r->elided_upto = r->samples.n;
		return 0;
	}
	out = r->elided_upto ? r->samples.v[r->elided_upto - 1].pc_off +
				       r->samples.v[r->elided_upto - 1].nframes
			     : 0;
	for (size_t si = r->elided_upto; si < r->samples.n; si++) {
		struct sample *s = &r->samples.v[si];
		uint64_t in = s->pc_off;
		uint16_t kept = 0;

		s->pc_off = out;
		for (uint16_t k = 0; k < s->nframes; k++) {
			uint64_t key = r->pcs.v[in + k];
			long fid = sprobe_rep__func_of(r, key);

			if (fid < 0)
				return (int)fid;
			uint32_t m = r->funcs.v[fid].module;

			/* The innermost frame stays: a thread interrupted in
			 * the agent's code was there. */
			if (k > 0 && m != SPROBE_DF_NO_MODULE && m < r->modules.n && r->modules.v[m].agent) {
				r->agent_frames++;
				continue;
			}
			r->pcs.v[out++] = key;
			kept++;
		}
		s->nframes = kept;
	}
	r->pcs.n = out;
	r->elided_upto = r->samples.n;
	return 0;
}

int sprobe_rep__aggregate(struct sprobe_report *r)
{
	uint32_t key[1 + SPROBE_REP_MAX_FRAMES];
	bool added;

	if (r->aggregated)
		return 0;
	int eerr = elide_agent_frames(r);

	if (eerr)
		return eerr;
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
		size_t nframes;
		/* inlined functions are frames of their own (inline.c) */
		const uint64_t *pcs = sprobe_rep__expand(r, s->nframes ? r->pcs.v + s->pc_off : NULL,
							 s->nframes, &nframes);
		long fid, sid;

		if (!sprobe_rep__thread_selected(r, s->thread))
			continue;
		r->nsel += s->weight;
		r->nsel_stacks++;
		key[0] = s->thread;
		for (uint32_t i = 0; i < nframes; i++) {
			fid = sprobe_rep__func_of(r, pcs[i]);
			if (fid < 0)
				return (int)fid;
			struct func *f = &r->funcs.v[fid];

			if (f->module != SPROBE_DF_NO_MODULE && f->module < r->modules.n) {
				r->modules.v[f->module].frames++;
				r->modules.v[f->module].named += !f->unnamed;
			}
			if (i == 0)
				f->self += s->weight;
			if (f->mark != si + 1) {	/* recursion counts once */
				f->mark = si + 1;
				f->total += s->weight;
			}
			key[1 + nframes - 1 - i] = (uint32_t)fid;	/* root first */
		}
		sid = sprobe_rep__bytemap_intern(&r->stackmap, key, (1 + nframes) * sizeof(uint32_t), &added);
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

		if (!sprobe_rep__thread_selected(r, (uint32_t)i))
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
		if (sprobe_rep__thread_selected(r, (uint32_t)i))
			n += r->threads.v[i].samples;
	return n;
}

/* Nearest-rank percentile of a sorted vector (p in 0..100). */
uint64_t sprobe_rep__pct(const u64vec *v, unsigned p)
{
	size_t rank;

	if (!v->n)
		return 0;
	rank = (v->n * p + 99) / 100;
	if (rank == 0)
		rank = 1;
	return v->v[rank - 1];
}

uint64_t sprobe_rep__sum(const u64vec *v)
{
	uint64_t s = 0;

	for (size_t i = 0; i < v->n; i++)
		s += v->v[i];
	return s;
}

/* How a process image ended, in words: "exit 0", "killed by SIGINT". */
void sprobe_rep__proc_end(const struct process *p, char *buf, size_t len)
{
	if (!p->has_exit) {
		snprintf(buf, len, "%s", p->has_trailer ? "ended" : "?");
		return;
	}
	switch (p->exit_how) {
	case SPROBE_DF_EXIT_EXITED:
		snprintf(buf, len, "exit %d", p->exit_code);
		break;
	case SPROBE_DF_EXIT_KILLED: {
		/* Linux numbers (the recording's), whatever the reader runs on. */
		static const char *const names[32] = {
			[1] = "HUP",   [2] = "INT",   [3] = "QUIT",  [4] = "ILL",   [5] = "TRAP",
			[6] = "ABRT",  [7] = "BUS",   [8] = "FPE",   [9] = "KILL",  [10] = "USR1",
			[11] = "SEGV", [12] = "USR2", [13] = "PIPE", [14] = "ALRM", [15] = "TERM",
			[16] = "STKFLT", [17] = "CHLD", [18] = "CONT", [19] = "STOP", [20] = "TSTP",
			[21] = "TTIN", [22] = "TTOU", [23] = "URG",  [24] = "XCPU", [25] = "XFSZ",
			[26] = "VTALRM", [27] = "PROF", [28] = "WINCH", [29] = "IO", [30] = "PWR",
			[31] = "SYS",
		};
		const char *n = p->exit_code > 0 && p->exit_code < 32 ? names[p->exit_code] : NULL;

		if (n)
			snprintf(buf, len, "killed by SIG%s", n);
		else
			snprintf(buf, len, "killed by signal %d", p->exit_code);
		break;
	}
	case SPROBE_DF_EXIT_EXECED:
		snprintf(buf, len, "exec'd");
		break;
	case SPROBE_DF_EXIT_RUNNING:
		snprintf(buf, len, "still running");
		break;
	default:
		snprintf(buf, len, "end not seen");
	}
}

/* Whether the part of the file of a process image is whole, in words (a
 * process killed by a signal writes no trailer: that is how it ended, not
 * damage). */
const char *sprobe_rep__proc_data(const struct process *p)
{
	if (p->flags & SPROBE_DF_PROCESS_UNSAMPLED)
		return p->note;
	else if (!p->has_header)
		return "no data: it ended while its sampler started";
	else if (!p->has_exit)
		return p->has_trailer ? "complete" : "no trailer";
	else if (p->part_status == SPROBE_DF_COMPLETE)
		return "complete";
	else if (p->part_status == SPROBE_DF_CORRUPT)
		return "DAMAGED: kept up to the damage";
	else if (p->exit_how == SPROBE_DF_EXIT_KILLED)
		return "up to its last write before the signal";
	else if (p->exit_how == SPROBE_DF_EXIT_RUNNING)
		return "up to the end of the recording";
	else if (p->exit_how == SPROBE_DF_EXIT_EXITED)
		/* An exit the agent did not see (a raw exit_group,
		 * as Go's runtime makes): what reached the file. */
		return "up to its last write (it left without exit())";
	else
		return "CUT SHORT";
}

uint64_t sprobe_rep__wall_ns(const struct sprobe_report *r)
{
	uint64_t start = r->has_header && r->header.start_mono_ns ? r->header.start_mono_ns
								  : r->t_min;
	uint64_t end = r->has_trailer && r->trailer.end_mono_ns ? r->trailer.end_mono_ns
							       : r->t_max;

	/* Several processes: from the first start to the last end. */
	for (size_t i = 0; i < r->procs.n; i++)
		if (r->procs.v[i].end_mono_ns > end)
			end = r->procs.v[i].end_mono_ns;
	if (r->procs.n > 1 && r->t_max != 0 && r->t_max > end)
		end = r->t_max;

	if (start == UINT64_MAX || end <= start)
		return 0;
	return end - start;
}

uint64_t sprobe_rep__lost_total(const struct sprobe_report *r)
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
	return r ? sprobe_rep__lost_total(r) : 0;
}

uint64_t sprobe_report__threads_dropped(const struct sprobe_report *r)
{
	return r ? r->cap_dropped : 0;
}

const char *sprobe_rep__status_name(int st)
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

const char *sprobe_rep__func_name(const struct sprobe_report *r, uint32_t fid)
{
	return sprobe_rep__bytemap_key(&r->names, r->funcs.v[fid].name);
}

const char *sprobe_rep__module_name(const struct sprobe_report *r, uint32_t pos)
{
	if (pos != SPROBE_DF_NO_MODULE && pos < r->modules.n)
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
	return strcmp(sprobe_rep__func_name(c->r, fa->name), sprobe_rep__func_name(c->r, fb->name));
}

/* Function ids with at least one sample, sorted. Caller frees. */
uint32_t *sprobe_rep__sorted_funcs(const struct sprobe_report *r, bool by_total, size_t *n)
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

/* ---- kernel vs self-reported windows ------------------------------------ */

/* The kernel's word on the selected threads' zero-pause samples: each is
 * checked over its whole capture round (start .. start + capture_ns of the
 * capture record with that start; its own reads' end when that record is
 * missing). */
int sprobe_rep__zp_check(const struct sprobe_report *r, struct sprobe_pause_zp_check *out)
{
	struct sprobe_pause_zp_sample *zs = malloc((r->zpv.n + 1) * sizeof(*zs));
	size_t nz = 0;
	int err;

	if (!zs)
		return -ENOMEM;
	for (size_t i = 0; i < r->zpv.n; i++) {
		struct sprobe_pause_zp_sample z = r->zpv.v[i];
		uint32_t dur;

		if (!sprobe_rep__selected(r, (uint32_t)z.tid))
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
 * (see userspace/pause/pause_merge.c). NULL with errno on failure; a report
 * without kernel windows gets NULL with errno ENOENT. */
struct sprobe_pause_merge *sprobe_rep__pause_check(const struct sprobe_report *r)
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
		if (sprobe_rep__selected(r, (uint32_t)r->kwv.v[i].tid))
			kw[nk++] = r->kwv.v[i];
	for (size_t i = 0; i < r->swv.n; i++)
		if (sprobe_rep__selected(r, (uint32_t)r->swv.v[i].tid))
			sw[ns++] = r->swv.v[i];
	struct sprobe_pause_merge_opts mo = {
		.sz = sizeof(mo),
		.wall_ns = sprobe_rep__wall_ns(r),
		.kernel_lost = r->lost[SPROBE_DF_KWINDOW],
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, sw, ns, &mo);
	free(kw);
	free(sw);
	return m;
}

/* ---- access for the other writers (pprof.c, speedscope.c, svg.c) ------- */

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
	i.wall_ns = sprobe_rep__wall_ns(r);
	i.samples = sprobe_report__samples(r);
	i.lost = sprobe_rep__lost_total(r);
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
	int eerr = elide_agent_frames(r);

	if (eerr)
		return eerr;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		const struct thread *t = &r->threads.v[s->thread];
		/* The folded report's thread label, so every stack format
		 * names threads alike. */
		char pbuf[32];
		struct sprobe_report_sample out = {
			.tid = t->tid, .thread_name = t->name && *t->name ? t->name : "thread",
			.pid = r->procs.n ? r->procs.v[t->proc].pid : 0,
			.process_name = r->procs.n ? sprobe_rep__proc_name(r, t->proc, pbuf, sizeof(pbuf)) : "",
			.multi_process = sprobe_rep__multi(r),
			.time_ns = s->time_ns, .window_ns = s->window_ns, .method = s->method,
			.truncated = s->truncated,
			.weight = s->weight,
		};
		size_t nframes;
		int rc;

		if (!sprobe_rep__thread_selected(r, s->thread))
			continue;
		/* inlined functions are frames of their own (inline.c) */
		out.pcs = sprobe_rep__expand(r, s->nframes ? r->pcs.v + s->pc_off : NULL, s->nframes,
					     &nframes);
		out.nframes = (uint32_t)nframes;
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
	fid = sprobe_rep__func_of(r, pc);
	if (fid < 0)
		return (int)fid;
	memset(f, 0, sizeof(*f));
	f->name = sprobe_rep__func_name(r, (uint32_t)fid);
	f->symbolized = ro_map__get(&r->sym_idx, pc, &si) && r->names.keys.v[r->syms.v[si].name].len;
	if (f->symbolized) {
		f->module_pos = r->syms.v[si].module;
	} else {
		long mp = module_of(r, pc);

		f->module_pos = mp >= 0 ? (uint32_t)mp : SPROBE_DF_NO_MODULE;
	}
	f->module_index = f->module_pos != SPROBE_DF_NO_MODULE && f->module_pos < r->modules.n
				  ? r->modules.v[f->module_pos].index
				  : SPROBE_DF_NO_MODULE;
	f->module = sprobe_rep__module_name(r, f->module_pos);
	f->address = key_pc(pc);
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
		.index = mod->index, .pid = r->procs.n ? r->procs.v[mod->proc].pid : 0,
		.path = mod->path, .build_id = mod->build_id,
		.load_bias = mod->load_bias, .ranges = mod->ranges, .nranges = mod->nranges,
	};
	return 0;
}

const char *sprobe_report__labels(const struct sprobe_report *r)
{
	return r->labels;
}
