/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * An object's ELF file opened, and its separate debug file found (see
 * debug_file.h; symbolize.h for the search order). Not async-signal-safe.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "userspace/common/zlib_dl.h" /* zlib's names are macros from here on */
#include "userspace/symbols/libelf_dl.h" /* libelf's names are macros from here on */
#include "userspace/common/fds.h"
#include "userspace/symbols/build_id.h"
#include "userspace/symbols/debug_file.h"
#include "userspace/symbols/debuginfod.h"

/* Open path as an ELF file. Returns 0 and fills f, or -errno. */
int sprobe__elf_open(const char *path, struct elf_file *f)
{
	int h = sprobe_fd__open_file(path);
	int fd = sprobe_fd__get(h);

	f->elf = NULL;
	f->from_file = false;
	if (fd < 0) {
		sprobe_fd__close(h);
		return fd;
	}
	f->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	/* ELF_C_FDREAD: a mapped file needs the descriptor no more; one
	 * libelf could not map is read in whole. Either way it can go. */
	if (!f->elf || elf_kind(f->elf) != ELF_K_ELF || elf_cntl(f->elf, ELF_C_FDREAD) != 0) {
		if (f->elf)
			elf_end(f->elf);
		f->elf = NULL;
		sprobe_fd__done(h);
		return -ENOEXEC;
	}
	sprobe_fd__done(h);
	f->from_file = true;
	return 0;
}

void sprobe__elf_close(struct elf_file *f)
{
	if (f->elf)
		elf_end(f->elf);
	f->elf = NULL;
	f->from_file = false;
}

/* The first section of type type (or named name if name != NULL). */
static Elf_Scn *find_section(Elf *elf, Elf64_Word type, const char *name, GElf_Shdr *out)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, out))
			continue;
		if (out->sh_type != type)
			continue;
		if (name) {
			const char *n = elf_strptr(elf, shstrndx, out->sh_name);

			if (!n || strcmp(n, name) != 0)
				continue;
		}
		return scn;
	}
	return NULL;
}

bool sprobe__elf_has_symbols(Elf *elf, Elf64_Word type)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(elf, type, NULL, &sh);

	return scn && sh.sh_size >= 2 * (sh.sh_entsize ? sh.sh_entsize : 1);
}

bool sprobe__same_build_id(Elf *elf, const struct sprobe_module *mod)
{
	uint8_t id[SPROBE_BUILD_ID_MAX];
	uint32_t n = sprobe__elf_build_id(elf, id);

	return n == mod->build_id_len && memcmp(id, mod->build_id, n) == 0;
}

/* <root>/.build-id/ab/cdef....debug, checked against the module's id. */
int sprobe__debug_by_build_id(struct sprobe_modules *m, const struct sprobe_module *mod,
			      struct elf_file *f)
{
	char hex[2 * SPROBE_BUILD_ID_MAX + 1], path[PATH_MAX];

	if (mod->build_id_len < 2 ||
	    sprobe_build_id__hex(mod->build_id, mod->build_id_len, hex, sizeof(hex)) < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/.build-id/%.2s/%s.debug", m->debug_root, hex, hex + 2);
	if (sprobe__elf_open(path, f) != 0)
		return -ENOENT;
	if (!sprobe__same_build_id(f->elf, mod)) {
		sprobe__elf_close(f);
		return -ENOENT;
	}
	return 0;
}

/* The debug file from a debuginfod server (debuginfod.h), build-id
 * checked: a server, or its cache, could hand back another file. */
int sprobe__debug_by_debuginfod(struct sprobe_modules *m, const struct sprobe_module *mod,
				struct elf_file *f)
{
	char *path = NULL;
	int ret;

	if (!m->debuginfod || mod->build_id_len < 2)
		return -ENOENT;
	ret = sprobe__debuginfod_find(mod->build_id, mod->build_id_len, &path);
	if (ret)
		return ret;
	ret = sprobe__elf_open(path, f);
	free(path);
	if (ret)
		return -ENOENT;
	if (!sprobe__same_build_id(f->elf, mod) || !sprobe__elf_has_symbols(f->elf, SHT_SYMTAB)) {
		sprobe__elf_close(f);
		return -ENOENT;
	}
	return 0;
}

/* CRC32 of the whole file f was read from (.gnu_debuglink's check). */
static int file_crc32(const struct elf_file *f, uint32_t *crc)
{
	size_t size = 0;
	const char *b = elf_rawfile(f->elf, &size);
	uLong c = crc32(0L, Z_NULL, 0);

	if (!b && size)
		return -EIO;
	while (size) {
		uInt chunk = size > (1u << 30) ? (1u << 30) : (uInt)size;

		c = crc32(c, (const Bytef *)b, chunk);
		b += chunk;
		size -= chunk;
	}
	*crc = (uint32_t)c;
	return 0;
}

/* .gnu_debuglink: NAME next to the object, in its .debug/, or under
 * <root>/<dir of the object>; the CRC must match. */
int sprobe__debug_by_link(struct sprobe_modules *m, struct module *mod, Elf *elf,
			  struct elf_file *f)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(elf, SHT_PROGBITS, ".gnu_debuglink", &sh);
	Elf_Data *d;
	char dir[PATH_MAX], ldir[PATH_MAX], cand[3][PATH_MAX * 2];
	uint32_t want;

	if (!scn || !(d = elf_getdata(scn, NULL)) || !d->d_buf || d->d_size < 8)
		return -ENOENT;
	const char *name = d->d_buf;
	size_t nlen = strnlen(name, d->d_size);

	if (nlen == 0 || nlen == d->d_size || strchr(name, '/'))
		return -ENOENT;
	size_t crc_off = (nlen + 4) & ~(size_t)3;

	if (crc_off + 4 > d->d_size)
		return -ENOENT;
	memcpy(&want, (const char *)d->d_buf + crc_off, 4);

	snprintf(dir, sizeof(dir), "%s", mod->open_path);
	char *slash = strrchr(dir, '/');

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		*slash = '\0';
	snprintf(ldir, sizeof(ldir), "%s", mod->path);
	slash = strrchr(ldir, '/');
	if (!slash)
		ldir[0] = '\0';
	else
		*slash = '\0';
	snprintf(cand[0], sizeof(cand[0]), "%s/%s", dir, name);
	snprintf(cand[1], sizeof(cand[1]), "%s/.debug/%s", dir, name);
	snprintf(cand[2], sizeof(cand[2]), "%s%s/%s", m->debug_root, ldir, name);
	for (int i = 0; i < 3; i++) {
		uint32_t crc = 0;

		if (sprobe__elf_open(cand[i], f) != 0)
			continue;
		if (file_crc32(f, &crc) == 0 && crc == want)
			return 0;
		sprobe__elf_close(f);
	}
	return -ENOENT;
}
