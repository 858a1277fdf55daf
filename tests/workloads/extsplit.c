/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier's C workload (tests/test_external.c): built -O2
 * -static, so gcc omits frame pointers and the agent cannot enter it.
 *
 *   extsplit split N THREADS   main (and THREADS-1 more threads) loop
 *                              caller_a -> hot_a (N units of work) then
 *                              caller_b -> hot_b (3N units): the same loop
 *                              body, so hot_a has 1/4 of the CPU, hot_b 3/4
 *   extsplit deep DEPTH ROUNDS  main -> deep_recurse x DEPTH (about 200 bytes
 *                              of stack each) -> hot_a, ROUNDS times (built
 *                              with frame pointers as build/extsplit-fp: a
 *                              stack deeper than a small copy)
 *   extsplit fork MS_CHILD MS_PARENT
 *                              a child runs child_hot for MS_CHILD ms of
 *                              CPU and exits; the parent runs parent_hot
 *                              for MS_PARENT ms after the child's exit
 *
 * Prints what it did on stdout ("units a=.. b=.."), so the test checks
 * the split against the work actually done.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

/* One unit: the same arithmetic in every hot function (a xorshift chain,
 * no memory traffic), so units are CPU time in a fixed ratio; k differs
 * so that gcc does not fold the functions into one (-fipa-icf). */
#define UNIT_LOOP(n, k)                                                    \
	do {                                                              \
		uint64_t x_ = sink | (k);                               \
		for (uint64_t i_ = 0; i_ < (uint64_t)(n) * 20000u; i_++) { \
			x_ ^= x_ << 13;                                   \
			x_ ^= x_ >> 7;                                    \
			x_ ^= x_ << 17;                                   \
		}                                                         \
		sink = x_;                                                \
	} while (0)

__attribute__((noinline)) static void hot_a(unsigned n) { UNIT_LOOP(n, 1); }
__attribute__((noinline)) static void hot_b(unsigned n) { UNIT_LOOP(n, 3); }
__attribute__((noinline)) static void child_hot(unsigned n) { UNIT_LOOP(n, 5); }
__attribute__((noinline)) static void parent_hot(unsigned n) { UNIT_LOOP(n, 7); }

/* The callers do something after the call, so it is no tail call. */
__attribute__((noinline)) static void caller_a(unsigned n)
{
	hot_a(n);
	sink += 1;
}

__attribute__((noinline)) static void caller_b(unsigned n)
{
	hot_b(n);
	sink += 2;
}

static unsigned rounds;

__attribute__((noinline)) static void deep_recurse(int d, unsigned n)
{
	volatile char pad[200];

	pad[0] = (char)d;
	if (d > 0)
		deep_recurse(d - 1, n);
	else
		hot_a(n);
	sink += (uint64_t)pad[0];
}

static void *split_loop(void *arg)
{
	unsigned n = (unsigned)(uintptr_t)arg;

	for (unsigned r = 0; r < rounds; r++) {
		caller_a(n);
		caller_b(3 * n);
	}
	return NULL;
}

static double cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Run fn one unit at a time until ms of this process's CPU time passed. */
static unsigned spin_ms(void (*fn)(unsigned), double ms)
{
	double end = cpu_ms() + ms;
	unsigned units = 0;

	while (cpu_ms() < end) {
		fn(1);
		units++;
	}
	return units;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "split") == 0) {
		int nt = atoi(argv[3]);
		pthread_t t[8];

		rounds = (unsigned)atoi(argv[2]);
		if (nt < 1 || nt > 8)
			return 2;
		for (int i = 1; i < nt; i++)
			pthread_create(&t[i], NULL, split_loop, (void *)(uintptr_t)4);
		split_loop((void *)(uintptr_t)4);
		for (int i = 1; i < nt; i++)
			pthread_join(t[i], NULL);
		printf("units a=%u b=%u\n", rounds * 4 * nt, rounds * 12 * nt);
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "deep") == 0) {
		int depth = atoi(argv[2]);

		rounds = (unsigned)atoi(argv[3]);
		for (unsigned r = 0; r < rounds; r++)
			deep_recurse(depth, 4);
		printf("units a=%u\n", rounds * 4);
		return 0;
	}
	if (argc == 4 && strcmp(argv[1], "fork") == 0) {
		int st = 0;
		pid_t pid = fork();

		if (pid == 0) {
			unsigned u = spin_ms(child_hot, atof(argv[2]));

			printf("child units=%u\n", u);
			fflush(stdout);
			_exit(0);
		}
		waitpid(pid, &st, 0);
		unsigned u = spin_ms(parent_hot, atof(argv[3]));

		printf("parent units=%u\n", u);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	fprintf(stderr, "usage: extsplit split ROUNDS THREADS | deep DEPTH ROUNDS | "
				"fork MS_CHILD MS_PARENT\n");
	return 2;
}
