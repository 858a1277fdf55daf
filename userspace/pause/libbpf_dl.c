/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * libbpf through dlopen (see libbpf_dl.h for the contract and why the
 * shared library does not link it; the loader is userspace/common/dl_table.h).
 */
#define SPROBE_LIBBPF_DL_IMPL
#include "userspace/pause/libbpf_dl.h"
#include "userspace/common/dl_table.h"

struct sprobe_libbpf sprobe__libbpf;

static const char *const names[] = { SPROBE_LIBBPF_FNS(SPROBE_DL_NAME) };
_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) == sizeof(sprobe__libbpf),
	       "one pointer per name");
static struct sprobe_dl dl = SPROBE_DL_INIT(SPROBE_LIBBPF_SONAME, names, &sprobe__libbpf, NULL);

int sprobe__libbpf_load(const char **why)
{
	return sprobe__dl_load(&dl, why);
}
