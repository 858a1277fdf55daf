/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The public module API of <stackprobe/symbolize.h>, implemented for macOS
 * over dyld's image list and the Mach-O parser (macho.c). On Linux userspace/symbols/modules.c
 * and symbolize.c implement it with dl_iterate_phdr and libelf. Differences:
 *   - the current process only: opts.pid of another process is ENOTSUP
 *     (reading another task needs task_for_pid and its entitlement);
 *   - a module's span is its __TEXT segment (shared cache images have their
 *     other segments elsewhere, among other images' segments);
 *   - build_id holds the 16-byte LC_UUID;
 *   - names come from LC_SYMTAB, then dladdr() for exported names (local
 *     symbols of shared cache images are not in memory); modules
 *     added with sprobe_modules__add() get module+offset only;
 *   - C++ names are returned mangled (no demangler is bound here yet).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mach-o/dyld.h>

#include <stackprobe/symbolize.h>

#include "backends/macos/modules.h"

struct mac_module {
	struct sprobe_module pub;
	struct sprobe_macho_image img;	/* header_addr 0 for added modules */
	char *path;			/* owned copies behind pub.path/name */
};

struct sprobe_modules {
	bool empty;
	uint64_t generation;
	size_t n;
	struct mac_module *mods;	/* sorted by pub.start */
	/* dyld's list at the last refresh, to tell whether it changed. */
	uint32_t seen_count;
	const void **seen_headers;
};

static int mod_cmp(const void *a, const void *b)
{
	const struct mac_module *x = a, *y = b;

	return x->pub.start < y->pub.start ? -1 : x->pub.start > y->pub.start;
}

static void drop_all(struct sprobe_modules *m)
{
	for (size_t i = 0; i < m->n; i++) {
		sprobe_macho_image__clear(&m->mods[i].img);
		free(m->mods[i].path);
	}
	free(m->mods);
	m->mods = NULL;
	m->n = 0;
}

static int fill_module(struct mac_module *mm, const char *path)
{
	const char *slash;

	mm->path = strdup(path ? path : "?");
	if (!mm->path)
		return -ENOMEM;
	slash = strrchr(mm->path, '/');
	mm->pub.path = mm->path;
	mm->pub.name = slash ? slash + 1 : mm->path;
	return 0;
}

/* Re-read dyld's list into m (current process). */
static int load_dyld(struct sprobe_modules *m, uint32_t count)
{
	struct mac_module *mods = calloc(count ? count : 1, sizeof(*mods));
	const void **headers = calloc(count ? count : 1, sizeof(*headers));
	size_t n = 0;

	if (!mods || !headers) {
		free(mods);
		free(headers);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < count; i++) {
		/* An index past the list's current end (a dlclose meanwhile)
		 * returns NULL: that image is simply not listed. */
		const struct mach_header *mh = _dyld_get_image_header(i);
		intptr_t slide = _dyld_get_image_vmaddr_slide(i);
		struct mac_module *mm = &mods[n];

		headers[i] = mh;
		/* The load commands follow the header inside __TEXT, mapped as
		 * long as the image is; the parser bounds itself by sizeofcmds. */
		if (!mh || sprobe_macho_image__parse(mh, 32 + MACHO_MAX_CMDS_BYTES,
						     (int64_t)slide, &mm->img) < 0)
			continue;
		if (fill_module(mm, _dyld_get_image_name(i)) < 0) {
			/* Keep the previous inventory usable: free only ours. */
			for (size_t k = 0; k < n; k++)
				free(mods[k].path);
			free(mods);
			free(headers);
			return -ENOMEM;
		}
		mm->img.path = mm->path;
		mm->pub.bias = (uint64_t)slide;
		mm->pub.start = mm->img.text_start;
		mm->pub.end = mm->img.text_end;
		mm->pub.nsegs = 1;
		mm->pub.segs[0].start = mm->img.text_start;
		mm->pub.segs[0].end = mm->img.text_end;
		mm->pub.segs[0].prot = SPROBE_SEG_R | SPROBE_SEG_X;
		/* __TEXT maps the file from its first byte (the Mach header). */
		mm->pub.segs[0].file_offset = 0;
		if (mm->img.has_uuid) {
			memcpy(mm->pub.build_id, mm->img.uuid, sizeof(mm->img.uuid));
			mm->pub.build_id_len = sizeof(mm->img.uuid);
		}
		n++;
	}
	qsort(mods, n, sizeof(*mods), mod_cmp);
	drop_all(m);
	free(m->seen_headers);
	m->mods = mods;
	m->n = n;
	m->seen_count = count;
	m->seen_headers = headers;
	m->generation++;
	return 0;
}

struct sprobe_modules *sprobe_modules__new(const struct sprobe_modules_opts *opts)
{
	struct sprobe_modules *m;
	int err;

	if (opts && opts->sz < sizeof(size_t)) {
		errno = EINVAL;
		return NULL;
	}
	if (opts && opts->pid != 0 && opts->pid != getpid() && !opts->empty) {
		errno = ENOTSUP;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->empty = opts && opts->empty;
	if (!m->empty && (err = load_dyld(m, _dyld_image_count())) < 0) {
		free(m);
		errno = -err;
		return NULL;
	}
	return m;
}

void sprobe_modules__free(struct sprobe_modules *m)
{
	if (!m)
		return;
	drop_all(m);
	free(m->seen_headers);
	free(m);
}

int sprobe_modules__refresh(struct sprobe_modules *m)
{
	uint32_t count;
	bool same;
	int err;

	if (!m)
		return -EINVAL;
	if (m->empty)
		return 0;
	/* dyld keeps no public change counter: compare the list itself. */
	count = _dyld_image_count();
	same = count == m->seen_count;
	for (uint32_t i = 0; same && i < count; i++)
		same = _dyld_get_image_header(i) == m->seen_headers[i];
	if (same)
		return 0;
	err = load_dyld(m, count);
	return err < 0 ? err : 1;
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
	return &m->mods[i].pub;
}

static struct mac_module *find_mod(const struct sprobe_modules *m, uint64_t addr)
{
	size_t lo = 0, hi = m ? m->n : 0;

	while (lo < hi) {	/* first module starting above addr */
		size_t mid = lo + (hi - lo) / 2;

		if (m->mods[mid].pub.start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr >= m->mods[lo - 1].pub.end)
		return NULL;
	return &m->mods[lo - 1];
}

const struct sprobe_module *sprobe_modules__find(const struct sprobe_modules *m, uint64_t addr)
{
	struct mac_module *mm = find_mod(m, addr);

	if (!mm) {
		errno = ENOENT;
		return NULL;
	}
	return &mm->pub;
}

int sprobe_modules__add(struct sprobe_modules *m, const struct sprobe_module *desc)
{
	struct mac_module *mods, mm = { 0 };

	if (!m || !desc || !m->empty || !desc->path || desc->nsegs == 0 ||
	    desc->nsegs > SPROBE_MODULE_MAX_SEGS || desc->build_id_len > SPROBE_BUILD_ID_MAX)
		return -EINVAL;
	mm.pub = *desc;
	mm.pub.start = UINT64_MAX;
	mm.pub.end = 0;
	for (uint32_t i = 0; i < desc->nsegs; i++) {
		if (desc->segs[i].end <= desc->segs[i].start)
			return -EINVAL;
		if (desc->segs[i].start < mm.pub.start)
			mm.pub.start = desc->segs[i].start;
		if (desc->segs[i].end > mm.pub.end)
			mm.pub.end = desc->segs[i].end;
	}
	mm.pub.eh_frame_hdr = mm.pub.eh_frame_hdr_len = 0;
	for (size_t i = 0; i < m->n; i++)
		if (mm.pub.start < m->mods[i].pub.end && m->mods[i].pub.start < mm.pub.end)
			return -EEXIST;
	if (fill_module(&mm, desc->path) < 0)
		return -ENOMEM;
	mods = realloc(m->mods, (m->n + 1) * sizeof(*mods));
	if (!mods) {
		free(mm.path);
		return -ENOMEM;
	}
	mods[m->n] = mm;	/* img stays zeroed: no symbols, module+offset */
	m->mods = mods;
	m->n++;
	qsort(m->mods, m->n, sizeof(*m->mods), mod_cmp);
	m->generation++;
	return 0;
}

int sprobe_modules__symbolize(struct sprobe_modules *m, uint64_t pc, struct sprobe_symbol *out)
{
	struct mac_module *mm;
	const char *name;
	uint64_t off;
	Dl_info info;

	if (!m || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->pc = pc;
	mm = find_mod(m, pc);
	if (!mm)
		return -ENOENT;
	out->module = &mm->pub;
	out->module_offset = pc - mm->pub.bias;
	if (!mm->img.header_addr)
		return 0;	/* offline module: module + offset */
	if (sprobe_macho_image__symbolize(&mm->img, pc, &name, &off) == 0) {
		out->name = name;
		out->sym_start = pc - off;
		out->sym_offset = off;
		out->source = "symtab";
		return 0;
	}
	/* Shared cache images may keep few names in LC_SYMTAB; dyld's export
	 * trie still names exported functions. Accept dladdr's answer only for
	 * this image, and not when a function starts between its symbol and pc
	 * (that function's own name is gone: module + offset, not a wrong one). */
	if (dladdr((const void *)(uintptr_t)pc, &info) && info.dli_sname && info.dli_saddr &&
	    (uint64_t)(uintptr_t)info.dli_fbase == mm->img.header_addr &&
	    (uint64_t)(uintptr_t)info.dli_saddr <= pc &&
	    sprobe_macho_image__unnamed_between(&mm->img, (uint64_t)(uintptr_t)info.dli_saddr,
						pc) == 0) {
		out->name = info.dli_sname;
		out->sym_start = (uint64_t)(uintptr_t)info.dli_saddr;
		out->sym_offset = pc - out->sym_start;
		out->source = "dladdr";
	}
	return 0;
}

int sprobe_symbol__snprintf(const struct sprobe_symbol *sym, char *buf, size_t len)
{
	if (!sym)
		return -EINVAL;
	if (sym->module && sym->name)
		return snprintf(buf, len, "%s+0x%llx (%s)", sym->name,
				(unsigned long long)sym->sym_offset, sym->module->name);
	if (sym->module)
		return snprintf(buf, len, "%s+0x%llx", sym->module->name,
				(unsigned long long)sym->module_offset);
	return snprintf(buf, len, "0x%llx", (unsigned long long)sym->pc);
}

int sprobe_build_id__hex(const uint8_t *id, size_t len, char *buf, size_t buflen)
{
	static const char hex[] = "0123456789abcdef";

	if (!id || !buf || buflen < 2 * len + 1)
		return -ENOSPC;
	for (size_t i = 0; i < len; i++) {
		buf[2 * i] = hex[id[i] >> 4];
		buf[2 * i + 1] = hex[id[i] & 0xf];
	}
	buf[2 * len] = '\0';
	return (int)(2 * len);
}
