/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Reports through the CLI: its exit codes on missing, cut-short and corrupt
 * files, and the output file. The workload and fixtures in
 * report_fixture.h.
 */

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <stackprobe/report.h>

#include "sprobe_test.h"
#include "datafile_fixture.h"
#include "report_fixture.h"

/* ---- the CLI ------------------------------------------------------------ */

static int run_cli(const char *args, char *out, size_t cap, char *err, size_t errcap)
{
	char cmd[1024], errpath[] = "/tmp/sprobe-report-err-XXXXXX";
	int fd = mkstemp(errpath);

	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "%s %s 2>%s", SPROBE_CLI, args, errpath);
	FILE *p = popen(cmd, "r");

	assert_non_null(p);
	size_t n = fread(out, 1, cap - 1, p);

	out[n] = '\0';
	int st = pclose(p);
	FILE *e = fopen(errpath, "r");

	n = fread(err, 1, errcap - 1, e);
	err[n] = '\0';
	fclose(e);
	unlink(errpath);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_exit_codes(void **state)
{
	static char out[65536];
	char err[4096], path[64], args[256];
	struct df_buf b;

	make_file(&b, true);
	assert_int_equal(df_write_tmp(b.bytes, b.len, path, sizeof(path)), 0);

	snprintf(args, sizeof(args), "report -i %s", path);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_non_null(strstr(out, "compute_a"));
	assert_string_equal(err, "");
	snprintf(args, sizeof(args), "report -i %s --format folded --tid 103", path);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_string_equal(out, "blocked-103;thread_start;0xdead0 10\n");
	/* Folded has no room for drops: they go to stderr. */
	assert_non_null(strstr(err, "5 records lost in the stream (queue full), 3 thread-captures dropped"));
	/* Standard input. */
	snprintf(args, sizeof(args), "report -i - --format folded --tid 102 < %s", path);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_string_equal(out, "worker-102;thread_start;demo+0x5abc;__futex_wait 20\n");

	/* Missing file: 1 and a one-line reason. */
	assert_int_equal(run_cli("report -i /nonexistent/x.data", out, sizeof(out), err,
				 sizeof(err)), 1);
	assert_non_null(strstr(err, "cannot open /nonexistent/x.data: No such file"));

	/* Cut short (inside the last record): still reports, says so, exit 0. */
	assert_int_equal(truncate(path, (off_t)b.len - 5), 0);
	snprintf(args, sizeof(args), "report -i %s", path);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_non_null(strstr(err, "cut short"));
	assert_non_null(strstr(out, "CUT SHORT"));
	assert_non_null(strstr(out, "compute_a"));

	/* Corrupt (a flipped byte in the middle): 1, names the offset. */
	unlink(path);
	b.bytes[b.len / 2] ^= 0x40;
	assert_int_equal(df_write_tmp(b.bytes, b.len, path, sizeof(path)), 0);
	snprintf(args, sizeof(args), "report -i %s", path);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "corrupt"));
	assert_non_null(strstr(err, "at offset"));
	assert_string_equal(out, "");
	unlink(path);

	/* Empty (cut short before the header): nothing to report, 1. */
	assert_int_equal(df_write_tmp("", 0, path, sizeof(path)), 0);
	snprintf(args, sizeof(args), "report -i %s", path);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "file is empty"));
	assert_non_null(strstr(err, "nothing to report"));
	unlink(path);

	/* A directory that holds no parts of a recording (a parts
	 * directory is read: tests/test_tree.c). */
	assert_int_equal(run_cli("report -i /tmp", out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "is a directory without parts of a recording"));

	/* Not a data file. */
	assert_int_equal(df_write_tmp("garbage!", 8, path, sizeof(path)), 0);
	snprintf(args, sizeof(args), "report -i %s", path);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 1);
	assert_non_null(strstr(err, "not a stackprobe data file"));
	unlink(path);

	/* Usage errors: 2. */
	assert_int_equal(run_cli("report --format xml", out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli("report --tid 12x", out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli("report --tid -5", out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli("report --tid 0", out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli("report --top 99999999999999999999", out, sizeof(out), err,
				 sizeof(err)), 2);
	assert_int_equal(run_cli("report stray", out, sizeof(out), err, sizeof(err)), 2);
	assert_int_equal(run_cli("report --help", out, sizeof(out), err, sizeof(err)), 0);
	assert_non_null(strstr(out, "Examples:"));
	df_buf_close(&b);
}

static void test_cli_output_file(void **state)
{
	static char out[65536];
	char err[4096], path[64], opath[] = "/tmp/sprobe-report-out-XXXXXX", args[256];
	struct df_buf b;

	make_file(&b, true);
	assert_int_equal(df_write_tmp(b.bytes, b.len, path, sizeof(path)), 0);
	int fd = mkstemp(opath);

	assert_true(fd >= 0);
	close(fd);
	snprintf(args, sizeof(args), "report -i %s -f json -o %s", path, opath);
	assert_int_equal(run_cli(args, out, sizeof(out), err, sizeof(err)), 0);
	assert_string_equal(out, "");
	FILE *f = fopen(opath, "r");
	size_t n = fread(out, 1, sizeof(out) - 1, f);

	out[n] = '\0';
	fclose(f);
	assert_non_null(strstr(out, "\"format\": \"stackprobe-report\""));
	unlink(opath);
	unlink(path);
	df_buf_close(&b);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_cli_exit_codes),
	cmocka_unit_test(test_cli_output_file),
};

SPROBE_TEST_MAIN(tests)
