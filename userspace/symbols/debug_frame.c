/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An object's .debug_frame in .eh_frame form, for the unwinder of another
 * process (unwind.h, "Other processes"): Go binaries have no .eh_frame,
 * only .debug_frame (zlib-compressed, SHF_COMPRESSED), and libunwind's
 * remote table search reads .eh_frame-format CIEs and FDEs. The two
 * formats differ, for 32-bit DWARF, in two fields only: a CIE's id (0
 * here, 0xffffffff there) and an FDE's CIE pointer (the distance back
 * from the field to its CIE here, the CIE's section offset there); with
 * no augmentation, an FDE's initial location is an address-sized
 * absolute value in both, made a runtime address here (+ bias).
 *
 * Input is untrusted (a file): every read is bounds-checked; an entry
 * that does not parse ends the conversion (the FDEs before it stay). A
 * CIE with an augmentation or another version than 1 or 3, or 64-bit
 * DWARF, is not converted.
 *
 * Not async-signal-safe (allocates). Not thread-safe (the inventory's
 * rule).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/common/zlib_dl.h" /* zlib's names are macros from here on */
#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/symbols/modules_internal.h"

/* More than any real object (a Go binary: one FDE per function). */
#define DF_MAX_BYTES (256u << 20)

static uint8_t *section_bytes(Elf *elf, const char *want, size_t *len)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *n;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || strcmp(n, want) != 0 || !(d = elf_rawdata(scn, NULL)) || !d->d_buf)
			continue;
		if (!(sh.sh_flags & SHF_COMPRESSED)) {
			uint8_t *c = d->d_size && d->d_size < DF_MAX_BYTES ? malloc(d->d_size) : NULL;

			if (c) {
				memcpy(c, d->d_buf, d->d_size);
				*len = d->d_size;
			}
			return c;
		}
		Elf64_Chdr ch;

		if (d->d_size < sizeof(ch) || gelf_getclass(elf) != ELFCLASS64)
			return NULL;
		memcpy(&ch, d->d_buf, sizeof(ch));
		if (ch.ch_type != ELFCOMPRESS_ZLIB || !ch.ch_size || ch.ch_size > DF_MAX_BYTES)
			return NULL;
		uint8_t *out = malloc(ch.ch_size);
		uLongf got = (uLongf)ch.ch_size;

		if (!out)
			return NULL;
		if (uncompress(out, &got, (const Bytef *)d->d_buf + sizeof(ch),
			       (uLong)(d->d_size - sizeof(ch))) != Z_OK || got != ch.ch_size) {
			free(out);
			return NULL;
		}
		*len = got;
		return out;
	}
	return NULL;
}

struct df_ent {
	uint64_t start;
	uint32_t fde;
};

static int cmp_ent(const void *a, const void *b)
{
	const struct df_ent *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Is the CIE at off one this converter handles (version 1 or 3, no
 * augmentation)? */
static bool cie_ok(const uint8_t *b, size_t len, size_t off)
{
	uint32_t l, id;

	if (off + 10 > len)
		return false;
	memcpy(&l, b + off, 4);
	memcpy(&id, b + off + 4, 4);
	/* Converted already (CIEs come before their FDEs): id 0. */
	if ((id != 0xffffffffu && id != 0) || l < 6 || l > len - off - 4)
		return false;
	return (b[off + 8] == 1 || b[off + 8] == 3) && b[off + 9] == '\0';
}

int sprobe__debug_frame_eh(struct module *mod, uint64_t base, uint8_t **eh, size_t *eh_len,
			   int32_t **table, uint64_t *count)
{
	size_t len = 0, n = 0, cap = 0, off = 0;
	struct df_ent *v = NULL;
	uint8_t *b;

	if (!mod->st.obj_trusted || !mod->st.nfiles || !mod->st.files[0].elf ||
	    gelf_getclass(mod->st.files[0].elf) != ELFCLASS64)
		return -ENOENT;
	b = section_bytes(mod->st.files[0].elf, ".debug_frame", &len);
	if (!b)
		return -ENOENT;
	while (off + 8 <= len) {
		uint32_t l, id;

		memcpy(&l, b + off, 4);
		if (l == 0 || l == 0xffffffffu || l > len - off - 4 || l < 4)
			break; /* end, 64-bit DWARF, or garbage */
		memcpy(&id, b + off + 4, 4);
		if (id == 0xffffffffu) {
			id = 0; /* a CIE */
			memcpy(b + off + 4, &id, 4);
		} else {
			uint64_t start, range;

			/* An FDE: id is its CIE's offset; 8-byte location and
			 * range follow (ELFCLASS64, no augmentation). */
			if (l < 4 + 16 || !cie_ok(b, len, id) || id >= off)
				goto next;
			memcpy(&start, b + off + 8, 8);
			memcpy(&range, b + off + 16, 8);
			if (!range || start + mod->pub.bias < start)
				goto next;
			start += mod->pub.bias;
			memcpy(b + off + 8, &start, 8);
			id = (uint32_t)(off + 4 - id);
			memcpy(b + off + 4, &id, 4);
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 1024;
				struct df_ent *p = realloc(v, nc * sizeof(*p));

				if (!p)
					break;
				v = p;
				cap = nc;
			}
			v[n++] = (struct df_ent){ start, (uint32_t)off };
		}
next:
		off += 4 + (size_t)l;
	}
	if (!n) {
		free(v);
		free(b);
		return -ENOENT;
	}
	qsort(v, n, sizeof(*v), cmp_ent);
	*table = malloc(n * 2 * sizeof(**table));
	if (!*table) {
		free(v);
		free(b);
		return -ENOMEM;
	}
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t a = (int64_t)(v[i].start - base), f = (int64_t)v[i].fde;

		if (a < INT32_MIN || a > INT32_MAX || f > INT32_MAX)
			continue;
		if (w && (*table)[2 * (w - 1)] == (int32_t)a)
			continue; /* one FDE per start */
		(*table)[2 * w] = (int32_t)a;
		(*table)[2 * w + 1] = (int32_t)f;
		w++;
	}
	free(v);
	if (!w) {
		free(*table);
		*table = NULL;
		free(b);
		return -ENOENT;
	}
	*eh = b;
	*eh_len = len;
	*count = w;
	return 0;
}
