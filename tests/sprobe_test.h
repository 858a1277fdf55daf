/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared cmocka runner for tests/test_<part>.c: one table of tests at the
 * bottom of each file, a name filter from argv[1] or $SPROBE_TEST_FILTER
 * (cmocka glob, e.g. "*torture*").
 */
#ifndef SPROBE_TEST_H
#define SPROBE_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#define SPROBE_TEST_MAIN(tests)                                             \
	int main(int argc, char **argv)                                     \
	{                                                                   \
		const char *filter = argc > 1 ? argv[1]                     \
					      : getenv("SPROBE_TEST_FILTER"); \
		if (filter && *filter)                                      \
			cmocka_set_test_filter(filter);                     \
		return cmocka_run_group_tests(tests, NULL, NULL);           \
	}

/* Print why a test is skipped, then skip it. Use only on the errno that
 * means "not available here". */
#define SPROBE_SKIP(...)                                                    \
	do {                                                                \
		print_message("SKIP: " __VA_ARGS__);                        \
		print_message("\n");                                        \
		skip();                                                     \
	} while (0)

#endif
