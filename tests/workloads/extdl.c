/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier meets a library loaded late (tests/test_external.c):
 *
 *   extdl LIB MS N   spin MS ms of CPU in before_hot, then dlopen LIB (the
 *                    unwind test library) and call its
 *                    sprobe_testlib_beta(N) from dl_caller: N iterations in
 *                    its internal testlib_hidden_worker
 *
 * Built -O2 without frame pointers: the library's frames unwind only if
 * record reads the process's maps again after the dlopen.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

static double cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

__attribute__((noinline)) static void before_hot(double ms)
{
	double end = cpu_ms() + ms;

	while (cpu_ms() < end)
		for (int i = 0; i < 100000; i++)
			sink += (unsigned long)i;
}

__attribute__((noinline)) static int dl_caller(int (*beta)(int), int n)
{
	int r = beta(n);

	sink += (unsigned long)r;
	return r;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: extdl LIB MS N\n");
		return 2;
	}
	before_hot(atof(argv[2]));
	void *h = dlopen(argv[1], RTLD_NOW);
	int (*beta)(int) = h ? (int (*)(int))dlsym(h, "sprobe_testlib_beta") : NULL;

	if (!beta) {
		fprintf(stderr, "extdl: %s\n", dlerror());
		return 1;
	}
	printf("beta %d\n", dl_caller(beta, atoi(argv[3])));
	return 0;
}
