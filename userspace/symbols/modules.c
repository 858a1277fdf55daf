/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Module inventory: the objects loaded in a process (see symbolize.h).
 *
 * Nothing here is async-signal-safe: dl_iterate_phdr takes the loader lock,
 * and we allocate and open files. The unwinder refreshes the inventory only
 * after every captured thread runs again, never inside a suspend window.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/common/fds.h"
#include "userspace/symbols/build_id.h"
#include "userspace/symbols/modules_internal.h"

/* The inventory owns each module: its caches are released here, each by
 * the file that fills it, so those files never call back into this one. */
static void module_free(struct module *mod)
{
	if (!mod)
		return;
	sprobe__inline_cache_free(mod->inl);
	sprobe__symtab_release(&mod->st);
	free(mod->unw.rows);
	free(mod->unw.blobs);
	free(mod->unw.no_cfi);
	free(mod->unw.sig);
	free(mod->unw.synth);
	free(mod->unw.synth_eh);
	free(mod->path);
	free(mod->open_path);
	free(mod);
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');

	return s ? s + 1 : p;
}

static int modules_reserve(struct sprobe_modules *m, size_t want)
{
	if (want <= m->cap)
		return 0;
	size_t cap = m->cap ? m->cap * 2 : 32;

	while (cap < want)
		cap *= 2;
	struct module **p = realloc(m->mods, cap * sizeof(*p));

	if (!p)
		return -ENOMEM;
	m->mods = p;
	m->cap = cap;
	return 0;
}

static int cmp_module(const void *a, const void *b)
{
	const struct module *x = *(struct module *const *)a, *y = *(struct module *const *)b;

	return x->pub.start < y->pub.start ? -1 : x->pub.start > y->pub.start;
}

/* Set start/end from the segments. */
static void module_span(struct module *mod)
{
	mod->pub.start = UINT64_MAX;
	mod->pub.end = 0;
	for (uint32_t i = 0; i < mod->pub.nsegs; i++) {
		if (mod->pub.segs[i].start < mod->pub.start)
			mod->pub.start = mod->pub.segs[i].start;
		if (mod->pub.segs[i].end > mod->pub.end)
			mod->pub.end = mod->pub.segs[i].end;
	}
}

/* Set span and names once path is known. */
static void module_finish(struct module *mod)
{
	mod->pub.path = mod->path;
	mod->pub.name = base_name(mod->path);
	module_span(mod);
}

static uint32_t pflags_to_prot(uint32_t f)
{
	return ((f & PF_R) ? SPROBE_SEG_R : 0) | ((f & PF_W) ? SPROBE_SEG_W : 0) |
	       ((f & PF_X) ? SPROBE_SEG_X : 0);
}

/*
 * Merge a freshly scanned list into m: modules with the same path, bias and
 * span are kept (with their symbol and unwind caches), others replaced.
 * Takes ownership of every element of fresh. Returns 1 if the set changed.
 */
static int modules_reconcile(struct sprobe_modules *m, struct module **fresh, size_t nfresh)
{
	bool changed = nfresh != m->n;

	for (size_t i = 0; i < m->n; i++)
		m->mods[i]->seen = false;
	for (size_t i = 0; i < nfresh; i++) {
		struct module *f = fresh[i];
		struct module *old = sprobe__modules_find(m, f->pub.start);

		if (old && !old->seen && old->pub.start == f->pub.start &&
		    old->pub.end == f->pub.end && old->pub.bias == f->pub.bias &&
		    strcmp(old->path, f->path) == 0 && old->dev == f->dev &&
		    old->ino == f->ino) {
			old->seen = true;
			module_free(f);
			fresh[i] = old;
		} else {
			changed = true;
		}
	}
	for (size_t i = 0; i < m->n; i++) {
		if (!m->mods[i]->seen) {
			changed = true;
			module_free(m->mods[i]);
		}
	}
	/* fresh now holds kept and new modules; it fits in m->mods because
	 * the caller reserved nfresh slots. */
	memcpy(m->mods, fresh, nfresh * sizeof(*fresh));
	m->n = nfresh;
	qsort(m->mods, m->n, sizeof(*m->mods), cmp_module);
	/* Drop overlapping spans (should not happen with a sane loader): keep
	 * the first, so lookups stay a plain binary search. */
	size_t w = 0;

	for (size_t i = 0; i < m->n; i++) {
		if (w && m->mods[i]->pub.start < m->mods[w - 1]->pub.end) {
			module_free(m->mods[i]);
			changed = true;
			continue;
		}
		m->mods[w++] = m->mods[i];
	}
	m->n = w;
	for (size_t i = 0; i < m->n; i++)
		m->mods[i]->seen = false;
	if (changed)
		m->generation++;
	return changed ? 1 : 0;
}

/* ---- the current process: dl_iterate_phdr ---- */

struct self_scan {
	struct module **list;
	size_t n, cap;
	int err;
	unsigned long long adds, subs;
	bool have_counters;
	uint64_t vdso;
	uint64_t ldso;		/* AT_BASE: the dynamic loader */
	uint64_t self;		/* an address in the object holding this code */
	char exe[PATH_MAX];
};

static int counters_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct self_scan *s = data;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		s->adds = info->dlpi_adds;
		s->subs = info->dlpi_subs;
		s->have_counters = true;
	}
	return 1; /* stop after the first object */
}

static int self_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct self_scan *s = data;
	struct module *mod;
	const char *path;

	counters_cb(info, size, data);
	mod = calloc(1, sizeof(*mod));
	if (!mod) {
		s->err = -ENOMEM;
		return 1;
	}
	mod->pub.bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t a = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && mod->pub.nsegs < SPROBE_MODULE_MAX_SEGS) {
			struct sprobe_segment *sg = &mod->pub.segs[mod->pub.nsegs++];

			sg->start = a;
			sg->end = a + ph->p_memsz;
			sg->prot = pflags_to_prot(ph->p_flags);
			sg->file_offset = ph->p_offset;
		} else if (ph->p_type == PT_GNU_EH_FRAME) {
			mod->pub.eh_frame_hdr = a;
			mod->pub.eh_frame_hdr_len = ph->p_memsz;
		} else if (ph->p_type == PT_NOTE && !mod->pub.build_id_len) {
			mod->pub.build_id_len = sprobe__parse_build_id((const uint8_t *)(uintptr_t)a,
							       ph->p_memsz, ph->p_align,
							       mod->pub.build_id);
		}
	}
	if (mod->pub.nsegs == 0) {
		free(mod);
		return 0;
	}
	module_span(mod);
	/* Never unloaded while we run, so read without a pin: the loader
	 * (AT_BASE) and the object holding this code. Pinning the latter
	 * (dlopen RTLD_NOLOAD) from the agent's probe thread while the
	 * agent's constructor still runs made glibc run that constructor a
	 * second time in an exec'd image (test_agent_is_transparent). */
	if ((s->ldso && s->ldso >= mod->pub.start && s->ldso < mod->pub.end) ||
	    (s->self >= mod->pub.start && s->self < mod->pub.end))
		mod->permanent = true;
	if (s->vdso && s->vdso >= mod->pub.start && s->vdso < mod->pub.end) {
		path = "[vdso]";
		mod->vdso_self = true;
		mod->permanent = true;
	} else if (!info->dlpi_name || !info->dlpi_name[0]) {
		path = s->exe;
		mod->permanent = true; /* the main program: dlclose never unmaps it */
	} else {
		path = info->dlpi_name;
	}
	mod->path = strdup(path);
	mod->open_path = strdup(path);
	if (!mod->path || !mod->open_path) {
		module_free(mod);
		s->err = -ENOMEM;
		return 1;
	}
	module_finish(mod);
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct module **p = realloc(s->list, cap * sizeof(*p));

		if (!p) {
			module_free(mod);
			s->err = -ENOMEM;
			return 1;
		}
		s->list = p;
		s->cap = cap;
	}
	s->list[s->n++] = mod;
	return 0;
}

static int refresh_self(struct sprobe_modules *m)
{
	struct self_scan s = { 0 };
	ssize_t k;
	int ret;

	dl_iterate_phdr(counters_cb, &s);
	if (s.have_counters && m->have_counters && s.adds == m->adds && s.subs == m->subs)
		return 0;

	memset(&s, 0, sizeof(s));
	s.vdso = getauxval(AT_SYSINFO_EHDR);
	s.ldso = getauxval(AT_BASE);
	s.self = (uint64_t)(uintptr_t)&sprobe_modules__refresh;
	k = readlink("/proc/self/exe", s.exe, sizeof(s.exe) - 1);
	if (k <= 0)
		snprintf(s.exe, sizeof(s.exe), "%s", program_invocation_name);
	else
		s.exe[k] = '\0';
	dl_iterate_phdr(self_cb, &s);
	if (s.err == 0)
		s.err = modules_reserve(m, s.n);
	if (s.err) {
		for (size_t i = 0; i < s.n; i++)
			module_free(s.list[i]);
		free(s.list);
		return s.err;
	}
	ret = modules_reconcile(m, s.list, s.n);
	free(s.list);
	m->adds = s.adds;
	m->subs = s.subs;
	m->have_counters = s.have_counters;
	return ret;
}

/* ---- another process: /proc/PID/maps + ELF files ---- */

struct mapping {
	uint64_t start, end, offset, dev, ino;
	bool exec;
	char *path;
};

/*
 * Read the ELF program headers of the file at open_path and build a module
 * whose first PT_LOAD is mapped at map_start (the offset-0 mapping).
 */
static struct module *module_from_file(const char *open_path, uint64_t map_start, int *err)
{
	struct module *mod = NULL;
	size_t phnum = 0, rawsz = 0;
	uint64_t first_vaddr = UINT64_MAX;
	const uint8_t *raw;
	long pgsz = sysconf(_SC_PAGESIZE);
	int h = sprobe_fd__open_file(open_path);
	int fd = sprobe_fd__get(h);
	Elf *elf = NULL;

	*err = 0;
	if (fd < 0) {
		sprobe_fd__close(h);
		*err = fd;
		return NULL;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &phnum) != 0) {
		*err = -ENOEXEC;
		goto out;
	}
	raw = (const uint8_t *)elf_rawfile(elf, &rawsz);
	mod = calloc(1, sizeof(*mod));
	if (!mod) {
		*err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && ph.p_vaddr < first_vaddr)
			first_vaddr = ph.p_vaddr;
	}
	if (first_vaddr == UINT64_MAX) {
		*err = -ENOEXEC;
		goto out;
	}
	mod->pub.bias = map_start - (first_vaddr & ~(uint64_t)(pgsz - 1));
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_LOAD && mod->pub.nsegs < SPROBE_MODULE_MAX_SEGS) {
			struct sprobe_segment *sg = &mod->pub.segs[mod->pub.nsegs++];

			sg->start = mod->pub.bias + ph.p_vaddr;
			sg->end = sg->start + ph.p_memsz;
			sg->prot = pflags_to_prot(ph.p_flags);
			sg->file_offset = ph.p_offset;
		} else if (ph.p_type == PT_NOTE && !mod->pub.build_id_len && raw &&
			   ph.p_offset < rawsz && ph.p_filesz <= rawsz - ph.p_offset) {
			mod->pub.build_id_len = sprobe__parse_build_id(raw + ph.p_offset, ph.p_filesz,
							       ph.p_align, mod->pub.build_id);
		}
	}
out:
	if (*err) {
		free(mod);
		mod = NULL;
	}
	if (elf)
		elf_end(elf);
	sprobe_fd__done(h);
	return mod;
}

static int read_maps(pid_t pid, struct mapping **out, size_t *nout)
{
	char fname[64], line[PATH_MAX + 256];
	struct mapping *v = NULL;
	size_t n = 0, cap = 0, len = 0;
	char *text = NULL, *cur, *nl;
	int err;

	/* Read whole through the descriptor registry (fds.h): in a host
	 * process no stdio FILE may hold a descriptor the wrappers do not
	 * know. */
	snprintf(fname, sizeof(fname), "/proc/%d/maps", (int)pid);
	err = sprobe_fd__read_file(fname, &text, &len);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	for (cur = text; *cur; cur = nl) {
		size_t ll;

		nl = strchr(cur, '\n');
		nl = nl ? nl + 1 : cur + strlen(cur);
		ll = (size_t)(nl - cur) < sizeof(line) - 1 ? (size_t)(nl - cur) : sizeof(line) - 1;
		memcpy(line, cur, ll);
		line[ll] = '\0';
		unsigned long long start, end, off, ino;
		unsigned maj, min;
		char perms[8];
		int pos = 0;

		if (sscanf(line, "%llx-%llx %7s %llx %x:%x %llu %n", &start, &end, perms,
			   &off, &maj, &min, &ino, &pos) < 7)
			continue;
		char *path = line + pos;

		path[strcspn(path, "\n")] = '\0';
		bool vdso = strcmp(path, "[vdso]") == 0;

		if (!vdso && (path[0] != '/' || ino == 0))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 128;
			struct mapping *p = realloc(v, cap * sizeof(*p));

			if (!p)
				goto nomem;
			v = p;
		}
		v[n] = (struct mapping){ start, end, off, ((uint64_t)maj << 32) | min, ino,
					 perms[2] == 'x', strdup(path) };
		if (!v[n].path)
			goto nomem;
		n++;
	}
	free(text);
	*out = v;
	*nout = n;
	return 0;
nomem:
	free(text);
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
	return -ENOMEM;
}

static int refresh_pid(struct sprobe_modules *m)
{
	struct mapping *maps = NULL;
	size_t nmaps = 0, n = 0;
	struct module **list = NULL;
	int ret = read_maps(m->pid, &maps, &nmaps);

	if (ret)
		return ret;
	list = calloc(nmaps ? nmaps : 1, sizeof(*list));
	if (!list) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nmaps; i++) {
		struct mapping *mp = &maps[i];
		struct module *mod;
		bool exec = mp->exec;
		size_t j;
		int err;

		if (mp->offset != 0)
			continue; /* not the start of an object: part of one below */
		/* The object's other mappings follow in address order. */
		for (j = i + 1; j < nmaps && maps[j].ino == mp->ino && maps[j].dev == mp->dev &&
				strcmp(maps[j].path, mp->path) == 0 && maps[j].offset != 0; j++)
			exec |= maps[j].exec;
		if (!exec)
			continue; /* data file or non-code mapping of an ELF */
		if (strcmp(mp->path, "[vdso]") == 0) {
			mod = calloc(1, sizeof(*mod));
			if (!mod) {
				ret = -ENOMEM;
				goto out;
			}
			/* The vDSO image starts at its mapping and links at 0. */
			mod->pub.bias = mp->start;
			mod->pub.nsegs = 1;
			mod->pub.segs[0] = (struct sprobe_segment){ mp->start, mp->end,
								    SPROBE_SEG_R | SPROBE_SEG_X, 0, 0 };
			mod->vdso_self = false;
		} else {
			char open_path[PATH_MAX + 64];

			size_t plen = strlen(mp->path);

			if (plen > 10 && strcmp(mp->path + plen - 10, " (deleted)") == 0)
				/* Unlinked since it was mapped: the kernel still
				 * has it (needs ptrace access to the process). */
				snprintf(open_path, sizeof(open_path), "/proc/%d/map_files/%llx-%llx",
					 (int)m->pid, (unsigned long long)mp->start,
					 (unsigned long long)mp->end);
			else
				snprintf(open_path, sizeof(open_path), "/proc/%d/root%s",
					 (int)m->pid, mp->path);
			mod = module_from_file(open_path, mp->start, &err);
			if (!mod) {
				if (err == -ENOMEM) {
					ret = err;
					goto out;
				}
				continue; /* not an ELF we can read: not a module */
			}
			mod->open_path = strdup(open_path);
		}
		mod->path = strdup(mp->path);
		mod->dev = mp->dev;
		mod->ino = mp->ino;
		if (!mod->path || (!mod->open_path && strcmp(mp->path, "[vdso]") != 0)) {
			module_free(mod);
			ret = -ENOMEM;
			goto out;
		}
		module_finish(mod);
		list[n++] = mod;
	}
	ret = modules_reserve(m, n);
	if (ret == 0) {
		ret = modules_reconcile(m, list, n);
		n = 0;
	}
out:
	for (size_t i = 0; i < n; i++)
		module_free(list[i]);
	free(list);
	for (size_t i = 0; i < nmaps; i++)
		free(maps[i].path);
	free(maps);
	return ret;
}

/* ---- public API ---- */

struct sprobe_modules *sprobe_modules__new(const struct sprobe_modules_opts *opts)
{
	struct sprobe_modules *m;
	int ret = 0;

	if (opts && opts->sz < offsetof(struct sprobe_modules_opts, debug_root)) {
		errno = EINVAL;
		return NULL;
	}
	if (opts && opts->pid < 0) {
		errno = EINVAL;
		return NULL;
	}
	if (elf_version(EV_CURRENT) == EV_NONE) {
		errno = ENOSYS;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->pid = opts ? opts->pid : 0;
	if (m->pid == getpid())
		m->pid = 0;
	m->empty_mode = opts && opts->empty;
	m->demangle = !(opts && opts->no_demangle);
	m->no_perf_map = opts && opts->sz >= offsetof(struct sprobe_modules_opts, no_perf_map) +
						  sizeof(opts->no_perf_map) &&
			 opts->no_perf_map;
	m->debuginfod = opts && opts->sz >= offsetof(struct sprobe_modules_opts, debuginfod) +
						 sizeof(opts->debuginfod) &&
			opts->debuginfod;
	const char *root = opts && opts->sz >= sizeof(*opts) && opts->debug_root
				   ? opts->debug_root
				   : "/usr/lib/debug";
	m->debug_root = strdup(root);
	if (!m->debug_root) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	if (!m->empty_mode) {
		ret = sprobe_modules__refresh(m);
		if (ret < 0) {
			sprobe_modules__free(m);
			errno = -ret;
			return NULL;
		}
	}
	return m;
}

void sprobe_modules__free(struct sprobe_modules *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		module_free(m->mods[i]);
	free(m->mods);
	sprobe__demangler_release(m);
	sprobe__perfmap_release(&m->jit);
	sprobe__inline_release(m);
	free(m->debug_root);
	free(m);
}

int sprobe_modules__refresh(struct sprobe_modules *m)
{
	if (!m)
		return -EINVAL;
	if (m->empty_mode)
		return 0;
	return m->pid ? refresh_pid(m) : refresh_self(m);
}

uint64_t sprobe_modules__generation(const struct sprobe_modules *m)
{
	return m ? m->generation : 0;
}

size_t sprobe_modules__count(const struct sprobe_modules *m)
{
	return m ? m->n : 0;
}

const struct sprobe_module *sprobe_modules__get(const struct sprobe_modules *m, size_t i)
{
	if (!m || i >= m->n) {
		errno = ERANGE;
		return NULL;
	}
	return &m->mods[i]->pub;
}

const struct sprobe_module *sprobe_modules__find(const struct sprobe_modules *m, uint64_t addr)
{
	struct module *mod = m ? sprobe__modules_find(m, addr) : NULL;

	if (!mod) {
		errno = ENOENT;
		return NULL;
	}
	return &mod->pub;
}

int sprobe_modules__add(struct sprobe_modules *m, const struct sprobe_module *desc)
{
	struct module *mod;
	int ret;

	if (!m || !desc || !m->empty_mode || !desc->path || !desc->path[0] || desc->nsegs == 0 ||
	    desc->nsegs > SPROBE_MODULE_MAX_SEGS || desc->build_id_len > SPROBE_BUILD_ID_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < desc->nsegs; i++)
		if (desc->segs[i].end <= desc->segs[i].start)
			return -EINVAL;
	mod = calloc(1, sizeof(*mod));
	if (!mod)
		return -ENOMEM;
	mod->pub = *desc;
	mod->pub.eh_frame_hdr = mod->pub.eh_frame_hdr_len = 0;
	mod->path = strdup(desc->path);
	mod->open_path = strdup(desc->path);
	if (!mod->path || !mod->open_path) {
		module_free(mod);
		return -ENOMEM;
	}
	module_finish(mod);
	for (size_t i = 0; i < m->n; i++) {
		if (mod->pub.start < m->mods[i]->pub.end && m->mods[i]->pub.start < mod->pub.end) {
			module_free(mod);
			return -EEXIST;
		}
	}
	ret = modules_reserve(m, m->n + 1);
	if (ret) {
		module_free(mod);
		return ret;
	}
	m->mods[m->n++] = mod;
	qsort(m->mods, m->n, sizeof(*m->mods), cmp_module);
	m->generation++;
	return 0;
}
