/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the output tests (test_outputs.c, test_outputs_html.c): the
 * independent readers run on every format against the folded report, and
 * the synthetic data files written with the data-file writer.
 *
 * The functions are static and not inline, as they were in test_outputs.c
 * (inlining them into the tests is not what was tested).
 */
#ifndef SPROBE_OUTPUTS_FIXTURE_H
#define SPROBE_OUTPUTS_FIXTURE_H

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

#define CLI "build/stackprobe"
#ifndef SPROBE_NODE_MODULES
#define SPROBE_NODE_MODULES "build/node/node_modules"
#endif

static char dir[256];	/* short: every path is dir + a short name */

/* Run a shell command, stdout and stderr into *out (malloc'd, may be NULL).
 * Returns the exit status, -1 if it did not exit. */
static __attribute__((unused)) int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static __attribute__((unused)) int run(char **out, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	return sprobe_test_run(cmd, out);
}

static __attribute__((unused)) bool have_node(void)
{
	return run(NULL, "command -v node >/dev/null") == 0;
}

/* Run a checker; fail the test with its output unless it exits 0. Returns
 * the "samples" number of its JSON summary line. */
static __attribute__((unused)) unsigned long long check(const char *what, const char *cmd_fmt, ...)
	__attribute__((format(printf, 2, 3)));

static __attribute__((unused)) unsigned long long check(const char *what, const char *cmd_fmt, ...)
{
	char cmd[8192], *out = NULL;
	va_list ap;

	va_start(ap, cmd_fmt);
	vsnprintf(cmd, sizeof(cmd), cmd_fmt, ap);
	va_end(ap);
	int rc = run(&out, "%s", cmd);

	if (rc != 0)
		fail_msg("%s: checker exited %d:\n%s\n(command: %s)", what, rc, out, cmd);
	print_message("%s: %s", what, out);
	const char *s = strstr(out, "\"samples\":");

	assert_non_null(s);
	unsigned long long n = strtoull(s + strlen("\"samples\":"), NULL, 10);

	free(out);
	return n;
}

static __attribute__((unused)) unsigned long long pprof_check(const char *pb, const char *folded, const char *mode,
				      unsigned freq, const char *expect)
{
	return check("pprof", "NODE_PATH=%s node tests/outputs/check_pprof.cjs %s %s %s %u %s",
		     SPROBE_NODE_MODULES, pb, folded, mode, freq, expect ? expect : "");
}

static __attribute__((unused)) unsigned long long speedscope_check(const char *json, const char *folded, unsigned freq)
{
	return check("speedscope", "NODE_PATH=%s node tests/outputs/check_speedscope.cjs %s %s %u",
		     SPROBE_NODE_MODULES, json, folded, freq);
}

#define PYTHON "$(test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)"

/* check_html.py HTML FOLDED TRACE SCRIPT [EXPECT...]: '-' for what is not
 * compared. */
static __attribute__((unused)) unsigned long long html_check(const char *html, const char *folded, const char *trace,
				     const char *js, const char *expect)
{
	return check("html", PYTHON " tests/outputs/check_html.py %s %s %s %s %s", html, folded, trace,
		     js, expect ? expect : "");
}

static __attribute__((unused)) unsigned long long svg_check(const char *svg, const char *folded)
{
	/* Debian's python3 (xml.etree is in its standard library); a pyenv
	 * shim in PATH can cost seconds per start. */
	return check("svg", "$(test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3) "
			    "tests/outputs/check_svg.py %s %s", svg, folded);
}

/* `stackprobe report -i IN --format FMT -o DIR/BASE.EXT [extra]`, must exit 0. */
static __attribute__((unused)) void report_to(const char *in, const char *fmt, const char *outpath, const char *extra)
{
	char *out = NULL;
	int rc = run(&out, CLI " report -i %s --format %s -o %s %s", in, fmt, outpath,
		     extra ? extra : "");

	if (rc != 0)
		fail_msg("report --format %s exited %d: %s", fmt, rc, out);
	free(out);
	struct stat st;

	assert_int_equal(stat(outpath, &st), 0);
	/* Only folded output of a file without samples may be empty. */
	if (strcmp(fmt, "folded") != 0)
		assert_true(st.st_size > 0);
}

static __attribute__((unused)) void path_in(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "%.255s/%.200s", dir, name);

	assert_true(n > 0 && (size_t)n < len);
}

static __attribute__((unused)) int setup(void **state)
{
	mkdir("build", 0755);
	snprintf(dir, sizeof(dir), "build/test-out-outputs.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return 0;
}

static __attribute__((unused)) int teardown(void **state)
{
	char cmd[sizeof(dir) + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Write all three outputs and the folded report of IN, run every reader,
 * and require each to count as many samples as the library loaded. */
static __attribute__((unused)) void check_all(const char *in, const char *tag, const char *mode, unsigned freq,
		      const char *pprof_expect, const char *extra, bool names_exact)
{
	char folded[PATH_MAX], pb[PATH_MAX], ss[PATH_MAX], svg[PATH_MAX], html[PATH_MAX],
		trace[PATH_MAX], name[128];
	struct sprobe_report *r;
	uint32_t tid = 0;

	if (extra && strstr(extra, "--tid "))
		tid = (uint32_t)strtoul(strstr(extra, "--tid ") + 6, NULL, 10);
	r = sprobe_report__new(&(struct sprobe_report_opts){ .sz = sizeof(struct sprobe_report_opts),
							    .tid = tid });
	assert_non_null(r);
	assert_int_equal(sprobe_report__load_file(r, in), 0);
	unsigned long long want = sprobe_report__samples(r);

	sprobe_report__free(r);

	snprintf(name, sizeof(name), "%s.folded", tag);
	path_in(folded, sizeof(folded), name);
	snprintf(name, sizeof(name), "%s.pb.gz", tag);
	path_in(pb, sizeof(pb), name);
	snprintf(name, sizeof(name), "%s.speedscope.json", tag);
	path_in(ss, sizeof(ss), name);
	snprintf(name, sizeof(name), "%s.svg", tag);
	path_in(svg, sizeof(svg), name);
	report_to(in, "folded", folded, extra);
	report_to(in, "pprof", pb, extra);
	report_to(in, "speedscope", ss, extra);
	report_to(in, "svg", svg, extra);
	snprintf(name, sizeof(name), "%s.html", tag);
	path_in(html, sizeof(html), name);
	snprintf(name, sizeof(name), "%s.trace.json", tag);
	path_in(trace, sizeof(trace), name);
	report_to(in, "html", html, extra);
	report_to(in, "trace", trace, extra);
	/* The page's structure and timeline whatever the names; its names
	 * against the folded report's where they can be compared. */
	assert_int_equal(html_check(html, want && names_exact ? folded : "-", trace, "-", NULL), want);

	/* Well-formed XML by a second parser (libxml2), whatever the names. */
	char *out = NULL;

	if (run(&out, "xmllint --noout %s", svg) != 0)
		fail_msg("xmllint: %s", out);
	free(out);
	if (want && names_exact)
		assert_int_equal(svg_check(svg, folded), want);
	if (!have_node()) {
		SPROBE_SKIP("node is not installed (apt-get install nodejs npm): pprof and "
			    "speedscope readers not run");
	}
	assert_int_equal(pprof_check(pb, folded, mode, freq, pprof_expect), want);
	assert_int_equal(speedscope_check(ss, folded, freq), want);
}

/* ---- synthetic files --------------------------------------------------------- */

#define MOD0_BIAS 0x400000ull
#define MOD1_BIAS 0x7f0000000000ull

struct synth {
	bool header;
	uint32_t mode;
	uint32_t freq;
	bool trailer;
	bool bad_bytes;		/* a name with invalid UTF-8 and a control byte */
	bool no_samples;
	bool weights;		/* samples of weight 1..4, as cpu mode writes */
	bool hostile;		/* markup in a thread name, a symbol and the command */
};

/* Symbolized pcs: module 0 (the "server") and module 1 ("libfoo.so"). */
static const struct {
	uint64_t pc;
	uint32_t module;
	const char *name;
} syms[] = {
	{ 0x401010, 0, "main" },
	{ 0x401110, 0, "handle<int, std::pair<a, b>>(x&, y const*)" },
	{ 0x401120, 0, "handle<int, std::pair<a, b>>(x&, y const*)" }, /* same function */
	{ 0x401210, 0, "ns::parse;json" },
	{ 0x401310, 0, "caf\xc3\xa9_\xc3\xbcn\xc3\xaf \xe2\x86\x92 \xf0\x9f\x94\xa5" },
	{ 0x401410, 0, "operator\"\" _q & 'quote' <tag>" },
	{ 0x7f0000001010, 1, "foo_compute" },
	{ 0x7f0000001110, 1, "foo_leaf" },
};
#define PC_UNSYMBOLIZED 0x401810ull	/* in module 0, no symbol record */
#define PC_NOWHERE 0x1234ull		/* in no module */
#define PC_BAD 0x401910ull		/* named with invalid bytes when asked */
#define PC_HOSTILE 0x401a10ull		/* named with markup when asked */
#define TID_HOSTILE 105u

/* What would break out of an HTML page's script, comment, attribute or
 * title if written unescaped; U+2028 ends a line in old JavaScript. */
static const char hostile_thread[] = "</script><script>alert(1)</script>";
static const char hostile_sym[] = "<!--</script><img src=x onerror=alert(2)>&amp;\"'\xe2\x80\xa8" "end";
static const char hostile_cmd[] = "evil</title><script>alert(3)</script>\0--x=\"'&<b>";

static const struct {
	uint32_t tid;
	const char *name;
} threads[] = {
	{ 101, "w<1>&\"q\"" },
	{ 102, "caf\xc3\xa9" },
	{ 103, "semi;colon" },
};

/* Stacks, leaf first, 0-terminated. */
static const uint64_t stacks[][7] = {
	{ 0x401110, 0x401010, 0 },
	{ 0x401120, 0x401010, 0 },
	{ 0x401210, 0x401110, 0x401010, 0 },
	{ 0x401310, 0x401210, 0x401010, 0 },
	{ 0x401410, 0x401010, 0 },
	{ 0x7f0000001110, 0x7f0000001010, 0x401010, 0 },
	{ PC_UNSYMBOLIZED, 0x401010, 0 },
	{ PC_NOWHERE, 0x7f0000001010, 0x401010, 0 },
	{ 0x401110, 0x401110, 0x401010, 0 },	/* recursion */
	{ 0 },					/* no frames at all */
	{ PC_BAD, 0x401010, 0 },		/* last: only with bad_bytes */
};

static __attribute__((unused)) void write_synthetic(const char *path, const struct synth *o, unsigned seed)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	struct sprobe_datafile_writer *w;
	struct sprobe_df_record rec;
	uint64_t t = 1000000000ull;

	assert_true(fd >= 0);
	w = sprobe_datafile_writer__new(fd, NULL);
	assert_non_null(w);
	srand(seed);
	if (o->header) {
		rec = (struct sprobe_df_record){ .type = SPROBE_DF_HEADER };
		rec.header = (struct sprobe_df_header){
			.pid = 4242, .mode = o->mode, .freq_hz = o->freq,
			.start_realtime_ns = 1700000000000000000ull, .start_mono_ns = t,
			.cmdline = "synthetic\0--flag=<&>", .cmdline_len = 20,
		};
		if (o->hostile) {
			rec.header.cmdline = hostile_cmd;
			rec.header.cmdline_len = sizeof(hostile_cmd);
		}
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	for (size_t i = 0; i < sizeof(threads) / sizeof(threads[0]); i++) {
		rec = (struct sprobe_df_record){ .type = SPROBE_DF_THREAD };
		rec.thread = (struct sprobe_df_thread){ .tid = threads[i].tid, .name = threads[i].name,
							 .name_len = (uint32_t)strlen(threads[i].name) };
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	if (o->hostile) {
		rec = (struct sprobe_df_record){ .type = SPROBE_DF_THREAD };
		rec.thread = (struct sprobe_df_thread){ .tid = TID_HOSTILE, .name = hostile_thread,
							 .name_len = (uint32_t)strlen(hostile_thread) };
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	static const uint8_t bid0[] = { 0xde, 0xad, 0xbe, 0xef, 0x00, 0x11, 0x22, 0x33 };
	static const uint8_t bid1[] = { 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a };
	struct sprobe_df_range r0[] = { { 0x401000, 0x402000, 0x1000 } };
	struct sprobe_df_range r1[] = { { 0x7f0000001000, 0x7f0000003000, 0x1000 } };

	rec = (struct sprobe_df_record){ .type = SPROBE_DF_MODULE };
	rec.module = (struct sprobe_df_module){ .index = 0, .load_bias = MOD0_BIAS, .build_id = bid0,
						 .build_id_len = sizeof(bid0), .path = "/opt/app/bin/server",
						 .path_len = 19, .ranges = r0, .nranges = 1 };
	assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	rec.module = (struct sprobe_df_module){ .index = 1, .load_bias = MOD1_BIAS, .build_id = bid1,
						 .build_id_len = sizeof(bid1), .path = "/usr/lib/libfoo.so",
						 .path_len = 18, .ranges = r1, .nranges = 1 };
	assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);

	size_t nstacks = sizeof(stacks) / sizeof(stacks[0]) - (o->bad_bytes ? 0 : 1);

	for (int round = 0; !o->no_samples && round < 3; round++) {
		for (size_t s = 0; s < nstacks; s++) {
			int count = 1 + rand() % 12;
			uint32_t nf = 0;

			while (stacks[s][nf])
				nf++;
			for (int k = 0; k < count; k++) {
				rec = (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE };
				t += 1000000 + (uint64_t)(rand() % 1000);
				rec.sample = (struct sprobe_df_sample){
					/* tid 104 has no thread record (no name). */
					.time_ns = t, .tid = rand() % 4 == 3 ? 104 : threads[rand() % 3].tid,
					.method = 1,
					.stack_used = 4096, .signal_ns = t, .entry_ns = t + 2000,
					.exit_ns = t + 2000 + 500 + (uint64_t)(rand() % 5000),
					.pcs = stacks[s], .nframes = nf,
				};
				if (o->weights)
					rec.sample.weight = 1 + (uint32_t)(rand() % 4);
				assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
			}
		}
	}
	for (int k = 0; o->hostile && k < 5 + rand() % 10; k++) {
		static const uint64_t hstack[] = { PC_HOSTILE, 0x401010, 0 };

		rec = (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE };
		t += 1000000;
		rec.sample = (struct sprobe_df_sample){
			.time_ns = t, .tid = TID_HOSTILE, .method = 1, .stack_used = 4096,
			.signal_ns = t, .entry_ns = t + 1000, .exit_ns = t + 4000 + (uint64_t)(rand() % 1000),
			.pcs = hstack, .nframes = 2,
		};
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	if (o->hostile) {
		rec = (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL };
		rec.symbol = (struct sprobe_df_symbol){ .pc = PC_HOSTILE, .module = 0, .offset = 0x10,
							 .name = hostile_sym,
							 .name_len = (uint32_t)strlen(hostile_sym) };
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	/* Symbols at flush, after the samples, as the agent writes them. */
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		rec = (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL };
		rec.symbol = (struct sprobe_df_symbol){ .pc = syms[i].pc, .module = syms[i].module,
							 .offset = 0x10, .name = syms[i].name,
							 .name_len = (uint32_t)strlen(syms[i].name) };
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	if (o->bad_bytes) {
		static const char bad[] = "bad\xff\x01name\xc3";

		rec = (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL };
		rec.symbol = (struct sprobe_df_symbol){ .pc = PC_BAD, .module = 0, .offset = 0,
							 .name = bad, .name_len = sizeof(bad) - 1 };
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	if (o->trailer) {
		struct sprobe_df_trailer tr = { .end_realtime_ns = 1700000001000000000ull,
						.end_mono_ns = t + 1000000 };

		assert_int_equal(sprobe_datafile_writer__finish(w, &tr), 0);
	}
	sprobe_datafile_writer__free(w);
	close(fd);
}

static __attribute__((unused)) unsigned seed_now(void)
{
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	print_message("seed %u\n", seed);
	return seed;
}


#endif
