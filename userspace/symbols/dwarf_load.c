/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The line-and-inline DWARF loader (contract in dwarf_load.h).
 *
 * The image: Elf64_Ehdr, each kept section's bytes (16-aligned), a
 * .shstrtab, then the section headers; one anonymous private mapping in
 * transparent huge pages where the kernel gives them (map_image();
 * measured in docs/PERFORMANCE.md). Section headers keep the source's type, flags
 * less SHF_COMPRESSED and SHF_ALLOC, and entsize, so libdw recognises
 * them by name as it does in the file.
 */
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <gelf.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/symbols/libdw_dl.h" /* libdw's names read its table from here on */
#include "userspace/common/dl_table.h"
#include "userspace/symbols/build_id.h"
#include "userspace/symbols/dwarf_load.h"
#include "userspace/symbols/dwarf_cache.h"
#include <stackprobe/symbolize.h>

/* The sections libdw 0.188 reads for lines, scopes, ranges and names (see
 * dwarf_load.h); libdw takes the first of each name, so do we. */
static const char *const kept[] = {
	".debug_info",	   ".debug_abbrev", ".debug_aranges",	   ".debug_line",
	".debug_line_str", ".debug_str",    ".debug_str_offsets", ".debug_addr",
	".debug_ranges",   ".debug_rnglists", ".debug_types",	   ".gnu_debugaltlink",
};
#define NKEPT (sizeof(kept) / sizeof(kept[0]))

/* A compressed section cannot inflate past ~1032x (deflate's limit):
 * a larger ch_size is a damaged header, not a mapping to make. */
#define INFLATE_RATIO_MAX 1040u
#define SECTION_BYTES_MAX (1ull << 32)

/* The layout of an image (kept[], the order, the headers written below):
 * part of the cache's key (dwarf_cache.h), so change it with the layout. */
#define IMAGE_VERSION 1u

struct sprobe_dwarf_image {
	void *map;
	size_t map_len;
	Elf *elf;
	Dwarf *dw;
	bool cached;	/* map is a cache file's (dwarf_cache.h) */
};

struct kept_scn {
	Elf_Scn *scn;
	GElf_Shdr sh;
	uint64_t size;	/* bytes in the image (ch_size when compressed) */
	uint64_t off;	/* in the image */
	bool zlib;
};

/* libdeflate, dlopen'd on the first image: a profiled program whose agent
 * never reads DWARF (under `record`) maps nothing more (~76 KB of RSS
 * linked), and a machine without libdeflate0 keeps libdw's loading. Never
 * closed: the functions stay valid for the process. */
static struct {
	pthread_once_t once;
	bool ok;
	struct libdeflate_decompressor *(*alloc)(void);
	void (*free)(struct libdeflate_decompressor *);
	enum libdeflate_result (*zlib)(struct libdeflate_decompressor *, const void *, size_t,
				       void *, size_t, size_t *);
} inflater = { .once = PTHREAD_ONCE_INIT };

static void inflater_open(void)
{
	void *dl = sprobe__dl_open("libdeflate.so.0", RTLD_LAZY | RTLD_LOCAL);

	if (!dl)
		return;
	*(void **)&inflater.alloc = dlsym(dl, "libdeflate_alloc_decompressor");
	*(void **)&inflater.free = dlsym(dl, "libdeflate_free_decompressor");
	*(void **)&inflater.zlib = dlsym(dl, "libdeflate_zlib_decompress");
	inflater.ok = inflater.alloc && inflater.free && inflater.zlib;
	if (!inflater.ok)
		dlclose(dl);
}

static bool is_debug_name(const char *n)
{
	return strncmp(n, ".debug_", 7) == 0 || strncmp(n, ".zdebug", 7) == 0 ||
	       strncmp(n, ".gnu.debuglto_", 14) == 0 || strcmp(n, ".gnu_debugaltlink") == 0;
}

/* Which kept[] n is, or -1; -ENOTSUP for a debug section of a kind libdw
 * would read differently (GNU-compressed, split, LTO). */
static int classify(const char *n)
{
	size_t len = strlen(n);

	if (strncmp(n, ".zdebug", 7) == 0 || strncmp(n, ".gnu.debuglto_", 14) == 0 ||
	    (len > 4 && strcmp(n + len - 4, ".dwo") == 0 && strncmp(n, ".debug_", 7) == 0))
		return -ENOTSUP;
	for (size_t i = 0; i < NKEPT; i++)
		if (strcmp(n, kept[i]) == 0)
			return (int)i;
	return -1;
}

static int pick_sections(Elf *elf, struct kept_scn *ks, bool *any_zlib)
{
	size_t shstrndx, file_size = 0;
	Elf_Scn *scn = NULL;

	*any_zlib = false;
	if (!elf_rawfile(elf, &file_size) || !file_size)
		return -EILSEQ;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -EILSEQ;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		GElf_Shdr sh;
		const char *n;
		int k;

		if (!gelf_getshdr(scn, &sh) || !(n = elf_strptr(elf, shstrndx, sh.sh_name)))
			return -EILSEQ;
		if (!is_debug_name(n))
			continue;
		if (sh.sh_flags & SHF_GROUP)
			return -ENOTSUP;
		k = classify(n);
		if (k < 0) {
			if (k == -ENOTSUP)
				return k;
			continue; /* a section lookups never read: not inflated */
		}
		if (sh.sh_type == SHT_NOBITS || ks[k].scn)
			continue; /* libdw ignores both */
		ks[k].scn = scn;
		ks[k].sh = sh;
		/* Bounded before the layout sums them (12 sections of at most
		 * 4 GiB cannot wrap a uint64_t), and within the file: fill()
		 * copies exactly this many bytes of it. */
		if (sh.sh_size > SECTION_BYTES_MAX || sh.sh_offset > file_size ||
		    sh.sh_size > file_size - sh.sh_offset)
			return -EILSEQ;
		ks[k].size = sh.sh_size;
		if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;

			if (!gelf_getchdr(scn, &ch))
				return -EILSEQ;
			if (ch.ch_type != ELFCOMPRESS_ZLIB)
				return -ENOTSUP;
			if (ch.ch_size > SECTION_BYTES_MAX ||
			    ch.ch_size / INFLATE_RATIO_MAX > sh.sh_size)
				return -EILSEQ;
			ks[k].size = ch.ch_size;
			ks[k].zlib = true;
			*any_zlib = true;
		}
	}
	return 0;
}

/* Copy or inflate section k's bytes to dst (exactly ks->size of them). */
static int fill(struct libdeflate_decompressor *dc, const struct kept_scn *ks, uint8_t *dst)
{
	Elf_Data *raw = elf_rawdata(ks->scn, NULL);

	if (!raw || (raw->d_size && !raw->d_buf) || raw->d_size != ks->sh.sh_size)
		return -EILSEQ;
	if (!ks->zlib) {
		if (ks->size)
			memcpy(dst, raw->d_buf, ks->size);
		return 0;
	}
	if (raw->d_size < sizeof(Elf64_Chdr))
		return -EILSEQ;
	/* A NULL actual size: anything but exactly ch_size bytes fails. */
	if (inflater.zlib(dc, (const uint8_t *)raw->d_buf + sizeof(Elf64_Chdr),
			  raw->d_size - sizeof(Elf64_Chdr), dst, ks->size,
			  NULL) != LIBDEFLATE_SUCCESS)
		return -EILSEQ;
	return 0;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* len bytes of zeroed private memory for the image, or NULL. From 2 MiB
 * up: started on a 2 MiB boundary with MADV_HUGEPAGE, so the inflater
 * fills transparent huge pages (a few faults instead of one per 4 KiB
 * page; the tail past the last whole 2 MiB stays in small pages, so
 * nothing is rounded up). Below: populated when mapped. Either way a
 * kernel that refuses the advice just gives small pages. */
static void *map_image(size_t len)
{
	const size_t huge = 2u << 20, pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *raw, *a;
	size_t plen = (len + pg - 1) & ~(pg - 1);

	if (len < huge) {
		raw = mmap(NULL, len, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		return raw == MAP_FAILED ? NULL : raw;
	}
	raw = mmap(NULL, plen + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
	if (a > raw)
		munmap(raw, (size_t)(a - raw));
	if (raw + plen + huge > a + plen)
		munmap(a + plen, (size_t)(raw + plen + huge - (a + plen)));
	(void)madvise(a, plen, MADV_HUGEPAGE);
	return a;
}

/* The cache's key for elf: its GNU build-id (0: none, no caching) and the
 * size of its file. */
static uint32_t cache_key(Elf *elf, uint8_t *id, uint64_t *src_size)
{
	size_t n = 0;

	if (!elf_rawfile(elf, &n) || !n)
		return 0;
	*src_size = n;
	return sprobe__elf_build_id(elf, id);
}

/* The image of (id, src_size) from the cache, opened, or NULL. One that
 * libdw cannot open is not used: the caller builds it again, and stores
 * the new one over it. */
static struct sprobe_dwarf_image *from_cache(const uint8_t *id, uint32_t id_len,
					     uint64_t src_size)
{
	struct sprobe_dwarf_image *img;
	void *m;
	size_t len, off;

	if (sprobe_dwarf_cache__get(id, id_len, src_size, IMAGE_VERSION, &m, &len, &off) != 0)
		return NULL;
	img = calloc(1, sizeof(*img));
	if (!img) {
		munmap(m, len);
		return NULL;
	}
	img->map = m;
	img->map_len = len;
	img->cached = true;
	img->elf = elf_memory((char *)m + off, len - off);
	if (img->elf)
		img->dw = dwarf_begin_elf(img->elf, DWARF_C_READ, NULL);
	if (!img->dw) {
		sprobe_dwarf_image__free(img);
		return NULL;
	}
	return img;
}

int sprobe_dwarf_image__open(Elf *elf, struct sprobe_dwarf_image **out)
{
	uint8_t id[SPROBE_BUILD_ID_MAX];
	uint32_t id_len = 0;
	uint64_t src_size = 0;
	struct kept_scn ks[NKEPT];
	struct sprobe_dwarf_image *img;
	struct libdeflate_decompressor *dc;
	GElf_Ehdr eh;
	bool any_zlib;
	unsigned nsec = 0;
	uint64_t off, strtab_off, strtab_len = 1, shoff, total;
	int err;

	if (!elf || !out)
		return -EINVAL;
	*out = NULL;
	/* libelf and libdw are reached through their tables (libelf_dl.h,
	 * libdw_dl.h): an Elf handle means libelf is there; libdw may not be. */
	if (sprobe__libelf_load() != 0 || sprobe__libdw_load() != 0)
		return -ENOSYS;
	if (!gelf_getehdr(elf, &eh))
		return -EILSEQ;
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != (BYTE_ORDER == LITTLE_ENDIAN ? ELFDATA2LSB : ELFDATA2MSB) ||
	    (eh.e_type != ET_DYN && eh.e_type != ET_EXEC))
		return -ENOTSUP;
	memset(ks, 0, sizeof(ks));
	err = pick_sections(elf, ks, &any_zlib);
	if (err)
		return err;
	if (!any_zlib)
		return -ENOTSUP;
	if (sprobe_dwarf_cache__enabled() && (id_len = cache_key(elf, id, &src_size)) &&
	    (img = from_cache(id, id_len, src_size))) {
		*out = img;
		return 0;
	}
	if (pthread_once(&inflater.once, inflater_open) != 0 || !inflater.ok)
		return -ENOTSUP;

	off = sizeof(Elf64_Ehdr);
	for (size_t i = 0; i < NKEPT; i++) {
		if (!ks[i].scn)
			continue;
		off = align_up(off, 16);
		ks[i].off = off;
		off += ks[i].size;
		strtab_len += strlen(kept[i]) + 1;
		nsec++;
	}
	strtab_len += sizeof(".shstrtab");
	strtab_off = off;
	shoff = align_up(strtab_off + strtab_len, 8);
	total = shoff + (uint64_t)(nsec + 2) * sizeof(Elf64_Shdr);

	img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	img->map_len = (size_t)total;
	img->map = map_image(img->map_len);
	if (!img->map) {
		free(img);
		return -ENOMEM;
	}
	dc = inflater.alloc();
	if (!dc) {
		err = -ENOMEM;
		goto fail;
	}

	uint8_t *base = img->map;
	Elf64_Ehdr *e = (Elf64_Ehdr *)base;
	Elf64_Shdr *sh = (Elf64_Shdr *)(base + shoff);
	char *strtab = (char *)base + strtab_off;
	size_t spos = 1;
	unsigned idx = 1;

	for (size_t i = 0; i < NKEPT && !err; i++) {
		if (!ks[i].scn)
			continue;
		err = fill(dc, &ks[i], base + ks[i].off);
		sh[idx] = (Elf64_Shdr){
			.sh_name = (Elf64_Word)spos,
			.sh_type = ks[i].sh.sh_type,
			.sh_flags = ks[i].sh.sh_flags & ~(uint64_t)(SHF_COMPRESSED | SHF_ALLOC),
			.sh_offset = ks[i].off,
			.sh_size = ks[i].size,
			.sh_addralign = 1,
			.sh_entsize = ks[i].sh.sh_entsize,
		};
		memcpy(strtab + spos, kept[i], strlen(kept[i]) + 1);
		spos += strlen(kept[i]) + 1;
		idx++;
	}
	inflater.free(dc);
	if (err)
		goto fail;
	sh[idx] = (Elf64_Shdr){
		.sh_name = (Elf64_Word)spos,
		.sh_type = SHT_STRTAB,
		.sh_offset = strtab_off,
		.sh_size = strtab_len,
		.sh_addralign = 1,
	};
	memcpy(strtab + spos, ".shstrtab", sizeof(".shstrtab"));
	memcpy(e->e_ident, eh.e_ident, EI_NIDENT);
	e->e_type = eh.e_type;
	e->e_machine = eh.e_machine;
	e->e_version = EV_CURRENT;
	e->e_shoff = shoff;
	e->e_ehsize = sizeof(Elf64_Ehdr);
	e->e_shentsize = sizeof(Elf64_Shdr);
	e->e_shnum = (Elf64_Half)(idx + 1);
	e->e_shstrndx = (Elf64_Half)idx;

	img->elf = elf_memory((char *)base, img->map_len);
	if (!img->elf) {
		err = -EILSEQ;
		goto fail;
	}
	img->dw = dwarf_begin_elf(img->elf, DWARF_C_READ, NULL);
	if (!img->dw) {
		err = -ENOENT;
		goto fail;
	}
	if (id_len) /* best effort: a failure only means building it next time */
		(void)sprobe_dwarf_cache__put(id, id_len, src_size, IMAGE_VERSION, img->map,
					      img->map_len);
	*out = img;
	return 0;
fail:
	sprobe_dwarf_image__free(img);
	return err;
}

Dwarf *sprobe_dwarf_image__dwarf(const struct sprobe_dwarf_image *img)
{
	return img ? img->dw : NULL;
}

bool sprobe_dwarf_image__cached(const struct sprobe_dwarf_image *img)
{
	return img && img->cached;
}

size_t sprobe_dwarf_image__bytes(const struct sprobe_dwarf_image *img)
{
	return img ? img->map_len : 0;
}

void sprobe_dwarf_image__free(struct sprobe_dwarf_image *img)
{
	if (!img)
		return;
	if (img->dw)
		dwarf_end(img->dw);
	if (img->elf)
		elf_end(img->elf);
	if (img->map)
		munmap(img->map, img->map_len);
	free(img);
}
