/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The HTML page (`stackprobe report --format html`), checked with the
 * independent reader tests/outputs/check_html.py as in test_outputs.c:
 * markup in names cannot break out of the page, more windows than it sends
 * one by one, a process tree's recording, kernel windows against
 * self-reported ones. The readers and synthetic files in outputs_fixture.h.
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

/* Markup in a thread name, a symbol and the command line: the HTML page
 * holds each as text (its data has them verbatim) and gains no element,
 * script or attribute from them (check_html.py counts the page's elements
 * with python's html.parser); the SVG stays well-formed. */
static void test_outputs_html_hostile(void **state)
{
	char data[PATH_MAX], names[PATH_MAX], expect[PATH_MAX + 1], html[PATH_MAX], *out = NULL;
	struct synth o = { .header = true, .mode = SPROBE_DF_MODE_WALL, .freq = 99, .trailer = true,
			   .hostile = true };

	path_in(data, sizeof(data), "hostile.data");
	write_synthetic(data, &o, seed_now());
	check_all(data, "hostile", "wall", 99, NULL, NULL, true);
	/* The names the data must hold unchanged ("--x=..." is an argument). */
	path_in(names, sizeof(names), "hostile.names");
	FILE *f = fopen(names, "w");

	assert_non_null(f);
	fprintf(f, "%s\n%s\n%s\n%s\n", hostile_thread, hostile_sym, hostile_cmd,
		hostile_cmd + strlen(hostile_cmd) + 1);
	assert_int_equal(fclose(f), 0);
	snprintf(expect, sizeof(expect), "@%s", names);
	path_in(html, sizeof(html), "hostile.html");
	html_check(html, "-", "-", "-", expect);
	/* None of their markup verbatim in the file: '<' of the data never is. */
	assert_int_equal(run(&out, "grep -c -F -e '<img' -e '<script>alert' -e '<b>' -e '<!--' %s", html), 1);
	free(out);
}

/* More windows than the page sends one by one (html.c's TL_MAX, 100000):
 * the timeline is binned, every window in one bin, the file stays small,
 * and the tree and the table still count every sample. */
static void test_outputs_html_big(void **state)
{
	char data[PATH_MAX], html[PATH_MAX], folded[PATH_MAX], trace[PATH_MAX];
	int fd;
	struct sprobe_datafile_writer *w;
	struct sprobe_df_record rec;
	uint64_t t = 1000000000ull;
	const uint32_t n = 150000 + (uint32_t)(seed_now() % 1000);
	static const uint64_t st[2][3] = { { 0x401110, 0x401010, 0 }, { 0x401210, 0x401010, 0 } };

	path_in(data, sizeof(data), "big.data");
	fd = open(data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	w = sprobe_datafile_writer__new(fd, NULL);
	assert_non_null(w);
	rec = (struct sprobe_df_record){ .type = SPROBE_DF_HEADER };
	rec.header = (struct sprobe_df_header){ .pid = 77, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 997,
						.start_mono_ns = t, .cmdline = "big", .cmdline_len = 4 };
	assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	for (uint32_t i = 0; i < n; i++) {
		rec = (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE };
		t += 1000000;
		rec.sample = (struct sprobe_df_sample){
			.time_ns = t, .tid = 200 + i % 8, .method = 1, .stack_used = 4096,
			.signal_ns = t, .entry_ns = t + 1000, .exit_ns = t + 2000 + i % 5000,
			.pcs = st[i % 2], .nframes = 2,
		};
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	struct sprobe_df_trailer tr = { .end_mono_ns = t + 1000000 };

	assert_int_equal(sprobe_datafile_writer__finish(w, &tr), 0);
	sprobe_datafile_writer__free(w);
	close(fd);

	path_in(html, sizeof(html), "big.html");
	path_in(folded, sizeof(folded), "big.folded");
	path_in(trace, sizeof(trace), "big.trace.json");
	report_to(data, "html", html, NULL);
	report_to(data, "folded", folded, NULL);
	report_to(data, "trace", trace, NULL);
	assert_int_equal(html_check(html, folded, trace, "-", NULL), n);
	struct stat sb;

	assert_int_equal(stat(html, &sb), 0);
	/* Bins: 8 threads x 2000 bins x 4 numbers, not 150000 windows. */
	print_message("%u windows: %lld bytes\n", n, (long long)sb.st_size);
	assert_true(sb.st_size < 1024 * 1024);
	char *out = NULL;

	assert_int_equal(run(&out, "grep -c '\"sb\":\\[' %s", html), 0);
	free(out);
}

/* A recording of a process tree (data file v3): the page lists every
 * process and how it ended, its tree has the process level the folded
 * report has, each thread belongs to a listed process, and the timeline
 * holds every window of every process's threads (against the trace). */
static void test_outputs_html_processes(void **state)
{
	char data[PATH_MAX], html[PATH_MAX], folded[PATH_MAX], trace[PATH_MAX], *out = NULL;
	int rc;

	path_in(data, sizeof(data), "tree.data");
	rc = run(&out, CLI " record -q -F 199 -o %s -- sh -c 'build/demo 1 & build/demo 1; wait'", data);
	if (rc != 0)
		fail_msg("record exited %d: %s", rc, out);
	free(out);
	path_in(html, sizeof(html), "tree.html");
	path_in(folded, sizeof(folded), "tree.folded");
	path_in(trace, sizeof(trace), "tree.trace.json");
	report_to(data, "html", html, NULL);
	report_to(data, "folded", folded, NULL);
	report_to(data, "trace", trace, NULL);
	assert_true(html_check(html, folded, trace, "-", NULL) > 0);
	assert_int_equal(run(&out, PYTHON " tests/outputs/check_html.py %s %s %s", html, folded, trace), 0);
	/* sh and both demos, each ended with exit 0. */
	assert_non_null(strstr(out, "\"procs\": 3,"));
	assert_non_null(strstr(out, "\"ends\": [\"exit 0\", \"exit 0\", \"exit 0\"]"));
	free(out);
}

/* Kernel windows (as the eBPF companion's, spliced into the file): each
 * lane of the timeline holds its side's windows, and the one window each
 * side has without a partner is marked with the merge's reason. */
static void test_outputs_html_kernel_vs_self(void **state)
{
	char data[PATH_MAX], html[PATH_MAX], folded[PATH_MAX], trace[PATH_MAX], *out = NULL;
	struct sprobe_datafile_writer *w;
	struct sprobe_df_record rec;
	uint64_t t = 5000000000ull;
	unsigned seed = seed_now();
	const uint32_t n = 20 + seed % 20, no_kernel = 3 + seed % 10, extra = 14 + seed % 5;
	static const uint64_t st[] = { 0x401010, 0 };
	int fd;

	path_in(data, sizeof(data), "kernel.data");
	fd = open(data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	w = sprobe_datafile_writer__new(fd, NULL);
	assert_non_null(w);
	rec = (struct sprobe_df_record){ .type = SPROBE_DF_HEADER };
	rec.header = (struct sprobe_df_header){ .pid = 9, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 1000,
						.start_mono_ns = t, .cmdline = "k", .cmdline_len = 2 };
	assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	struct sprobe_df_kwindow kw[64];
	uint32_t nk = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t s = t + (i + 1) * 1000000ull, entry = s + 2000, exit = entry + 500 + (uint64_t)(rand() % 3000);

		rec = (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE };
		rec.sample = (struct sprobe_df_sample){ .time_ns = s, .tid = 101, .method = 1, .stack_used = 64,
							.signal_ns = s, .entry_ns = entry, .exit_ns = exit,
							.pcs = st, .nframes = 1 };
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
		if (i != no_kernel)	/* the handler's window, unseen by the kernel */
			kw[nk++] = (struct sprobe_df_kwindow){ .tid = 101, .generate_ns = s + 100,
								.deliver_ns = entry - 300, .sigreturn_ns = exit + 400 };
		if (i == extra)		/* a signal the handler never reported */
			kw[nk++] = (struct sprobe_df_kwindow){ .tid = 101, .generate_ns = s + 400000,
								.deliver_ns = s + 500000, .sigreturn_ns = s + 510000 };
	}
	for (uint32_t i = 0; i < nk; i++) {
		rec = (struct sprobe_df_record){ .type = SPROBE_DF_KWINDOW, .kwindow = kw[i] };
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	struct sprobe_df_trailer tr = { .end_mono_ns = t + (n + 2) * 1000000ull };

	assert_int_equal(sprobe_datafile_writer__finish(w, &tr), 0);
	sprobe_datafile_writer__free(w);
	close(fd);

	path_in(html, sizeof(html), "kernel.html");
	path_in(folded, sizeof(folded), "kernel.folded");
	path_in(trace, sizeof(trace), "kernel.trace.json");
	report_to(data, "html", html, NULL);
	report_to(data, "folded", folded, NULL);
	report_to(data, "trace", trace, NULL);
	assert_int_equal(run(&out, PYTHON " tests/outputs/check_html.py %s %s %s", html, folded, trace), 0);
	print_message("%s", out);
	char want[64];

	snprintf(want, sizeof(want), "\"self_windows\": %u, \"kernel_windows\": %u", n, nk);
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "\"su\": [\"no-kernel-window\"], \"ku\": [\"no-self-report\"]"));
	free(out);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

static const struct CMUnitTest tests[] = {
	T(test_outputs_html_hostile),
	T(test_outputs_html_big),
	T(test_outputs_html_processes),
	T(test_outputs_html_kernel_vs_self),
};

SPROBE_TEST_MAIN(tests)
