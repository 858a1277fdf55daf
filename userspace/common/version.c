/* SPDX-License-Identifier: BSD-2-Clause */
#include <stackprobe.h>

const char *sprobe_version(void)
{
	return SPROBE_VERSION;
}
