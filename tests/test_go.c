/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A cgo Go program under `stackprobe record` (issue 25): the Go runtime
 * installs its own handler on every signal, the capture signal included,
 * with raw rt_sigaction calls; the capture backend puts its handler back
 * in front and chains (backends/linux/chain.c). Checked, in cpu and wall
 * mode, on build/gomix (tests/workloads/gomix/main.go: main.gospin on one
 * goroutine, the C function cspin on another, both busy):
 *  - the program runs to its normal end, nothing said on stderr;
 *  - both functions are sampled, each with a share of the two between 0.3
 *    and 0.7 (both threads are busy all the time, perf sees about half
 *    each; the comparison with perf, within 0.05, is bench/go_vs_perf.py:
 *    timing and shares belong to benchmarks);
 *  - Go stacks unwind to the goroutine's root (runtime.goexit, through
 *    main.main.func1), and the goroutine's stack, carved out of the Go
 *    heap, is copied within its bounds (no "truncated" sample);
 *  - Go's own asynchronous preemption (SIGURG) still works: `gomix
 *    preempt` can only end early if a call-free loop is preempted by
 *    signal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define GOMIX "build/gomix"
#define OUT "build/test-out/go"

static int setup(void **state)
{
	(void)state;
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

/* Self samples of leaf function fn in a folded report. */
static long leaf_samples(const char *folded, const char *fn, long *rooted)
{
	long n = 0;
	size_t fl = strlen(fn);

	*rooted = 0;
	for (const char *line = folded; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *sp = memrchr(line, ' ', len);
		if (sp && (size_t)(sp - line) > fl && sp[-(long)fl - 1] == ';' &&
		    !memcmp(sp - fl, fn, fl)) {
			long c = atol(sp + 1);
			n += c;
			char buf[1024];
			size_t k = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
			memcpy(buf, line, k);
			buf[k] = '\0';
			if (strstr(buf, ";runtime.goexit.abi0;main.main.func1;"))
				*rooted += c;
		}
		line += len + (end ? 1 : 0);
	}
	return n;
}

static void record_mode(const char *mode)
{
	char cmd[512], *out = NULL, *folded = NULL, *text = NULL;
	char data[128];
	long rooted, crooted;

	snprintf(data, sizeof(data), OUT "/gomix-%s.data", mode);
	unlink(data);
	snprintf(cmd, sizeof(cmd),
		 CLI " record -q --no-bpf -F 499 -m %s -o %s -- " GOMIX " 1.5 2>&1", mode, data);
	int st = sprobe_test_run(cmd, &out);
	print_message("%s mode: exit %d\n%s", mode, st, out);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "gospin "));
	assert_non_null(strstr(out, "cspin "));
	assert_null(strstr(out, "stackprobe agent:"));

	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format folded 2>/dev/null", data);
	assert_int_equal(sprobe_test_run(cmd, &folded), 0);
	long g = leaf_samples(folded, "main.gospin", &rooted);
	long c = leaf_samples(folded, "cspin", &crooted);
	print_message("  main.gospin %ld (%ld under runtime.goexit;main.main.func1), cspin %ld\n",
		      g, rooted, c);
	assert_true(g > 0 && c > 0);
	double share = (double)g / (double)(g + c);
	/* Against the run's own split (the two loops cost the same per
	 * iteration and print their counts), not a fixed 0.5: on a loaded
	 * machine the goroutine may get less CPU than the C thread. The
	 * tolerance covers the samples taken at runtime.asyncPreempt's entry
	 * (docs/LIMITATIONS.md "Go programs"); shares against perf are in
	 * make bench-go. */
	const char *gs = strstr(out, "gospin "), *cs = strstr(out, "cspin ");
	double gi = strtod(gs + 7, NULL), ci = strtod(cs + 6, NULL);
	/* cpu mode: the CPU split; wall mode: both threads are runnable all
	 * the time (on CPU or waiting for one), so the wall split is even. */
	double truth = strcmp(mode, "wall") == 0 ? 0.5 : gi + ci > 0 ? gi / (gi + ci) : 0.5;
	print_message("  share %.3f, the run's own split %.3f\n", share, truth);
	assert_true(share >= truth - 0.15 && share <= truth + 0.15);
	assert_int_equal(rooted, g);

	snprintf(cmd, sizeof(cmd), CLI " report -i %s 2>/dev/null", data);
	assert_int_equal(sprobe_test_run(cmd, &text), 0);
	assert_null(strstr(text, "truncated="));
	free(text);
	free(folded);
	free(out);
}

static void test_go_cpu_mode(void **state)
{
	(void)state;
	record_mode("cpu");
}

static void test_go_wall_mode(void **state)
{
	(void)state;
	record_mode("wall");
}

static void test_go_preemption_works(void **state)
{
	char *out = NULL;

	(void)state;
	int st = sprobe_test_run(CLI " record -q --no-bpf -F 999 -o " OUT "/preempt.data -- " GOMIX
				 " preempt 2>&1",
				 &out);
	print_message("%s", out);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "preempted by signal after "));
	free(out);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_go_cpu_mode, setup),
	cmocka_unit_test_setup(test_go_wall_mode, setup),
	cmocka_unit_test_setup(test_go_preemption_works, setup),
};

SPROBE_TEST_MAIN(tests)
