/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libbpf through dlopen (see libbpf_dl.h for the contract and why the
 * shared library does not link it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#define SPROBE_LIBBPF_DL_IMPL
#include "userspace/pause/libbpf_dl.h"

struct sprobe_libbpf sprobe__libbpf;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int state;		/* 0 or -ENOSYS, set once */
static char state_why[256];

static void load_once(void)
{
	struct sprobe_libbpf t;
	/* Never closed: the table points into it for the process's life.
	 * RTLD_LOCAL: its symbols do not join the program's namespace. */
	void *dl = dlopen(SPROBE_LIBBPF_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		snprintf(state_why, sizeof(state_why), "%s", dlerror());
		state = -ENOSYS;
		return;
	}
#define SPROBE_LIBBPF_SYM(f)                              \
	if (!(*(void **)&t.f = dlsym(dl, #f))) {           \
		snprintf(state_why, sizeof(state_why), "%s", \
			 dlerror());                       \
		state = -ENOSYS;                           \
		return;                                    \
	}
	SPROBE_LIBBPF_FNS(SPROBE_LIBBPF_SYM)
#undef SPROBE_LIBBPF_SYM
	sprobe__libbpf = t;
}

int sprobe__libbpf_load(const char **why)
{
	/* pthread_once orders the table's writes before every caller's reads. */
	pthread_once(&once, load_once);
	if (why)
		*why = state ? state_why : NULL;
	return state;
}
