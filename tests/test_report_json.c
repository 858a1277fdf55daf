/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Reports as JSON: valid (checked by python3's json module) and holding
 * what was written, with the trace and pause check; hostile names stay
 * valid JSON. The workload and fixtures in report_fixture.h.
 */

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <stackprobe/report.h>

#include "sprobe_test.h"
#include "datafile_fixture.h"
#include "report_fixture.h"

/* JSON: valid (checked by python3's json module) and holding what was
 * written. */

/* --format trace: Chrome trace-event JSON with one track per thread, every
 * self-reported window, every kernel window and every sample; the JSON
 * report's pause_check has the kernel window as kernel-only. Checked by
 * python's json module, not by our code. */
static void test_trace_and_pause_check(void **state)
{
	struct df_buf b;

	make_file(&b, true);
	char *out = report_of(&b, SPROBE_REPORT_TRACE, 0, NULL);
	char *res = python_on_json(out,
		 "e=d[\"traceEvents\"] if isinstance(d, dict) else d; "
		 "names=[x for x in e if x.get(\"name\")==\"thread_name\"]; "
		 "c=lambda n: sum(1 for x in e if x.get(\"name\")==n); "
		 "print(len(names), c(\"handler\"), c(\"kernel pause\"), c(\"sample\"))");
	print_message("trace: %s", res);
	unsigned tracks, handlers, kpauses, samples;
	assert_int_equal(sscanf(res, "%u %u %u %u", &tracks, &handlers, &kpauses, &samples), 4);
	assert_true(tracks >= 3);	/* main, worker, blocked (+ dropped-only) */
	assert_int_equal(handlers, 60);	/* every window of the file (zero-pause: none) */
	assert_int_equal(kpauses, 1);
	assert_int_equal(samples, 70);
	free(res);
	free(out);

	out = report_of(&b, SPROBE_REPORT_JSON, 0, NULL);
	assert_non_null(strstr(out, "\"pause_check\": {"));
	assert_non_null(strstr(out, "{\"tid\": 0, \"matched\": 0, \"kernel_only\": 1, \"self_only\": 60"));
	/* The one kernel window (t = 200 .. 4200 ns) lies before every
	 * zero-pause sample: no claim either way. */
	assert_non_null(strstr(out, "\"zero_pause\": {\"samples\": 10, \"confirmed\": 0, "
				    "\"signalled\": 0, \"outside\": 10}"));
	free(out);
	df_buf_close(&b);
}

static void test_json_content(void **state)
{
	struct df_buf b;
	char path[64], cmd[512], res[512];

	make_file(&b, true);
	char *out = report_of(&b, SPROBE_REPORT_JSON, 0, NULL);

	assert_non_null(strstr(out, "\"status\": \"complete\""));
	assert_non_null(strstr(out, "\"cmdline\": [\"./demo\", \"--threads\", \"3\"]"));
	assert_non_null(strstr(out, "{\"name\": \"compute_a\", \"module\": \"/usr/bin/demo\", \"self\": 30, \"total\": 30, \"self_share\": 0.428571429, \"self_ci95\": ["));
	assert_non_null(strstr(out, "{\"name\": \"__futex_wait\", \"module\": \"/lib/libc.so.6\", \"self\": 20, \"total\": 20, \"self_share\": "));
	assert_non_null(strstr(out, "{\"tid\": 102, \"count\": 20, \"frames\": [\"thread_start\", \"demo+0x5abc\", \"__futex_wait\"]}"));
	assert_non_null(strstr(out, "\"stream_lost\": {\"header\": 0, \"thread\": 0, \"module\": 0, \"symbol\": 0, \"sample\": 5,"));
	assert_non_null(strstr(out, "\"threads_not_captured\": {\"exited\": 2, \"blocked\": 0, \"timeout\": 1,"));

	assert_int_equal(df_write_tmp(out, strlen(out), path, sizeof(path)), 0);
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
		 "t={x[\"tid\"]: x for x in d[\"threads\"]}; "
		 "print(d[\"samples\"], t[101][\"samples\"], t[101][\"window\"][\"median_ns\"], "
		 "t[104][\"dropped\"][\"exited\"], d[\"pause\"][\"total_ns\"], d[\"wall_ns\"], "
		 "d[\"methods\"][\"zero-pause\"], len(d[\"stacks\"]))' %s", path);
	FILE *p = popen(cmd, "r");

	assert_non_null(p);
	size_t n = fread(res, 1, sizeof(res) - 1, p);

	res[n] = '\0';
	assert_int_equal(pclose(p), 0);
	assert_string_equal(res, "70 40 10000 2 730000 1000000000 10 4\n");
	unlink(path);
	free(out);
	df_buf_close(&b);
}

/* Hostile names: JSON stays valid (UTF-8 kept, bad bytes -> U+FFFD, quotes
 * and newlines escaped); folded frames lose ';' and newlines. */
static void test_names_are_escaped(void **state)
{
	static const char tname[] = "w\xc3\xb6rk\xff\"x\ny";	/* wörk, bad byte, quote, NL */
	static const char sname[] = "ns;fn\nx";
	static const uint64_t pcs[] = { 0x1000 };
	struct df_buf b;
	char path[64], cmd[512], res[256];

	assert_int_equal(df_buf_open(&b), 0);
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_THREAD, .thread = {
		.tid = 5, .name = tname, .name_len = sizeof(tname) - 1 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.tid = 5, .pcs = pcs, .nframes = 1 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = 0x1000, .module = SPROBE_DF_NO_MODULE, .name = sname,
		.name_len = sizeof(sname) - 1 } });
	assert_int_equal(sprobe_datafile_writer__finish(b.w, NULL), 0);
	assert_int_equal(df_buf_take(&b), 0);

	char *out = report_of(&b, SPROBE_REPORT_FOLDED, 0, NULL);

	assert_string_equal(out, "w\xc3\xb6rk\xff\"x y-5;ns:fn x 1\n");
	free(out);
	out = report_of(&b, SPROBE_REPORT_JSON, 0, NULL);
	assert_int_equal(df_write_tmp(out, strlen(out), path, sizeof(path)), 0);
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import json,sys; d=json.load(open(sys.argv[1], encoding=\"utf-8\")); "
		 "print(ascii(d[\"threads\"][0][\"name\"]), ascii(d[\"functions\"][0][\"name\"]))' %s",
		 path);
	FILE *p = popen(cmd, "r");
	size_t n = fread(res, 1, sizeof(res) - 1, p);

	res[n] = '\0';
	assert_int_equal(pclose(p), 0);
	assert_string_equal(res, "'w\\xf6rk\\ufffd\"x\\ny' 'ns;fn\\nx'\n");
	unlink(path);
	free(out);
	df_buf_close(&b);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_json_content),
	cmocka_unit_test(test_trace_and_pause_check),
	cmocka_unit_test(test_names_are_escaped),
};

SPROBE_TEST_MAIN(tests)
