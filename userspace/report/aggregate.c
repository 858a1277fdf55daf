/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Aggregation of the report model: pcs -> functions (one per distinct
 * name), stacks and sorted distributions, which every writer reads after
 * sprobe_rep__aggregate(). The agent's own frames are elided first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/common/sort_compat.h"
#include "userspace/report/report_internal.h"

/* Position of the module of KEY (its process's), or -1. */
long sprobe_rep__module_of(const struct sprobe_report *r, uint64_t key)
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

/* A PLT stub's name ("f@plt", ".plt"; symbolize.h source "plt"): made
 * from relocations a stripped object keeps, so no sign of a symbol table
 * either. A symbol's own name has no '@' (the version is cut off). */
static bool plt_name(const struct sprobe_report *r, uint32_t id)
{
	const char *p = sprobe_rep__bytemap_key(&r->names, id);
	size_t len = r->names.keys.v[id].len;

	return (len > 4 && memcmp(p + len - 4, "@plt", 4) == 0) || strcmp(p, ".plt") == 0;
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
		named = !sprobe_rep__cfi_name(r, module, (uint32_t)name) &&
			!plt_name(r, (uint32_t)name);
	} else {
		long mp = sprobe_rep__module_of(r, key);
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

/* Drop the frames of the agent's library from every sample loaded since
 * the last call (see struct module.agent): the stacks are the program's,
 * as perf shows them. In place; pcs of later samples move down. */
int sprobe_rep__elide_agent_frames(struct sprobe_report *r)
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
	int eerr = sprobe_rep__elide_agent_frames(r);

	if (eerr)
		return eerr;
	/* Rebuild from scratch (load may have added records). */
	for (size_t i = 0; i < r->funcs.n; i++)
		r->funcs.v[i].self = r->funcs.v[i].total = r->funcs.v[i].mark = 0;
	sprobe_rep__bytemap_free(&r->stackmap);
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
