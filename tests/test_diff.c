/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `stackprobe diff` and the error of a share (userspace/report/shares.c,
 * stats.c, diff.c).
 *
 * The statistical claims are tested where the truth is known exactly:
 * recordings made with the real writer of a sampled process whose top
 * frame follows a two-state Markov chain (runs of the same stack, as a
 * wall-mode thread blocked for a while gives) with a known stationary
 * share, from fixed seeds, so every run of the test sees the same draws:
 * intervals cover the truth in >= 90 % of 200 runs and two runs of the
 * same process are flagged in <= 5 % of 200 pairs, both with runs of 20
 * samples (where a binomial interval would be far too narrow); a 75 % ->
 * 50 % shift is flagged, with the right sign, in every one of 100 pairs
 * of 300 samples (99 Hz for 3 s) with short runs, as CPU phases of a few
 * milliseconds give. Then the same on real recordings of
 * tests/workloads/cpusplit.c, whose phases' CPU time the program measures
 * itself (the truth), and the formats and errors of the command.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/report.h>

#include "datafile_fixture.h"
#include "run_helper.h"
#include "sprobe_test.h"
#include "userspace/report/stats.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out"

/* ---- Student t and Holm ---------------------------------------------------- */

static void test_t_distribution(void **state)
{
	(void)state;
	/* Published two-sided 95 % quantiles. */
	assert_true(fabs(sprobe_rep__t_quantile(0.05, 1) - 12.7062) < 1e-3);
	assert_true(fabs(sprobe_rep__t_quantile(0.05, 19) - 2.0930) < 1e-3);
	assert_true(fabs(sprobe_rep__t_quantile(0.05, 1e7) - 1.9600) < 1e-3);
	assert_true(fabs(sprobe_rep__t_pvalue(2.093024, 19) - 0.05) < 1e-5);
	assert_true(fabs(sprobe_rep__t_pvalue(-2.093024, 19) - 0.05) < 1e-5);
	assert_true(fabs(sprobe_rep__t_pvalue(0, 5) - 1.0) < 1e-12);
	assert_true(sprobe_rep__t_pvalue(INFINITY, 5) == 0.0);
	assert_true(isnan(sprobe_rep__t_pvalue(1, 0)));
}

static void test_holm(void **state)
{
	const double p[] = { 0.01, 0.04, 0.03, 0.005, NAN };
	unsigned char sig[5];

	(void)state;
	assert_int_equal(sprobe_rep__holm(p, 5, 0.05, sig), 0);
	/* 4 tests: 0.005 <= 0.0125, 0.01 <= 0.0167, then 0.03 > 0.025 stops. */
	assert_int_equal(sig[3], 1);
	assert_int_equal(sig[0], 1);
	assert_int_equal(sig[2], 0);
	assert_int_equal(sig[1], 0);
	assert_int_equal(sig[4], 0);
}

/* ---- synthetic recordings with a known share ----------------------------- */

#define PC_A 0x401000ull
#define PC_B 0x402000ull
#define PC_MAIN 0x403000ull

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static void put(struct df_buf *b, struct sprobe_df_record rec)
{
	assert_int_equal(sprobe_datafile_writer__write(b->w, &rec), 0);
}

/* A recording of n samples at 99 Hz of one thread whose top frame is
 * hot_a with stationary probability p, in runs: leave a with probability
 * k (1 - p), leave b with k p (k = 0.2, p = 0.75: runs of 20 samples in
 * a, the samples far from independent; k = 1: independent). */
static struct sprobe_report *markov_report(double p, double k, unsigned n, uint64_t seed,
					   struct df_buf *b)
{
	static const struct sprobe_df_range r = { 0x400000, 0x500000, 0 };
	const uint64_t t0 = 1000000000;
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	bool in_a = rng_unit(&s) < p;

	assert_int_equal(df_buf_open(b), 0);
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 100, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 99, .start_mono_ns = t0 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_THREAD,
		.thread = { .tid = 100, .name = "main", .name_len = 4 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 0, .load_bias = 0x400000, .path = "/usr/bin/known", .path_len = 14,
		.ranges = &r, .nranges = 1 } });
	for (unsigned i = 0; i < n; i++) {
		uint64_t pcs[2] = { in_a ? PC_A : PC_B, PC_MAIN };

		put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
			.tid = 100, .time_ns = t0 + (uint64_t)i * 10101010, .method = SPROBE_METHOD_SIGNAL, .pcs = pcs, .nframes = 2 } });
		if (rng_unit(&s) < k * (in_a ? 1 - p : p))
			in_a = !in_a;
	}
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_A, .module = 0, .name = "hot_a", .name_len = 5 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_B, .module = 0, .name = "hot_b", .name_len = 5 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_MAIN, .module = 0, .name = "main", .name_len = 4 } });
	assert_int_equal(df_buf_take(b), 0);

	struct sprobe_report *rep = sprobe_report__new(&(struct sprobe_report_opts){
		.sz = sizeof(struct sprobe_report_opts), .source = "markov" });
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__from_mem(b->bytes, b->len);

	assert_non_null(rep);
	assert_non_null(rd);
	assert_int_equal(sprobe_report__load(rep, rd), 0);
	sprobe_datafile_reader__free(rd);
	return rep;
}

/* A wall-mode recording of nthreads threads captured in ncap rounds 10 ms
 * apart, where each round has a share of its own (a phase of the program:
 * p + u, u uniform in [-0.3, 0.3]) and each thread is in hot_a with that
 * round's share: the rounds, not the samples, are the observations. */
static struct sprobe_report *rounds_report(double p, unsigned nthreads, unsigned ncap,
					   uint64_t seed, struct df_buf *b)
{
	static const struct sprobe_df_range r = { 0x400000, 0x500000, 0 };
	const uint64_t t0 = 1000000000;
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 7;

	assert_int_equal(df_buf_open(b), 0);
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_HEADER, .header = {
		.pid = 100, .mode = SPROBE_DF_MODE_WALL, .freq_hz = 99, .start_mono_ns = t0 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_MODULE, .module = {
		.index = 0, .load_bias = 0x400000, .path = "/usr/bin/known", .path_len = 14,
		.ranges = &r, .nranges = 1 } });
	for (unsigned c = 0; c < ncap; c++) {
		double q = p + 0.6 * (rng_unit(&s) - 0.5);

		for (unsigned t = 0; t < nthreads; t++) {
			uint64_t pcs[2] = { rng_unit(&s) < q ? PC_A : PC_B, PC_MAIN };

			put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SAMPLE, .sample = {
				.tid = 100 + t, .time_ns = t0 + (uint64_t)c * 10000000,
				.method = SPROBE_METHOD_SIGNAL, .pcs = pcs, .nframes = 2 } });
		}
	}
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_A, .module = 0, .name = "hot_a", .name_len = 5 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_B, .module = 0, .name = "hot_b", .name_len = 5 } });
	put(b, (struct sprobe_df_record){ .type = SPROBE_DF_SYMBOL, .symbol = {
		.pc = PC_MAIN, .module = 0, .name = "main", .name_len = 4 } });
	assert_int_equal(df_buf_take(b), 0);

	struct sprobe_report *rep = sprobe_report__new(&(struct sprobe_report_opts){
		.sz = sizeof(struct sprobe_report_opts), .source = "rounds" });
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__from_mem(b->bytes, b->len);

	assert_non_null(rep);
	assert_non_null(rd);
	assert_int_equal(sprobe_report__load(rep, rd), 0);
	sprobe_datafile_reader__free(rd);
	return rep;
}

/* The diff of two reports as JSON (malloc'd). */
static char *diff_json(struct sprobe_report *a, struct sprobe_report *b)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	assert_non_null(f);
	assert_int_equal(sprobe_report__diff(a, b, f, SPROBE_REPORT_JSON, NULL), 0);
	fclose(f);
	return out;
}

/* diff_json() of two synthetic recordings, which it then frees with their
 * buffers. */
static char *pair_json(struct sprobe_report *ra, struct df_buf *a, struct sprobe_report *rb,
		       struct df_buf *b)
{
	char *json = diff_json(ra, rb);

	sprobe_report__free(ra);
	sprobe_report__free(rb);
	df_buf_close(a);
	df_buf_close(b);
	return json;
}

/* Field key ("delta", "ci95", "base_ci95", "significant") of function fn's
 * self (total: its "total" object) in a diff's JSON: v[0] (and v[1] for
 * an interval); returns false when the field is null or missing. */
static bool field(const char *json, const char *fn, bool total, const char *key, double v[2])
{
	char pat[128];
	const char *at;

	snprintf(pat, sizeof(pat), "{\"name\": \"%s\",", fn);
	at = strstr(json, pat);
	if (!at)
		return false;
	if (total)
		at = strstr(at, "\"total\": {");
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	at = at ? strstr(at, pat) : NULL;
	if (!at)
		return false;
	at += strlen(pat);
	if (!strncmp(at, "true", 4) || !strncmp(at, "false", 5)) {
		v[0] = at[0] == 't';
		return true;
	}
	if (*at == '[')
		return sscanf(at, "[%lf, %lf]", &v[0], &v[1]) == 2;
	return sscanf(at, "%lf", &v[0]) == 1;
}

static bool any_significant(const char *json)
{
	return strstr(json, "\"significant\": true") != NULL;
}

static void test_intervals_cover_truth(void **state)
{
	unsigned covered = 0, runs = 200;

	(void)state;
	for (unsigned i = 0; i < runs; i++) {
		struct df_buf a, b;
		struct sprobe_report *ra = markov_report(0.75, 0.2, 2000, 1000 + i, &a);
		struct sprobe_report *rb = markov_report(0.5, 0.2, 2000, 5000 + i, &b);
		char *json = pair_json(ra, &a, rb, &b);
		double ci[2];

		assert_true(field(json, "hot_a", false, "base_ci95", ci));
		covered += ci[0] <= 0.75 && 0.75 <= ci[1];
		free(json);
	}
	print_message("95 %% intervals covered the true share in %u of %u runs\n", covered, runs);
	assert_true(covered >= runs * 9 / 10);
}

/* Many threads, few captures: 100 threads in 4 rounds fill 4 of the 20
 * batches of time; the interval must have the degrees of freedom of the 4
 * rounds, not of 20 batches (with 19 it covered the truth in 162 of
 * these 200 runs). */
static void test_intervals_with_few_captures(void **state)
{
	unsigned covered = 0, runs = 200;

	(void)state;
	for (unsigned i = 0; i < runs; i++) {
		struct df_buf a, b;
		struct sprobe_report *ra = rounds_report(0.5, 100, 4, 70000 + i, &a);
		struct sprobe_report *rb = rounds_report(0.5, 100, 4, 80000 + i, &b);
		char *json = pair_json(ra, &a, rb, &b);
		double ci[2];

		assert_true(field(json, "hot_a", false, "base_ci95", ci));
		covered += ci[0] <= 0.5 && 0.5 <= ci[1];
		free(json);
	}
	print_message("4 captures of 100 threads: the interval covered the truth in %u of %u runs\n",
		      covered, runs);
	assert_true(covered >= runs * 9 / 10);
}

static void test_same_program_not_flagged(void **state)
{
	unsigned flagged = 0, runs = 200;

	(void)state;
	for (unsigned i = 0; i < runs; i++) {
		struct df_buf a, b;
		struct sprobe_report *ra = markov_report(0.75, 0.2, 2000, 9000 + i, &a);
		struct sprobe_report *rb = markov_report(0.75, 0.2, 2000, 19000 + i, &b);
		char *json = pair_json(ra, &a, rb, &b);

		flagged += any_significant(json);
		free(json);
	}
	print_message("A/A: %u of %u pairs flagged a change\n", flagged, runs);
	assert_true(flagged <= runs / 20);
}

static void test_shift_flagged_at_99hz_3s(void **state)
{
	unsigned found = 0, runs = 100, contains = 0;

	(void)state;
	for (unsigned i = 0; i < runs; i++) {
		struct df_buf a, b;
		struct sprobe_report *ra = markov_report(0.75, 0.8, 300, 30000 + i, &a);
		struct sprobe_report *rb = markov_report(0.5, 0.8, 300, 40000 + i, &b);
		char *json = pair_json(ra, &a, rb, &b);
		double sig[2], d[2], ci[2];

		assert_true(field(json, "hot_a", false, "significant", sig));
		assert_true(field(json, "hot_a", false, "delta", d));
		assert_true(field(json, "hot_a", false, "ci95", ci));
		found += sig[0] == 1 && d[0] < 0;
		contains += ci[0] <= -0.25 && -0.25 <= ci[1];
		free(json);
	}
	print_message("75 %% -> 50 %% at 300 samples: flagged %u of %u, interval held -25 points "
		      "in %u\n", found, runs, contains);
	assert_int_equal(found, runs);
	assert_true(contains >= runs * 9 / 10);
}

/* ---- real recordings -------------------------------------------------------- */

/* Record cpusplit's phases a_us / b_us for ms in cpu mode at hz into
 * OUT/<name>.data; the truth (phase_a's share of the phases' CPU) into
 * *truth. */
static void record_phases(const char *name, unsigned a_us, unsigned b_us, unsigned ms,
			  unsigned hz, double *truth)
{
	char cmd[512], *out = NULL;
	unsigned long long ta = 0, tb = 0;
	const char *t;

	snprintf(cmd, sizeof(cmd),
		 "mkdir -p " OUT " && " CLI " record -q -F %u --mode cpu -o " OUT "/diff-%s.data -- "
		 "build/cpusplit phases %u %u %u 2>&1", hz, name, a_us, b_us, ms);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	t = strstr(out, "truth phase_a ");
	assert_non_null(t);
	assert_int_equal(sscanf(t, "truth phase_a %llu phase_b %llu", &ta, &tb), 2);
	assert_true(ta + tb > 0);
	*truth = (double)ta / (double)(ta + tb);
	free(out);
}

__attribute__((noinline)) static char *cli_diff(const char *a, const char *b, const char *fmt)
{
	char cmd[512], *out = NULL;

	snprintf(cmd, sizeof(cmd), CLI " diff -f %s " OUT "/diff-%s.data " OUT "/diff-%s.data", fmt,
		 a, b);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	return out;
}

/* The phases' cycle (1.618 ms) is incommensurate with the sampling period,
 * so samples do not lock onto one phase for long. */
static void test_recorded_shift(void **state)
{
	double t75, t50, t75b, d[2], ci[2], sig[2];
	char *json;

	(void)state;
	NEED_PERF(false);
	record_phases("a75", 1213, 405, 2000, 999, &t75);
	record_phases("b50", 809, 809, 2000, 999, &t50);
	json = cli_diff("a75", "b50", "json");
	assert_true(field(json, "phase_a", true, "significant", sig));
	assert_true(field(json, "phase_a", true, "delta", d));
	assert_true(field(json, "phase_a", true, "ci95", ci));
	print_message("phase_a 75 %% -> 50 %% at 999 Hz: %+.2f [%+.2f, %+.2f] points, truth %+.2f\n",
		      100 * d[0], 100 * ci[0], 100 * ci[1], 100 * (t50 - t75));
	assert_int_equal(sig[0], 1);
	assert_true(d[0] < 0);
	assert_true(ci[0] <= t50 - t75 && t50 - t75 <= ci[1]);
	free(json);

	/* 99 Hz for 3 s: ~300 samples. */
	record_phases("a75s", 1213, 405, 3000, 99, &t75b);
	record_phases("b50s", 809, 809, 3000, 99, &t50);
	json = cli_diff("a75s", "b50s", "json");
	assert_true(field(json, "phase_a", true, "significant", sig));
	assert_true(field(json, "phase_a", true, "delta", d));
	print_message("phase_a 75 %% -> 50 %% at 99 Hz: %+.2f points, truth %+.2f\n", 100 * d[0],
		      100 * (t50 - t75b));
	assert_int_equal(sig[0], 1);
	assert_true(d[0] < 0);
	free(json);
}

/* Two recordings of the same program: no change flagged. Two of three
 * pairs at least (each pair is wrongly flagged with probability <= 5 %,
 * so this fails with probability < 1 % if the intervals are honest). */
static void test_recorded_same_program(void **state)
{
	double t;
	unsigned clean = 0;

	(void)state;
	NEED_PERF(false);
	for (int i = 0; i < 3; i++) {
		char a[16], b[16], *text;

		snprintf(a, sizeof(a), "aa%d", 2 * i);
		snprintf(b, sizeof(b), "aa%d", 2 * i + 1);
		record_phases(a, 1213, 405, 1500, 999, &t);
		record_phases(b, 1213, 405, 1500, 999, &t);
		text = cli_diff(a, b, "json");
		clean += !any_significant(text);
		free(text);
	}
	print_message("A/A recorded: %u of 3 pairs flagged nothing\n", clean);
	assert_true(clean >= 2);
}

/* ---- formats and errors ---------------------------------------------------- */

static void test_formats(void **state)
{
	double t;
	char *out = NULL, cmd[512];

	(void)state;
	NEED_PERF(false);
	record_phases("fa", 1213, 405, 600, 999, &t);
	record_phases("fb", 809, 809, 600, 999, &t);
	/* text: the header and phase_a's row with a mark */
	out = cli_diff("fa", "fb", "text");
	assert_non_null(strstr(out, "Holm's correction"));
	assert_non_null(strstr(out, "phase_a"));
	free(out);
	/* folded: "stack base new", both columns numbers, phase_a's base larger */
	out = cli_diff("fa", "fb", "folded");
	{
		double ba = 0, na = 0;
		unsigned lines = 0;

		for (char *l = strtok(out, "\n"); l; l = strtok(NULL, "\n")) {
			char *s2 = strrchr(l, ' '), *s1;

			assert_non_null(s2);
			*s2 = 0;
			s1 = strrchr(l, ' ');
			assert_non_null(s1);
			lines++;
			if (strstr(l, ";phase_a;") || strstr(l, ";phase_a")) {
				ba += strtod(s1 + 1, NULL);
				na += strtod(s2 + 1, NULL);
			}
		}
		assert_true(lines > 0);
		assert_true(ba > na);
	}
	free(out);
	/* pprof: go tool pprof reads it; phase_a's change is negative */
	snprintf(cmd, sizeof(cmd),
		 CLI " diff -f pprof -o " OUT "/diff.pb.gz " OUT "/diff-fa.data " OUT "/diff-fb.data"
		 " && go tool pprof -top -cum " OUT "/diff.pb.gz 2>&1");
	int rc = sprobe_test_run(cmd, &out);

	if (rc == 127 || (out && strstr(out, "go: not found")))
		print_message("go tool pprof not installed: the pprof form is not checked\n");
	else {
		char *line;

		assert_int_equal(rc, 0);
		line = strstr(out, "phase_a");
		assert_non_null(line);
		/* a top line ends with the name; its values are negative */
		while (line > out && line[-1] != '\n')
			line--;
		assert_non_null(strchr(line, '-'));
	}
	free(out);
	/* html: one page, data script-safe (no raw '<' between its tags) */
	{
		char *page = cli_diff("fa", "fb", "html");
		char *data = strstr(page, "id=\"sp-data\">"), *end;

		assert_non_null(data);
		end = strstr(data, "</script>");
		assert_non_null(end);
		*end = 0;
		assert_null(strchr(data + 13, '<'));
		assert_non_null(strstr(data, "phase_a"));
		free(page);
	}
}

static void test_usage_and_bad_input(void **state)
{
	char *out = NULL;

	(void)state;
	assert_int_equal(sprobe_test_run(CLI " diff " OUT "/nothing.data 2>&1", &out), 2);
	assert_non_null(strstr(out, "two data files"));
	free(out);
	assert_int_equal(sprobe_test_run(CLI " diff -f svg a b 2>&1", &out), 2);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " diff --alpha 2 a b 2>&1", &out), 2);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " diff " OUT "/no-such-base.data " OUT
					 "/no-such-new.data 2>&1", &out), 1);
	assert_non_null(strstr(out, "no-such-base.data"));
	free(out);
	/* a corrupt file: an error naming it, exit 1 */
	assert_int_equal(sprobe_test_run("mkdir -p " OUT " && head -c 300 /dev/urandom > " OUT
					 "/diff-garbage.data", NULL), 0);
	assert_int_equal(sprobe_test_run(CLI " diff " OUT "/diff-garbage.data " OUT
					 "/diff-garbage.data 2>&1", &out), 1);
	assert_non_null(strstr(out, "diff-garbage.data"));
	free(out);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_t_distribution),
	cmocka_unit_test(test_holm),
	cmocka_unit_test(test_intervals_cover_truth),
	cmocka_unit_test(test_intervals_with_few_captures),
	cmocka_unit_test(test_same_program_not_flagged),
	cmocka_unit_test(test_shift_flagged_at_99hz_3s),
	cmocka_unit_test(test_recorded_shift),
	cmocka_unit_test(test_recorded_same_program),
	cmocka_unit_test(test_formats),
	cmocka_unit_test(test_usage_and_bad_input),
};

SPROBE_TEST_MAIN(tests)
