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

#define CLI "build/stackprobe"
#ifndef SPROBE_NODE_MODULES
#define SPROBE_NODE_MODULES "build/node/node_modules"
#endif

static char dir[256];	/* short: every path is dir + a short name */

/* Run a shell command, stdout and stderr into *out (malloc'd, may be NULL).
 * Returns the exit status, -1 if it did not exit. */
static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int run(char **out, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	strncat(cmd, " 2>&1", sizeof(cmd) - strlen(cmd) - 1);
	return sprobe_test_run(cmd, out);
}

static bool have_node(void)
{
	return run(NULL, "command -v node >/dev/null") == 0;
}

/* Run a checker; fail the test with its output unless it exits 0. Returns
 * the "samples" number of its JSON summary line. */
static unsigned long long check(const char *what, const char *cmd_fmt, ...)
	__attribute__((format(printf, 2, 3)));

static unsigned long long check(const char *what, const char *cmd_fmt, ...)
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

static unsigned long long pprof_check(const char *pb, const char *folded, const char *mode,
				      unsigned freq, const char *expect)
{
	return check("pprof", "NODE_PATH=%s node tests/outputs/check_pprof.cjs %s %s %s %u %s",
		     SPROBE_NODE_MODULES, pb, folded, mode, freq, expect ? expect : "");
}

static unsigned long long speedscope_check(const char *json, const char *folded, unsigned freq)
{
	return check("speedscope", "NODE_PATH=%s node tests/outputs/check_speedscope.cjs %s %s %u",
		     SPROBE_NODE_MODULES, json, folded, freq);
}

#define PYTHON "$(test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)"

/* check_html.py HTML FOLDED TRACE SCRIPT [EXPECT...]: '-' for what is not
 * compared. */
static unsigned long long html_check(const char *html, const char *folded, const char *trace,
				     const char *js, const char *expect)
{
	return check("html", PYTHON " tests/outputs/check_html.py %s %s %s %s %s", html, folded, trace,
		     js, expect ? expect : "");
}

static unsigned long long svg_check(const char *svg, const char *folded)
{
	/* Debian's python3 (xml.etree is in its standard library); a pyenv
	 * shim in PATH can cost seconds per start. */
	return check("svg", "$(test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3) "
			    "tests/outputs/check_svg.py %s %s", svg, folded);
}

/* `stackprobe report -i IN --format FMT -o DIR/BASE.EXT [extra]`, must exit 0. */
static void report_to(const char *in, const char *fmt, const char *outpath, const char *extra)
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

static void path_in(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "%.255s/%.200s", dir, name);

	assert_true(n > 0 && (size_t)n < len);
}

static int setup(void **state)
{
	mkdir("build", 0755);
	snprintf(dir, sizeof(dir), "build/test-out-outputs.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	char cmd[sizeof(dir) + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Write all three outputs and the folded report of IN, run every reader,
 * and require each to count as many samples as the library loaded. */
static void check_all(const char *in, const char *tag, const char *mode, unsigned freq,
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

static void write_synthetic(const char *path, const struct synth *o, unsigned seed)
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

static unsigned seed_now(void)
{
	unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();

	print_message("seed %u\n", seed);
	return seed;
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
	T(test_outputs_html_hostile),
	T(test_outputs_html_big),
	T(test_outputs_html_processes),
	T(test_outputs_html_kernel_vs_self),
	T(test_outputs_cli_errors),
	T(test_outputs_demo_recording),
};

SPROBE_TEST_MAIN(tests)
