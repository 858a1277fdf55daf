/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Mach-O images in memory: __TEXT range, LC_UUID, LC_SYMTAB names, and (on
 * macOS) the inventory of what dyld has loaded. See modules_macos.h.
 *
 * The Mach-O layouts below are the file format's, written with fixed-width
 * types under our own names so the parser builds on any host: the format is
 * stable and documented in <mach-o/loader.h> and <mach-o/nlist.h>, and the
 * parser is tested on Linux against dylibs that ld64.lld links
 * (tests/test_macho.c). Only the dyld inventory at the bottom needs macOS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "modules_macos.h"

#define MACHO_MAGIC_64 0xfeedfacfu	/* MH_MAGIC_64, little-endian host */
#define MACHO_LC_SEGMENT_64 0x19u
#define MACHO_LC_SYMTAB 0x2u
#define MACHO_LC_UUID 0x1bu
#define MACHO_LC_FUNCTION_STARTS 0x26u
#define MACHO_N_STAB 0xe0u
#define MACHO_N_TYPE 0x0eu
#define MACHO_N_SECT 0x0eu
/* A bound on sizeofcmds: real images stay far below it, and it keeps a
 * corrupt header from making us walk gigabytes. */
#define MACHO_MAX_CMDS_BYTES (1u << 20)

struct macho_header_64 {	/* struct mach_header_64 */
	uint32_t magic;
	int32_t cputype;
	int32_t cpusubtype;
	uint32_t filetype;
	uint32_t ncmds;
	uint32_t sizeofcmds;
	uint32_t flags;
	uint32_t reserved;
};

struct macho_load_command {	/* struct load_command */
	uint32_t cmd;
	uint32_t cmdsize;
};

struct macho_segment_64 {	/* struct segment_command_64 */
	uint32_t cmd;
	uint32_t cmdsize;
	char segname[16];
	uint64_t vmaddr;
	uint64_t vmsize;
	uint64_t fileoff;
	uint64_t filesize;
	int32_t maxprot;
	int32_t initprot;
	uint32_t nsects;
	uint32_t flags;
};

struct macho_symtab {		/* struct symtab_command */
	uint32_t cmd;
	uint32_t cmdsize;
	uint32_t symoff;
	uint32_t nsyms;
	uint32_t stroff;
	uint32_t strsize;
};

struct macho_uuid {		/* struct uuid_command */
	uint32_t cmd;
	uint32_t cmdsize;
	uint8_t uuid[16];
};

struct macho_linkedit_data {	/* struct linkedit_data_command */
	uint32_t cmd;
	uint32_t cmdsize;
	uint32_t dataoff;
	uint32_t datasize;
};

struct macho_nlist_64 {		/* struct nlist_64 */
	uint32_t n_strx;
	uint8_t n_type;
	uint8_t n_sect;
	uint16_t n_desc;
	uint64_t n_value;
};

_Static_assert(sizeof(struct macho_header_64) == 32, "mach_header_64 layout");
_Static_assert(sizeof(struct macho_segment_64) == 72, "segment_command_64 layout");
_Static_assert(sizeof(struct macho_symtab) == 24, "symtab_command layout");
_Static_assert(sizeof(struct macho_uuid) == 24, "uuid_command layout");
_Static_assert(sizeof(struct macho_nlist_64) == 16, "nlist_64 layout");

struct sprobe_macho_sym {
	uint64_t addr;		/* unslid n_value */
	const char *name;
};

static bool segname_is(const struct macho_segment_64 *seg, const char *name)
{
	return strncmp(seg->segname, name, sizeof(seg->segname)) == 0;
}

int sprobe_macho_image__parse(const void *header, size_t span, int64_t slide,
			      struct sprobe_macho_image *out)
{
	const uint8_t *base = header;
	struct macho_header_64 mh;
	const struct macho_symtab *symtab = NULL;
	struct macho_linkedit_data fstarts = { 0 };
	bool have_fstarts = false;
	struct macho_segment_64 text = { 0 }, linkedit = { 0 };
	bool have_text = false, have_linkedit = false;
	uint64_t lo, hi, linkedit_base;
	size_t off;

	if (!header || !out || span < sizeof(mh))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	memcpy(&mh, base, sizeof(mh));	/* the header may be unaligned in a test buffer */
	if (mh.magic != MACHO_MAGIC_64 || mh.sizeofcmds > MACHO_MAX_CMDS_BYTES ||
	    sizeof(mh) + (size_t)mh.sizeofcmds > span)
		return -EINVAL;

	off = sizeof(mh);
	for (uint32_t i = 0; i < mh.ncmds; i++) {
		struct macho_load_command lc;

		/* Each command must fit inside sizeofcmds; cmdsize >= 8 makes
		 * the walk advance, so it ends after at most ncmds steps. */
		if (off + sizeof(lc) > sizeof(mh) + mh.sizeofcmds)
			return -EINVAL;
		memcpy(&lc, base + off, sizeof(lc));
		if (lc.cmdsize < sizeof(lc) || lc.cmdsize > sizeof(mh) + mh.sizeofcmds - off)
			return -EINVAL;

		if (lc.cmd == MACHO_LC_SEGMENT_64) {
			struct macho_segment_64 seg;

			if (lc.cmdsize < sizeof(seg))
				return -EINVAL;
			memcpy(&seg, base + off, sizeof(seg));
			if (!have_text && segname_is(&seg, "__TEXT")) {
				text = seg;
				have_text = true;
			} else if (!have_linkedit && segname_is(&seg, "__LINKEDIT")) {
				linkedit = seg;
				have_linkedit = true;
			}
		} else if (lc.cmd == MACHO_LC_SYMTAB) {
			if (lc.cmdsize < sizeof(*symtab))
				return -EINVAL;
			symtab = (const struct macho_symtab *)(base + off);
		} else if (lc.cmd == MACHO_LC_FUNCTION_STARTS) {
			if (lc.cmdsize < sizeof(fstarts))
				return -EINVAL;
			memcpy(&fstarts, base + off, sizeof(fstarts));
			have_fstarts = true;
		} else if (lc.cmd == MACHO_LC_UUID) {
			struct macho_uuid u;

			if (lc.cmdsize < sizeof(u))
				return -EINVAL;
			memcpy(&u, base + off, sizeof(u));
			memcpy(out->uuid, u.uuid, sizeof(out->uuid));
			out->has_uuid = true;
		}
		off += lc.cmdsize;
	}
	if (!have_text || text.vmsize == 0 || text.vmaddr + text.vmsize < text.vmaddr)
		return -EINVAL;

	out->header_addr = (uint64_t)(uintptr_t)header;
	out->slide = slide;
	out->text_start = text.vmaddr + (uint64_t)slide;
	out->text_end = out->text_start + text.vmsize;
	out->cputype = (uint32_t)mh.cputype;
	out->filetype = mh.filetype;

	if (!have_linkedit)
		return 0;	/* no symbols to find: attribution only */
	/* __LINKEDIT's bytes live at vmaddr + slide; symoff, stroff and dataoff
	 * are file offsets inside its file range (also true of dyld shared cache
	 * images, whose __LINKEDIT is the cache's shared one). */
	lo = linkedit.fileoff;
	hi = linkedit.fileoff + linkedit.filesize;
	linkedit_base = linkedit.vmaddr + (uint64_t)slide - linkedit.fileoff;
	if (hi < lo || linkedit.filesize > linkedit.vmsize)
		return -EINVAL;
	if (symtab) {
		struct macho_symtab st;

		memcpy(&st, symtab, sizeof(st));
		if (st.symoff < lo || (uint64_t)st.symoff + (uint64_t)st.nsyms * 16 > hi ||
		    st.stroff < lo || (uint64_t)st.stroff + st.strsize > hi)
			return -EINVAL;
		out->symtab = (const void *)(uintptr_t)(linkedit_base + st.symoff);
		out->nsyms = st.nsyms;
		out->strtab = (const char *)(uintptr_t)(linkedit_base + st.stroff);
		out->strsize = st.strsize;
	}
	if (have_fstarts) {
		if (fstarts.dataoff < lo || (uint64_t)fstarts.dataoff + fstarts.datasize > hi)
			return -EINVAL;
		out->fstarts = (const uint8_t *)(uintptr_t)(linkedit_base + fstarts.dataoff);
		out->fstarts_size = fstarts.datasize;
	}
	return 0;
}

void sprobe_macho_image__clear(struct sprobe_macho_image *img)
{
	if (!img)
		return;
	free(img->sorted);
	free(img->starts);
	img->sorted = NULL;
	img->starts = NULL;
	img->nsorted = 0;
	img->nstarts = 0;
}

bool sprobe_macho_image__contains(const struct sprobe_macho_image *img, uint64_t pc)
{
	return img && pc >= img->text_start && pc < img->text_end;
}

static int sym_cmp(const void *a, const void *b)
{
	const struct sprobe_macho_sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Read one ULEB128 from [*p, end); 0 at the end or on an overlong value. */
static uint64_t read_uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	*p = end;
	return 0;
}

/*
 * LC_FUNCTION_STARTS: ULEB128 deltas, the first from the start of __TEXT,
 * ending with 0. The linker writes it even when it strips local symbols, so
 * it tells "pc is in a function whose name was stripped" apart from "pc is
 * in the last named function", and the first must not borrow a neighbour's
 * name. Kept sorted (increasing by construction; out-of-range entries stop
 * the decode).
 */
static int build_fstarts(struct sprobe_macho_image *img)
{
	const uint8_t *p = img->fstarts, *end = p + img->fstarts_size;
	uint64_t addr = img->text_start - (uint64_t)img->slide;
	uint64_t text_hi = img->text_end - (uint64_t)img->slide;
	uint32_t n = 0;

	if (!p || img->fstarts_size == 0)
		return 0;
	/* Each entry takes at least one byte: fstarts_size bounds the count. */
	img->starts = calloc(img->fstarts_size, sizeof(*img->starts));
	if (!img->starts)
		return -ENOMEM;
	while (p < end) {
		uint64_t delta = read_uleb(&p, end);

		if (delta == 0 || delta >= text_hi - addr)
			break;
		addr += delta;
		img->starts[n++] = addr;
	}
	img->nstarts = n;
	return 0;
}

/* Index the defined symbols that fall inside __TEXT, sorted by address. */
static int build_index(struct sprobe_macho_image *img)
{
	const uint8_t *syms = img->symtab;
	uint64_t text_lo = img->text_start - (uint64_t)img->slide;
	uint64_t text_hi = img->text_end - (uint64_t)img->slide;
	uint32_t n = 0;

	img->sorted = calloc(img->nsyms ? img->nsyms : 1, sizeof(*img->sorted));
	if (!img->sorted)
		return -ENOMEM;
	for (uint32_t i = 0; i < img->nsyms; i++) {
		struct macho_nlist_64 s;

		memcpy(&s, syms + (size_t)i * sizeof(s), sizeof(s));
		if ((s.n_type & MACHO_N_STAB) || (s.n_type & MACHO_N_TYPE) != MACHO_N_SECT ||
		    s.n_sect == 0 || s.n_value < text_lo || s.n_value >= text_hi)
			continue;
		/* The name must be a NUL-terminated string inside the table. */
		if (s.n_strx == 0 || s.n_strx >= img->strsize ||
		    !memchr(img->strtab + s.n_strx, '\0', img->strsize - s.n_strx))
			continue;
		img->sorted[n].addr = s.n_value;
		img->sorted[n].name = img->strtab + s.n_strx;
		n++;
	}
	qsort(img->sorted, n, sizeof(*img->sorted), sym_cmp);
	img->nsorted = n;
	return build_fstarts(img);
}

/* Index of the first function start above addr (unslid); 0..nstarts. */
static uint32_t starts_above(const struct sprobe_macho_image *img, uint64_t addr)
{
	uint32_t a = 0, b = img->nstarts;

	while (a < b) {
		uint32_t mid = a + (b - a) / 2;

		if (img->starts[mid] <= addr)
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

int sprobe_macho_image__unnamed_between(struct sprobe_macho_image *img, uint64_t sym,
					uint64_t pc)
{
	uint32_t a;
	int err;

	if (!img || sym > pc)
		return -EINVAL;
	if (!img->sorted && img->nsyms && (err = build_index(img)) < 0)
		return err;
	if (!img->starts && img->fstarts && (err = build_fstarts(img)) < 0)
		return err;
	a = starts_above(img, pc - (uint64_t)img->slide);
	return a > 0 && img->starts[a - 1] > sym - (uint64_t)img->slide;
}

int sprobe_macho_image__symbolize(struct sprobe_macho_image *img, uint64_t pc,
				  const char **name, uint64_t *offset)
{
	uint64_t addr;
	uint32_t lo = 0, hi;
	int err;

	if (!img || !name || !offset)
		return -EINVAL;
	if (!sprobe_macho_image__contains(img, pc) || img->nsyms == 0)
		return -ENOENT;
	if (!img->sorted && (err = build_index(img)) < 0)
		return err;

	/* Last symbol with addr <= pc: binary search for the first one above. */
	addr = pc - (uint64_t)img->slide;
	hi = img->nsorted;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (img->sorted[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	/* A function start after the symbol and at or before pc means pc is in
	 * a function that has no name here (stripped): say so, do not lend it
	 * the previous function's name. */
	if (img->nstarts > 0) {
		uint32_t a = starts_above(img, addr);

		if (a > 0 && img->starts[a - 1] > img->sorted[lo - 1].addr)
			return -ENOENT;
	}
	*name = img->sorted[lo - 1].name;
	if ((*name)[0] == '_')
		(*name)++;	/* C symbols carry one leading underscore */
	*offset = addr - img->sorted[lo - 1].addr;
	return 0;
}

#ifdef __APPLE__
/*
 * The public module API of <stackprobe/symbolize.h>, implemented for macOS
 * over dyld's image list and the parser above. On Linux userspace/modules.c
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
#include <stdio.h>
#include <unistd.h>
#include <mach-o/dyld.h>

#include <stackprobe/symbolize.h>

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
#endif /* __APPLE__ */
