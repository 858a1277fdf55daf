/* SPDX-License-Identifier: BSD-2-Clause */
/* The CLI's contract: exit 0 on success, 2 on a usage error, help on stdout. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <poll.h>
#endif

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

#ifdef __linux__
/* report -i FIFO does not wait silently: it says it waits for a writer,
 * then reads what the writer sends as it would the file itself. */
static void test_report_fifo_says_it_waits(void **state)
{
	char src[] = "build/test-out/cli-fifo.data", fifo[] = "build/test-out/cli-fifo";
	char want[8192], got[8192] = "", cmd[512];
	int err[2];

	(void)state;
	mkdir("build/test-out", 0755);
	/* Wall mode samples a sleeping thread: a file with samples. */
	snprintf(cmd, sizeof(cmd), SPROBE_CLI " record -q -F 499 -o %s -- sleep 0.2", src);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "report -i %s --format folded", src);
	int want_rc = run_cli(cmd, want, sizeof(want));
	assert_int_equal(want_rc, 0);
	assert_true(want[0] != '\0');
	unlink(fifo);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(pipe(err), 0);
	int out = open("build/test-out/cli-fifo.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(out >= 0);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		dup2(out, 1);
		dup2(err[1], 2);
		close(err[0]);
		execl(SPROBE_CLI, "stackprobe", "report", "-i", fifo, "--format", "folded",
		      (char *)NULL);
		_exit(127);
	}
	close(out);
	close(err[1]);
	/* Its word that it waits comes before any writer (bounded: 20 s). */
	size_t n = 0;
	while (!strstr(got, "waiting for a writer") && n < sizeof(got) - 1) {
		struct pollfd p = { .fd = err[0], .events = POLLIN };
		if (poll(&p, 1, 20000) != 1) {
			kill(c, SIGKILL);
			fail_msg("report -i FIFO said nothing for 20 s: \"%s\"", got);
		}
		ssize_t r = read(err[0], got + n, sizeof(got) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		got[n] = '\0';
	}
	assert_non_null(strstr(got, "cli-fifo is a FIFO with nothing in it yet: waiting for a writer"));
	snprintf(cmd, sizeof(cmd), "cat %s > %s", src, fifo);
	assert_int_equal(system(cmd), 0);
	int st = 0;
	assert_int_equal(waitpid(c, &st, 0), c);
	close(err[0]);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), want_rc);
	char *rep = NULL;
	FILE *f = fopen("build/test-out/cli-fifo.out", "r");
	assert_non_null(f);
	size_t len = 0;
	assert_true(getdelim(&rep, &len, '\0', f) >= 0 || want[0] == '\0');
	fclose(f);
	assert_string_equal(rep ? rep : "", want);
	free(rep);
	unlink(fifo);
}
#endif

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_version),
	cmocka_unit_test(test_help),
	cmocka_unit_test(test_usage_errors_exit_2),
#ifdef __linux__
	cmocka_unit_test(test_report_fifo_says_it_waits),
#endif
};

SPROBE_TEST_MAIN(tests)
