/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libunwind through dlopen (see libunwind_dl.h for the contract and why
 * the shared library does not link it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define SPROBE_LIBUNWIND_DL_IMPL
#include "userspace/unwind/unwind_internal.h"
#include "userspace/common/dl_failed.h"

struct sprobe_libunwind sprobe__libunwind;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int state; /* 0 or -ENOSYS, set once */
static atomic_bool failed; /* dl_failed.h: state is -ENOSYS, read without loading */

#define SPROBE_STR2(x) #x
#define SPROBE_STR(x) SPROBE_STR2(x)

static void load_once(void)
{
	struct sprobe_libunwind t;
	/* Never closed: the table and the address spaces point into it for
	 * the process's life. RTLD_LOCAL: its symbols do not join the
	 * program's namespace. */
	void *dl = dlopen(SPROBE_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		state = -ENOSYS;
		return;
	}
	/* f is expanded before it is stringized: the target's name. */
#define SPROBE_LIBUNWIND_SYM(f)                          \
	if (!(*(void **)&t.f = dlsym(dl, SPROBE_STR(f)))) { \
		state = -ENOSYS;                          \
		return;                                   \
	}
	SPROBE_LIBUNWIND_FNS(SPROBE_LIBUNWIND_SYM)
#undef SPROBE_LIBUNWIND_SYM
	sprobe__libunwind = t;
}

int sprobe__libunwind_load(void)
{
	/* pthread_once orders the table's writes before every caller's reads. */
	pthread_once(&once, load_once);
	if (state)
		atomic_store(&failed, true);
	return state;
}

bool sprobe__libunwind_failed(void)
{
	return atomic_load(&failed);
}
