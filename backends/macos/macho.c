/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Mach-O images in memory: __TEXT range, LC_UUID, LC_SYMTAB names. See
 * modules.h; the inventory of what dyld has loaded is modules.c.
 *
 * The Mach-O layouts below are the file format's, written with fixed-width
 * types under our own names so the parser builds on any host: the format is
 * stable and documented in <mach-o/loader.h> and <mach-o/nlist.h>, and the
 * parser is tested on Linux against dylibs that ld64.lld links
 * (tests/test_macho.c). Only the dyld inventory (modules.c) needs macOS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/macos/modules.h"

#define MACHO_MAGIC_64 0xfeedfacfu	/* MH_MAGIC_64, little-endian host */
#define MACHO_LC_SEGMENT_64 0x19u
#define MACHO_LC_SYMTAB 0x2u
#define MACHO_LC_UUID 0x1bu
#define MACHO_LC_FUNCTION_STARTS 0x26u
#define MACHO_N_STAB 0xe0u
#define MACHO_N_TYPE 0x0eu
#define MACHO_N_SECT 0x0eu

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
