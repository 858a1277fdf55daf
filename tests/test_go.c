/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A cgo Go program under `stackprobe record`: the Go runtime
 * installs its own handler on every signal, the capture signal included,
 * with raw rt_sigaction calls; the capture backend puts its handler back
 * in front and chains (backends/linux/chain.c). Checked, in cpu and wall
 * mode, on build/gomix (tests/workloads/gomix/main.go: main.gospin on one
 * goroutine, the C function cspin on another, both busy):
 *  - the program runs to its normal end, nothing said on stderr;
 *  - both functions are sampled. cpu mode: gospin's share of the two is
 *    within 0.05 of perf's in the SAME run (`perf record -g` runs
 *    `stackprobe record`, so both sample the same process over the same
 *    time; without a usable perf, against the run's own split only);
 *    wall mode, the program pinned to one CPU (so its two threads share
 *    it evenly, and the CPU split perf measures is the wall split: both
 *    threads are runnable all the time): within 0.05 of perf's in the same
 *    run and of 0.5 (unpinned on a loaded machine, perf's CPU split and
 *    the wall split differ by definition: docs/PERFORMANCE.md);
 *  - a sample taken at runtime.asyncPreempt's first instruction (a capture
 *    pending with Go's SIGURG) names the preempted function as its caller
 *    (userspace/unwind/go_preempt.c): none shows as
 *    main.main.func1;runtime.asyncPreempt, and they count as gospin's;
 *    also in a copy stripped of its symbol table, where the unwinder
 *    finds asyncPreempt in Go's .gopclntab;
 *  - Go stacks unwind to the goroutine's root (runtime.goexit, through
 *    main.main.func1), and the goroutine's stack, carved out of the Go
 *    heap, is copied within its bounds (no "truncated" sample);
 *  - Go's own asynchronous preemption (SIGURG) still works: `gomix
 *    preempt` can only end early if a call-free loop is preempted by
 *    signal.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_helper.h"
#include "sprobe_test.h"
#include "userspace/unwind/unwind_internal.h"

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

struct counts {
	long gospin;	/* leaf main.gospin, or asyncPreempt's entry under it */
	long cspin;	/* leaf cspin */
	long rooted;	/* of gospin: under runtime.goexit;main.main.func1 */
	long preempt;	/* leaf runtime.asyncPreempt, under main.gospin */
	long skipped;	/* leaf runtime.asyncPreempt right under main.main.func1:
			 * the preempted function missing */
};

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len >= n && !memcmp(s + len - n, suffix, n);
}

/* Count the two functions' samples in a folded report. */
static void count_folded(const char *folded, struct counts *k)
{
	memset(k, 0, sizeof(*k));
	for (const char *line = folded; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *sp = memrchr(line, ' ', len);

		if (sp) {
			size_t sl = (size_t)(sp - line);
			long n = atol(sp + 1);
			char buf[1024];
			size_t b = sl < sizeof(buf) - 1 ? sl : sizeof(buf) - 1;

			memcpy(buf, line, b);
			buf[b] = '\0';
			bool g = ends_with(line, sl, ";main.gospin");

			if (ends_with(line, sl, ";main.gospin;runtime.asyncPreempt.abi0")) {
				k->preempt += n;
				g = true;
			}
			if (ends_with(line, sl, ";main.main.func1;runtime.asyncPreempt.abi0"))
				k->skipped += n;
			if (g) {
				k->gospin += n;
				if (strstr(buf, ";runtime.goexit.abi0;main.main.func1;main.gospin"))
					k->rooted += n;
			}
			if (ends_with(line, sl, ";cspin"))
				k->cspin += n;
		}
		line += len + (end ? 1 : 0);
	}
}

/* Can perf sample here (installed, perf_event_paranoid lets us)? */
static bool perf_usable(void)
{
	return sprobe_test_run("command -v perf >/dev/null 2>&1", NULL) == 0 &&
	       sprobe_test_run("perf record -q -e cpu-clock -o " OUT "/perf-probe.data -- true "
			       ">/dev/null 2>&1",
			       NULL) == 0;
}

/* perf's self samples of main.gospin and cspin in perf data file pdata. */
static void perf_counts(const char *pdata, long *g, long *c)
{
	char cmd[512], *out = NULL;

	snprintf(cmd, sizeof(cmd),
		 "perf report -i %s --no-children -g none --sort sym --stdio -F sample,sym "
		 "2>/dev/null | awk '$2 == \"[.]\" && ($3 == \"main.gospin\" || $3 == \"cspin\") "
		 "{ print $3, $1 }'",
		 pdata);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	*g = *c = 0;
	for (char *sp = NULL, *l = strtok_r(out, "\n", &sp); l; l = strtok_r(NULL, "\n", &sp)) {
		char name[32];
		long n;

		if (sscanf(l, "%31s %ld", name, &n) == 2)
			*(strcmp(name, "cspin") == 0 ? c : g) += n;
	}
	free(out);
}

static void record_mode(const char *mode)
{
	char cmd[768], *out = NULL, *folded = NULL, *text = NULL;
	char data[128], pdata[128], perf[256] = "";
	struct counts k;
	bool with_perf = perf_usable();
	bool wall = strcmp(mode, "wall") == 0;

	snprintf(data, sizeof(data), OUT "/gomix-%s.data", mode);
	snprintf(pdata, sizeof(pdata), OUT "/gomix-%s.perf.data", mode);
	unlink(data);
	unlink(pdata);
	/* perf: a sample per millisecond of each thread's CPU time (a fixed
	 * period: -F adapts it, which is noisier over a second's samples). */
	if (with_perf)
		snprintf(perf, sizeof(perf), "perf record -q -c 1000000 -g -e cpu-clock -o %s -- ",
			 pdata);
	else
		print_message("  perf unavailable here (perf_event_paranoid?): not compared\n");
	/* wall mode: the program on one CPU (taskset), so that its two
	 * threads share it evenly, whatever else the machine runs: the CPU
	 * split perf measures is then the wall split (both threads runnable
	 * all the time: 0.5). And each waits for the CPU, with Go's SIGURG
	 * and a capture both pending when it gets it back: captures at
	 * asyncPreempt's entry are frequent (about 15 % of the goroutine's). */
	snprintf(cmd, sizeof(cmd),
		 "%s" CLI " record -q --no-bpf -F 499 -m %s -o %s -- %s" GOMIX " 1.5 2>&1", perf, mode,
		 data, wall ? "taskset -c 0 " : "");
	int st = sprobe_test_run(cmd, &out);
	print_message("%s mode: exit %d\n%s", mode, st, out);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "gospin "));
	assert_non_null(strstr(out, "cspin "));
	assert_null(strstr(out, "stackprobe agent:"));

	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format folded 2>/dev/null", data);
	assert_int_equal(sprobe_test_run(cmd, &folded), 0);
	count_folded(folded, &k);
	print_message("  main.gospin %ld (%ld under runtime.goexit;main.main.func1, %ld at "
		      "asyncPreempt's entry), cspin %ld; asyncPreempt without its caller %ld\n",
		      k.gospin, k.rooted, k.preempt, k.cspin, k.skipped);
	assert_true(k.gospin > 0 && k.cspin > 0);
	assert_int_equal(k.rooted, k.gospin);
	assert_int_equal(k.skipped, 0);
	double share = (double)k.gospin / (double)(k.gospin + k.cspin);
	/* The run's own split: the two loops cost the same per iteration and
	 * print their counts. */
	const char *gs = strstr(out, "gospin "), *cs = strstr(out, "cspin ");
	double gi = strtod(gs + 7, NULL), ci = strtod(cs + 6, NULL);
	double own = gi + ci > 0 ? gi / (gi + ci) : 0.5;
	double pshare = -1;

	if (with_perf) {
		long pg, pc;

		perf_counts(pdata, &pg, &pc);
		print_message("  perf, same run: main.gospin %ld, cspin %ld\n", pg, pc);
		assert_true(pg > 0 && pc > 0);
		pshare = (double)pg / (double)(pg + pc);
	}
	print_message("  share %.3f; perf's %.3f; the run's own CPU split %.3f\n", share, pshare,
		      own);
	if (with_perf)
		assert_true(share >= pshare - 0.05 && share <= pshare + 0.05);
	if (wall) {
		/* Both threads are runnable all the time (on the CPU or
		 * waiting for it): the wall split is even. */
		assert_true(share >= 0.45 && share <= 0.55);
		assert_true(k.preempt > 0); /* so k.skipped == 0 says something */
	} else {
		/* Looser: the iteration counts are an estimate of the CPU
		 * split, perf's samples a measurement. */
		assert_true(share >= own - 0.1 && share <= own + 0.1);
	}

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

/* main.gospin's and runtime.asyncPreempt.abi0's addresses and sizes in
 * build/gomix, from nm (its ELF symbol table). */
static void nm_addrs(uint64_t *gospin, uint64_t *gospin_size, uint64_t *preempt)
{
	char *out = NULL;
	unsigned long long a, sz;
	char name[64];

	*gospin = *gospin_size = *preempt = 0;
	assert_int_equal(sprobe_test_run("nm -S " GOMIX, &out), 0);
	for (char *sp = NULL, *l = strtok_r(out, "\n", &sp); l; l = strtok_r(NULL, "\n", &sp)) {
		if (sscanf(l, "%llx %llx %*s %63s", &a, &sz, name) != 3)
			continue;
		if (!strcmp(name, "main.gospin")) {
			*gospin = a;
			*gospin_size = sz;
		} else if (!strcmp(name, "runtime.asyncPreempt.abi0")) {
			*preempt = a;
		}
	}
	free(out);
	assert_true(*gospin && *gospin_size && *preempt);
}

/* The unwinder's lookup of runtime.asyncPreempt (go_preempt.c) on a module
 * of its own: build/gomix, a copy of it stripped of its symbol table (the
 * same code at the same addresses: Go's .gopclntab stays), and a C
 * program without Go code. */
static void test_go_preempt_entry_lookup(void **state)
{
	uint64_t g, gsz, pre;
	struct module mod;

	(void)state;
	nm_addrs(&g, &gsz, &pre);
	assert_int_equal(sprobe_test_run("objcopy --strip-all " GOMIX " " OUT "/gomix-stripped && "
					 "nm " OUT "/gomix-stripped 2>&1 | grep -q 'no symbols'",
					 NULL),
			 0);
	const char *paths[] = { GOMIX, OUT "/gomix-stripped", "build/sigshare" };

	for (unsigned i = 0; i < 3; i++) {
		memset(&mod, 0, sizeof(mod));
		mod.path = (char *)paths[i];
		bool at = sprobe_unw__go_preempt_entry(&mod, pre);
		bool after = sprobe_unw__go_preempt_entry(&mod, pre + 1);

		print_message("  %s: asyncPreempt at 0x%llx: %s (state %d, 0x%llx)\n", paths[i],
			      (unsigned long long)pre, at ? "yes" : "no", mod.unw.go_state,
			      (unsigned long long)mod.unw.go_preempt);
#if defined(__x86_64__)
		assert_int_equal(at, i < 2);
		assert_int_equal(mod.unw.go_state, i < 2 ? 1 : -1);
#else
		assert_false(at);
#endif
		assert_false(after);
	}
}

/* The stripped copy under stackprobe: the captures at asyncPreempt's entry
 * (named by address: no symbol table) have gospin's code as their caller,
 * which the unwinder found from .gopclntab alone. */
static void test_go_stripped_preempt_caller(void **state)
{
	uint64_t g, gsz, pre;
	char *out = NULL, *folded = NULL, leaf[64];
	long under = 0, other = 0;

	(void)state;
#if !defined(__x86_64__)
	SPROBE_SKIP("the [sp] rule is x86_64's (aarch64 has the preempted pc in LR)");
#endif
	nm_addrs(&g, &gsz, &pre);
	assert_int_equal(sprobe_test_run("objcopy --strip-all " GOMIX " " OUT "/gomix-stripped", NULL),
			 0);
	/* On one CPU, as record_mode() runs wall mode: many such samples. */
	assert_int_equal(sprobe_test_run(CLI " record -q --no-bpf -F 499 -m wall -o " OUT
					 "/stripped.data -- taskset -c 0 " OUT "/gomix-stripped 1.5 2>&1",
					 &out),
			 0);
	assert_non_null(strstr(out, "gospin "));
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/stripped.data --format folded "
					 "2>/dev/null",
					 &folded),
			 0);
	snprintf(leaf, sizeof(leaf), ";gomix-stripped+0x%llx ", (unsigned long long)pre);
	for (char *sp = NULL, *l = strtok_r(folded, "\n", &sp); l; l = strtok_r(NULL, "\n", &sp)) {
		char *at = strstr(l, leaf);
		if (!at)
			continue;
		long n = atol(at + strlen(leaf));
		*at = '\0';
		char *caller = strrchr(l, ';');
		unsigned long long pc = 0;

		if (caller && sscanf(caller, ";gomix-stripped+0x%llx", &pc) == 1 && pc >= g &&
		    pc < g + gsz)
			under += n;
		else
			other += n;
	}
	print_message("  samples at asyncPreempt's entry: %ld under gospin [0x%llx, +0x%llx), "
		      "%ld under anything else\n",
		      under, (unsigned long long)g, (unsigned long long)gsz, other);
	/* About 100 (docs/LIMITATIONS.md); none had gospin before. */
	assert_true(under > 0);
	assert_int_equal(other, 0);
	free(folded);
	free(out);
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
	cmocka_unit_test_setup(test_go_preempt_entry_lookup, setup),
	cmocka_unit_test_setup(test_go_stripped_preempt_caller, setup),
};

SPROBE_TEST_MAIN(tests)
