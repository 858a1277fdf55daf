/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * dlexit PLUGIN: computes for ~100 ms (the agent samples it), then
 * dlopen()s PLUGIN, whose constructor computes for ~500 ms and calls
 * exit(3) -- inside dlopen, with the dynamic loader's lock held
 * (tests/test_failure_modes.c test_exit_in_constructor_ends: the agent's
 * exit handler must not wait for its probe thread forever if the probe is
 * in a dlopen of its own, waiting for that lock).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	volatile unsigned long x = 0;
	double t0 = now_ms();

	if (argc != 2) {
		fprintf(stderr, "usage: dlexit PLUGIN\n");
		return 2;
	}
	while (now_ms() - t0 < 100)
		for (int i = 0; i < 10000; i++)
			x += (unsigned long)i;
	void *h = dlopen(argv[1], RTLD_NOW);

	/* Not reached when the plugin's constructor exits. */
	printf("dlopen returned %p: %s\n", h, h ? "" : dlerror());
	return 1;
}
