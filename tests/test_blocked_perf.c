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
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/sampler.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "run_helper.h"
#include "sprobe_test.h"
#include "userspace/sampler/blocked_perf.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out"
#define HZ 499
#define SPIN_MS "1500"

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
	/* Dropped 'blocked' by the signal captures, and the report says the
	 * drops were covered. */
	if (strcmp(mode, "wall") == 0)
		assert_non_null(strstr(rep, "sampled without a signal"));
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
	NEED_PERF(true);
	sampled("cpu");
}

static void test_blocked_sampled_wall(void **state)
{
	NEED_PERF(true);
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

	NEED_PERF(true);
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

/* ---- the mechanism in this process (blocked_perf.h) -------------------- */

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static _Atomic int spin_stop;
static _Atomic pid_t spin_tid;
static _Atomic int spin_blocked;

void bp_unit_spin(void);
__attribute__((noinline)) void bp_unit_spin(void)
{
	volatile uint64_t x = 1;

	while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ull + 1;
}

static void *bp_unit_thread(void *arg)
{
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
	atomic_store(&spin_tid, (pid_t)syscall(SYS_gettid));
	atomic_store(&spin_blocked, 1);
	bp_unit_spin();
	return NULL;
}

struct unit_ctx {
	struct sprobe_unwinder *u;
	pid_t tid;
	unsigned n, wrong, in_spin, reach_start;
	uint64_t last_ns;
	bool time_ok;
};

static bool frame_named(struct sprobe_unwinder *u, const struct sprobe_frame *f, const char *name)
{
	struct sprobe_symbol sym;

	return sprobe_modules__symbolize(sprobe_unwinder__modules(u), sprobe_frame_lookup_pc(f),
					 &sym) == 0 &&
	       sym.name && strcmp(sym.name, name) == 0;
}

static void unit_cb(void *ctx, struct sprobe_thread_sample *ts, uint64_t time_ns)
{
	struct unit_ctx *c = ctx;
	bool spin = false, start = false;

	c->n++;
	if (ts->tid != c->tid || ts->method != SPROBE_METHOD_PERF_EVENT ||
	    ts->stage != SPROBE_STAGE_RAW || !ts->stack_len || ts->weight < 1)
		c->wrong++;
	/* Kernel times on the sampler's clock, in order. */
	if (time_ns < c->last_ns || time_ns > mono_ns())
		c->time_ok = false;
	c->last_ns = time_ns;
	if (sprobe_unwinder__unwind(c->u, ts, NULL) <= 0)
		return;
	for (uint32_t i = 0; i < ts->nframes; i++) {
		spin |= frame_named(c->u, &ts->frames[i], "bp_unit_spin");
		start |= frame_named(c->u, &ts->frames[i], "bp_unit_thread");
	}
	c->in_spin += spin;
	c->reach_start += spin && start;
}

/* A thread of this process that blocks every signal is sampled: its
 * samples carry its registers and stack, unwind through bp_unit_spin()
 * to its start routine, and come at about one per period of its CPU; the
 * event closes by itself once the thread exits. */
static void test_blocked_perf_unit(void **state)
{
	struct sprobe_blocked_perf_opts o = { .sz = sizeof(o), .period_ns = 2000000 };
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_blocked_perf_stats st;
	struct sprobe_blocked_perf *bp;
	struct unit_ctx c = { .time_ok = true };
	pthread_t th;
	clockid_t clk;
	struct timespec ts0, ts1;
	uint64_t t_end;

	NEED_PERF(true);
	bp = sprobe_blocked_perf__new(&o);
	assert_non_null(bp);
	c.u = sprobe_unwinder__new(&uo);
	assert_non_null(c.u);
	assert_int_equal(sprobe_blocked_perf__available(bp, NULL, 0), 1);
	atomic_store(&spin_stop, 0);
	atomic_store(&spin_blocked, 0);
	assert_int_equal(pthread_create(&th, NULL, bp_unit_thread, NULL), 0);
	while (!atomic_load(&spin_blocked))
		sched_yield();
	c.tid = atomic_load(&spin_tid);
	assert_int_equal(pthread_getcpuclockid(th, &clk), 0);
	assert_int_equal(sprobe_blocked_perf__watch(bp, c.tid), 0);
	assert_int_equal(sprobe_blocked_perf__watch(bp, c.tid), -EEXIST);
	assert_true(sprobe_blocked_perf__watching(bp, c.tid));
	assert_int_equal(sprobe_blocked_perf__unwatch(bp, c.tid + 100000, unit_cb, &c), -ENOENT);
	sprobe_modules__refresh(sprobe_unwinder__modules(c.u));
	clock_gettime(clk, &ts0);
	/* 300 ms of wall time, drained every 5 ms (8 samples fit in the
	 * ring, 2.5 are made per drain at most). */
	t_end = mono_ns() + 300000000ull;
	while (mono_ns() < t_end) {
		struct timespec d = { 0, 5000000 };

		nanosleep(&d, NULL);
		assert_true(sprobe_blocked_perf__drain(bp, mono_ns(), unit_cb, &c) >= 0);
	}
	clock_gettime(clk, &ts1);
	atomic_store(&spin_stop, 1);
	pthread_join(th, NULL);
	/* Exited: the kernel hung the event up, the next drain takes what is
	 * left and closes it. */
	assert_true(sprobe_blocked_perf__drain(bp, mono_ns(), unit_cb, &c) >= 0);
	assert_false(sprobe_blocked_perf__watching(bp, c.tid));
	sprobe_blocked_perf__stats(bp, &st);

	double cpu = (double)(ts1.tv_sec - ts0.tv_sec) + (double)(ts1.tv_nsec - ts0.tv_nsec) / 1e9;
	print_message("%u samples (lost %lu) for %.3f s of CPU (%.0f expected); in bp_unit_spin %u, "
		      "reaching bp_unit_thread %u\n",
		      c.n, (unsigned long)st.lost, cpu, cpu / 0.002, c.in_spin, c.reach_start);
	assert_int_equal(c.wrong, 0);
	assert_true(c.time_ok);
	assert_int_equal(st.opened, 1);
	assert_int_equal(st.closed, 1);
	assert_int_equal(st.watching, 0);
	assert_true(c.n >= 5);
	/* One per period of its CPU (the thread's clock was read a moment
	 * before the first and after the last drain: a few periods either
	 * way; the kernel's task clock and the thread's CPU clock are
	 * sampled at different instants, 1.1x covers that at any length). */
	assert_true((double)(c.n + st.lost) <= 1.1 * cpu / 0.002 + 3);
	assert_true((double)(c.n + st.lost) >= 0.8 * cpu / 0.002 - 3);
	assert_true(c.in_spin >= 0.9 * c.n);
	assert_true(c.reach_start >= 0.9 * c.in_spin);
	sprobe_unwinder__free(c.u);
	sprobe_blocked_perf__free(bp);
}

/* Refused by a seccomp filter (in a child: the filter is for life): the
 * watch fails with the kernel's errno, the set says why from then on, and
 * later watches fail at once. */
static void test_blocked_perf_unit_refused(void **state)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EACCES & SECCOMP_RET_DATA)),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
		struct sprobe_blocked_perf_opts o = { .sz = sizeof(o), .period_ns = 2000000 };
		struct sprobe_blocked_perf *bp;
		char why[256];

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(10);
		bp = sprobe_blocked_perf__new(&o);
		if (!bp)
			_exit(11);
		if (sprobe_blocked_perf__watch(bp, getpid()) != -EACCES)
			_exit(12);
		if (sprobe_blocked_perf__available(bp, why, sizeof(why)) != 0 ||
		    !strstr(why, "perf events not allowed") || !strstr(why, "seccomp"))
			_exit(13);
		if (sprobe_blocked_perf__watch(bp, getpid()) != -EACCES ||
		    sprobe_blocked_perf__watching(bp, getpid()))
			_exit(14);
		sprobe_blocked_perf__free(bp);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void count_notice(void *ctx, const char *line)
{
	(void)line;
	(*(int *)ctx)++;
}

/* The sampler in this process (wall mode): a thread that blocks every
 * signal while it spins is in the data file with perf-event samples, one
 * per period of its CPU from the round that found it; no notice (perf
 * events are allowed here). */
static void test_blocked_perf_sampler(void **state)
{
	int notices = 0;
	struct sprobe_sampler_opts so = { .sz = sizeof(so), .freq_hz = 499, .mode = SPROBE_MODE_WALL,
					  .output = OUT "/blocked-inproc.data", .no_table = true,
					  .notice = count_notice, .notice_ctx = &notices };
	struct sprobe_datafile_reader *rd;
	struct sprobe_df_record rec;
	struct sprobe_sampler *smp;
	unsigned long perf = 0, other = 0;
	pthread_t th;
	clockid_t clk;
	struct timespec c0, c0b = { 0, 0 }, c1;
	int rc;

	NEED_PERF(true);
	assert_int_equal(system("mkdir -p " OUT), 0);
	atomic_store(&spin_stop, 0);
	atomic_store(&spin_blocked, 0);
	assert_int_equal(pthread_create(&th, NULL, bp_unit_thread, NULL), 0);
	while (!atomic_load(&spin_blocked))
		sched_yield();
	assert_int_equal(pthread_getcpuclockid(th, &clk), 0);
	clock_gettime(clk, &c0);
	smp = sprobe_sampler__start(&so);
	assert_non_null(smp);
	/* The first round watches the thread (a round may take long under a
	 * sanitizer or on a loaded machine: the first symbols), so count its
	 * CPU from the end of that round for the lower bound; then wait for
	 * 150 ms of its CPU and 20 more rounds (the probe may stall on its
	 * first symbols again: what the ring could not hold meanwhile comes
	 * back as weight with the next sample, after a drain). */
	uint64_t r1 = 0;

	for (int phase = 0, i = 0; phase < 3 && i < 30000; i++) {
		struct sprobe_sampler_stats ss;
		struct timespec ms = { 0, 1000000 }, now;

		sprobe_sampler__stats(smp, &ss);
		clock_gettime(clk, &now);
		if (phase == 0 && ss.rounds) {
			c0b = now;
			phase = 1;
		} else if (phase == 1 && (double)(now.tv_sec - c0b.tv_sec) +
						 (double)(now.tv_nsec - c0b.tv_nsec) / 1e9 >= 0.15) {
			r1 = ss.rounds;
			phase = 2;
		} else if (phase == 2 && ss.rounds >= r1 + 20) {
			phase = 3;
		}
		if (phase < 3)
			nanosleep(&ms, NULL);
	}
	assert_int_equal(sprobe_sampler__stop(smp), 0);
	clock_gettime(clk, &c1);
	atomic_store(&spin_stop, 1);
	pthread_join(th, NULL);

	rd = sprobe_datafile_reader__open(OUT "/blocked-inproc.data");
	assert_non_null(rd);
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		if (rec.type != SPROBE_DF_SAMPLE || (pid_t)rec.sample.tid != atomic_load(&spin_tid))
			continue;
		if (rec.sample.method == SPROBE_METHOD_PERF_EVENT)
			perf += rec.sample.weight;
		else
			other++;
	}
	assert_int_equal(rc, 0);
	sprobe_datafile_reader__free(rd);
	double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
	double cpu_b = (double)(c1.tv_sec - c0b.tv_sec) + (double)(c1.tv_nsec - c0b.tv_nsec) / 1e9;
	print_message("perf-event samples %lu (= %.3f s) for %.3f s of CPU while sampled, %.3f s "
		      "after the first round; others %lu; notices %d\n",
		      perf, (double)perf / 499, cpu, cpu_b, other, notices);
	assert_int_equal(notices, 0);
	assert_int_equal(other, 0); /* it blocked before the sampler started */
	assert_true(perf >= 50);
	assert_true((double)perf / 499 <= 1.1 * cpu + 3.0 / 499);
	assert_true((double)perf / 499 >= 0.8 * cpu_b - 3.0 / 499);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_blocked_perf_unit),
	cmocka_unit_test(test_blocked_perf_unit_refused),
	cmocka_unit_test(test_blocked_perf_sampler),
	cmocka_unit_test(test_blocked_sampled_cpu),
	cmocka_unit_test(test_blocked_sampled_wall),
	cmocka_unit_test(test_blocked_then_unblocked_cpu),
	cmocka_unit_test(test_blocked_refused_cpu),
	cmocka_unit_test(test_blocked_refused_wall),
};

SPROBE_TEST_MAIN(tests)
