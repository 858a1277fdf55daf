/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier unwinds: `record --mode cpu --
 * CMD` on a program the agent cannot enter samples it through the kernel
 * (registers and a copy of the user stack per sample) and unwinds each
 * sample with the deferred unwinder, reading the program's code and
 * .eh_frame from its file. Checked on real programs, read back through
 * the reports:
 *  - build/extsplit (tests/workloads/extsplit.c, -O2 -static: no frame
 *    pointers): hot_a and hot_b do 1:3 of the same work; each one's share
 *    of their self samples within 0.05 of that (perf agrees:
 *    bench/external_vs_perf.py, docs/PERFORMANCE.md), and their stacks go
 *    through their own caller to main (or the thread's start);
 *  - build/gosplit (tests/workloads/gosplit, CGO_ENABLED=0: static, no
 *    .eh_frame; .debug_frame and frame pointers): hotA and hotB in 1:3
 *    within 0.05, each under its caller (callerA, callerB: the leaves are
 *    frameless) and the goroutine's function;
 *  - a stack deeper than the copy (build/extsplit-fp deep, 40 frames of
 *    ~200 bytes, a 1 KiB copy): the walk runs out of copy and the
 *    kernel's frame-pointer chain goes on from its last frame to main;
 *  - a library the program dlopens after record read its maps
 *    (build/extdl, --external): its frames are named and unwound through
 *    to main (record reads the maps again on a pc in no module);
 *  - a child that exits while the command goes on keeps its samples,
 *    named and unwound (its modules were read while it lived).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/external"

static int setup(void **state)
{
	(void)state;
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

/* Record cmdline in cpu mode at 999 Hz into OUT/name.data; its stderr
 * into *err. Skips when this machine forbids perf events. */
static void record(const char *name, const char *opts, const char *cmdline, char **err)
{
	char cmd[1024];
	int rc;

	snprintf(cmd, sizeof(cmd),
		 CLI " record --mode cpu -F 999 --no-report %s -o " OUT "/%s.data -- %s 2>&1", opts,
		 name, cmdline);
	rc = sprobe_test_run(cmd, err);
	if (strstr(*err, "cannot sample") && (strstr(*err, "Permission denied") ||
					      strstr(*err, "Operation not permitted") ||
					      strstr(*err, "No such file or directory")))
		SPROBE_SKIP("perf events are not available here: %s", *err);
	if (rc != 0)
		fail_msg("%s: exit %d; output:\n%s", cmdline, rc, *err);
}

static char *folded(const char *name)
{
	char cmd[512], *out = NULL;

	snprintf(cmd, sizeof(cmd), CLI " report -i " OUT "/%s.data --format folded", name);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	return out;
}

struct leaf {
	long self;	/* samples whose innermost frame is the function */
	long called;	/* ... whose frame above it is caller */
	long rooted;	/* ... whose stack reaches one of the roots */
	long deep;	/* ... with more than 2 frames */
};

/* Count the folded report's samples whose leaf is fn. */
static struct leaf leaf_of(const char *text, const char *fn, const char *caller,
			   const char *root1, const char *root2)
{
	struct leaf l = { 0 };
	char want_leaf[128], want_call[256];
	char *copy = strdup(text);

	assert_non_null(copy);
	snprintf(want_leaf, sizeof(want_leaf), ";%s ", fn);
	snprintf(want_call, sizeof(want_call), ";%s;%s ", caller, fn);
	for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');
		int frames = 1;

		if (!sp)
			continue;
		/* Match the leaf with its trailing space: "x;hot_a 12". */
		size_t ll = (size_t)(sp - line) + 1;
		char *end = line + ll;
		char saved = *end;

		*end = '\0';
		bool is_leaf = ll >= strlen(want_leaf) &&
			       strcmp(line + ll - strlen(want_leaf), want_leaf) == 0;
		bool is_called = ll >= strlen(want_call) &&
				 strcmp(line + ll - strlen(want_call), want_call) == 0;
		*end = saved;
		if (!is_leaf)
			continue;
		long n = strtol(sp + 1, NULL, 10);

		for (const char *c = line; c < sp; c++)
			frames += *c == ';';
		l.self += n;
		l.called += is_called ? n : 0;
		if ((root1 && strstr(line, root1)) || (root2 && strstr(line, root2)))
			l.rooted += n;
		/* The first element is the thread ("name-tid"), not a frame. */
		l.deep += frames - 1 > 2 ? n : 0;
	}
	free(copy);
	return l;
}

static void test_static_c_split(void **state)
{
	char *err = NULL;

	(void)state;
	record("csplit", "", "build/extsplit split 1500 2", &err);
	/* The one line that says which tier samples it. */
	assert_non_null(strstr(err, "is statically linked"));
	assert_non_null(strstr(err, "sampled through the kernel instead"));
	char *f = folded("csplit");
	struct leaf a = leaf_of(f, "hot_a", "caller_a", "main;split_loop;", "start_thread;split_loop;");
	struct leaf b = leaf_of(f, "hot_b", "caller_b", "main;split_loop;", "start_thread;split_loop;");

	print_message("  static C: hot_a %ld (called %ld, rooted %ld), hot_b %ld (called %ld, "
		      "rooted %ld)\n",
		      a.self, a.called, a.rooted, b.self, b.called, b.rooted);
	assert_true(a.self + b.self >= 500);
	double share = (double)a.self / (double)(a.self + b.self);

	print_message("  hot_a share %.3f (the work's: 0.250)\n", share);
	assert_true(share > 0.20 && share < 0.30);
	/* Without frame pointers only DWARF finds the callers: nearly every
	 * sample goes through its caller to main or the thread's start. */
	assert_true(a.called >= a.self * 9 / 10);
	assert_true(b.called >= b.self * 9 / 10);
	assert_true(a.rooted >= a.self * 9 / 10);
	assert_true(b.rooted >= b.self * 9 / 10);
	assert_true(a.deep >= a.self * 9 / 10);
	/* The main thread's stacks reach main itself. */
	assert_non_null(strstr(f, ";main;split_loop;caller_b;hot_b "));
	free(f);
	free(err);
}

static void test_static_go_split(void **state)
{
	char *err = NULL;

	(void)state;
	record("gosplit", "", "build/gosplit 1500", &err);
	assert_non_null(strstr(err, "sampled through the kernel instead"));
	char *f = folded("gosplit");
	struct leaf a = leaf_of(f, "main.hotA", "main.callerA", "main.main.func1", NULL);
	struct leaf b = leaf_of(f, "main.hotB", "main.callerB", "main.main.func1", NULL);

	print_message("  static Go: hotA %ld (called %ld, rooted %ld), hotB %ld (called %ld, "
		      "rooted %ld)\n",
		      a.self, a.called, a.rooted, b.self, b.called, b.rooted);
	assert_true(a.self + b.self >= 500);
	double share = (double)a.self / (double)(a.self + b.self);

	print_message("  hotA share %.3f (the work's: 0.250)\n", share);
	assert_true(share > 0.20 && share < 0.30);
	/* The interrupted frame by Go's .debug_frame (the leaves have no
	 * frame record: frame pointers alone would skip their callers), frame
	 * pointers from there to the goroutine's function. */
	assert_true(a.called >= a.self * 9 / 10);
	assert_true(b.called >= b.self * 9 / 10);
	assert_true(a.rooted >= a.self * 9 / 10);
	assert_true(b.rooted >= b.self * 9 / 10);
	free(f);
	free(err);
}

/* Samples of leaf fn whose stack holds exactly `min` frames named frame
 * and passes through "main;frame". */
static long deep_samples(const char *text, const char *fn, const char *frame, int min,
			 long *all)
{
	long n = 0;
	char want_leaf[128], via[128];
	char *copy = strdup(text);

	assert_non_null(copy);
	snprintf(want_leaf, sizeof(want_leaf), ";%s ", fn);
	snprintf(via, sizeof(via), ";main;%s", frame);
	*all = 0;
	for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');
		int k = 0;

		if (!sp || !strstr(line, want_leaf))
			continue;
		long c = strtol(sp + 1, NULL, 10);

		*all += c;
		for (const char *q = line; (q = strstr(q, frame)); q += strlen(frame))
			k++;
		if (k == min && strstr(line, via))
			n += c;
	}
	free(copy);
	return n;
}

static void test_deeper_than_the_copy(void **state)
{
	char *err = NULL;
	long all;

	(void)state;
	/* The variable is record's (it sizes the copy the kernel makes). */
	char cmd[512];

	snprintf(cmd, sizeof(cmd),
		 "STACKPROBE_EXT_STACK_BYTES=1024 " CLI " record --mode cpu -F 999 --no-report -o " OUT
		 "/deep.data -- build/extsplit-fp deep 40 6000 2>&1");
	assert_int_equal(sprobe_test_run(cmd, &err), 0);
	free(err);
	char *f = folded("deep");
	long deep = deep_samples(f, "hot_a", "deep_recurse", 41, &all);

	print_message("  1 KiB copies: %ld of %ld samples through 41 deep_recurse frames to main\n",
		      deep, all);
	assert_true(all >= 100);
	assert_true(deep >= all * 9 / 10);
	free(f);
}

static void test_library_loaded_late(void **state)
{
	char *err = NULL;

	(void)state;
	record("dl", "--external",
	       "build/extdl build/tests/unwind_testlib/libsprobe_testlib.so 300 1200000000", &err);
	assert_non_null(strstr(err, "sampling through the kernel"));
	char *f = folded("dl");
	struct leaf w = leaf_of(f, "testlib_hidden_worker", "sprobe_testlib_beta",
				";main;dl_caller;sprobe_testlib_beta;", NULL);

	print_message("  dlopen'ed: testlib_hidden_worker %ld (through main %ld)\n", w.self,
		      w.rooted);
	assert_true(w.self >= 100);
	assert_true(w.called >= w.self * 9 / 10);
	assert_true(w.rooted >= w.self * 9 / 10);
	free(f);
	free(err);
}

/* The child spins 400 ms of CPU and exits; the parent then spins 400 ms
 * more: the child's samples, unwound to main, are in the recording. */
static void test_exited_child_keeps_samples(void **state)
{
	char *err = NULL;

	(void)state;
	record("exited", "", "build/extsplit fork 400 400", &err);
	char *f = folded("exited");
	struct leaf c = leaf_of(f, "child_hot", "spin_ms", "main;spin_ms;", NULL);
	struct leaf p = leaf_of(f, "parent_hot", "spin_ms", "main;spin_ms;", NULL);

	print_message("  exited child: child_hot %ld (rooted %ld), parent_hot %ld\n", c.self,
		      c.rooted, p.self);
	/* 400 ms at 999 Hz is ~400 samples each. */
	assert_true(c.self >= 150);
	assert_true(p.self >= 150);
	assert_true(c.rooted >= c.self * 9 / 10);
	free(f);
	free(err);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_static_c_split, setup),
	cmocka_unit_test_setup(test_static_go_split, setup),
	cmocka_unit_test_setup(test_deeper_than_the_copy, setup),
	cmocka_unit_test_setup(test_library_loaded_late, setup),
	cmocka_unit_test_setup(test_exited_child_keeps_samples, setup),
};

SPROBE_TEST_MAIN(tests)
