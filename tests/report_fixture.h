/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the report tests (test_report.c, test_report_json.c,
 * test_report_cli.c): the known workload written as a data file, a report
 * of it in memory, and checks on the text, folded and JSON outputs.
 *
 * The workload (70 samples):
 *   tid 101 "main":    30 x [compute_a <- main <- thread_start]
 *                      10 x [compute_b <- main <- thread_start]
 *   tid 102 "worker":  20 x [__futex_wait (libc) <- demo+0x5abc <- thread_start]
 *   tid 103 "blocked": 10 x [0xdead0 (no module) <- thread_start]
 * Windows: sample k of a thread has entry->exit = (k + 1) us.
 *
 * The functions are static and not inline, as they were in test_report.c:
 * inlined into the tests, gcc's -Wdangling-pointer misreads the output
 * pointer report_of() fills.
 */
#ifndef SPROBE_REPORT_FIXTURE_H
#define SPROBE_REPORT_FIXTURE_H

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <stackprobe/report.h>

#include "sprobe_test.h"
#include "datafile_fixture.h"

#ifndef SPROBE_CLI
#define SPROBE_CLI "build/stackprobe"
#endif

#define PC_A 0x401000ULL
#define PC_B 0x402000ULL
#define PC_MAIN 0x403000ULL
#define PC_START 0x404000ULL
#define PC_NOSYM 0x405abcULL	/* in demo, no symbol: demo+0x5abc (bias 0x400000) */
#define PC_WAIT 0x7f0000001234ULL
#define PC_RAW 0xdead0ULL

static __attribute__((unused)) void put(struct df_buf *b, struct sprobe_df_record rec)
{
	assert_int_equal(sprobe_datafile_writer__write(b->w, &rec), 0);
}

static __attribute__((unused)) void put_samples(struct df_buf *b, uint32_t tid, int n, const uint64_t *pcs,
			uint32_t nframes, uint64_t t0)
{
	for (int k = 0; k < n; k++) {
		uint64_t t = t0 + (uint64_t)k * 10000000;	/* 10 ms apart */

		put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
			.time_ns = t, .tid = tid, .method = tid == 103 ? SPROBE_METHOD_ZERO_PAUSE
								       : SPROBE_METHOD_SIGNAL,
			/* A zero-pause sample (103) has no signal: its
			 * entry/exit bracket the probe's reads and it
			 * counts as a 0 ns window. */
			.stack_used = 1000u * tid, .signal_ns = tid == 103 ? 0 : t, .entry_ns = t + 500,
			.exit_ns = t + 500 + (uint64_t)(k + 1) * 1000, .pcs = pcs,
			.nframes = nframes } });
	}
}

/* Write the known workload; finish with a trailer unless !complete. */
static __attribute__((unused)) void make_file(struct df_buf *b, bool complete)
{
	static const char cmd[] = "./demo\0--threads\0" "3";
	static const struct sprobe_df_range demo_r = { 0x400000, 0x500000, 0 };
	static const struct sprobe_df_range libc_r = { 0x7f0000000000, 0x7f0000100000, 0 };
	static const uint8_t bid[] = { 0xab, 0xcd };
	static const uint64_t sa[] = { PC_A, PC_MAIN, PC_START };
	static const uint64_t sb[] = { PC_B, PC_MAIN, PC_START };
	static const uint64_t sw[] = { PC_WAIT, PC_NOSYM, PC_START };
	static const uint64_t sr[] = { PC_RAW, PC_START };
	static const struct sprobe_df_dropped d1[] = { { 104, SPROBE_DROP_EXITED } };
	static const struct sprobe_df_dropped d2[] = { { 103, SPROBE_DROP_TIMEOUT } };
	const uint64_t t0 = 1000000000;

	assert_int_equal(df_buf_open(b), 0);
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 4242, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 99,
		.start_realtime_ns = 1764500000000000000ULL, .start_mono_ns = t0,
		.cmdline = cmd, .cmdline_len = sizeof(cmd) - 1 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 101, .name = "main", .name_len = 4 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 102, .name = "worker", .name_len = 6 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 103, .name = "blocked", .name_len = 7 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 0, .load_bias = 0x400000, .build_id = bid, .build_id_len = 2,
		.path = "/usr/bin/demo", .path_len = 13, .ranges = &demo_r, .nranges = 1 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 1, .load_bias = 0x7f0000000000, .path = "/lib/libc.so.6",
		.path_len = 14, .ranges = &libc_r, .nranges = 1 } });
	put_samples(b, 101, 30, sa, 3, t0 + 1000);
	put_samples(b, 101, 10, sb, 3, t0 + 400000000);
	put_samples(b, 102, 20, sw, 3, t0 + 2000);
	put_samples(b, 103, 10, sr, 2, t0 + 3000);
	for (int c = 0; c < 3; c++) {
		struct sprobe_df_record rec = { .type = SPROBE_DF_CAPTURE, .capture = {
			.time_ns = t0 + (uint64_t)c * 10000000, .threads_total = 4,
			.threads_captured = 3, .threads_dropped = 1, .pause_ns = 3000,
			.capture_ns = 20000, .dropped_tids = c < 2 ? d1 : d2, .ndropped_tids = 1 } };

		rec.capture.dropped[c < 2 ? SPROBE_DROP_EXITED : SPROBE_DROP_TIMEOUT] = 1;
		put(b, rec);
	}
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_KWINDOW, .kwindow = {
		.tid = 101, .generate_ns = 100, .deliver_ns = 200, .sigreturn_ns = 4200 } });
	struct sprobe_df_record lost = { .type = SPROBE_DF_LOST, .lost = { .time_ns = t0 } };

	lost.lost.lost[SPROBE_DF_SAMPLE] = 5;
	put(b, lost);
	/* Symbols last, as the agent writes them at flush. */
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_A, .module = 0, .name = "compute_a", .name_len = 9 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_B, .module = 0, .name = "compute_b", .name_len = 9 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_MAIN, .module = 0, .name = "main", .name_len = 4 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_START, .module = 0, .name = "thread_start", .name_len = 12 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_WAIT, .module = 1, .offset = 0x34, .name = "__futex_wait", .name_len = 12 } });
	if (complete) {
		struct sprobe_df_trailer tr = { .end_mono_ns = t0 + 1000000000 };	/* 1 s */

		tr.lost[SPROBE_DF_SAMPLE] = 5;
		assert_int_equal(sprobe_datafile_writer__finish(b->w, &tr), 0);
	}
	assert_int_equal(df_buf_take(b), 0);
}

/* Run REPORT on B's bytes with the given options; output in a malloc'd
 * string. */
static __attribute__((unused)) char *report_of(const struct df_buf *b, enum sprobe_report_format fmt, uint32_t tid,
		       int *status)
{
	struct sprobe_report *r = sprobe_report__new(&(struct sprobe_report_opts){
		.sz = sizeof(struct sprobe_report_opts), .tid = tid, .source = "known.data" });
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__from_mem(b->bytes, b->len);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(r);
	assert_non_null(rd);
	assert_int_equal(sprobe_report__load(r, rd), 0);
	assert_int_equal(sprobe_report__write(r, f, fmt), 0);
	fclose(f);
	if (status)
		*status = sprobe_report__status(r);
	sprobe_datafile_reader__free(rd);
	sprobe_report__free(r);
	return out;
}

/* Every line of a folded report is one of want[0..n), and there are n. */
static __attribute__((unused)) void assert_folded_lines(char *out, const char *const *want, size_t n)
{
	size_t nlines = 0;

	for (char *save, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		bool found = false;

		for (size_t i = 0; i < n; i++)
			found |= strcmp(l, want[i]) == 0;
		if (!found)
			fail_msg("unexpected folded line '%s'", l);
		nlines++;
	}
	assert_int_equal(nlines, n);
}


/* The line of OUT that follows SECTION and contains NEEDLE. */
static __attribute__((unused)) const char *line_with(const char *out, const char *section, const char *needle,
			     char *line, size_t cap)
{
	const char *p = strstr(out, section);

	assert_non_null(p);
	while ((p = strchr(p, '\n'))) {
		const char *e = strchr(++p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 0)
			break;	/* end of the section */
		if (n < cap) {
			memcpy(line, p, n);
			line[n] = '\0';
			if (strstr(line, needle))
				return line;
		}
	}
	fail_msg("no line with '%s' after '%s' in:\n%s", needle, section, out);
	return NULL;
}

static __attribute__((unused)) void assert_func_row(const char *out, const char *name, unsigned long self,
			    const char *self_pct, unsigned long total, const char *total_pct)
{
	char line[256], want[256], fn[128];
	unsigned long s, t;
	char sp[16], tp[16], se[16], te[16];

	/* self self% ± total total% ± function (±: a number, or "-") */
	line_with(out, "Top functions by self", name, line, sizeof(line));
	assert_int_equal(sscanf(line, " %lu %15s %15s %lu %15s %15s %127s", &s, sp, se, &t, tp, te, fn),
			 7);
	snprintf(want, sizeof(want), "%lu %s %lu %s %s", self, self_pct, total, total_pct, name);
	char got[256];

	snprintf(got, sizeof(got), "%lu %s %lu %s %s", s, sp, t, tp, fn);
	assert_string_equal(got, want);
}

/* Run python3 CODE (which reads the JSON document OUT as d) and return
 * what it printed, malloc'd. */
static __attribute__((unused)) char *python_on_json(const char *out, const char *code)
{
	char path[64], cmd[1024];
	static char res[512];

	assert_int_equal(df_write_tmp(out, strlen(out), path, sizeof(path)), 0);
	snprintf(cmd, sizeof(cmd),
		 "$(test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3) -c "
		 "'import json,sys; d=json.load(open(sys.argv[1])); %s' %s", code, path);
	FILE *p = popen(cmd, "r");

	assert_non_null(p);
	size_t n = fread(res, 1, sizeof(res) - 1, p);

	res[n] = '\0';
	assert_int_equal(pclose(p), 0);
	unlink(path);
	return strdup(res);
}

#endif
