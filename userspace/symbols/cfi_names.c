/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Function ranges from the CFI, for pcs no symbol covers (stripped
 * objects: every Debian binary without its -dbgsym package).
 *
 * The compiler emits one FDE (frame description entry) per function in
 * .eh_frame (a hot/cold split function has one per part, as it has two
 * symbols, "f" and "f.cold"), with the exact [pc_begin, pc_begin +
 * pc_range) of its code. .eh_frame is allocated, so strip keeps it. A pc
 * inside an FDE is therefore named after the function's start,
 * "<module>+0x<FDE start as ELF vaddr>" (the address `addr2line -e
 * <module>` and readelf --debug-dump=frames print): every pc of one
 * stripped function is one row of a report, not one row per address. No
 * FDE covers pc (hand-written assembly without CFI, a PLT without
 * ld-generated unwind info): no name, as before.
 *
 * The index is built from the object's ELF file (not from the mapped
 * .eh_frame_hdr the unwinder reads), so it works for any inventory: this
 * process, another one (`stackprobe dump`, the external tier) and a data
 * file's modules. It walks .eh_frame once per module, on the first pc no
 * symbol covers, into a sorted array; each lookup is a binary search, and
 * each FDE's name is formatted once, on its first lookup.
 *
 * Input is untrusted (a file that may be truncated or hostile): every read
 * is bounds-checked, an entry that does not parse ends the walk (the FDEs
 * read so far stay), and an encoding this file does not decode (indirect,
 * text-, data- or function-relative pc_begin) skips that FDE.
 *
 * Not async-signal-safe (allocates). Not thread-safe (the inventory's rule).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/symbols/modules_internal.h"

/* DWARF pointer encodings (DW_EH_PE_*, LSB Core spec, "Exception Frames"). */
#define PE_OMIT 0xff
#define PE_ABSPTR 0x00
#define PE_ULEB128 0x01
#define PE_UDATA2 0x02
#define PE_UDATA4 0x03
#define PE_UDATA8 0x04
#define PE_SLEB128 0x09
#define PE_SDATA2 0x0a
#define PE_SDATA4 0x0b
#define PE_SDATA8 0x0c
#define PE_PCREL 0x10
#define PE_ALIGNED 0x50

/* More FDEs than any real object has (libxul: ~200k): a hostile file
 * cannot make the index grow without end. */
#define FDE_MAX (1u << 22)

struct cur {
	const uint8_t *b;
	size_t size;		/* of the section */
	uint64_t addr;		/* its sh_addr: pcrel base */
	unsigned ptr;		/* 4 or 8 (ELF class) */
};

static int rd(const struct cur *c, size_t *off, void *out, size_t n)
{
	if (*off > c->size || c->size - *off < n)
		return -EBADMSG;
	memcpy(out, c->b + *off, n);
	*off += n;
	return 0;
}

static int rd_uleb(const struct cur *c, size_t *off, uint64_t *v)
{
	uint64_t r = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		uint8_t byte;

		if (rd(c, off, &byte, 1))
			return -EBADMSG;
		r |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EBADMSG;
}

static int rd_sleb(const struct cur *c, size_t *off, int64_t *v)
{
	uint64_t r = 0;
	unsigned shift = 0;
	uint8_t byte;

	do {
		if (shift >= 64 || rd(c, off, &byte, 1))
			return -EBADMSG;
		r |= (uint64_t)(byte & 0x7f) << shift;
		shift += 7;
	} while (byte & 0x80);
	if (shift < 64 && (byte & 0x40))
		r |= ~(uint64_t)0 << shift;
	*v = (int64_t)r;
	return 0;
}

/* An encoded pointer at *off. Returns 0, -EBADMSG (truncated, omitted)
 * or -ENOTSUP (an application this file does not decode; *off is still
 * moved past the value, so a caller can skip it). */
static int rd_encoded(const struct cur *c, size_t *off, uint8_t enc, uint64_t *v)
{
	uint64_t field = c->addr + *off;
	uint8_t app = enc & 0x70;
	int ret = 0;

	if (enc == PE_OMIT)
		return -EBADMSG;
	if (app == PE_ALIGNED) {
		*off = (*off + c->ptr - 1) / c->ptr * c->ptr;
		field = c->addr + *off;
	}
	switch (enc & 0x0f) {
	case PE_ABSPTR:
		if (c->ptr == 4) {
			uint32_t x = 0;

			ret = rd(c, off, &x, 4);
			*v = x;
		} else {
			ret = rd(c, off, v, 8);
		}
		break;
	case PE_ULEB128:
		ret = rd_uleb(c, off, v);
		break;
	case PE_SLEB128: {
		int64_t s = 0;

		ret = rd_sleb(c, off, &s);
		*v = (uint64_t)s;
		break;
	}
	case PE_UDATA2: {
		uint16_t x = 0;

		ret = rd(c, off, &x, 2);
		*v = x;
		break;
	}
	case PE_SDATA2: {
		int16_t x = 0;

		ret = rd(c, off, &x, 2);
		*v = (uint64_t)(int64_t)x;
		break;
	}
	case PE_UDATA4: {
		uint32_t x = 0;

		ret = rd(c, off, &x, 4);
		*v = x;
		break;
	}
	case PE_SDATA4: {
		int32_t x = 0;

		ret = rd(c, off, &x, 4);
		*v = (uint64_t)(int64_t)x;
		break;
	}
	case PE_UDATA8:
	case PE_SDATA8:
		ret = rd(c, off, v, 8);
		break;
	default:
		return -EBADMSG;
	}
	if (ret)
		return ret;
	if (enc & 0x80) /* indirect: the value is where the pointer is */
		return -ENOTSUP;
	if (app == PE_PCREL)
		*v += field;
	else if (app != 0 && app != PE_ALIGNED)
		return -ENOTSUP;
	if (c->ptr == 4)
		*v &= 0xffffffffu;
	return 0;
}

/* The FDE pointer encoding of the CIE at off (its 'R' augmentation;
 * absptr without one). */
static int cie_fde_encoding(const struct cur *c, size_t off, uint8_t *enc)
{
	uint32_t len32, id;
	uint64_t end, u;
	int64_t s;
	uint8_t version, e;
	const char *aug;
	size_t auglen;

	if (rd(c, &off, &len32, 4) || len32 == 0)
		return -EBADMSG;
	if (len32 == 0xffffffffu) {
		uint64_t len64;

		if (rd(c, &off, &len64, 8) || len64 > c->size)
			return -EBADMSG;
		end = off + len64;
	} else {
		end = off + len32;
	}
	if (end > c->size || rd(c, &off, &id, 4) || id != 0 || rd(c, &off, &version, 1))
		return -EBADMSG;
	aug = (const char *)c->b + off;
	auglen = strnlen(aug, (size_t)end - off);
	if (off + auglen >= end)
		return -EBADMSG;
	off += auglen + 1;
	*enc = PE_ABSPTR;
	if (strstr(aug, "eh")) /* GCC 2.x's eh_ptr */
		off += c->ptr;
	if (rd_uleb(c, &off, &u) || rd_sleb(c, &off, &s))
		return -EBADMSG;
	if (version == 1) {
		if (rd(c, &off, &e, 1))
			return -EBADMSG;
	} else if (rd_uleb(c, &off, &u)) {
		return -EBADMSG;
	}
	if (aug[0] != 'z')
		return 0;
	if (rd_uleb(c, &off, &u))
		return -EBADMSG;
	for (const char *a = aug + 1; *a; a++) {
		switch (*a) {
		case 'R':
			return rd(c, &off, enc, 1);
		case 'L':
			if (rd(c, &off, &e, 1))
				return -EBADMSG;
			break;
		case 'P': {
			uint64_t pers;
			int r;

			if (rd(c, &off, &e, 1))
				return -EBADMSG;
			r = rd_encoded(c, &off, e, &pers);
			if (r == -EBADMSG)
				return r;
			break;
		}
		case 'S': /* signal frame */
		case 'B': /* aarch64 BTI */
		case 'G': /* MTE tagged frame */
			break;
		default: /* unknown: what follows cannot be found */
			return -ENOTSUP;
		}
	}
	return 0;
}

struct fde_span {
	uint64_t start, end;
	uint64_t fde;		/* ELF vaddr of the FDE (its length field) */
};

static int cmp_span(const void *a, const void *b)
{
	const struct fde_span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->end < y->end) - (x->end > y->end); /* the longest first */
}

/* The .eh_frame section of elf, or NULL (absent, NOBITS in a debug file,
 * another byte order than ours). */
static Elf_Data *eh_frame(Elf *elf, GElf_Shdr *sh, unsigned *ptr)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	const char *ident = elf_getident(elf, NULL);
	const uint16_t one = 1;
	bool host_le = *(const uint8_t *)&one == 1;

	if (!ident || ident[EI_DATA] != (host_le ? ELFDATA2LSB : ELFDATA2MSB))
		return NULL;
	*ptr = ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;

		if (!gelf_getshdr(scn, sh) || sh->sh_type == SHT_NOBITS)
			continue;
		n = elf_strptr(elf, shstrndx, sh->sh_name);
		if (n && strcmp(n, ".eh_frame") == 0)
			return elf_rawdata(scn, NULL);
	}
	return NULL;
}

/* Walk .eh_frame into fi (sorted, overlaps resolved to the first). */
static int build(struct fde_index *fi, Elf *elf)
{
	GElf_Shdr sh;
	struct cur c;
	Elf_Data *d = eh_frame(elf, &sh, &c.ptr);
	struct fde_span *v = NULL;
	size_t n = 0, cap = 0, off = 0;
	size_t last_cie = SIZE_MAX;
	uint8_t last_enc = 0;
	int last_ret = 0;

	if (!d || !d->d_buf || !d->d_size)
		return -ENOENT;
	c.b = d->d_buf;
	c.size = d->d_size;
	c.addr = sh.sh_addr;
	while (off + 4 <= c.size && n < FDE_MAX) {
		size_t id_off, end, entry = off;
		uint32_t len32, id;
		uint64_t len;

		if (rd(&c, &off, &len32, 4))
			break;
		if (len32 == 0) /* terminator */
			break;
		len = len32;
		if (len32 == 0xffffffffu && rd(&c, &off, &len, 8))
			break;
		if (len > c.size - off || len < 4)
			break;
		end = off + (size_t)len;
		id_off = off;
		if (rd(&c, &off, &id, 4))
			break;
		if (id != 0) { /* an FDE; id is the distance back to its CIE */
			uint64_t begin, range;
			int r;

			if (id > id_off)
				goto next;
			if (id_off - id != last_cie) {
				last_cie = id_off - id;
				last_ret = cie_fde_encoding(&c, last_cie, &last_enc);
			}
			if (last_ret)
				goto next;
			r = rd_encoded(&c, &off, last_enc, &begin);
			if (r || off > end)
				goto next;
			r = rd_encoded(&c, &off, last_enc & 0x0f, &range);
			if (r || off > end || range == 0 || begin == 0 || begin + range < begin)
				goto next;
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 256;
				struct fde_span *p = realloc(v, nc * sizeof(*p));

				if (!p) {
					free(v);
					return -ENOMEM;
				}
				v = p;
				cap = nc;
			}
			v[n++] = (struct fde_span){ begin, begin + range, c.addr + entry };
		}
next:
		off = end;
	}
	if (!n) {
		free(v);
		return -ENOENT;
	}
	qsort(v, n, sizeof(*v), cmp_span);
	/* Disjoint ranges, so a pc has one answer: an FDE that starts inside
	 * the one before it (never in a sane object) is dropped. */
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		if (w && v[i].start < v[w - 1].end)
			continue;
		v[w++] = v[i];
	}
	fi->start = malloc(w * sizeof(*fi->start));
	fi->end = malloc(w * sizeof(*fi->end));
	fi->names = calloc(w, sizeof(*fi->names));
	fi->fde = malloc(w * sizeof(*fi->fde));
	if (!fi->start || !fi->end || !fi->names || !fi->fde) {
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < w; i++) {
		fi->start[i] = v[i].start;
		fi->end[i] = v[i].end;
		fi->fde[i] = v[i].fde;
	}
	fi->eh_frame = sh.sh_addr;
	fi->n = w;
	free(v);
	return 0;
}

void sprobe__fde_index_free(struct fde_index *fi)
{
	for (size_t i = 0; fi->names && i < fi->n; i++)
		free(fi->names[i]);
	free(fi->names);
	free(fi->start);
	free(fi->end);
	free(fi->fde);
	memset(fi, 0, sizeof(*fi));
}

/* Build mod's index on first use. 0 or the remembered -errno. */
static int index_ready(struct module *mod, Elf *elf)
{
	struct fde_index *fi = &mod->st.fde;

	if (fi->state == 0) {
		int ret = build(fi, elf);

		if (ret) {
			sprobe__fde_index_free(fi);
			fi->state = ret;
		} else {
			fi->state = 1;
		}
	}
	return fi->state == 1 ? 0 : fi->state;
}

int sprobe__fde_table(struct module *mod, const struct fde_index **out)
{
	int ret;

	if (!mod->st.obj_trusted || !mod->st.nfiles || !mod->st.files[0].elf)
		return -ENOENT;
	ret = index_ready(mod, mod->st.files[0].elf);
	if (ret)
		return ret;
	*out = &mod->st.fde;
	return 0;
}

int sprobe__fde_name(struct module *mod, Elf *elf, uint64_t vaddr, uint64_t *start,
		     uint64_t *end, const char **name)
{
	struct fde_index *fi = &mod->st.fde;
	int ret = index_ready(mod, elf);

	if (ret)
		return ret;
	size_t lo = 0, hi = fi->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (fi->start[mid] <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || vaddr >= fi->end[lo - 1])
		return -ENOENT;
	lo--;
	if (!fi->names[lo]) {
		char buf[512];

		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, mod->pub.name, fi->start[lo]);
		fi->names[lo] = strdup(buf);
		if (!fi->names[lo])
			return -ENOMEM;
	}
	*start = fi->start[lo];
	*end = fi->end[lo];
	*name = fi->names[lo];
	return 0;
}
