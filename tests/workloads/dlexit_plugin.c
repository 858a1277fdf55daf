/* SPDX-License-Identifier: BSD-2-Clause */
/* The plugin of dlexit.c: its constructor computes ~500 ms, then exits 3. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((constructor)) static void plugin_init(void)
{
	struct timespec t0, t;
	volatile unsigned long x = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 500);
	fprintf(stderr, "plugin constructor: exit(3)\n");
	exit(3);
}
