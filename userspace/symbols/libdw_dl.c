/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libdw through dlopen (see libdw_dl.h for the contract and why the shared
 * library does not link it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define SPROBE_LIBDW_DL_IMPL
#include "userspace/symbols/libdw_dl.h"
#include "userspace/common/dl_failed.h"

struct sprobe_libdw sprobe__libdw;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int state; /* 0 or -ENOSYS, set once */
static atomic_bool failed; /* dl_failed.h: state is -ENOSYS, read without loading */

static void load_once(void)
{
	struct sprobe_libdw t;
	/* Never closed: the table and the Dwarf handles point into it for
	 * the process's life. RTLD_LOCAL: its symbols do not join the
	 * program's namespace. */
	void *dl = dlopen(SPROBE_LIBDW_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		state = -ENOSYS;
		return;
	}
#define SPROBE_LIBDW_SYM(f)                         \
	if (!(*(void **)&t.f = dlsym(dl, #f))) {     \
		state = -ENOSYS;                     \
		return;                              \
	}
	SPROBE_LIBDW_FNS(SPROBE_LIBDW_SYM)
#undef SPROBE_LIBDW_SYM
	sprobe__libdw = t;
}

int sprobe__libdw_load(void)
{
	/* pthread_once orders the table's writes before every caller's reads. */
	pthread_once(&once, load_once);
	if (state)
		atomic_store(&failed, true);
	return state;
}

bool sprobe__libdw_failed(void)
{
	return atomic_load(&failed);
}
