/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The JVM under `stackprobe record`: a runtime with a
 * signal table of its own (SIGSEGV for implicit null checks and stack
 * guard pages, SIGUSR2 to suspend threads, SIGQUIT for thread dumps),
 * checked with its own check of its handlers on (-Xcheck:jni: the JVM
 * warns when a handler it installed was replaced). Checked, in cpu and
 * wall mode, on tests/workloads/jvm/JvmMix.java, compiled here with javac
 * (skipped, saying so, when java or javac is not installed):
 *  - the program ends normally with all its output, its caught
 *    NullPointerExceptions and StackOverflowErrors counted (the JVM's
 *    SIGSEGV handler still works), nothing said by the agent or by the
 *    JVM's handler check, no fatal-error log;
 *  - the JVM's native code is sampled: frames of libjvm.so in the report,
 *    the JVM's threads unwound through libjvm's thread_native_entry (their
 *    start), and in cpu mode samples whose leaf is in libjvm (the JVM's
 *    own work: compilers, GC, runtime calls).
 *  - with -XX:+DumpPerfMapAtExit (the JVM writes /tmp/perf-PID.map only
 *    as it exits), JIT-compiled Java methods named from that map by
 *    record after the merge, as perf report names them: JvmMix.spin is
 *    where the program spends its time (cpu mode).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/jvm"

static int setup(void **state)
{
	(void)state;
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

/* The count on the line "key N" of out, -1 if no such line. */
static long printed(const char *out, const char *key)
{
	size_t kl = strlen(key);

	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (!strncmp(l, key, kl) && l[kl] == ' ')
			return strtol(l + kl + 1, NULL, 10);
	}
	return -1;
}

static void record_mode(const char *mode)
{
	char cmd[1024], *out = NULL, *res = NULL;
	char data[128];
	long self = -1, total = -1, entry = -1;

	if (sprobe_test_run("command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1",
			    NULL) != 0)
		SPROBE_SKIP("java or javac not installed (Debian: openjdk-17-jdk-headless)");
	assert_int_equal(sprobe_test_run("javac -d " OUT " tests/workloads/jvm/JvmMix.java 2>&1", &out),
			 0);
	free(out);
	out = NULL;

	snprintf(data, sizeof(data), OUT "/jvm-%s.data", mode);
	unlink(data);
	/* The JVM writes hs_err_pid*.log into its working directory when it
	 * dies of a signal: run it in OUT, and look for one after. */
	assert_int_equal(sprobe_test_run("rm -f " OUT "/hs_err_pid*.log", NULL), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd " OUT " && ../../../" CLI " record -q --no-bpf -F 499 -m %s -o jvm-%s.data -- "
		 "java -Xcheck:jni -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit "
		 "-cp . JvmMix 1.5 2>&1",
		 mode, mode);
	int st = sprobe_test_run(cmd, &out);
	print_message("%s mode: exit %d\n%s", mode, st, out);
	assert_int_equal(st, 0);
	assert_true(printed(out, "spin") > 0);
	assert_true(printed(out, "npe") > 0);
	assert_true(printed(out, "soe") > 0);
	assert_non_null(strstr(out, "\ndone\n"));
	assert_null(strstr(out, "stackprobe agent:"));
	assert_null(strcasestr(out, "warning")); /* -Xcheck:jni's handler check */
	assert_null(strcasestr(out, "fatal error"));
	assert_int_not_equal(sprobe_test_run("ls " OUT "/hs_err_pid*.log >/dev/null 2>&1", NULL), 0);

	/* libjvm.so's functions in the report: self and total of them all,
	 * and the total of thread_native_entry (every JVM thread's start). */
	snprintf(cmd, sizeof(cmd),
		 CLI " report -i %s --format json 2>/dev/null | python3 -c 'import json,sys; "
		 "d=json.load(sys.stdin); "
		 "f=[x for x in d[\"functions\"] if (x[\"module\"] or \"\").endswith(\"/libjvm.so\")]; "
		 "print(sum(x[\"self\"] for x in f), max([x[\"total\"] for x in f] + [0]), "
		 "sum(x[\"total\"] for x in f if x[\"name\"].startswith(\"thread_native_entry\")))'",
		 data);
	assert_int_equal(sprobe_test_run(cmd, &res), 0);
	assert_int_equal(sscanf(res, "%ld %ld %ld", &self, &total, &entry), 3);
	print_message("  libjvm.so: %ld self samples, its busiest function in %ld, "
		      "thread_native_entry in %ld\n",
		      self, total, entry);
	assert_true(total > 0);
	assert_true(entry > 0);
	if (strcmp(mode, "cpu") == 0)
		assert_true(self > 0);
	free(res);

	/* The JIT's code named from the map the JVM wrote at exit (then
	 * removed: /tmp is everyone's). */
	long pid = -1, spin = -1, all = -1;

	snprintf(cmd, sizeof(cmd),
		 CLI " report -i %s --format json 2>/dev/null | python3 -c 'import json,sys; "
		 "d=json.load(sys.stdin); "
		 "print(d[\"processes\"][0][\"pid\"], "
		 "sum(x[\"self\"] for x in d[\"functions\"] if \"JvmMix.spin(\" in x[\"name\"]), "
		 "sum(x[\"self\"] for x in d[\"functions\"]))'",
		 data);
	assert_int_equal(sprobe_test_run(cmd, &res), 0);
	assert_int_equal(sscanf(res, "%ld %ld %ld", &pid, &spin, &all), 3);
	free(res);
	snprintf(cmd, sizeof(cmd), "/tmp/perf-%ld.map", pid);
	unlink(cmd);
	print_message("  JvmMix.spin (JIT code, named from the map): %ld of %ld samples\n", spin, all);
	if (strcmp(mode, "cpu") == 0)
		assert_true(spin * 4 > all);
	else
		assert_true(spin > 0);
	free(out);
}

static void test_jvm_cpu_mode(void **state)
{
	(void)state;
	record_mode("cpu");
}

static void test_jvm_wall_mode(void **state)
{
	(void)state;
	record_mode("wall");
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_jvm_cpu_mode, setup),
	cmocka_unit_test_setup(test_jvm_wall_mode, setup),
};

SPROBE_TEST_MAIN(tests)
