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
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
