/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Wall mode does not alias with a workload periodic at its own rate
 * (userspace/sampler/sampler.c, wall_interval()): tests/workloads/phased.c
 * spends the first half of every 10 ms in phase_a() and the second in
 * phase_b(), locked to CLOCK_MONOTONIC; sampled at 100 Hz. With a fixed
 * interval every sample lands at nearly the same phase (measured here:
 * 167:126, 196:100, 246:51 on a loaded machine; all in one function on a
 * quiet one); with the drawn interval the split is the truth, 1:1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_helper.h"
#include "sprobe_test.h"

static void count(const char *folded, unsigned long *a, unsigned long *b)
{
	char *copy = strdup(folded);

	*a = *b = 0;
	for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');

		if (!sp)
			continue;
		if (strstr(line, "phase_a"))
			*a += strtoul(sp + 1, NULL, 10);
		else if (strstr(line, "phase_b"))
			*b += strtoul(sp + 1, NULL, 10);
	}
	free(copy);
}

static void test_wall_mode_does_not_alias(void **state)
{
	char *out;
	unsigned long a, b;

	assert_int_equal(sprobe_test_run("mkdir -p build/test-out && build/stackprobe record -q -F 100 -o build/test-out/phased.data "
					 "-- build/phased 100 3000 2>&1",
					 &out),
			 0);
	free(out);
	assert_int_equal(sprobe_test_run("build/stackprobe report -i build/test-out/phased.data "
					 "--format folded",
					 &out),
			 0);
	count(out, &a, &b);
	free(out);
	double share = a + b ? (double)a / (double)(a + b) : 0;
	print_message("phase_a %lu, phase_b %lu: share %.3f (truth 0.5)\n", a, b, share);
	/* ~300 samples: the binomial sd at 0.5 is 0.029; the band is 5 sd. */
	assert_true(a + b >= 100);
	assert_true(share >= 0.35 && share <= 0.65);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_wall_mode_does_not_alias),
};

SPROBE_TEST_MAIN(tests)
