/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libdw through dlopen (see libdw_dl.h for the contract and why the shared
 * library does not link it; the loader is userspace/common/dl_table.h).
 */
#define SPROBE_LIBDW_DL_IMPL
#include "userspace/symbols/libdw_dl.h"
#include "userspace/common/dl_failed.h"
#include "userspace/common/dl_table.h"

struct sprobe_libdw sprobe__libdw;

static const char *const names[] = { SPROBE_LIBDW_FNS(SPROBE_DL_NAME) };
_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) == sizeof(sprobe__libdw),
	       "one pointer per name");
static struct sprobe_dl dl = SPROBE_DL_INIT(SPROBE_LIBDW_SONAME, names, &sprobe__libdw, NULL);

int sprobe__libdw_load(void)
{
	return sprobe__dl_load(&dl, NULL);
}

bool sprobe__libdw_failed(void)
{
	return sprobe__dl_failed(&dl);
}
