/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A library whose calls into libc go through its PLT, for the names of PLT
 * stubs ("getpid@plt", tests/test_symbolize.c). mk/unwind.mk links it
 * lazily (.plt) and, on x86_64, with IBT stubs (.plt.sec), stripped both
 * times as distribution libraries are.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sprobe_pltlib_calls(const char *s);

int sprobe_pltlib_calls(const char *s)
{
	return (int)getpid() + (int)strlen(s) + abs(atoi(s));
}
