/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libelf through dlopen (see libelf_dl.h for the contract and why the
 * shared library does not link it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define SPROBE_LIBELF_DL_IMPL
#include "userspace/symbols/libelf_dl.h"
#include "userspace/common/dl_failed.h"

struct sprobe_libelf sprobe__libelf;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int state; /* 0 or -ENOSYS, set once */
static atomic_bool failed; /* dl_failed.h: state is -ENOSYS, read without loading */

static void load_once(void)
{
	struct sprobe_libelf t;
	/* Never closed: the table and every Elf point into it for the
	 * process's life. RTLD_LOCAL: its symbols do not join the program's
	 * namespace (a program linked with -lelf has it there already, and
	 * dlopen returns that copy). */
	void *dl = dlopen(SPROBE_LIBELF_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		state = -ENOSYS;
		return;
	}
#define SPROBE_LIBELF_SYM(f)                        \
	if (!(*(void **)&t.f = dlsym(dl, #f))) {     \
		state = -ENOSYS;                     \
		return;                              \
	}
	SPROBE_LIBELF_FNS(SPROBE_LIBELF_SYM)
#undef SPROBE_LIBELF_SYM
	if (t.elf_version(EV_CURRENT) == EV_NONE) {
		state = -ENOSYS;
		return;
	}
	sprobe__libelf = t;
}

int sprobe__libelf_load(void)
{
	/* pthread_once orders the table's writes before every caller's reads. */
	pthread_once(&once, load_once);
	if (state)
		atomic_store(&failed, true);
	return state;
}

bool sprobe__libelf_failed(void)
{
	return atomic_load(&failed);
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
