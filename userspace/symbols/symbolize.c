/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Symbolization with libelf (see symbolize.h for the search order and the
 * "never a wrong name" rule). Not async-signal-safe: runs only after every
 * captured thread runs again.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/common/dl_table.h"
#include "userspace/common/fds.h"
#include "userspace/symbols/build_id.h"
#include "userspace/symbols/debug_file.h"
#include "userspace/symbols/libdw_dl.h" /* libdw's names read its table from here on */
#include "userspace/symbols/dwarf_load.h"
#include "userspace/symbols/demangle_rust.h"
#include "userspace/symbols/modules_internal.h"
#include "userspace/symbols/plt.h"

void sprobe__symtab_release(struct symtab *st)
{
	sprobe__fde_index_free(&st->fde);
	if (st->dwarf_img)
		sprobe_dwarf_image__free(st->dwarf_img);
	else if (st->dwarf)
		dwarf_end(st->dwarf);
	st->dwarf_img = NULL;
	for (size_t i = 0; i < st->n; i++)
		if (st->syms[i].demangled != SYM_NOT_MANGLED)
			free(st->syms[i].demangled);
	free(st->syms);
	for (unsigned i = 0; i < st->nfiles; i++) {
		if (st->files[i].elf)
			elf_end(st->files[i].elf);
	}
	free(st->membuf);
	memset(st, 0, sizeof(*st));
}

void sprobe__demangler_release(struct sprobe_modules *m)
{
	if (m->demangler_dl)
		dlclose(m->demangler_dl);
	m->demangler_dl = NULL;
	m->demangler = NULL;
	m->demangler_state = 0;
}

static int leading_underscores(const char *n)
{
	int k = 0;

	while (n[k] == '_')
		k++;
	return k;
}

/*
 * Order for choosing among aliases at one address, best first (perf's
 * choose_best_symbol, plus: glibc's internal "__GI_" hidden aliases last):
 * a real symbol before a PLT stub's synthetic one, sized, not weak,
 * global, not __GI_, fewer leading underscores, unversioned.
 */
static int alias_cmp(const struct sym *x, const struct sym *y)
{
	int d;

	if ((d = (x->plt != 0) - (y->plt != 0)))
		return d;
	if ((d = (x->size == 0) - (y->size == 0)))
		return d;
	if ((d = (x->bind == STB_WEAK) - (y->bind == STB_WEAK)))
		return d;
	if ((d = (x->bind != STB_GLOBAL) - (y->bind != STB_GLOBAL)))
		return d;
	if ((d = (strncmp(x->name, "__GI_", 5) == 0) - (strncmp(y->name, "__GI_", 5) == 0)))
		return d;
	if ((d = leading_underscores(x->name) - leading_underscores(y->name)))
		return d;
	if ((d = (strchr(x->name, '@') != NULL) - (strchr(y->name, '@') != NULL)))
		return d;
	return strcmp(x->name, y->name); /* deterministic */
}

static int cmp_sym(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return alias_cmp(x, y);
}

/* Append the function symbols of every section of type type in elf. */
static int collect(struct symtab *st, Elf *elf, Elf64_Word type, size_t *cap)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		size_t count = sh.sh_size / sh.sh_entsize;

		for (size_t i = 0; i < count; i++) {
			GElf_Sym s;
			const char *name;
			int t;

			if (!gelf_getsym(d, (int)i, &s))
				break;
			t = GELF_ST_TYPE(s.st_info);
			if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF ||
			    s.st_value == 0)
				continue;
			name = elf_strptr(elf, sh.sh_link, s.st_name);
			if (!name || !name[0])
				continue;
			if (st->n == *cap) {
				size_t nc = *cap ? *cap * 2 : 1024;
				struct sym *p = realloc(st->syms, nc * sizeof(*p));

				if (!p)
					return -ENOMEM;
				st->syms = p;
				*cap = nc;
			}
			st->syms[st->n++] = (struct sym){ s.st_value, s.st_size, name, NULL,
							  (uint8_t)GELF_ST_BIND(s.st_info), 0 };
		}
	}
	return 0;
}

/* Load the image of this process's vDSO or another process's. */
static int open_vdso(struct sprobe_modules *m, struct module *mod, struct elf_file *f)
{
	size_t len = mod->pub.end - mod->pub.start;
	char *image;

	f->from_file = false;
	if (mod->vdso_self) {
		image = (char *)(uintptr_t)mod->pub.start;
	} else {
		char path[64];
		int h, fd;
		ssize_t k;

		snprintf(path, sizeof(path), "/proc/%d/mem", (int)m->pid);
		h = sprobe_fd__open_file(path);
		fd = sprobe_fd__get(h);
		if (fd < 0) {
			sprobe_fd__close(h);
			return fd;
		}
		image = malloc(len);
		if (!image) {
			sprobe_fd__done(h);
			return -ENOMEM;
		}
		k = pread(fd, image, len, (off_t)mod->pub.start);
		sprobe_fd__done(h);
		if (k != (ssize_t)len) {
			free(image);
			return -EIO;
		}
		mod->st.membuf = image;
	}
	f->elf = elf_memory(image, len);
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF) {
		if (f->elf)
			elf_end(f->elf);
		f->elf = NULL;
		return -ENOEXEC;
	}
	return 0;
}

/* Sort by address, one symbol per address: the best-ranked alias. */
static void sort_syms(struct symtab *st)
{
	size_t w = 0;

	if (st->n) /* qsort(NULL, 0, ...) is undefined behaviour */
		qsort(st->syms, st->n, sizeof(*st->syms), cmp_sym);
	for (size_t i = 0; i < st->n; i++) {
		if (w && st->syms[w - 1].start == st->syms[i].start)
			continue;
		st->syms[w++] = st->syms[i];
	}
	st->n = w;
}

static const struct sym *symtab_lookup(const struct symtab *st, uint64_t addr);

/* Add the PLT stubs of the object (files[0]) to the sorted table, which
 * names their IRELATIVE targets (the ifunc symbol at the resolver's
 * address), and sort it again. 0 or -ENOMEM. */
static int add_plt(struct symtab *st, size_t *cap)
{
	struct sprobe_plt_sym *p = NULL;
	size_t np = 0, n0 = st->n;
	int ret = sprobe__plt_symbols(st->files[0].elf, &p, &np);

	for (size_t i = 0; ret == 0 && i < np; i++) {
		const char *name = p[i].name;

		if (!name) {
			const struct sym *f = symtab_lookup(st, p[i].ifunc);

			if (!f || f->start != p[i].ifunc || f->plt)
				continue; /* no name rather than a guess */
			name = f->name;
		}
		if (st->n == *cap) {
			size_t nc = *cap ? *cap * 2 : 64;
			struct sym *v = realloc(st->syms, nc * sizeof(*v));

			if (!v) {
				ret = -ENOMEM;
				break;
			}
			st->syms = v;
			*cap = nc;
		}
		st->syms[st->n++] = (struct sym){ p[i].start, p[i].size, name, NULL, STB_GLOBAL,
						  p[i].header ? SYM_PLT_HEADER : SYM_PLT_ENTRY };
	}
	free(p);
	if (ret == 0 && st->n != n0)
		sort_syms(st);
	return ret;
}

static int load_symtab(struct sprobe_modules *m, struct module *mod)
{
	struct symtab *st = &mod->st;
	struct elf_file obj = { -1, NULL }, dbg = { -1, NULL };
	size_t cap = 0;
	int ret;

	if (strcmp(mod->path, "[vdso]") == 0)
		ret = open_vdso(m, mod, &obj);
	else
		ret = sprobe__elf_open(mod->open_path, &obj);
	if (ret && m->debuginfod && sprobe__debug_by_debuginfod(m, &mod->pub, &dbg) == 0) {
		/* The object is not here (a report made on another machine):
		 * the debug file alone has the names (its .symtab has the
		 * object's addresses). Not trusted for .eh_frame (NOBITS). */
		st->files[st->nfiles++] = dbg;
		st->source = "debuginfod";
		ret = collect(st, dbg.elf, SHT_SYMTAB, &cap);
		goto sort;
	}
	if (ret)
		return ret;
	st->files[st->nfiles++] = obj;
	st->obj_trusted = !(obj.from_file && mod->pub.build_id_len &&
			    !sprobe__same_build_id(obj.elf, &mod->pub));
	if (!st->obj_trusted) {
		/* The file at that path is not the object that was mapped
		 * (upgraded since, or a stale module record): its symbols
		 * would be wrong names. Only a debug file with the right
		 * build-id will do. */
		if (sprobe__debug_by_build_id(m, &mod->pub, &dbg) == 0)
			st->source = "debug-build-id";
		else if (sprobe__debug_by_debuginfod(m, &mod->pub, &dbg) == 0)
			st->source = "debuginfod";
		else
			return -ESTALE;
		st->files[st->nfiles++] = dbg;
		ret = collect(st, dbg.elf, SHT_SYMTAB, &cap);
	} else if (sprobe__elf_has_symbols(obj.elf, SHT_SYMTAB)) {
		st->source = obj.from_file ? "symtab" : "memory";
		ret = collect(st, obj.elf, SHT_SYMTAB, &cap);
	} else if (sprobe__debug_by_build_id(m, &mod->pub, &dbg) == 0 ||
		   sprobe__debug_by_link(m, mod, obj.elf, &dbg) == 0) {
		bool by_id = dbg.elf && sprobe__same_build_id(dbg.elf, &mod->pub) &&
			     mod->pub.build_id_len;

		st->files[st->nfiles++] = dbg;
		st->source = by_id ? "debug-build-id" : "debug-link";
		ret = collect(st, dbg.elf, SHT_SYMTAB, &cap);
		if (ret == 0 && st->n == 0) {
			st->source = "dynsym";
			ret = collect(st, obj.elf, SHT_DYNSYM, &cap);
		}
	} else if (obj.from_file && sprobe__debug_by_debuginfod(m, &mod->pub, &dbg) == 0) {
		st->files[st->nfiles++] = dbg;
		st->source = "debuginfod";
		ret = collect(st, dbg.elf, SHT_SYMTAB, &cap);
	} else {
		st->source = obj.from_file ? "dynsym" : "memory";
		ret = collect(st, obj.elf, SHT_DYNSYM, &cap);
	}
sort:
	if (ret)
		return ret;
	sort_syms(st);
	/* The PLT from the mapped object's own sections (a debug file has
	 * them as NOBITS). */
	if (st->obj_trusted && st->files[0].from_file)
		return add_plt(st, &cap);
	return 0;
}

static const struct sym *symtab_lookup(const struct symtab *st, uint64_t addr)
{
	size_t lo = 0, hi = st->n;

	/* Find the last symbol starting at or before addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st->syms[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* lo - 1 is the candidate; a few more back cover a small function
	 * nested in a bigger one's range (rare; aliases were merged). */
	for (size_t i = lo, k = 0; i > 0 && k < 4; i--, k++) {
		const struct sym *s = &st->syms[i - 1];

		if (addr < s->start + s->size || (s->size == 0 && addr == s->start))
			return s;
	}
	return NULL;
}

static char *cxa_demangle(struct sprobe_modules *m, const char *name)
{
	if (m->demangler_state == 0) {
		void *fn = dlsym(RTLD_DEFAULT, "__cxa_demangle");

		if (!fn) {
			m->demangler_dl = sprobe__dl_open("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
			if (m->demangler_dl)
				fn = dlsym(m->demangler_dl, "__cxa_demangle");
		}
		m->demangler = (char *(*)(const char *, char *, size_t *, int *))fn;
		m->demangler_state = fn ? 1 : -1;
	}
	if (m->demangler_state == 1) {
		int status = -1;
		char *d = m->demangler(name, NULL, NULL, &status);

		if (status == 0 && d)
			return d;
		free(d);
	}
	return NULL;
}

/* A name demangled as display_name() would (Rust, then C++): a string
 * the caller frees, or NULL when it is not mangled (or demangling is off). */
char *sprobe__demangle(struct sprobe_modules *m, const char *name)
{
	if (!m->demangle)
		return NULL;
	if (sprobe__rust_is_mangled(name))
		return sprobe__rust_demangle(name);
	if (strncmp(name, "_Z", 2) == 0)
		return cxa_demangle(m, name);
	return NULL;
}

static const char *plt_name(struct sprobe_modules *m, struct sym *s);

/*
 * The name users read: without a symbol-version suffix (.symtab of a debug
 * file spells "pthread_cond_wait@@GLIBC_2.3.2"), demangled if Rust or C++.
 * Rust first: a legacy Rust name is also a valid Itanium name, which
 * __cxa_demangle would print with its hash and "$u7b$" escapes left in.
 * Computed once per symbol.
 */
static const char *display_name(struct sprobe_modules *m, struct sym *s)
{
	const char *at;
	char *base = NULL, *d;

	if (s->demangled)
		return s->demangled == SYM_NOT_MANGLED ? s->name : s->demangled;
	if (s->plt == SYM_PLT_ENTRY)
		return plt_name(m, s);
	at = strchr(s->name, '@');
	if (at && at != s->name)
		base = strndup(s->name, (size_t)(at - s->name));
	const char *src = base ? base : s->name;

	if (m->demangle && sprobe__rust_is_mangled(src) && (d = sprobe__rust_demangle(src))) {
		free(base);
		s->demangled = d;
		return d;
	}
	if (m->demangle && strncmp(src, "_Z", 2) == 0 && (d = cxa_demangle(m, src))) {
		free(base);
		s->demangled = d;
		return d;
	}
	s->demangled = base ? base : SYM_NOT_MANGLED;
	return base ? base : s->name;
}

/* "<target>@plt", the target demangled as display_name() would (perf
 * names stubs so). Out of memory: ".plt", not cached (the target's own
 * name would be a wrong one). */
static const char *plt_name(struct sprobe_modules *m, struct sym *s)
{
	struct sym target = { .name = s->name };
	const char *t = display_name(m, &target);
	size_t len = strlen(t) + sizeof("@plt");
	char *d = malloc(len);

	if (d)
		snprintf(d, len, "%s@plt", t);
	if (target.demangled != SYM_NOT_MANGLED)
		free(target.demangled);
	if (!d)
		return ".plt";
	s->demangled = d;
	return d;
}

int sprobe_modules__symbolize(struct sprobe_modules *m, uint64_t pc, struct sprobe_symbol *out)
{
	struct module *mod;

	if (!m || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->pc = pc;
	mod = sprobe__modules_find(m, pc);
	if (!mod)
		return sprobe__perfmap_symbolize(m, pc, out) == 0 ? 0 : -ENOENT;
	out->module = &mod->pub;
	out->module_offset = pc - mod->pub.bias;
	if (mod->st.state == 0) {
		int ret = load_symtab(m, mod);

		if (ret) {
			sprobe__symtab_release(&mod->st);
			mod->st.state = ret;
		} else {
			mod->st.state = 1;
		}
	}
	if (mod->st.state != 1)
		return 0;
	struct sym *s = (struct sym *)symtab_lookup(&mod->st, out->module_offset);

	if (!s) {
		uint64_t start, end;
		const char *name;

		/* No symbol: the function the CFI says pc is in (cfi_names.c),
		 * from the object's own .eh_frame only. */
		if (mod->st.obj_trusted &&
		    sprobe__fde_name(mod, mod->st.files[0].elf, out->module_offset, &start, &end,
				     &name) == 0) {
			out->name = name;
			out->sym_start = start + mod->pub.bias;
			out->sym_offset = pc - out->sym_start;
			out->sym_size = end - start;
			out->source = "eh-frame";
		}
		return 0;
	}
	out->name = display_name(m, s);
	out->sym_start = s->start + mod->pub.bias;
	out->sym_offset = pc - out->sym_start;
	out->sym_size = s->size;
	out->source = s->plt ? "plt" : mod->st.source;
	return 0;
}

int sprobe__module_image(struct sprobe_modules *m, struct module *mod, const uint8_t **base,
			 size_t *len, uint64_t *eh_hdr, uint64_t *eh_hdr_len)
{
	struct sprobe_symbol tmp;
	size_t phnum = 0;
	Elf *elf;

	*eh_hdr = *eh_hdr_len = 0;
	/* The symbol table's loader opens the object (and checks its
	 * build-id against the mapped one's: obj_trusted). */
	if (sprobe_modules__symbolize(m, mod->pub.start, &tmp) != 0 || mod->st.state != 1 ||
	    !mod->st.obj_trusted || !mod->st.nfiles || !(elf = mod->st.files[0].elf))
		return -ENOENT;
	*base = (const uint8_t *)elf_rawfile(elf, len);
	if (!*base || !*len)
		return -ENOENT;
	if (elf_getphdrnum(elf, &phnum) != 0)
		return 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
			*eh_hdr = mod->pub.bias + ph.p_vaddr;
			*eh_hdr_len = ph.p_memsz;
			break;
		}
	}
	return 0;
}

/* Load the symbol table first: it opens the object and its debug file. */
static struct module *loaded_module(struct sprobe_modules *m, uint64_t pc)
{
	struct sprobe_symbol tmp;

	if (sprobe_modules__symbolize(m, pc, &tmp) != 0)
		return NULL;
	return sprobe__modules_find(m, pc);
}

/* The module of pc with its DWARF open (*dw), or NULL: no module, or no
 * DWARF for it. Opens the debug file if there is one (it holds the DWARF
 * of a stripped object), else the object itself (built with -g), once. */
struct module *sprobe__module_dwarf(struct sprobe_modules *m, uint64_t pc, void **dw)
{
	struct module *mod = loaded_module(m, pc);
	struct symtab *st;

	if (!mod)
		return NULL;
	st = &mod->st;
	if (st->dwarf_state == 0) {
		/* STACKPROBE_DWARF_LOADER=libdw: libdw's own loading, for
		 * comparisons (tests/test_dwarf_load.c, docs/PERFORMANCE.md). */
		const char *ld = getenv("STACKPROBE_DWARF_LOADER");
		bool fast = !ld || strcmp(ld, "libdw") != 0;

		st->dwarf_state = -ENOENT;
		if (sprobe__libdw_load() != 0) /* no libdw: no lines, no inlined frames */
			st->dwarf_state = -ENOSYS;
		for (int i = (int)st->nfiles - 1; i >= 0 && st->dwarf_state == -ENOENT; i--) {
			struct sprobe_dwarf_image *img = NULL;
			Dwarf *d = NULL;

			if (!st->files[i].elf)
				continue;
			/* Only the sections line and inline lookups read,
			 * inflated fast (dwarf_load.h); anything it does not
			 * take (or finds damaged) goes to libdw as it is. */
			if (fast && sprobe_dwarf_image__open(st->files[i].elf, &img) == 0) {
				st->dwarf_img = img;
				d = sprobe_dwarf_image__dwarf(img);
			} else {
				d = dwarf_begin_elf(st->files[i].elf, DWARF_C_READ, NULL);
			}
			if (d) {
				st->dwarf = d;
				st->dwarf_state = 1;
				break;
			}
		}
	}
	if (st->dwarf_state != 1)
		return NULL;
	*dw = st->dwarf;
	return mod;
}

int sprobe_modules__source_line(struct sprobe_modules *m, uint64_t pc, const char **file,
				int *line)
{
	struct module *mod;
	void *dw = NULL;
	Dwarf_Die cu;
	Dwarf_Line *l;
	const char *src;
	int ln = 0;

	if (!m || !file || !line)
		return -EINVAL;
	mod = sprobe__module_dwarf(m, pc, &dw);
	if (!mod)
		return -ENOENT;
	if (!dwarf_addrdie(dw, pc - mod->pub.bias, &cu))
		return -ENOENT;
	l = dwarf_getsrc_die(&cu, pc - mod->pub.bias);
	if (!l || dwarf_lineno(l, &ln) != 0 || !(src = dwarf_linesrc(l, NULL, NULL)))
		return -ENOENT;
	*file = src;
	*line = ln;
	return 0;
}

int sprobe_symbol__snprintf(const struct sprobe_symbol *sym, char *buf, size_t len)
{
	if (!sym)
		return -EINVAL;
	if (!sym->module && sym->name)
		return snprintf(buf, len, "%s+0x%" PRIx64 " ([jit])", sym->name, sym->sym_offset);
	if (!sym->module)
		return snprintf(buf, len, "0x%" PRIx64, sym->pc);
	if (!sym->name)
		return snprintf(buf, len, "%s+0x%" PRIx64, sym->module->name, sym->module_offset);
	if (sym->source && strcmp(sym->source, "eh-frame") == 0) /* the name holds the module */
		return snprintf(buf, len, "%s+0x%" PRIx64, sym->name, sym->sym_offset);
	return snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", sym->name, sym->sym_offset,
			sym->module->name);
}
