/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A workload periodic at exactly F Hz, phase-locked to CLOCK_MONOTONIC
 * (tests/test_threads.c, the aliasing test): in each period of 1/F it
 * spends the first half in phase_a() and the second in phase_b().
 *
 *   phased F MS
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t period;

/* Spin while the phase of now is in [lo, hi). */
__attribute__((noinline)) void phase_a(void)
{
	while (now_ns() % period < period / 2)
		;
}

__attribute__((noinline)) void phase_b(void)
{
	while (now_ns() % period >= period / 2)
		;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return 2;
	period = (uint64_t)(1e9 / atof(argv[1]));
	uint64_t end = now_ns() + strtoull(argv[2], NULL, 10) * 1000000ull;

	while (now_ns() < end) {
		phase_a();
		phase_b();
	}
	return 0;
}
