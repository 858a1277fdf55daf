/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Reports: a data file with known samples gives known shares and folded
 * lines; unnamed and CFI-named frames, samples without frames, cut-short
 * files and weighted (cpu-mode) samples. JSON is tested in
 * test_report_json.c, the CLI in test_report_cli.c; the workload and
 * fixtures in report_fixture.h.
 */

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <stackprobe/report.h>

#include "sprobe_test.h"
#include "datafile_fixture.h"
#include "report_fixture.h"

static void test_text_shares(void **state)
{
	struct df_buf b;
	char line[256];
	int st;

	make_file(&b, true);
	char *out = report_of(&b, SPROBE_REPORT_TEXT, 0, &st);

	/* SPROBE_TEST_DUMP=1: show the report (and leave the data file in
	 * /tmp) for a human to look at. */
	if (getenv("SPROBE_TEST_DUMP")) {
		char path[64];

		print_message("%s", out);
		if (df_write_tmp(b.bytes, b.len, path, sizeof(path)) == 0)
			print_message("data file left at %s\n", path);
	}
	assert_int_equal(st, SPROBE_DF_COMPLETE);
	assert_non_null(strstr(out, "command:  ./demo --threads 3"));
	assert_non_null(strstr(out, "pid 4242, wall mode, 99 Hz"));
	assert_non_null(strstr(out, "file:     complete"));
	assert_non_null(strstr(out, "samples:  70 in 3 captures"));
	assert_func_row(out, "compute_a", 30, "42.86%", 30, "42.86%");
	assert_func_row(out, "__futex_wait", 20, "28.57%", 20, "28.57%");
	assert_func_row(out, "compute_b", 10, "14.29%", 10, "14.29%");
	assert_func_row(out, "0xdead0", 10, "14.29%", 10, "14.29%");
	/* By total: thread_start is in every stack, main in 40. */
	line_with(out, "Top functions by total", "thread_start", line, sizeof(line));
	assert_non_null(strstr(line, "0   0.00%"));
	assert_non_null(strstr(line, "70 100.00%"));
	line_with(out, "Top functions by total", " main", line, sizeof(line));
	assert_non_null(strstr(line, "40  57.14%"));
	line_with(out, "Top functions by total", "demo+0x5abc", line, sizeof(line));
	assert_non_null(strstr(line, "20  28.57%"));
	/* demo's frames at PC_NOSYM have no name, its others do; libc's
	 * have one: neither module is without symbols. */
	assert_null(strstr(out, "symbols:"));

	/* Threads: share and window percentiles. main has windows 1..30 and
	 * 1..10 us: 40 values, median (rank 20) = 10 us, p99 (rank 40) and
	 * max = 30 us. */
	line_with(out, "Threads", "main", line, sizeof(line));
	assert_non_null(strstr(line, "     101  main                   40  57.14%    10.0us    30.0us    30.0us"));
	/* Ordered by samples: 101 (40), 102 (20), 103 (10), 104 (0). */
	{
		const char *th = strstr(out, "Threads (by samples)");
		const char *a = strstr(th, "     101  main"), *b2 = strstr(th, "     102  worker");
		const char *c = strstr(th, "     103  blocked"), *d = strstr(th, "     104  ?");

		assert_true(a && b2 && c && d && a < b2 && b2 < c && c < d);
	}
	line_with(out, "Threads", "blocked", line, sizeof(line));
	assert_non_null(strstr(line, "zero-pause=10"));
	/* Pause: all 70 windows, the 10 zero-pause ones at 0 ns; sum =
	 * (465+55) + 210 = 730 us over 1 s. */
	assert_non_null(strstr(out, "overall: 70 windows, median 9.0 us, p99 30.0 us, max 30.0 us"));
	assert_non_null(strstr(out, "capture, probe side (all threads of one capture): median 20.0 us"));
	assert_non_null(strstr(out, "total pause 0.730 ms = 0.0730% of 1.000 s wall time"));
	assert_non_null(strstr(out, "capture methods: signal 60 (85.7%) zero-pause 10 (14.3%)"));
	/* Drops. */
	assert_non_null(strstr(out, "records lost in the stream (queue full): 5 (sample 5)"));
	assert_non_null(strstr(out, "threads not captured: 3 of 12 thread-captures (exited 2, timeout 1)"));
	line_with(out, "dropped threads", "104", line, sizeof(line));
	assert_non_null(strstr(line, "exited=2"));
	/* Kernel windows are matched with the self-reported ones when
	 * present: this one (deliver 200, sigreturn 4200) matches none. */
	assert_non_null(strstr(out, "Pause (kernel: eBPF companion"));
	line_with(out, "thread 101:", "kernel pause", line, sizeof(line));
	assert_non_null(strstr(line, "n=1 "));
	assert_non_null(strstr(line, " 4.000"));
	line_with(out, "thread 101:", "unmatched", line, sizeof(line));
	assert_non_null(strstr(line, "1 "));
	free(out);
	df_buf_close(&b);
}

/* A module whose sampled frames have no name at all says so, with the
 * package to install: libc without libc6-dbg (its .dynsym lacks
 * start_thread) and a library without any symbol table. A module whose
 * frames all have names gets no line. */
static void test_modules_without_symbols(void **state)
{
	static const struct sprobe_df_range app_r = { 0x400000, 0x500000, 0 };
	static const struct sprobe_df_range libc_r = { 0x7f0000000000, 0x7f0000200000, 0 };
	static const struct sprobe_df_range foo_r = { 0x7f1000000000, 0x7f1000100000, 0 };
	static const uint64_t st[] = { 0x7f1000000100, PC_MAIN, 0x7f00000891f4, 0x7f00001098eb };
	struct df_buf b;

	(void)state;
	assert_int_equal(df_buf_open(&b), 0);
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 4243, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 99,
		.start_mono_ns = 1000000000, .cmdline = "app", .cmdline_len = 3 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 0, .load_bias = 0x400000, .path = "/usr/bin/app", .path_len = 12,
		.ranges = &app_r, .nranges = 1 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 1, .load_bias = 0x7f0000000000, .path = "/lib/x86_64-linux-gnu/libc.so.6",
		.path_len = 31, .ranges = &libc_r, .nranges = 1 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 2, .load_bias = 0x7f1000000000, .path = "/opt/lib/libfoo.so",
		.path_len = 18, .ranges = &foo_r, .nranges = 1 } });
	put_samples(&b, 101, 4, st, 4, 1000000000);
	/* As the agent writes them: a name for app's pc, none (module and
	 * offset only) for the libc and libfoo ones. */
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_MAIN, .module = 0, .name = "main", .name_len = 4 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = st[0], .module = 2, .offset = 0x100 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = st[2], .module = 1, .offset = 0x891f4 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = st[3], .module = 1, .offset = 0x1098eb } });
	assert_int_equal(sprobe_datafile_writer__finish(b.w, &(struct sprobe_df_trailer){
		.end_mono_ns = 2000000000 }), 0);
	assert_int_equal(df_buf_take(&b), 0);
	char *out = report_of(&b, SPROBE_REPORT_TEXT, 0, NULL);

	print_message("%s", out);
	assert_non_null(strstr(out, "\n  symbols:  libc.so.6: no symbols (install libc6-dbg for names)\n"));
	assert_non_null(strstr(out, "\n            libfoo.so: no symbols (no symbol table; install its "
				    "debug package (-dbgsym) or build with -g)\n"));
	assert_null(strstr(out, "app: "));
	assert_non_null(strstr(out, "libc.so.6+0x891f4"));
	assert_non_null(strstr(out, "libc.so.6+0x1098eb"));
	free(out);
	df_buf_close(&b);
}

/* Names the agent gives from a function's FDE in a stripped module
 * ("libfoo.so+0xf0": the module's base name, "+0x", lowercase hex): pcs
 * with that name are one function, and the module still gets its "no
 * symbols" line; so does it with a PLT stub's name ("memcpy@plt", from
 * relocations a stripped object keeps). A real symbol, or anything after
 * the hex, is a name: no line for that module. */
static void test_cfi_names_are_not_symbols(void **state)
{
	static const struct sprobe_df_range app_r = { 0x400000, 0x500000, 0 };
	static const struct sprobe_df_range foo_r = { 0x7f1000000000, 0x7f1000100000, 0 };
	static const struct sprobe_df_range bar_r = { 0x7f2000000000, 0x7f2000100000, 0 };
	static const uint64_t st1[] = { 0x7f1000000100, PC_MAIN };
	static const uint64_t st2[] = { 0x7f1000000108, PC_MAIN };
	static const uint64_t st3[] = { 0x7f2000000010, PC_MAIN };
	static const uint64_t st4[] = { 0x7f1000000020, PC_MAIN };
	struct df_buf b;

	(void)state;
	assert_int_equal(df_buf_open(&b), 0);
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 4243, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 99,
		.start_mono_ns = 1000000000, .cmdline = "app", .cmdline_len = 3 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 0, .load_bias = 0x400000, .path = "/usr/bin/app", .path_len = 12,
		.ranges = &app_r, .nranges = 1 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 1, .load_bias = 0x7f1000000000, .path = "/opt/lib/libfoo.so",
		.path_len = 18, .ranges = &foo_r, .nranges = 1 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 2, .load_bias = 0x7f2000000000, .path = "/opt/lib/libbar.so",
		.path_len = 18, .ranges = &bar_r, .nranges = 1 } });
	put_samples(&b, 101, 3, st1, 2, 1000000000);
	put_samples(&b, 101, 2, st2, 2, 1100000000);
	put_samples(&b, 101, 1, st3, 2, 1200000000);
	put_samples(&b, 101, 1, st4, 2, 1300000000);
	/* libbar's name has a suffix: a name */
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_MAIN, .module = 0, .name = "main", .name_len = 4 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = st1[0], .module = 1, .offset = 0x10, .name = "libfoo.so+0xf0", .name_len = 14 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = st2[0], .module = 1, .offset = 0x18, .name = "libfoo.so+0xf0", .name_len = 14 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = st3[0], .module = 2, .offset = 0x0, .name = "libbar.so+0x10.cold", .name_len = 19 } });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = st4[0], .module = 1, .offset = 0x0, .name = "memcpy@plt", .name_len = 10 } });
	assert_int_equal(sprobe_datafile_writer__finish(b.w, &(struct sprobe_df_trailer){
		.end_mono_ns = 2000000000 }), 0);
	assert_int_equal(df_buf_take(&b), 0);
	char *out = report_of(&b, SPROBE_REPORT_TEXT, 0, NULL);
	char line[512];

	print_message("%s", out);
	assert_non_null(strstr(out, "\n  symbols:  libfoo.so: no symbols (no symbol table; install its "
				    "debug package (-dbgsym) or build with -g)\n"));
	assert_null(strstr(out, "libbar.so: no symbols"));
	assert_null(strstr(out, "app: no symbols"));
	/* both libfoo pcs: one function, 5 self samples */
	line_with(out, "Top functions by self samples", "  libfoo.so+0xf0", line, sizeof(line));
	assert_int_equal(strtol(line, NULL, 10), 5);
	line_with(out, "Top functions by self samples", "  memcpy@plt", line, sizeof(line));
	assert_int_equal(strtol(line, NULL, 10), 1);
	assert_null(strstr(out, "libfoo.so+0x100"));
	assert_null(strstr(out, "libfoo.so+0x108"));
	free(out);
	df_buf_close(&b);
}

static void test_folded_lines(void **state)
{
	static const char *const want[] = {
		"main-101;thread_start;main;compute_a 30",
		"main-101;thread_start;main;compute_b 10",
		"worker-102;thread_start;demo+0x5abc;__futex_wait 20",
		"blocked-103;thread_start;0xdead0 10",
	};
	struct df_buf b;

	make_file(&b, true);
	char *out = report_of(&b, SPROBE_REPORT_FOLDED, 0, NULL);

	assert_folded_lines(out, want, 4);
	free(out);

	/* --tid filter. */
	out = report_of(&b, SPROBE_REPORT_FOLDED, 102, NULL);
	assert_string_equal(out, "worker-102;thread_start;demo+0x5abc;__futex_wait 20\n");
	free(out);
	out = report_of(&b, SPROBE_REPORT_TEXT, 102, NULL);
	assert_non_null(strstr(out, "samples:  20 in"));
	assert_null(strstr(out, "weights:")); /* one stack per sample */
	assert_non_null(strstr(out, "filter:   tid 102 only"));
	assert_null(strstr(out, "compute_a"));
	free(out);
	df_buf_close(&b);
}

/* A sample with no frames (an unwalkable stack) still counts, under its
 * thread alone. */
static void test_sample_without_frames(void **state)
{
	struct df_buf b;

	assert_int_equal(df_buf_open(&b), 0);
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER });
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = { .tid = 9 } });
	assert_int_equal(df_buf_take(&b), 0);
	char *out = report_of(&b, SPROBE_REPORT_FOLDED, 0, NULL);

	assert_string_equal(out, "thread-9 1\n");
	free(out);
	out = report_of(&b, SPROBE_REPORT_TEXT, 0, NULL);
	assert_non_null(strstr(out, "samples:  1 in 0 captures"));
	free(out);
	df_buf_close(&b);
}

/* A report of a file without a trailer says so, in every format, and still
 * shows what it holds. */
static void test_cut_short_is_reported(void **state)
{
	struct df_buf b;
	int st;

	make_file(&b, false);
	char *out = report_of(&b, SPROBE_REPORT_TEXT, 0, &st);

	assert_int_equal(st, SPROBE_DF_CUT_SHORT);
	assert_non_null(strstr(out, "file:     CUT SHORT: file cut short"));
	assert_non_null(strstr(out, "samples:  70 in 3 captures"));
	/* No trailer, but the stream's lost record still carries the drops. */
	assert_non_null(strstr(out, "records lost in the stream (queue full): 5 (sample 5)"));
	free(out);
	out = report_of(&b, SPROBE_REPORT_JSON, 0, NULL);
	assert_non_null(strstr(out, "\"status\": \"cut_short\""));
	assert_non_null(strstr(out, "\"trailer\": null"));
	assert_non_null(strstr(out, "\"sample\": 5,"));
	free(out);
	df_buf_close(&b);
}

/* ---- weighted samples ------------------------------------------------- */

/* A cpu-mode file (100 Hz: a 10 ms period) whose samples carry weights:
 *   tid 201 "A":  main;fn_f;fn_g  weight 3 (truncated)
 *                 main;fn_f       weight 1
 *   tid 202 "B":  main;fn_h       weight 0 (written as "one")
 * 3 records standing for 5 samples. Every count below is what a report
 * that ignored the weights would get wrong (it would see 3 samples, fn_g 1). */
#define WPC_MAIN 0x1000ULL
#define WPC_F 0x2000ULL
#define WPC_G 0x3000ULL
#define WPC_H 0x4000ULL
#define W_PERIOD_NS 10000000ULL	/* 1 s / 100 Hz */

static void make_weighted_file(struct df_buf *b)
{
	static const uint64_t sg[] = { WPC_G, WPC_F, WPC_MAIN };
	static const uint64_t sf[] = { WPC_F, WPC_MAIN };
	static const uint64_t sh[] = { WPC_H, WPC_MAIN };
	static const struct {
		uint64_t pc;
		const char *name;
	} syms[] = { { WPC_MAIN, "main" }, { WPC_F, "fn_f" }, { WPC_G, "fn_g" }, { WPC_H, "fn_h" } };
	const uint64_t t0 = 1000000000;

	assert_int_equal(df_buf_open(b), 0);
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 77, .mode = SPROBE_DF_MODE_CPU, .freq_hz = 100, .start_mono_ns = t0 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 201, .name = "A", .name_len = 1 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 202, .name = "B", .name_len = 1 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = t0 + 30000000, .tid = 201, .method = SPROBE_METHOD_SIGNAL,
		.flags = SPROBE_DF_SAMPLE_TRUNCATED, .signal_ns = t0 + 30000000,
		.entry_ns = t0 + 30000500, .exit_ns = t0 + 30001500, .pcs = sg, .nframes = 3,
		.weight = 3 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = t0 + 40000000, .tid = 201, .method = SPROBE_METHOD_SIGNAL,
		.signal_ns = t0 + 40000000, .entry_ns = t0 + 40000500, .exit_ns = t0 + 40001500,
		.pcs = sf, .nframes = 2, .weight = 1 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
		.time_ns = t0 + 35000000, .tid = 202, .method = SPROBE_METHOD_SIGNAL,
		.signal_ns = t0 + 35000000, .entry_ns = t0 + 35000500, .exit_ns = t0 + 35001500,
		.pcs = sh, .nframes = 2, .weight = 0 } });
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
		put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
			.pc = syms[i].pc, .module = SPROBE_DF_NO_MODULE, .name = syms[i].name,
			.name_len = (uint32_t)strlen(syms[i].name) } });
	assert_int_equal(sprobe_datafile_writer__finish(b->w, &(struct sprobe_df_trailer){
		.end_mono_ns = t0 + 100000000 }), 0);
	assert_int_equal(df_buf_take(b), 0);
}

struct weights_seen {
	uint64_t sum;
	uint32_t w[8];		/* per sample, file order */
	uint32_t tid[8];
	size_t n;
};

static int collect_weight(const struct sprobe_report_sample *s, void *ctx)
{
	struct weights_seen *ws = ctx;

	ws->sum += s->weight;
	if (ws->n < 8) {
		ws->w[ws->n] = s->weight;
		ws->tid[ws->n] = s->tid;
	}
	ws->n++;
	return 0;
}


static void test_weighted_samples(void **state)
{
	static const char *const want_folded[] = {
		"A-201;main;fn_f;fn_g 3",
		"A-201;main;fn_f 1",
		"B-202;main;fn_h 1",
	};
	struct sprobe_report_info info = { .sz = sizeof(info) };
	struct weights_seen ws = { 0 };
	struct df_buf b;
	char line[256], *res;

	make_weighted_file(&b);

	/* The library's own counts. */
	struct sprobe_report *r = sprobe_report__new(NULL);
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__from_mem(b.bytes, b.len);

	assert_non_null(r);
	assert_non_null(rd);
	assert_int_equal(sprobe_report__load(r, rd), 0);
	assert_int_equal(sprobe_report__samples(r), 5);
	assert_int_equal(sprobe_report__info(r, &info), 0);
	assert_int_equal(info.samples, 5);
	/* What the pprof, speedscope and SVG writers are handed: one call
	 * per record, each with its weight (0 on disk reads as 1). */
	assert_int_equal(sprobe_report__foreach_sample(r, collect_weight, &ws), 0);
	assert_int_equal(ws.n, 3);
	assert_int_equal(ws.sum, 5);
	assert_int_equal(ws.tid[0], 201);
	assert_int_equal(ws.w[0], 3);
	assert_int_equal(ws.tid[1], 201);
	assert_int_equal(ws.w[1], 1);
	assert_int_equal(ws.tid[2], 202);
	assert_int_equal(ws.w[2], 1);
	sprobe_datafile_reader__free(rd);
	sprobe_report__free(r);

	/* Folded: one line per stack, the weights summed. */
	char *out = report_of(&b, SPROBE_REPORT_FOLDED, 0, NULL);

	assert_folded_lines(out, want_folded, 3);
	free(out);

	/* Text: shares over 5 samples. */
	out = report_of(&b, SPROBE_REPORT_TEXT, 0, NULL);
	if (getenv("SPROBE_TEST_DUMP")) {
		char path[64];

		print_message("%s", out);
		if (df_write_tmp(b.bytes, b.len, path, sizeof(path)) == 0)
			print_message("data file left at %s\n", path);
	}
	assert_non_null(strstr(out, "samples:  5 in 0 captures"));
	assert_non_null(strstr(out, "weights:  the 5 samples come from 3 captured stacks"));
	assert_func_row(out, "fn_g", 3, "60.00%", 3, "60.00%");
	assert_func_row(out, "fn_f", 1, "20.00%", 4, "80.00%");
	assert_func_row(out, "fn_h", 1, "20.00%", 1, "20.00%");
	line_with(out, "Top functions by total", "main", line, sizeof(line));
	assert_non_null(strstr(line, "5 100.00%"));
	line_with(out, "Threads", " A", line, sizeof(line));
	assert_non_null(strstr(line, "     201  A                       4  80.00%"));
	assert_non_null(strstr(line, "signal=4"));
	assert_non_null(strstr(line, "truncated=3"));
	line_with(out, "Threads", " B", line, sizeof(line));
	assert_non_null(strstr(line, "     202  B                       1  20.00%"));
	assert_non_null(strstr(out, "capture methods: signal 5 (100.0%)"));
	/* Windows belong to the capture, not to the periods it stands for:
	 * 3 records, 3 windows. */
	assert_non_null(strstr(out, "overall: 3 windows"));
	free(out);

	/* JSON, read by python's json module. */
	out = report_of(&b, SPROBE_REPORT_JSON, 0, NULL);
	res = python_on_json(out,
		"t={x[\"tid\"]: x for x in d[\"threads\"]}; "
		"fn={x[\"name\"]: (x[\"self\"], x[\"total\"]) for x in d[\"functions\"]}; "
		"st=sorted((x[\"tid\"], x[\"count\"], \";\".join(x[\"frames\"])) for x in d[\"stacks\"]); "
		"print(d[\"samples\"], d[\"captured_stacks\"], t[201][\"samples\"], t[202][\"samples\"], "
		"fn[\"fn_g\"], fn[\"fn_f\"], fn[\"main\"], st)");
	assert_string_equal(res, "5 3 4 1 (3, 3) (1, 4) (0, 5) "
				 "[(201, 1, 'main;fn_f'), (201, 3, 'main;fn_f;fn_g'), (202, 1, 'main;fn_h')]\n");
	free(res);
	free(out);

	/* Speedscope: each sample weighs its periods (10 ms x weight), and
	 * a profile's endValue is the sum. */
	out = report_of(&b, SPROBE_REPORT_SPEEDSCOPE, 0, NULL);
	res = python_on_json(out,
		"print(sorted((p[\"name\"], p[\"unit\"], p[\"weights\"], p[\"endValue\"]) "
		"for p in d[\"profiles\"]))");
	assert_string_equal(res, "[('A-201', 'nanoseconds', [30000000, 10000000], 40000000), "
				 "('B-202', 'nanoseconds', [10000000], 10000000)]\n");
	free(res);
	free(out);

	/* SVG: frame widths count samples; the hover titles say how many. */
	out = report_of(&b, SPROBE_REPORT_SVG, 0, NULL);
	assert_non_null(strstr(out, "<title>fn_g (3 samples, 60.00%)</title>"));
	assert_non_null(strstr(out, "<title>A-201 (4 samples, 80.00%)</title>"));
	assert_non_null(strstr(out, "<title>all (5 samples, 100.00%)</title>"));
	free(out);

	/* --tid keeps the weights of the thread it keeps. */
	out = report_of(&b, SPROBE_REPORT_TEXT, 201, NULL);
	assert_non_null(strstr(out, "samples:  4 in"));
	free(out);
	df_buf_close(&b);
}

/* A wall-mode recording whose captures came at half the asked rate says
 * so, with the rounds not taken; one at the asked rate says only the rate;
 * drops are listed by reason. */
static void test_rate_below_asked(void **state)
{
	static const uint64_t sa[] = { PC_A, PC_MAIN };
	struct df_buf b;
	const uint64_t t0 = 1000000000;
	char *out;

	(void)state;
	assert_int_equal(df_buf_open(&b), 0);
	put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 7, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 100, .start_mono_ns = t0 } });
	for (int c = 0; c < 11; c++) {
		struct sprobe_df_record rec = { .type = SPROBE_DF_CAPTURE, .capture = {
			.time_ns = t0 + (uint64_t)c * 20000000, .threads_total = 2,
			.threads_captured = c == 3 ? 1 : 2, .threads_dropped = c == 3 } };

		rec.capture.dropped[SPROBE_DROP_NO_SLOT] = c == 3;
		put(&b, rec);
		put(&b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
			.time_ns = rec.capture.time_ns, .tid = 7, .method = SPROBE_METHOD_SIGNAL,
			.pcs = sa, .nframes = 2 } });
	}
	assert_int_equal(sprobe_datafile_writer__finish(b.w, &(struct sprobe_df_trailer){
		.end_mono_ns = t0 + 200000000 }), 0);
	assert_int_equal(df_buf_take(&b), 0);
	out = report_of(&b, SPROBE_REPORT_TEXT, 0, NULL);
	print_message("%s", out);
	assert_non_null(strstr(out, "rate:     50.0 captures/s of 100 asked (50.0 %): 10 rounds not taken"));
	assert_non_null(strstr(out, "dropped:  no-slot 1 "));
	free(out);
	df_buf_close(&b);

	make_file(&b, true);
	out = report_of(&b, SPROBE_REPORT_TEXT, 0, NULL);
	/* 3 captures 10 ms apart at 99 Hz asked: kept, nothing more said. */
	assert_non_null(strstr(out, "rate:     100.0 captures/s of 99 asked (101.0 %)\n"));
	assert_non_null(strstr(out, "dropped:  exited 2, timeout 1 "));
	free(out);
	df_buf_close(&b);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_rate_below_asked),
	cmocka_unit_test(test_text_shares),
	cmocka_unit_test(test_modules_without_symbols),
	cmocka_unit_test(test_cfi_names_are_not_symbols),
	cmocka_unit_test(test_folded_lines),
	cmocka_unit_test(test_sample_without_frames),
	cmocka_unit_test(test_cut_short_is_reported),
	cmocka_unit_test(test_weighted_samples),
};

SPROBE_TEST_MAIN(tests)
