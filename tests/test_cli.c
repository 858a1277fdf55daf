/* SPDX-License-Identifier: BSD-2-Clause */
/* The CLI's contract: exit 0 on success, 2 on a usage error, help on stdout. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "sprobe_test.h"

#ifndef SPROBE_CLI
#define SPROBE_CLI "build/stackprobe"
#endif

/* Run the CLI with ARGS, capture up to cap bytes of stdout, return the exit
 * status (or -1 if it did not exit normally). */
static int run_cli(const char *args, char *out, size_t cap)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", SPROBE_CLI, args);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	size_t n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_version(void **state)
{
	char out[4096];
	assert_int_equal(run_cli("--version", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "stackprobe " SPROBE_VERSION));
}

static void test_help(void **state)
{
	char out[4096];
	assert_int_equal(run_cli("--help", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "Usage: stackprobe"));
}

static void test_usage_errors_exit_2(void **state)
{
	char out[4096];
	assert_int_equal(run_cli("--no-such-option", out, sizeof(out)), 2);
	assert_int_equal(run_cli("no-such-command", out, sizeof(out)), 2);
	assert_int_equal(run_cli("", out, sizeof(out)), 2);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_version),
	cmocka_unit_test(test_help),
	cmocka_unit_test(test_usage_errors_exit_2),
};

SPROBE_TEST_MAIN(tests)
