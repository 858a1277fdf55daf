/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The outputs people open: `stackprobe report --format pprof|speedscope|svg|html`,
 * each checked by a reader that is not our code, against our folded report:
 *
 *   pprof       decoded with the npm package pprof-format
 *               (tests/outputs/check_pprof.cjs): stacks and counts equal the
 *               folded report's, sample types and period match the
 *               recording, build-ids match what readelf says;
 *   speedscope  validated with ajv against the schema the npm package
 *               speedscope ships (tests/outputs/check_speedscope.cjs), then
 *               the same stack comparison (a sample of weight k x period
 *               counts k times);
 *   svg         parsed with python's xml.etree (tests/outputs/check_svg.py):
 *               every folded frame name present, root and thread frames
 *               count what the folded report counts, nothing external;
 *   html        parsed with python's html.parser (tests/outputs/check_html.py):
 *               one style, one data and one code script and no other
 *               element a name could smuggle in, nothing external, a CSP of
 *               default-src 'none'; its data's tree, thread table and
 *               timeline against the folded and trace reports.
 *
 * Inputs: a real recording of build/demo, and synthetic data files written
 * with the data-file writer to reach what a recording rarely has (XML and
 * JSON metacharacters, ';' in names, UTF-8, invalid bytes, unsymbolized
 * pcs, cpu mode with weighted samples, no header, a file cut short, no
 * samples). Sample counts and weights in the synthetic files are random
 * (the seed is printed); the expected values always come from the folded
 * report of the same file.
 *
 * The npm readers are installed by mk/outputs.mk (npm ci into build/node).
 * Without node the node checks skip and say why; everything else still runs.
 *
 * The HTML page's own tests (hostile markup, many windows, process trees,
 * kernel windows) are in test_outputs_html.c; the readers and the synthetic
 * files in outputs_fixture.h.
 */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/report.h>

#include "run_helper.h"
#include "sprobe_test.h"
#include "outputs_fixture.h"

/* ---- a real recording ------------------------------------------------------ */

static void test_outputs_demo_recording(void **state)
{
	char data[PATH_MAX], expect[PATH_MAX + 128], real[PATH_MAX], *out = NULL, *text = NULL;
	int rc;

	path_in(data, sizeof(data), "demo.data");
	rc = run(&out, CLI " record -q -F 199 -o %s -- build/demo 2", data);
	if (rc != 0)
		fail_msg("record exited %d: %s", rc, out);
	free(out);
	/* The build-id readelf reads from the binary, for the pprof mapping. */
	assert_non_null(realpath("build/demo", real));
	assert_int_equal(run(&out, "readelf -n build/demo | awk '/Build ID/ {printf \"%%s\", $3}'"), 0);
	assert_true(strlen(out) >= 16);
	snprintf(expect, sizeof(expect), "%s=%s", real, out);
	free(out);

	check_all(data, "demo", "wall", 199, expect, NULL, true);

	/* The text report's sample count is what every reader counted. */
	char pb[PATH_MAX], folded[PATH_MAX];

	path_in(pb, sizeof(pb), "demo.pb.gz");
	path_in(folded, sizeof(folded), "demo.folded");
	assert_int_equal(run(&text, CLI " report -i %s", data), 0);
	const char *s = strstr(text, "samples:");

	assert_non_null(s);
	unsigned long long text_samples = strtoull(s + strlen("samples:"), NULL, 10);

	assert_true(text_samples >= 100);
	free(text);
	if (!have_node())
		SPROBE_SKIP("node is not installed: pprof count and SVG script not checked");
	assert_int_equal(pprof_check(pb, folded, "wall", 199, NULL), text_samples);
	/* The SVG's inline script (hover, zoom) is valid JavaScript. */
	char svg[PATH_MAX], js[PATH_MAX];

	path_in(svg, sizeof(svg), "demo.svg");
	path_in(js, sizeof(js), "demo-svg.js");
	assert_int_equal(run(&out, "$(test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3) "
				   "tests/outputs/check_svg.py %s %s %s", svg, folded, js), 0);
	free(out);
	if (run(&out, "node --check %s", js) != 0)
		fail_msg("node --check of the SVG script: %s", out);
	free(out);
	/* The HTML page of a real recording: its pieces, its data against
	 * the folded and trace reports (windows thread by thread), and its
	 * script is valid JavaScript. */
	char html[PATH_MAX], trace[PATH_MAX];

	path_in(html, sizeof(html), "demo.html");
	path_in(trace, sizeof(trace), "demo.trace.json");
	path_in(js, sizeof(js), "demo-html.js");
	assert_int_equal(html_check(html, folded, trace, js, NULL), text_samples);
	if (run(&out, "node --check %s", js) != 0)
		fail_msg("node --check of the HTML script: %s", out);
	free(out);
	/* Every section a reader looks for, by its heading. */
	static const char *const sections[] = { "Flame graph", "Processes", "Threads", "Pause timeline",
						"Window distribution", "Drops" };

	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		assert_int_equal(run(&out, "grep -c '<h2>%s</h2>' %s", sections[i], html), 0);
		free(out);
	}
}

static void test_outputs_synthetic_names(void **state)
{
	char data[PATH_MAX];
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_WALL, .freq = 97, .trailer = true };

	path_in(data, sizeof(data), "names.data");
	write_synthetic(data, &o, seed_now());
	check_all(data, "names", "wall", 97,
		  "/opt/app/bin/server=deadbeef00112233 /usr/lib/libfoo.so=0102030405060708090a",
		  NULL, true);
	/* The comparison covered frameless samples and a thread without a
	 * name (tid 104: about 1 sample in 4 over ~200). */
	char *out = NULL;

	assert_int_equal(run(&out, "grep -cE '^[^;]+ [0-9]+$' %s/names.folded", dir), 0);
	free(out);
	assert_int_equal(run(&out, "grep -c '^thread-104[; ]' %s/names.folded", dir), 0);
	free(out);
}

/* Invalid UTF-8 and a control byte in a name: every output stays valid
 * (XML by xmllint, JSON by the schema check, pprof by the decoder), and
 * pprof and speedscope still match the folded stacks. */
static void test_outputs_invalid_bytes(void **state)
{
	char data[PATH_MAX];
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_WALL, .freq = 250,
			   .trailer = true, .bad_bytes = true };

	path_in(data, sizeof(data), "bad.data");
	write_synthetic(data, &o, seed_now());
	check_all(data, "bad", "wall", 250, NULL, NULL, false);
}

static int count_records(const struct sprobe_report_sample *s, void *ctx)
{
	(void)s;
	++*(unsigned long long *)ctx;
	return 0;
}

/* Cpu mode, where one record stands for the timer periods the kernel
 * folded together (weight 1..4 here): every reader counts a record as
 * many times as its weight, so their counts equal the folded report's and
 * sprobe_report__samples(), which are more than the records. */
static void test_outputs_cpu_mode(void **state)
{
	char data[PATH_MAX];
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_CPU, .freq = 999, .trailer = true,
			   .weights = true };
	unsigned long long records = 0;
	struct sprobe_report *r;

	path_in(data, sizeof(data), "cpu.data");
	write_synthetic(data, &o, seed_now());
	r = sprobe_report__new(NULL);
	assert_non_null(r);
	assert_int_equal(sprobe_report__load_file(r, data), 0);
	assert_int_equal(sprobe_report__foreach_sample(r, count_records, &records), 0);
	/* Else the comparisons below would not tell weights from records. */
	assert_true(sprobe_report__samples(r) > records);
	sprobe_report__free(r);
	check_all(data, "cpu", "cpu", 999, NULL, NULL, true);
}

/* Frequency 0 (unknown, e.g. a future trigger-based mode): pprof has
 * samples/count only and speedscope weighs each sample 1 (unit none). */
static void test_outputs_no_frequency(void **state)
{
	char data[PATH_MAX];
	struct synth o = { .header = true, .freq = 0, .trailer = true };

	path_in(data, sizeof(data), "nohdr.data");
	write_synthetic(data, &o, seed_now());
	check_all(data, "nohdr", "wall", 0, NULL, NULL, true);
}

/* A file cut short (no trailer) still gives every output, and the pprof
 * and SVG say it was cut short. */
static void test_outputs_cut_short(void **state)
{
	char data[PATH_MAX], pb[PATH_MAX], svg[PATH_MAX], *out = NULL;
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_WALL, .freq = 99, .trailer = false };

	path_in(data, sizeof(data), "cut.data");
	write_synthetic(data, &o, seed_now());
	check_all(data, "cut", "wall", 99, NULL, NULL, true);
	path_in(svg, sizeof(svg), "cut.svg");
	assert_int_equal(run(&out, "grep -c 'CUT SHORT' %s", svg), 0);
	free(out);
	if (!have_node())
		SPROBE_SKIP("node is not installed: pprof comment not checked");
	path_in(pb, sizeof(pb), "cut.pb.gz");
	assert_int_equal(run(&out, "NODE_PATH=%s node tests/outputs/check_pprof.cjs %s %s/cut.folded "
				   "wall 99 | grep -c 'file: CUT SHORT'",
			     SPROBE_NODE_MODULES, pb, dir), 0);
	free(out);
}

/* One thread only (--tid): every output holds that thread and no other. */
static void test_outputs_tid_filter(void **state)
{
	char data[PATH_MAX], folded[PATH_MAX], *out = NULL;
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_WALL, .freq = 99, .trailer = true };

	path_in(data, sizeof(data), "tid.data");
	write_synthetic(data, &o, seed_now());
	check_all(data, "tid", "wall", 99, NULL, "--tid 102", true);
	path_in(folded, sizeof(folded), "tid.folded");
	/* The folded report itself honours the filter (else the comparison
	 * above would prove nothing about it). */
	assert_int_equal(run(&out, "grep -v '^caf\xc3\xa9-102[; ]' %s | wc -l", folded), 0);
	assert_int_equal(atoi(out), 0);
	free(out);
}

/* No samples at all: still valid files, no crash, no empty output. */
static void test_outputs_no_samples(void **state)
{
	char data[PATH_MAX];
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_WALL, .freq = 99, .trailer = true,
			   .no_samples = true };

	path_in(data, sizeof(data), "empty.data");
	write_synthetic(data, &o, seed_now());
	check_all(data, "empty", "wall", 99, NULL, NULL, true);
}

static void test_outputs_cli_errors(void **state)
{
	char data[PATH_MAX], *out = NULL;
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_WALL, .freq = 99, .trailer = true };

	path_in(data, sizeof(data), "cli.data");
	write_synthetic(data, &o, seed_now());
	/* Unknown format: usage error that lists the formats. */
	assert_int_equal(run(&out, CLI " report -i %s --format flame", data), 2);
	assert_non_null(strstr(out, "pprof, speedscope, svg, trace or html"));
	free(out);
	/* Unwritable output: runtime error that names the file. */
	assert_int_equal(run(&out, CLI " report -i %s --format svg -o /nonexistent/dir/x.svg", data),
			 1);
	assert_non_null(strstr(out, "/nonexistent/dir/x.svg"));
	free(out);
	/* Corrupt input: error, and no output file pretending to be a profile. */
	assert_int_equal(run(&out, "printf 'SPRBDATAgarbage-garbage-garbage' > %s/corrupt.data && "
				   CLI " report -i %s/corrupt.data --format pprof -o %s/corrupt.pb.gz",
			     dir, dir, dir), 1);
	free(out);
	/* Help lists the new formats. */
	assert_int_equal(run(&out, CLI " report --help"), 0);
	assert_non_null(strstr(out, "pprof:"));
	assert_non_null(strstr(out, "speedscope:"));
	assert_non_null(strstr(out, "svg:"));
	assert_non_null(strstr(out, "html:"));
	free(out);
}

/* The library API: the format names parse, and the accessors agree with
 * the loaded file. */
static void test_outputs_library_api(void **state)
{
	char data[PATH_MAX];
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_CPU, .freq = 123, .trailer = true };
	struct sprobe_report_info info = { .sz = sizeof(info) };
	struct sprobe_report_frame f;
	struct sprobe_report_module m;
	struct sprobe_report *r;

	assert_int_equal(sprobe_report_format__parse("pprof"), SPROBE_REPORT_PPROF);
	assert_int_equal(sprobe_report_format__parse("speedscope"), SPROBE_REPORT_SPEEDSCOPE);
	assert_int_equal(sprobe_report_format__parse("svg"), SPROBE_REPORT_SVG);
	assert_int_equal(sprobe_report_format__parse("SVG"), -EINVAL);
	assert_int_equal(sprobe_report_format__parse("html"), SPROBE_REPORT_HTML);
	path_in(data, sizeof(data), "api.data");
	write_synthetic(data, &o, seed_now());
	r = sprobe_report__new(NULL);
	assert_non_null(r);
	assert_int_equal(sprobe_report__load_file(r, data), 0);
	assert_int_equal(sprobe_report__info(r, &info), 0);
	assert_true(info.has_header);
	assert_int_equal(info.mode, SPROBE_DF_MODE_CPU);
	assert_int_equal(info.freq_hz, 123);
	assert_int_equal(info.pid, 4242);
	assert_int_equal(info.samples, sprobe_report__samples(r));
	assert_int_equal(info.status, SPROBE_DF_COMPLETE);
	assert_int_equal(sprobe_report__resolve(r, 0x401210, &f), 0);
	assert_string_equal(f.name, "ns::parse;json");
	assert_true(f.symbolized);
	assert_string_equal(f.module, "/opt/app/bin/server");
	assert_int_equal(sprobe_report__resolve(r, PC_UNSYMBOLIZED, &f), 0);
	assert_false(f.symbolized);
	assert_string_equal(f.name, "server+0x1810");	/* pc - load bias */
	assert_int_equal(sprobe_report__resolve(r, PC_NOWHERE, &f), 0);
	assert_string_equal(f.name, "0x1234");
	assert_null(f.module);
	assert_int_equal(sprobe_report__module_count(r), 2);
	assert_int_equal(sprobe_report__module(r, 1, &m), 0);
	assert_string_equal(m.build_id, "0102030405060708090a");
	assert_int_equal(m.nranges, 1);
	assert_int_equal(sprobe_report__module(r, 2, &m), -EINVAL);
	assert_int_equal(sprobe_report__info(r, &(struct sprobe_report_info){ .sz = 0 }), -EINVAL);
	sprobe_report__free(r);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

static const struct CMUnitTest tests[] = {
	T(test_outputs_library_api),
	T(test_outputs_synthetic_names),
	T(test_outputs_invalid_bytes),
	T(test_outputs_cpu_mode),
	T(test_outputs_no_frequency),
	T(test_outputs_cut_short),
	T(test_outputs_tid_filter),
	T(test_outputs_no_samples),
	T(test_outputs_cli_errors),
	T(test_outputs_demo_recording),
};

SPROBE_TEST_MAIN(tests)
