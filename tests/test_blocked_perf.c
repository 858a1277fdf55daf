/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Threads that block every signal after they started are sampled without
 * a signal, by a per-thread perf event (userspace/sampler/blocked_perf.h),
 * in cpu and in wall mode; where perf events are refused (a seccomp filter
 * that makes perf_event_open fail, tests/workloads/noperf.c, installed
 * before the agent starts) they are reported as unsampled, with their CPU
 * time and the reason, and one line says why the fallback is unavailable.
 *
 * Workload: tests/workloads/maskedworkers.c "latemix": worker 0 blocks
 * every signal with sigfillset + pthread_sigmask once running, worker 1
 * with a raw rt_sigprocmask; both spin in masked_spin() and print the CPU
 * time they measured themselves (CLOCK_THREAD_CPUTIME_ID).
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "run_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out"
#define HZ 499
#define SPIN_MS "1500"

/* Can this process open a task-clock event with user registers and stack
 * on itself (what the fallback needs)? 0 or -errno. */
static int perf_allowed(void)
{
	struct perf_event_attr a = { .size = sizeof(a), .type = PERF_TYPE_SOFTWARE,
				     .config = PERF_COUNT_SW_TASK_CLOCK, .sample_period = 1000000,
				     .sample_type = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
				     .sample_regs_user = 1, .sample_stack_user = 4096,
				     .disabled = 1, .exclude_kernel = 1, .exclude_hv = 1 };
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return -errno;
	close((int)fd);
	return 0;
}

#define NEED_PERF()                                                                         \
	do {                                                                                \
		int e_ = perf_allowed();                                                    \
		if (e_ == -EACCES || e_ == -EPERM || e_ == -ENOENT || e_ == -ENOSYS)        \
			SPROBE_SKIP("perf events not allowed here (%s)\n", strerror(-e_)); \
		assert_int_equal(e_, 0);                                                    \
	} while (0)

/* "cpu TID NS HOW" lines: the CPU each worker measured itself, and the
 * call that blocked its signals (how[k], up to 31 characters). */
static int worker_cpu(const char *out, long tid[2], double cpu_s[2], char how[2][32])
{
	int n = 0;

	for (const char *p = out; (p = strstr(p, "cpu ")) && n < 2; p++) {
		double ns;

		if (p != out && p[-1] != '\n')
			continue;
		if (sscanf(p, "cpu %ld %lf %31s", &tid[n], &ns, how[n]) == 3)
			cpu_s[n++] = ns / 1e9;
	}
	return n;
}

/* Samples the text report counts for a capture method ("perf-event",
 * "signal") on its "capture methods:" line; 0 if not there. */
static unsigned long method_samples(const char *rep, const char *method)
{
	const char *line = strstr(rep, "capture methods:"), *eol, *m;
	char key[40];

	if (!line)
		return 0;
	eol = strchr(line, '\n');
	snprintf(key, sizeof(key), " %s ", method);
	m = strstr(line, key);
	if (!m || (eol && m > eol))
		return 0;
	return strtoul(m + strlen(key), NULL, 10);
}

struct tstats {
	unsigned long all;   /* the thread's samples (weights) */
	unsigned long spin;  /* of which with masked_spin on the stack */
	unsigned long start; /* of which reaching worker() and start_thread */
	unsigned long open;  /* samples in unblocked_spin (signals open again) */
};

/* Per-thread counts from the folded report (lines "name-TID;f1;...;fn N"). */
static struct tstats thread_stats(const char *folded, long tid)
{
	struct tstats st = { 0 };
	char *copy = strdup(folded), key[32];

	snprintf(key, sizeof(key), "-%ld;", tid);
	for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' '), *semi = strchr(line, ';'), *k = strstr(line, key);
		unsigned long n;

		if (!sp || !semi || !k || k + strlen(key) - 1 != semi)
			continue;
		n = strtoul(sp + 1, NULL, 10);
		st.all += n;
		if (strstr(line, ";unblocked_spin"))
			st.open += n;
		if (strstr(line, ";masked_spin")) {
			st.spin += n;
			if (strstr(line, ";start_thread;") && strstr(line, ";worker;"))
				st.start += n;
		}
	}
	free(copy);
	return st;
}

/* Record maskedworkers latemix in mode; both workers sampled by the
 * fallback: their CPU is in masked_spin, their stacks reach worker() and
 * start_thread, and their samples stand for about the CPU they measured. */
static void sampled(const char *mode)
{
	char cmd[512], *out, *folded, *rep;
	long tid[2];
	double cpu[2];
	char how[2][32];

	snprintf(cmd, sizeof(cmd),
		 "mkdir -p " OUT " && " CLI " record -q --no-bpf -F %d --mode %s -o " OUT
		 "/blocked-%s.data -- build/maskedworkers " SPIN_MS " latemix 2>&1",
		 HZ, mode, mode);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	print_message("%s", out);
	assert_int_equal(worker_cpu(out, tid, cpu, how), 2);
	/* One worker blocked its signals each way. */
	assert_int_not_equal(strcmp(how[0], how[1]), 0);
	/* The fallback was allowed: no line says otherwise. */
	assert_null(strstr(out, "no perf-event fallback"));
	snprintf(cmd, sizeof(cmd), CLI " report -i " OUT "/blocked-%s.data --format folded", mode);
	assert_int_equal(sprobe_test_run(cmd, &folded), 0);
	snprintf(cmd, sizeof(cmd), CLI " report -i " OUT "/blocked-%s.data", mode);
	assert_int_equal(sprobe_test_run(cmd, &rep), 0);
	assert_true(method_samples(rep, "perf-event") > 0);
	for (int k = 0; k < 2; k++) {
		struct tstats st = thread_stats(folded, tid[k]);
		double covered = (double)st.all / HZ;
		char key[64];

		print_message("%s mode, tid %ld (blocked by %s): %lu samples = %.3f s, measured %.3f s "
			      "(%.0f%%); masked_spin %lu, reaching start_thread %lu\n",
			      mode, tid[k], how[k], st.all,
			      covered, cpu[k], cpu[k] > 0 ? 100 * covered / cpu[k] : 0, st.spin, st.start);
		/* Where its CPU went: masked_spin (the rest is the moment
		 * before it blocked the signals, and clock_gettime's vdso). */
		assert_true(st.all >= 10);
		assert_true(st.spin >= 0.9 * st.all);
		assert_true(st.start >= 0.9 * st.spin);
		/* How much: one sample per 1/F of its CPU. Before the event
		 * opens (cpu mode: the engine's blocked check, every ~100 ms of
		 * wall time; wall mode: the first round that drops it) its
		 * CPU goes unsampled, a share that does not depend on the
		 * load; samples the ring could not hold are counted in the
		 * weights. Never much more than the CPU it used. */
		assert_true(covered >= 0.7 * cpu[k]);
		assert_true(covered <= 1.1 * cpu[k] + 3.0 / HZ);
		/* Not listed as unsampled (cpu mode's coverage). */
		snprintf(key, sizeof(key), "tid %ld (", tid[k]);
		assert_null(strstr(rep, key));
	}
	free(rep);
	free(folded);
	free(out);
}

static void test_blocked_sampled_cpu(void **state)
{
	NEED_PERF();
	sampled("cpu");
}

static void test_blocked_sampled_wall(void **state)
{
	NEED_PERF();
	sampled("wall");
}

/* perf_event_open refused (seccomp, before the agent starts): one line
 * says the fallback is unavailable and why; cpu mode lists each worker as
 * unsampled with its CPU time (what it measured, read every ~100 ms) and
 * the reason; wall mode counts its captures as dropped 'blocked'. */
static void refused(const char *mode)
{
	char cmd[512], *out, *rep;
	long tid[2];
	double cpu[2];
	char how[2][32];

	snprintf(cmd, sizeof(cmd),
		 "mkdir -p " OUT " && build/noperf " CLI " record -q --no-bpf -F %d --mode %s -o " OUT
		 "/blocked-noperf-%s.data -- build/maskedworkers 800 latemix 2>&1",
		 HZ, mode, mode);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	print_message("%s", out);
	assert_int_equal(worker_cpu(out, tid, cpu, how), 2);
	const char *line = strstr(out, "no perf-event fallback");
	assert_non_null(line);
	const char *eol = strchr(line, '\n');
	const char *why = strstr(line, "perf events not allowed");
	assert_true(why && (!eol || why < eol));
	/* Once per process, not per thread or round. */
	assert_null(strstr(line + 1, "no perf-event fallback"));
	free(out);

	snprintf(cmd, sizeof(cmd), CLI " report -i " OUT "/blocked-noperf-%s.data", mode);
	assert_int_equal(sprobe_test_run(cmd, &rep), 0);
	print_message("%s", rep);
	assert_int_equal(method_samples(rep, "perf-event"), 0);
	if (strcmp(mode, "cpu") == 0) {
		assert_non_null(strstr(rep, "UNSAMPLED CPU"));
		for (int k = 0; k < 2; k++) {
			char key[64];
			const char *p;
			double s;

			snprintf(key, sizeof(key), "tid %ld (", tid[k]);
			p = strstr(rep, key);
			assert_non_null(p);
			p = strstr(p, "): ");
			assert_non_null(p);
			s = strtod(p + 3, NULL);
			print_message("tid %ld: report %.3f s of CPU, measured %.3f s\n", tid[k], s, cpu[k]);
			assert_true(s <= cpu[k] + 0.002);
			assert_true(s >= 0.5 * cpu[k]);
			eol = strchr(p, '\n');
			why = strstr(p, "blocks the capture signal");
			assert_true(why && (!eol || why < eol));
		}
	} else {
		assert_non_null(strstr(rep, "blocked="));
	}
	free(rep);
}

static void test_blocked_refused_cpu(void **state)
{
	refused("cpu");
}

static void test_blocked_refused_wall(void **state)
{
	refused("wall");
}

/* "unblocked TID NS" lines: each worker's CPU time when it opened its
 * signals again. */
static int unblock_cpu(const char *out, long tid[2], double cpu_s[2])
{
	int n = 0;

	for (const char *p = out; (p = strstr(p, "unblocked ")) && n < 2; p++) {
		double ns;

		if (p != out && p[-1] != '\n')
			continue;
		if (sscanf(p, "unblocked %ld %lf", &tid[n], &ns) == 2)
			cpu_s[n++] = ns / 1e9;
	}
	return n;
}

/* Blocked, then open again (maskedworkers "unblock"), in cpu mode: the
 * fallback samples the first half, the signal path takes the thread
 * back for the second (its event closed: no double count), and the
 * perf-event overflow signals it had queued while blocked, delivered
 * when it unblocks, are swallowed (before, the capture handler passed
 * them to the program's SIG_DFL: the process died of its own signal). */
static void test_blocked_then_unblocked_cpu(void **state)
{
	char *out, *folded, *rep;
	long tid[2], utid[2];
	double cpu[2], ucpu[2];
	char how[2][32];

	NEED_PERF();
	assert_int_equal(sprobe_test_run("mkdir -p " OUT " && " CLI " record -q --no-bpf -F 499 --mode "
					 "cpu -o " OUT "/blocked-unblock.data -- build/maskedworkers "
					 "2000 unblock 2>&1",
					 &out),
			 0);
	print_message("%s", out);
	assert_int_equal(worker_cpu(out, tid, cpu, how), 2);
	assert_int_equal(unblock_cpu(out, utid, ucpu), 2);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/blocked-unblock.data --format folded",
					 &folded),
			 0);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/blocked-unblock.data", &rep), 0);
	/* Both paths took samples. */
	assert_true(method_samples(rep, "perf-event") > 0);
	assert_true(method_samples(rep, "signal") > 0);
	for (int k = 0; k < 2; k++) {
		double before_cpu = 0, after_cpu;
		unsigned long after, all;

		for (int j = 0; j < 2; j++)
			if (utid[j] == tid[k])
				before_cpu = ucpu[j];
		assert_true(before_cpu > 0);
		after_cpu = cpu[k] - before_cpu;
		struct tstats st = thread_stats(folded, tid[k]);

		all = st.all;
		after = st.open;
		print_message("tid %ld: blocked %.3f s of CPU, %lu samples = %.3f s; open %.3f s, %lu "
			      "samples = %.3f s\n",
			      tid[k], before_cpu, all - after, (double)(all - after) / HZ, after_cpu, after,
			      (double)after / HZ);
		/* Each half about its CPU: the blocked one less what went
		 * before the engine found it blocking (~100 ms of wall), the
		 * open one all of it. */
		assert_true((double)(all - after) / HZ >= 0.5 * before_cpu);
		assert_true((double)(all - after) / HZ <= 1.1 * before_cpu + 3.0 / HZ);
		assert_true((double)after / HZ >= 0.7 * after_cpu);
		assert_true((double)after / HZ <= 1.1 * after_cpu + 3.0 / HZ);
	}
	free(rep);
	free(folded);
	free(out);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_blocked_sampled_cpu),
	cmocka_unit_test(test_blocked_sampled_wall),
	cmocka_unit_test(test_blocked_then_unblocked_cpu),
	cmocka_unit_test(test_blocked_refused_cpu),
	cmocka_unit_test(test_blocked_refused_wall),
};

SPROBE_TEST_MAIN(tests)
