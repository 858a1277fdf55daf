/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Capture backend, cpu mode with many threads: what a collect and a usage
 * call do grows with the threads that ran, not with the threads that
 * exist. Counted (the capturer's cpu_work counters: slots looked at,
 * clocks read, walks of every slot), never timed: the time it takes is
 * the bench's (bench/threads.py, docs/PERFORMANCE.md "Many threads").
 * And threads the kernel gives no signal source are said, not dropped.
 */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "backends/linux/linux.h"
#include "capture_fixture.h"
#include "sprobe_test.h"
#include "capture_case_fixture.h"

enum { IDLE = 300, BUSY = 2, PERIOD_NS = 2000000 };

static uint64_t clock_of(pthread_t th)
{
	clockid_t clk;
	struct timespec ts;

	if (pthread_getcpuclockid(th, &clk) != 0 || clock_gettime(clk, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Until each busy worker used another period of CPU (progress, bounded
 * by the fixture's deadline). */
static void wait_busy(const struct worker *w)
{
	uint64_t base[BUSY], deadline = fx_now_ns() + fx_timeout_ns();

	for (int i = 0; i < BUSY; i++)
		base[i] = clock_of(w[i].th);
	for (int i = 0; i < BUSY; i++)
		while (clock_of(w[i].th) - base[i] < PERIOD_NS) {
			assert_true(fx_now_ns() < deadline);
			sched_yield();
		}
}

/* IDLE threads blocked in read(2), BUSY spinning: the collects after the
 * first look at the slots that produced a sample, not at every slot, and
 * the usage calls read the clocks of those plus a bounded rotation. */
static void test_cpu_work_follows_running_threads(void **state)
{
	static struct worker idle[IDLE], busy[BUSY];
	static struct sprobe_cpu_usage out[IDLE + BUSY + 16];
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(IDLE + 64, 4096);
	unsigned samples[BUSY] = { 0 }, collects = 0;
	uint64_t t0, reads0, calls0, elapsed_s;
	uint32_t tracked = 0;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	for (int i = 0; i < IDLE; i++)
		assert_int_equal(fx_worker_start(&idle[i], PARK_PIPE, 0), 0);
	for (int i = 0; i < BUSY; i++)
		assert_int_equal(fx_worker_start(&busy[i], PARK_SPIN, 0), 0);

	/* The first collect makes every thread's source (a full walk). */
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, PERIOD_NS), 0);
	for (uint32_t i = 0; i < c->cpu_hi; i++)
		tracked += c->cpu_tid[i] != 0;
	assert_true(tracked >= IDLE + BUSY);
	assert_true(sprobe_capturer__cpu_usage(c, out, IDLE + BUSY + 16) >= 0);

	memset(&c->cpu_work, 0, sizeof(c->cpu_work));
	t0 = fx_now_ns();
	uint64_t deadline = t0 + fx_timeout_ns();
	while ((collects < 60 || samples[0] < 5 || samples[1] < 5) && fx_now_ns() < deadline) {
		wait_busy(busy);
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, PERIOD_NS), 0);
		assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
		collects++;
		for (int i = 0; i < BUSY; i++) {
			struct sprobe_thread_sample *t = fx_find(s, atomic_load(&busy[i].tid));

			samples[i] += t && t->stage == SPROBE_STAGE_RAW;
		}
		if (collects % 6 == 0)
			assert_true(sprobe_capturer__cpu_usage(c, out, IDLE + BUSY + 16) >= 0);
	}
	elapsed_s = (fx_now_ns() - t0) / 1000000000ull;
	print_message("%u collects (%lu walked every slot), %lu slots looked at by the others; "
		      "%lu usage calls read %lu clocks; busy samples %u, %u\n",
		      collects, (unsigned long)c->cpu_work.full, (unsigned long)c->cpu_work.fast_slots,
		      (unsigned long)c->cpu_work.usage_calls, (unsigned long)c->cpu_work.clock_reads,
		      samples[0], samples[1]);
	assert_true(samples[0] >= 5 && samples[1] >= 5);
	/* The thread count did not move: a walk of every slot only at the
	 * backstop (once in 10 s). */
	assert_true(c->cpu_work.full <= 1 + elapsed_s);
	/* A fast collect looks at the ready slots: the busy threads', and a
	 * bit a walk left behind (one per busy thread per walk). */
	assert_true(c->cpu_work.fast_slots <= BUSY * (c->cpu_work.fast + c->cpu_work.full + 1));
	/* A usage call reads the threads with samples and a rotation of at
	 * least 64, all of them once a second: far from IDLE per call. */
	assert_true(c->cpu_work.usage_calls >= 10);
	assert_true(c->cpu_work.clock_reads <=
		    c->cpu_work.usage_calls * (64 + 2 * BUSY) + (IDLE + BUSY) * (elapsed_s + 1));
	assert_true(c->cpu_work.clock_reads < c->cpu_work.usage_calls * (IDLE + BUSY) / 2);

	/* The final call reads them all. */
	reads0 = c->cpu_work.clock_reads;
	calls0 = c->cpu_work.usage_calls;
	assert_true(sprobe_capturer__cpu_usage_all(c, out, IDLE + BUSY + 16) >= 0);
	assert_int_equal(c->cpu_work.usage_calls, calls0 + 1);
	assert_true(c->cpu_work.clock_reads - reads0 >= IDLE + BUSY);

	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	for (int i = 0; i < BUSY; i++)
		fx_worker_stop(&busy[i]);
	for (int i = 0; i < IDLE; i++)
		fx_worker_stop(&idle[i]);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* The user's queued signals now (SigQ in /proc/self/status), or -1. */
static long sigq_used(void)
{
	char buf[256];
	long used = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "SigQ: %ld/", &used) == 1)
			break;
	fclose(f);
	return used;
}

/* No room for a CPU timer (the timers may take half of RLIMIT_SIGPENDING,
 * and the limit is set to what the user has queued already): the threads
 * are tracked without a source, counted and reported NOSOURCE with their
 * CPU; once there is room again a later follow gives them timers. */
static void test_cpu_unsourced_said(void **state)
{
	enum { N = 4 };
	static struct worker w[N + 1];
	static struct sprobe_cpu_usage out[64];
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 4096);
	struct rlimit old, rl;
	long used = sigq_used();
	int why = 0, n;
	bool flagged = false;
	uint64_t base, deadline;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	assert_true(used >= 0);
	assert_int_equal(sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_TIMER, NULL, 0),
			 SPROBE_CPU_ENGINE_TIMER);
	for (int i = 0; i < N - 1; i++)
		assert_int_equal(fx_worker_start(&w[i], PARK_PIPE, 0), 0);
	assert_int_equal(fx_worker_start(&w[N - 1], PARK_SPIN, 0), 0);
	assert_int_equal(getrlimit(RLIMIT_SIGPENDING, &old), 0);
	rl = old;
	rl.rlim_cur = used > 0 ? (rlim_t)used : 1;
	assert_int_equal(setrlimit(RLIMIT_SIGPENDING, &rl), 0);

	assert_int_equal(sprobe_capturer__cpu_collect(c, s, PERIOD_NS), 0);
	unsigned nosrc = sprobe_capturer__cpu_unsourced(c, &why);

	print_message("%u threads without a source (%s)\n", nosrc, strerror(why));
	assert_true(nosrc >= N);
	assert_int_equal(why, EAGAIN);
	/* The spinner's CPU is reported, flagged. */
	base = clock_of(w[N - 1].th);
	deadline = fx_now_ns() + fx_timeout_ns();
	while (clock_of(w[N - 1].th) - base < 3 * PERIOD_NS) {
		assert_true(fx_now_ns() < deadline);
		sched_yield();
	}
	n = sprobe_capturer__cpu_usage_all(c, out, 64);
	for (int k = 0; k < n; k++)
		flagged |= out[k].tid == atomic_load(&w[N - 1].tid) &&
			   (out[k].flags & SPROBE_CPU_USAGE_NOSOURCE) && out[k].cpu_ns > 0;
	assert_true(flagged);

	/* Room again: a follow (a new thread moves the count) gives them
	 * timers. */
	assert_int_equal(setrlimit(RLIMIT_SIGPENDING, &old), 0);
	assert_int_equal(fx_worker_start(&w[N], PARK_PIPE, 0), 0);
	while (sprobe_capturer__cpu_unsourced(c, NULL) > 0) {
		assert_true(fx_now_ns() < deadline);
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, PERIOD_NS), 0);
		sched_yield();
	}
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	for (int i = 0; i <= N; i++)
		fx_worker_stop(&w[i]);
	sprobe_snapshot__free(s);
	untrack(c);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_cpu_work_follows_running_threads, teardown),
	cmocka_unit_test_teardown(test_cpu_unsourced_said, teardown),
};

SPROBE_TEST_MAIN(tests)
