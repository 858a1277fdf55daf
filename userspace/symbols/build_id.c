/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * GNU build-ids: the note parser, the SHT_NOTE section search and the hex
 * spelling (build_id.h, symbolize.h).
 */
#include <errno.h>
#include <string.h>

#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/symbols/build_id.h"

#include <stackprobe/symbolize.h>

#define NT_GNU_BUILD_ID_ 3

uint32_t sprobe__parse_build_id(const uint8_t *p, size_t len, size_t align, uint8_t *out)
{
	size_t off = 0;

	if (align != 8)
		align = 4;
	while (off + 12 <= len) {
		uint32_t namesz, descsz, type;

		memcpy(&namesz, p + off, 4);
		memcpy(&descsz, p + off + 4, 4);
		memcpy(&type, p + off + 8, 4);
		size_t name_off = off + 12;
		size_t desc_off = name_off + ((namesz + align - 1) & ~(align - 1));
		size_t next = desc_off + ((descsz + align - 1) & ~(align - 1));

		if (namesz > len || descsz > len || desc_off > len || desc_off + descsz > len)
			return 0;
		if (type == NT_GNU_BUILD_ID_ && namesz == 4 &&
		    memcmp(p + name_off, "GNU", 4) == 0 && descsz > 0) {
			uint32_t n = descsz < SPROBE_BUILD_ID_MAX ? descsz : SPROBE_BUILD_ID_MAX;

			memcpy(out, p + desc_off, n);
			return n;
		}
		if (next <= off)
			return 0;
		off = next;
	}
	return 0;
}

uint32_t sprobe__elf_build_id(Elf *elf, uint8_t *out)
{
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;

	while ((scn = elf_nextscn(elf, scn))) {
		Elf_Data *d;
		uint32_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_rawdata(scn, NULL);
		if (d && d->d_buf &&
		    (n = sprobe__parse_build_id(d->d_buf, d->d_size, sh.sh_addralign, out)))
			return n;
	}
	return 0;
}

int sprobe_build_id__hex(const uint8_t *id, size_t len, char *buf, size_t buflen)
{
	static const char hex[] = "0123456789abcdef";

	if (!buf || (!id && len) || buflen < 2 * len + 1)
		return -ENOSPC;
	for (size_t i = 0; i < len; i++) {
		buf[2 * i] = hex[id[i] >> 4];
		buf[2 * i + 1] = hex[id[i] & 15];
	}
	buf[2 * len] = '\0';
	return (int)(2 * len);
}
