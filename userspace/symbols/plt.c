/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * PLT stub names from an object's relocations and PLT layout (plt.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/symbols/plt.h"

#ifndef R_X86_64_JUMP_SLOT
#define R_X86_64_JUMP_SLOT 7
#endif
#ifndef R_X86_64_GLOB_DAT
#define R_X86_64_GLOB_DAT 6
#endif
#ifndef R_X86_64_IRELATIVE
#define R_X86_64_IRELATIVE 37
#endif
#ifndef R_AARCH64_JUMP_SLOT
#define R_AARCH64_JUMP_SLOT 1026
#endif
#ifndef R_AARCH64_IRELATIVE
#define R_AARCH64_IRELATIVE 1032
#endif

struct reloc {
	uint64_t slot;		/* r_offset: the GOT slot it fills */
	const char *name;	/* NULL: IRELATIVE */
	uint64_t addend;
};

struct sec {
	Elf_Scn *scn;
	GElf_Shdr sh;
};

struct plt_out {
	struct sprobe_plt_sym *v;
	size_t n, cap;
};

static bool find(Elf *elf, size_t shstrndx, const char *name, struct sec *s)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, &s->sh))
			continue;
		n = elf_strptr(elf, shstrndx, s->sh.sh_name);
		if (n && strcmp(n, name) == 0 && s->sh.sh_type != SHT_NOBITS) {
			s->scn = scn;
			return true;
		}
	}
	return false;
}

static int push(struct plt_out *o, uint64_t start, uint64_t size, const char *name,
		uint64_t ifunc, bool header)
{
	if (o->n == o->cap) {
		size_t nc = o->cap ? o->cap * 2 : 64;
		struct sprobe_plt_sym *p = realloc(o->v, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		o->v = p;
		o->cap = nc;
	}
	o->v[o->n++] = (struct sprobe_plt_sym){ start, size, name, ifunc, header };
	return 0;
}

static int cmp_slot(const void *a, const void *b)
{
	const struct reloc *x = a, *y = b;

	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* The relocations of rel (SHT_RELA, symbols in its sh_link .dynsym) of
 * the given types, *out (the caller frees) and *n. 0, -ENOENT, -ENOMEM. */
static int read_relocs(Elf *elf, const struct sec *rel, uint32_t type_a, uint32_t type_b,
		       uint32_t type_irel, struct reloc **out, size_t *n)
{
	Elf_Scn *dynsym = elf_getscn(elf, rel->sh.sh_link);
	GElf_Shdr dsh;
	Elf_Data *rd, *sd;
	size_t count, k = 0;

	*out = NULL;
	*n = 0;
	if (rel->sh.sh_type != SHT_RELA || !rel->sh.sh_entsize || !dynsym ||
	    !gelf_getshdr(dynsym, &dsh) || dsh.sh_type != SHT_DYNSYM ||
	    !(rd = elf_getdata(rel->scn, NULL)) || !(sd = elf_getdata(dynsym, NULL)))
		return -ENOENT;
	count = rd->d_size / rel->sh.sh_entsize; /* what the file holds, not what it claims */
	if (!count)
		return 0;
	*out = calloc(count, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		GElf_Rela r;
		GElf_Sym sym;
		uint32_t type;
		const char *name = NULL;

		if (!gelf_getrela(rd, (int)i, &r))
			break;
		type = (uint32_t)GELF_R_TYPE(r.r_info);
		if (type != type_a && type != type_b && type != type_irel)
			continue; /* TLSDESC and the like: no PLT entry */
		if (type != type_irel) {
			if (!gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym) ||
			    !(name = elf_strptr(elf, dsh.sh_link, sym.st_name)) || !name[0])
				name = NULL;
			if (!name)
				continue;
		}
		(*out)[k++] = (struct reloc){ r.r_offset, name, (uint64_t)r.r_addend };
	}
	*n = k;
	return 0;
}

/* Entries of a PLT section at vaddr with header bytes before entries of
 * esz bytes, named in order by the sorted relocations. */
static int name_entries(struct plt_out *o, const struct sec *plt, uint64_t header, uint64_t esz,
			const struct reloc *rel, size_t nrel)
{
	uint64_t a = plt->sh.sh_addr;

	if (header && push(o, a, header, ".plt", 0, true))
		return -ENOMEM;
	for (size_t i = 0; i < nrel; i++)
		if (push(o, a + header + i * esz, esz, rel[i].name, rel[i].name ? 0 : rel[i].addend,
			 false))
			return -ENOMEM;
	return 0;
}

/* x86_64 .plt.got: each entry is a jmp *disp32(%rip) through a GOT slot
 * that .rela.dyn fills (GLOB_DAT: the function's address is also taken).
 * The jmp is found in the entry's bytes (ff 25, after endbr64 and bnd
 * with IBT); its slot is the address after it plus disp32. */
static int name_plt_got(Elf *elf, struct plt_out *o, const struct sec *got, const struct sec *dyn)
{
	uint64_t esz = got->sh.sh_entsize;
	struct reloc *rel = NULL;
	size_t nrel = 0;
	Elf_Data *d = elf_getdata(got->scn, NULL);
	int ret;

	if (esz != 8 && esz != 16)
		esz = got->sh.sh_addralign == 8 ? 8 : 16;
	if (!d || !d->d_buf || d->d_size < got->sh.sh_size)
		return 0;
	ret = read_relocs(elf, dyn, R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, UINT32_MAX, &rel, &nrel);
	if (ret)
		return ret == -ENOMEM ? ret : 0;
	if (nrel > 1)
		qsort(rel, nrel, sizeof(*rel), cmp_slot);
	for (uint64_t off = 0; off + esz <= got->sh.sh_size; off += esz) {
		const uint8_t *e = (const uint8_t *)d->d_buf + off;

		for (uint64_t p = 0; p + 6 <= esz; p++) {
			if (e[p] != 0xff || e[p + 1] != 0x25)
				continue;
			int32_t disp;
			uint64_t slot;
			size_t lo = 0, hi = nrel;

			memcpy(&disp, e + p + 2, 4);
			slot = got->sh.sh_addr + off + p + 6 + (uint64_t)(int64_t)disp;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (rel[mid].slot < slot)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < nrel && rel[lo].slot == slot &&
			    push(o, got->sh.sh_addr + off, esz, rel[lo].name, 0, false)) {
				free(rel);
				return -ENOMEM;
			}
			break;
		}
	}
	free(rel);
	return 0;
}

/* Does a PLT of size bytes hold a header of h bytes and n entries of e
 * bytes, perhaps followed by one trailer of t bytes (the lazy TLS
 * descriptor trampoline)? */
static bool fits(uint64_t size, uint64_t h, uint64_t e, size_t n, uint64_t t)
{
	return size == h + e * n || (t && size == h + e * n + t);
}

int sprobe__plt_symbols(Elf *elf, struct sprobe_plt_sym **out, size_t *n)
{
	struct plt_out o = { 0 };
	struct sec plt, sec, got, rela_plt, rela_dyn;
	struct reloc *rel = NULL;
	size_t shstrndx, nrel = 0;
	GElf_Ehdr eh;
	int ret = 0;

	*out = NULL;
	*n = 0;
	if (!gelf_getehdr(elf, &eh) || gelf_getclass(elf) != ELFCLASS64 ||
	    (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) ||
	    elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	bool x86 = eh.e_machine == EM_X86_64;
	bool have_plt = find(elf, shstrndx, ".plt", &plt);

	if (have_plt && find(elf, shstrndx, ".rela.plt", &rela_plt)) {
		ret = read_relocs(elf, &rela_plt, x86 ? R_X86_64_JUMP_SLOT : R_AARCH64_JUMP_SLOT,
				  UINT32_MAX, x86 ? R_X86_64_IRELATIVE : R_AARCH64_IRELATIVE, &rel,
				  &nrel);
		if (ret == -ENOMEM)
			goto out;
		ret = 0;
	}
	/* GOT slots are handed out in PLT order; ld writes the IRELATIVE
	 * relocations after the others, whatever their entries' places. */
	if (nrel > 1)
		qsort(rel, nrel, sizeof(*rel), cmp_slot);
	if (nrel && x86) {
		uint64_t size = plt.sh.sh_size;

		/* With IBT, calls go to .plt.sec; .plt keeps the lazy stubs. */
		if (find(elf, shstrndx, ".plt.sec", &sec) && sec.sh.sh_size == 16 * nrel)
			ret = name_entries(&o, &sec, 0, 16, rel, nrel);
		/* A .plt without header: one entry per relocation (perf's
		 * rule); else the 16-byte PLT0 first. */
		if (!ret && fits(size, 0, 16, nrel, 0))
			ret = name_entries(&o, &plt, 0, 16, rel, nrel);
		else if (!ret && fits(size, 16, 16, nrel, 16))
			ret = name_entries(&o, &plt, 16, 16, rel, nrel);
	} else if (nrel) {
		uint64_t size = plt.sh.sh_size, e = 0;

		if (fits(size, 32, 16, nrel, 0))
			e = 16;
		else if (fits(size, 32, 24, nrel, 0)) /* BTI or PAC stubs */
			e = 24;
		else if (fits(size, 32, 16, nrel, 32))
			e = 16;
		else if (fits(size, 32, 24, nrel, 32))
			e = 24;
		if (e)
			ret = name_entries(&o, &plt, 32, e, rel, nrel);
	}
	if (!ret && x86 && find(elf, shstrndx, ".plt.got", &got) &&
	    find(elf, shstrndx, ".rela.dyn", &rela_dyn))
		ret = name_plt_got(elf, &o, &got, &rela_dyn);
out:
	free(rel);
	if (ret) {
		free(o.v);
		return ret;
	}
	*out = o.v;
	*n = o.n;
	return 0;
}
