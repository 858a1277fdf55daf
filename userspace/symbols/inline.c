/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Inlined frames and source lines of a pc from DWARF (see
 * sprobe_modules__inline_frames() in symbolize.h). libdw's dwarf_getscopes
 * gives the scopes that contain the pc, innermost first: every
 * DW_TAG_inlined_subroutine up to the DW_TAG_subprogram that holds them.
 * The line table gives the innermost location; each inlined scope's
 * DW_AT_call_file/DW_AT_call_line gives the location in the scope around
 * it, as eu-addr2line -i walks them. Not async-signal-safe.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/symbols/libdw_dl.h" /* libdw's names read its table from here on */
#include "userspace/symbols/modules_internal.h"

void sprobe__inline_release(struct sprobe_modules *m)
{
	for (size_t i = 0; i < m->inl_n; i++)
		free(m->inl_names[i]);
	free(m->inl_names);
	m->inl_names = NULL;
	m->inl_n = m->inl_cap = 0;
}

/* Keep a demangled name for the inventory's life; NULL on ENOMEM. */
static const char *keep(struct sprobe_modules *m, char *s)
{
	if (m->inl_n == m->inl_cap) {
		size_t nc = m->inl_cap ? m->inl_cap * 2 : 64;
		char **nv = realloc(m->inl_names, nc * sizeof(*nv));

		if (!nv) {
			free(s);
			return NULL;
		}
		m->inl_names = nv;
		m->inl_cap = nc;
	}
	m->inl_names[m->inl_n++] = s;
	return s;
}

/* The name of an inlined scope: its (abstract origin's) linkage name
 * demangled, as the symbol table would name it, else its DW_AT_name. */
static const char *scope_name(struct sprobe_modules *m, Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *link = NULL, *name;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		link = dwarf_formstring(&a);
	if (link) {
		char *d = sprobe__demangle(m, link);

		if (d) {
			const char *k = keep(m, d);

			if (k)
				return k;
		}
	}
	name = dwarf_diename(die);
	return name ? name : link;
}

/* The source file of index idx in cu's file table, or NULL. */
static const char *cu_file(Dwarf_Die *cu, Dwarf_Word idx)
{
	Dwarf_Files *files;
	size_t nfiles;

	if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || idx >= nfiles)
		return NULL;
	return dwarf_filesrc(files, idx, NULL, NULL);
}

/* ---- index of function DIEs by address, per compilation unit ----------
 *
 * dwarf_getscopes() walks a CU's whole DIE tree from its root for every
 * pc (docs/PERFORMANCE.md, "Names: lines, inlined frames, JIT maps, Rust"). The index lists each
 * CU's functions (DW_TAG_subprogram with code, also inside namespaces) by
 * address range once; a pc then costs a binary search and a walk down its
 * own function's DIE subtree, the scopes that contain it. */

struct fn_range {
	uint64_t lo, hi;	/* [lo, hi) */
	Dwarf_Off die;
};

struct cu_index {
	Dwarf_Off cu;
	struct fn_range *v;
	size_t n;
};

struct inl_cache {
	struct cu_index *cus;	/* sorted by cu */
	size_t n, cap;
};

#define SCOPES_MAX 64

void sprobe__inline_cache_free(struct inl_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->cus[i].v);
	free(c->cus);
	free(c);
}

static int fn_push(struct cu_index *ci, size_t *cap, uint64_t lo, uint64_t hi, Dwarf_Off die)
{
	if (ci->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct fn_range *nv = realloc(ci->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		ci->v = nv;
		*cap = nc;
	}
	ci->v[ci->n++] = (struct fn_range){ lo, hi, die };
	return 0;
}

/* The functions under parent (a CU, or a namespace in it). */
static int index_children(Dwarf_Die *parent, struct cu_index *ci, size_t *cap, int depth)
{
	Dwarf_Die child;

	if (depth > 16 || dwarf_child(parent, &child) != 0)
		return 0;
	do {
		int tag = dwarf_tag(&child);

		if (tag == DW_TAG_subprogram) {
			Dwarf_Addr base, lo, hi;
			ptrdiff_t off = 0;

			while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0)
				if (hi > lo && fn_push(ci, cap, lo, hi, dwarf_dieoffset(&child)))
					return -ENOMEM;
		} else if (tag == DW_TAG_namespace || tag == DW_TAG_module) {
			if (index_children(&child, ci, cap, depth + 1))
				return -ENOMEM;
		}
	} while (dwarf_siblingof(&child, &child) == 0);
	return 0;
}

static int cmp_fn(const void *a, const void *b)
{
	const struct fn_range *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The index of cu, built on first use. NULL on ENOMEM. */
static const struct cu_index *cu_index_of(struct module *mod, Dwarf_Die *cu)
{
	struct inl_cache *c = mod->inl;
	Dwarf_Off off = dwarf_dieoffset(cu);
	size_t lo = 0, hi;

	if (!c && !(c = mod->inl = calloc(1, sizeof(*c))))
		return NULL;
	hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->cus[mid].cu < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < c->n && c->cus[lo].cu == off)
		return &c->cus[lo];
	struct cu_index ci = { .cu = off };
	size_t cap = 0;

	if (index_children(cu, &ci, &cap, 0)) {
		free(ci.v);
		return NULL;
	}
	if (ci.n > 1)
		qsort(ci.v, ci.n, sizeof(*ci.v), cmp_fn);
	if (c->n == c->cap) {
		size_t nc = c->cap ? c->cap * 2 : 16;
		struct cu_index *nv = realloc(c->cus, nc * sizeof(*nv));

		if (!nv) {
			free(ci.v);
			return NULL;
		}
		c->cus = nv;
		c->cap = nc;
	}
	memmove(c->cus + lo + 1, c->cus + lo, (c->n - lo) * sizeof(*c->cus));
	c->cus[lo] = ci;
	c->n++;
	return &c->cus[lo];
}

static bool has_pc_attrs(Dwarf_Die *d)
{
	return dwarf_hasattr(d, DW_AT_low_pc) || dwarf_hasattr(d, DW_AT_ranges);
}

/* Push the scopes under parent that contain pc, outermost first: an
 * inlined subroutine or lexical block whose ranges hold pc; a block with
 * no ranges of its own is looked into. Returns whether one was found. */
static bool find_scopes(Dwarf_Die *parent, Dwarf_Addr pc, Dwarf_Die *chain, int *depth, int guard)
{
	Dwarf_Die child;

	if (guard > SCOPES_MAX || *depth >= SCOPES_MAX || dwarf_child(parent, &child) != 0)
		return false;
	do {
		int tag = dwarf_tag(&child);

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block)
			continue;
		if (dwarf_haspc(&child, pc) == 1) {
			chain[(*depth)++] = child;
			find_scopes(&chain[*depth - 1], pc, chain, depth, guard + 1);
			return true;
		}
		if (tag == DW_TAG_lexical_block && !has_pc_attrs(&child) &&
		    find_scopes(&child, pc, chain, depth, guard + 1))
			return true;
	} while (dwarf_siblingof(&child, &child) == 0);
	return false;
}

/* The scopes of pc innermost first, as dwarf_getscopes() gives them, from
 * the index: into *out (malloc'd, the caller frees). Returns their count,
 * 0 when the index does not know pc's function, -ENOMEM. */
static int indexed_scopes(struct module *mod, Dwarf *dw, Dwarf_Die *cu, Dwarf_Addr pc,
			  Dwarf_Die **out)
{
	const struct cu_index *ci = cu_index_of(mod, cu);
	Dwarf_Die chain[SCOPES_MAX], fn;
	size_t lo = 0, hi;
	int depth = 0;

	if (!ci)
		return -ENOMEM;
	hi = ci->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ci->v[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || pc >= ci->v[lo - 1].hi || !dwarf_offdie(dw, ci->v[lo - 1].die, &fn))
		return 0;
	chain[depth++] = fn;
	find_scopes(&fn, pc, chain, &depth, 0);
	*out = malloc((size_t)depth * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (int i = 0; i < depth; i++)
		(*out)[i] = chain[depth - 1 - i];
	return depth;
}

int sprobe_modules__inline_frames(struct sprobe_modules *m, uint64_t pc,
				  struct sprobe_src_frame *out, size_t max)
{
	struct module *mod;
	void *dw = NULL;
	Dwarf_Die cu, *scopes = NULL;
	Dwarf_Addr a;
	Dwarf_Line *l;
	const char *file = NULL;
	uint32_t line = 0;
	size_t n = 0;
	int ns, ln = 0;

	if (!m || !out || max == 0)
		return -EINVAL;
	mod = sprobe__module_dwarf(m, pc, &dw);
	if (!mod)
		return -ENOENT;
	a = pc - mod->pub.bias;
	if (!dwarf_addrdie(dw, a, &cu))
		return -ENOENT;
	l = dwarf_getsrc_die(&cu, a);
	if (l && dwarf_lineno(l, &ln) == 0 && ln > 0) {
		file = dwarf_linesrc(l, NULL, NULL);
		line = (uint32_t)ln;
	}
	ns = indexed_scopes(mod, dw, &cu, a, &scopes);
	if (ns == 0) /* not in an indexed function: the full walk */
		ns = dwarf_getscopes(&cu, a, &scopes);
	for (int i = 0; i < ns; i++) {
		int tag = dwarf_tag(&scopes[i]);
		Dwarf_Attribute at;
		Dwarf_Word v;

		if (tag == DW_TAG_subprogram)
			break;
		if (tag != DW_TAG_inlined_subroutine)
			continue; /* lexical blocks */
		if (n + 1 < max) /* the last slot is the real function's */
			out[n++] = (struct sprobe_src_frame){ scope_name(m, &scopes[i]), file, line };
		/* from here on, the place of the call in the scope around it */
		file = NULL;
		line = 0;
		if (dwarf_attr(&scopes[i], DW_AT_call_file, &at) && dwarf_formudata(&at, &v) == 0)
			file = cu_file(&cu, v);
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &at) && dwarf_formudata(&at, &v) == 0)
			line = (uint32_t)v;
	}
	free(scopes);
	out[n++] = (struct sprobe_src_frame){ NULL, file, line };
	return (int)n;
}
