/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inlined frames and source lines in reports: srcline records (docs/FORMAT.md
 * type 12) loaded, and stacks expanded with them.
 *
 * An inlined function is a frame of its own in every report, named
 * "f (inlined)" as perf report names it (so it stays apart from an
 * out-of-line copy of f). It gets a synthetic pc, SRC_SYNTH_BIT | srcline
 * index << 6 | depth, with a symbol of its own in the model's symbol table:
 * func_of(), resolve() and every writer then treat it as any other frame.
 * User-space pcs never have bit 63 set (the kernel half of the address
 * space), so synthetic pcs collide with no sampled pc.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/report/report_internal.h"

#define SRC_SYNTH_BIT (1ull << 63)
#define SRC_DEPTH_BITS 6

_Static_assert(SPROBE_DF_MAX_INLINE <= (1u << SRC_DEPTH_BITS), "depth fits its bits");

static bool is_synth(uint64_t pc)
{
	return (pc & SRC_SYNTH_BIT) != 0;
}

static uint64_t synth_pc(size_t index, uint32_t depth)
{
	return SRC_SYNTH_BIT | (uint64_t)index << SRC_DEPTH_BITS | depth;
}

int sprobe_rep__load_srcline(struct sprobe_report *r, const struct sprobe_df_srcline *l)
{
	struct srcline sl = { .first = (uint32_t)r->srcents.n, .n = l->n };
	const char *p = l->text, *end = l->text + l->text_len;
	uint32_t idx, si;
	bool added;

	if (is_synth(l->pc) || ro_map__get(&r->src_idx, l->pc, &idx))
		return 0; /* not a user pc, or a repeat: the first one stands */
	/* the module of the pc's symbol, for the inlined frames' symbols */
	uint32_t module = ro_map__get(&r->sym_idx, l->pc, &si) ? r->syms.v[si].module
								: SPROBE_DF_NO_MODULE;

	for (uint32_t i = 0; i < l->n; i++) {
		/* the reader checked: 2n NUL-terminated strings */
		size_t flen = strnlen(p, (size_t)(end - p));
		const char *file = p + flen + 1;
		size_t filelen = strnlen(file, (size_t)(end - file));
		struct srcent e = { .line = l->lines[i] };
		long id;

		id = sprobe_rep__bytemap_intern(&r->srcstr, file, filelen, &added);
		if (id < 0)
			return (int)id;
		e.file = (uint32_t)id;
		if (i + 1 < l->n) {
			char name[1024];
			int k = snprintf(name, sizeof(name), "%.*s (inlined)", (int)(flen > 1000 ? 1000 : flen), p);

			if ((id = sprobe_rep__bytemap_intern(&r->srcstr, p, flen, &added)) < 0)
				return (int)id;
			e.plain = (uint32_t)id;
			if ((id = sprobe_rep__bytemap_intern(&r->names, name, (size_t)k, &added)) < 0)
				return (int)id;
			e.name = (uint32_t)id;
			if (ro_map__put(&r->inl_names, e.name, 1))
				return -ENOMEM;
			struct symbol sym = { .name = e.name, .module = module };

			if (VEC_PUSH(r->syms, sym) ||
			    ro_map__put(&r->sym_idx, synth_pc(r->srclines.n, i), (uint32_t)(r->syms.n - 1)))
				return -ENOMEM;
		}
		if (VEC_PUSH(r->srcents, e))
			return -ENOMEM;
		p = file + filelen + 1;
	}
	if (VEC_PUSH(r->srclines, sl) || ro_map__put(&r->src_idx, l->pc, (uint32_t)(r->srclines.n - 1)))
		return -ENOMEM;
	return 0;
}

const uint64_t *sprobe_rep__expand(struct sprobe_report *r, const uint64_t *pcs, size_t n,
				   size_t *out_n)
{
	size_t k = 0;
	uint32_t idx;

	*out_n = n;
	if (r->srclines.n == 0 || n == 0)
		return pcs;
	for (size_t i = 0; i < n; i++) {
		/* pcs[i]'s inlined frames only if the rest still fits raw */
		if (ro_map__get(&r->src_idx, pcs[i], &idx)) {
			uint32_t inl = r->srclines.v[idx].n - 1;

			if (k + inl + (n - i) <= SPROBE_REP_MAX_FRAMES)
				for (uint32_t d = 0; d < inl; d++)
					r->xbuf[k++] = synth_pc(idx, d);
		}
		r->xbuf[k++] = pcs[i];
	}
	*out_n = k;
	return r->xbuf;
}

int sprobe_report__frame_line(const struct sprobe_report *r, uint64_t pc, const char **function,
			      const char **file, uint32_t *line, bool *inlined)
{
	const struct srcent *e;
	uint32_t idx;

	if (!r || !file || !line)
		return -EINVAL;
	if (is_synth(pc)) {
		size_t i = (size_t)((pc & ~SRC_SYNTH_BIT) >> SRC_DEPTH_BITS);
		uint32_t d = (uint32_t)(pc & ((1u << SRC_DEPTH_BITS) - 1));

		if (i >= r->srclines.n || d + 1 >= r->srclines.v[i].n)
			return -ENOENT;
		e = &r->srcents.v[r->srclines.v[i].first + d];
		if (function)
			*function = sprobe_rep__bytemap_key(&r->srcstr, e->plain);
		if (inlined)
			*inlined = true;
	} else {
		if (!ro_map__get(&r->src_idx, pc, &idx))
			return -ENOENT;
		e = &r->srcents.v[r->srclines.v[idx].first + r->srclines.v[idx].n - 1];
		if (function)
			*function = NULL;
		if (inlined)
			*inlined = false;
	}
	*file = sprobe_rep__bytemap_key(&r->srcstr, e->file);
	*line = e->line;
	return 0;
}

struct line_count {
	uint32_t key;		/* id in the bytemap: "file:line\0function" */
	uint64_t count;
};

static int cmp_line_count(const void *a, const void *b)
{
	const struct line_count *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

int sprobe_rep__write_top_lines(struct sprobe_report *r, FILE *o)
{
	struct bytemap keys = { 0 };
	VEC(struct line_count) counts = { 0 };
	int ret = 0;

	if (r->srclines.n == 0)
		return 0;
	for (size_t si = 0; si < r->samples.n; si++) {
		const struct sample *s = &r->samples.v[si];
		const struct srcline *sl;
		const struct srcent *e;
		uint32_t idx, symi;
		char key[1200];
		bool added;

		if (!s->nframes || !sprobe_rep__selected(r, r->threads.v[s->thread].tid) ||
		    !ro_map__get(&r->src_idx, r->pcs.v[s->pc_off], &idx))
			continue;
		sl = &r->srclines.v[idx];
		e = &r->srcents.v[sl->first]; /* the innermost frame */
		const char *file = sprobe_rep__bytemap_key(&r->srcstr, e->file);
		const char *fn = sl->n > 1 ? sprobe_rep__bytemap_key(&r->names, e->name)
			       : ro_map__get(&r->sym_idx, r->pcs.v[s->pc_off], &symi)
				       ? sprobe_rep__bytemap_key(&r->names, r->syms.v[symi].name)
				       : "";
		if (!file[0] || !e->line)
			continue;
		int k = snprintf(key, sizeof(key), "%.600s:%u%c%.500s", file, e->line, '\0', fn);
		long id = sprobe_rep__bytemap_intern(&keys, key, (size_t)k, &added);

		if (id < 0 || (added && VEC_PUSH(counts, ((struct line_count){ (uint32_t)id, 0 })))) {
			ret = -ENOMEM;
			goto out;
		}
		counts.v[id].count += s->weight;
	}
	if (!counts.n)
		goto out;
	qsort(counts.v, counts.n, sizeof(*counts.v), cmp_line_count);
	fprintf(o, "\nTop source lines by self samples (the innermost frame's line)\n");
	fprintf(o, "  %8s %7s  %s\n", "self", "self%", "line  function");
	for (size_t i = 0; i < counts.n && i < r->top; i++) {
		const char *k = sprobe_rep__bytemap_key(&keys, counts.v[i].key);

		fprintf(o, "  %8" PRIu64 " %6.2f%%  %s  %s\n", counts.v[i].count,
			r->nsel ? 100.0 * (double)counts.v[i].count / (double)r->nsel : 0.0, k,
			k + strlen(k) + 1);
	}
out:
	ro_map__free(&keys.idx);
	free(keys.arena.v);
	free(keys.keys.v);
	free(counts.v);
	return ret;
}

bool sprobe_rep__is_inlined(const struct sprobe_report *r, uint32_t name)
{
	uint32_t v;

	return ro_map__get(&r->inl_names, name, &v);
}

void sprobe_rep__inline_free(struct sprobe_report *r)
{
	ro_map__free(&r->inl_names);
	ro_map__free(&r->src_idx);
	free(r->srclines.v);
	free(r->srcents.v);
	ro_map__free(&r->srcstr.idx);
	free(r->srcstr.arena.v);
	free(r->srcstr.keys.v);
}
