/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libelf through dlopen (see libelf_dl.h for the contract and why the
 * shared library does not link it; the loader is userspace/common/dl_table.h).
 */
#include <errno.h>

#define SPROBE_LIBELF_DL_IMPL
#include "userspace/symbols/libelf_dl.h"
#include "userspace/common/dl_failed.h"
#include "userspace/common/dl_table.h"

struct sprobe_libelf sprobe__libelf;

/* libelf works only once a working version is set. */
static int set_version(void)
{
	return sprobe__libelf.elf_version(EV_CURRENT) == EV_NONE ? -ENOSYS : 0;
}

static const char *const names[] = { SPROBE_LIBELF_FNS(SPROBE_DL_NAME) };
_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) == sizeof(sprobe__libelf),
	       "one pointer per name");
static struct sprobe_dl dl = SPROBE_DL_INIT(SPROBE_LIBELF_SONAME, names, &sprobe__libelf,
					    set_version);

int sprobe__libelf_load(void)
{
	return sprobe__dl_load(&dl, NULL);
}

bool sprobe__libelf_failed(void)
{
	return sprobe__dl_failed(&dl);
}

Elf *sprobe__elf_begin(int fd, Elf_Cmd cmd, Elf *ref)
{
	if (sprobe__libelf_load() != 0) {
		errno = ENOSYS;
		return NULL;
	}
	return sprobe__libelf.elf_begin(fd, cmd, ref);
}

Elf *sprobe__elf_memory(char *image, size_t size)
{
	if (sprobe__libelf_load() != 0) {
		errno = ENOSYS;
		return NULL;
	}
	return sprobe__libelf.elf_memory(image, size);
}

unsigned int sprobe__elf_version(unsigned int version)
{
	return version == EV_CURRENT ? EV_CURRENT : EV_NONE;
}

int sprobe__elf_end(Elf *elf)
{
	return elf ? sprobe__libelf.elf_end(elf) : 0;
}

Elf_Kind sprobe__elf_kind(Elf *elf)
{
	return elf ? sprobe__libelf.elf_kind(elf) : ELF_K_NONE;
}
