/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libunwind through dlopen (see libunwind_dl.h for the contract and why
 * the shared library does not link it; the loader is
 * userspace/common/dl_table.h).
 */
#define SPROBE_LIBUNWIND_DL_IMPL
#include "userspace/unwind/unwind_internal.h"
#include "userspace/common/dl_failed.h"
#include "userspace/common/dl_table.h"

struct sprobe_libunwind sprobe__libunwind;

/* The names as libunwind exports them (unw_* are macros for those). */
static const char *const names[] = { SPROBE_LIBUNWIND_FNS(SPROBE_DL_NAME) };
_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) == sizeof(sprobe__libunwind),
	       "one pointer per name");
static struct sprobe_dl dl = SPROBE_DL_INIT(SPROBE_LIBUNWIND_SONAME, names, &sprobe__libunwind,
					    NULL);

int sprobe__libunwind_load(void)
{
	return sprobe__dl_load(&dl, NULL);
}

bool sprobe__libunwind_failed(void)
{
	return sprobe__dl_failed(&dl);
}
