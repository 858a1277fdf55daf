/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zeroed tables from anonymous mappings (see zalloc.h for why).
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#include "userspace/common/zalloc.h"

/* The mapping's length, in front of what the caller gets: 16 bytes keep
 * the caller's pointer aligned as malloc's. It shares the first page with
 * the table's start, which most users write first anyway. */
#define ZHDR 16

void *sprobe__zcalloc(size_t nmemb, size_t size)
{
	size_t len;
	void *p;

	if (size && nmemb > (SIZE_MAX - ZHDR - 4095) / size) {
		errno = ENOMEM;
		return NULL;
	}
	len = (nmemb * size + ZHDR + 4095) & ~(size_t)4095;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	*(size_t *)p = len;
	return (char *)p + ZHDR;
}

void sprobe__zfree(void *p)
{
	if (!p)
		return;
	p = (char *)p - ZHDR;
	munmap(p, *(size_t *)p);
}
