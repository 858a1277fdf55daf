/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * macOS capture tests. Built and run only on a macOS host (`make test`
 * there, mk/macos.mk; run by .github/workflows/ci.yml); the folder keeps it out
 * of the Linux tests/test_*.c wildcard. Here it is only syntax-checked
 * against tests/macos_sdk_standin.h: it has NOT been run by anyone yet.
 *
 * Threads park in a known place and wait on atomics or a mutex; the tests
 * wait for them with bounded polling loops (deadline), never with sleeps.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <stackprobe/capture.h>

#include "sprobe_test.h"

#define DEADLINE_NS (10ull * 1000 * 1000 * 1000)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait until *counter reaches want, or fail the test at the deadline. */
static void wait_for(atomic_int *counter, int want)
{
	uint64_t end = now_ns() + DEADLINE_NS;

	while (atomic_load_explicit(counter, memory_order_acquire) < want) {
		assert_true(now_ns() < end);
		sched_yield();
	}
}

static pid_t my_tid(void)
{
	uint64_t id = 0;

	assert_int_equal(pthread_threadid_np(NULL, &id), 0);
	return (pid_t)id;	/* what the backend stores (see docs/MACOS.md) */
}

static struct sprobe_thread_sample *find_tid(struct sprobe_snapshot *s, pid_t tid)
{
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

		if (t && t->tid == tid)
			return t;
	}
	return NULL;
}

static void assert_counters(const struct sprobe_snapshot *s)
{
	const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
	uint32_t sum = 0;

	assert_non_null(st);
	for (int r = 0; r < SPROBE_DROP__COUNT; r++)
		sum += st->dropped[r];
	assert_int_equal(st->threads_dropped, sum);
	assert_int_equal(st->threads_total, st->threads_captured + st->threads_dropped);
}

/* ---- known stack ---------------------------------------------------------- */

struct parked {
	atomic_int ready;
	atomic_int stop;
	pid_t tid;
};

__attribute__((noinline)) static void blocked_leaf(struct parked *p)
{
	atomic_store_explicit(&p->ready, 1, memory_order_release);
	while (!atomic_load_explicit(&p->stop, memory_order_acquire))
		__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void blocked_marker(struct parked *p)
{
	blocked_leaf(p);
	/* A use after the call keeps this a real caller frame. */
	atomic_fetch_add_explicit(&p->ready, 1, memory_order_release);
}

static void *parked_main(void *arg)
{
	struct parked *p = arg;

	p->tid = my_tid();
	blocked_marker(p);
	return NULL;
}

static void test_known_blocked_stack_contains_marker(void **state)
{
	struct parked p = { .ready = 0, .stop = 0 };
	struct sprobe_capturer *c = sprobe_capturer__new(NULL);
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 0);
	struct sprobe_thread_sample *t;
	uint64_t marker = (uint64_t)(uintptr_t)&blocked_marker;
	bool found = false;
	pthread_t th;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(pthread_create(&th, NULL, parked_main, &p), 0);
	wait_for(&p.ready, 1);

	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_int_equal(sprobe_snapshot__unwind_fp(s), 0);
	atomic_store_explicit(&p.stop, 1, memory_order_release);
	assert_int_equal(pthread_join(th, NULL), 0);

	assert_counters(s);
	assert_true(sprobe_snapshot__frames_resolved(s));
	t = find_tid(s, p.tid);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_int_equal(t->method, SPROBE_METHOD_SUSPEND);
	assert_true(t->stack_len > 0);
	assert_true(t->sp >= t->stack_addr && t->sp < t->stack_addr + t->stack_len);
	assert_true(t->stack_top >= t->stack_addr + t->stack_len);
	assert_true(t->entry_ns <= t->exit_ns);
	for (uint32_t i = 1; i < t->nframes; i++)
		if (t->frames[i].pc - marker < 4096)
			found = true;
	if (!found) {
		print_message("marker %#llx not among %u frames (ip %#llx):\n",
			      (unsigned long long)marker, t->nframes, (unsigned long long)t->ip);
		for (uint32_t i = 0; i < t->nframes; i++)
			print_message("  #%u %#llx\n", i, (unsigned long long)t->frames[i].pc);
	}
	assert_true(found);

	/* The caller is never suspended, so never in the snapshot. */
	assert_null(find_tid(s, my_tid()));
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

/* ---- counters, slots, truncation ------------------------------------------ */

#define NBLOCKED 8

struct blocked {
	pthread_mutex_t *gate;
	atomic_int *ready;
	pid_t tid;
};

/* Blocks in the kernel on a mutex the test holds. */
static void *blocked_main(void *arg)
{
	struct blocked *b = arg;

	b->tid = my_tid();
	atomic_fetch_add_explicit(b->ready, 1, memory_order_release);
	pthread_mutex_lock(b->gate);
	pthread_mutex_unlock(b->gate);
	return NULL;
}

static void start_blocked(pthread_mutex_t *gate, atomic_int *ready, struct blocked *b,
			  pthread_t *th, int n)
{
	assert_int_equal(pthread_mutex_lock(gate), 0);
	for (int i = 0; i < n; i++) {
		b[i].gate = gate;
		b[i].ready = ready;
		assert_int_equal(pthread_create(&th[i], NULL, blocked_main, &b[i]), 0);
	}
	wait_for(ready, n);
}

static void stop_blocked(pthread_mutex_t *gate, pthread_t *th, int n)
{
	assert_int_equal(pthread_mutex_unlock(gate), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
}

static void test_every_sibling_is_counted(void **state)
{
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
	atomic_int ready = 0;
	struct blocked b[NBLOCKED];
	pthread_t th[NBLOCKED];
	struct sprobe_capturer *c = sprobe_capturer__new(NULL);
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 0);
	const struct sprobe_snapshot_stats *st;

	assert_non_null(c);
	assert_non_null(s);
	start_blocked(&gate, &ready, b, th, NBLOCKED);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	st = sprobe_snapshot__stats(s);
	assert_counters(s);
	assert_true(st->threads_total >= NBLOCKED);
	for (int i = 0; i < NBLOCKED; i++) {
		struct sprobe_thread_sample *t = find_tid(s, b[i].tid);

		assert_non_null(t);
		assert_int_equal(t->stage, SPROBE_STAGE_RAW);
		assert_int_equal(t->drop_reason, SPROBE_DROP_NONE);
		assert_true(t->stack_len > 0);
	}
	assert_false(sprobe_snapshot__frames_resolved(s));
	stop_blocked(&gate, th, NBLOCKED);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

static void test_more_threads_than_slots_are_dropped_no_slot(void **state)
{
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
	atomic_int ready = 0;
	struct blocked b[NBLOCKED];
	pthread_t th[NBLOCKED];
	struct sprobe_capturer *c = sprobe_capturer__new(NULL);
	struct sprobe_snapshot *s = sprobe_snapshot__new(2, 0);
	const struct sprobe_snapshot_stats *st;

	assert_non_null(c);
	assert_non_null(s);
	start_blocked(&gate, &ready, b, th, NBLOCKED);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	st = sprobe_snapshot__stats(s);
	assert_counters(s);
	assert_true(sprobe_snapshot__nthreads(s) <= 2);
	assert_true(st->dropped[SPROBE_DROP_NO_SLOT] >= NBLOCKED - 2);
	stop_blocked(&gate, th, NBLOCKED);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

/* A thread 64 KiB deep, blocked: a 4 KiB cap must truncate its copy. */
struct deep {
	pthread_mutex_t *gate;
	atomic_int *ready;
	pid_t tid;
};

__attribute__((noinline)) static int recurse(struct deep *d, int depth)
{
	volatile char pad[1024];

	pad[0] = (char)depth;
	if (depth == 0) {
		atomic_fetch_add_explicit(d->ready, 1, memory_order_release);
		pthread_mutex_lock(d->gate);
		pthread_mutex_unlock(d->gate);
		return pad[0];
	}
	return recurse(d, depth - 1) + pad[0];
}

static void *deep_main(void *arg)
{
	struct deep *d = arg;

	d->tid = my_tid();
	recurse(d, 64);
	return NULL;
}

static void test_cap_truncates_deep_stack(void **state)
{
	pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
	atomic_int ready = 0;
	struct deep d = { .gate = &gate, .ready = &ready };
	struct sprobe_capturer *c = sprobe_capturer__new(NULL);
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 4096);
	struct sprobe_thread_sample *t;
	pthread_t th;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(pthread_mutex_lock(&gate), 0);
	assert_int_equal(pthread_create(&th, NULL, deep_main, &d), 0);
	wait_for(&ready, 1);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = find_tid(s, d.tid);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_true(t->truncated);
	assert_true(t->stack_len <= 4096 + SPROBE_REDZONE);
	assert_true(t->stack_top - t->sp > 64 * 1024);
	assert_int_equal(pthread_mutex_unlock(&gate), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

/* ---- threads exiting during captures -------------------------------------- */

struct churn {
	atomic_int stop;
	atomic_int started;
};

static void *short_lived(void *arg)
{
	return arg;
}

static void *churn_main(void *arg)
{
	struct churn *ch = arg;

	while (!atomic_load_explicit(&ch->stop, memory_order_acquire)) {
		pthread_t th;

		if (pthread_create(&th, NULL, short_lived, NULL) == 0) {
			pthread_join(th, NULL);
			atomic_fetch_add_explicit(&ch->started, 1, memory_order_release);
		}
	}
	return NULL;
}

/* Threads are created and exit while captures run: a thread may exit
 * between enumeration and its window, or while suspended in the kernel
 * (where its stack is unmapped): each must be dropped, never crash the
 * process, and the counters must stay consistent. */
static void test_threads_exiting_during_captures(void **state)
{
	struct churn ch = { .stop = 0, .started = 0 };
	struct sprobe_capturer *c = sprobe_capturer__new(NULL);
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 0);
	uint32_t exited = 0;
	pthread_t th;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(pthread_create(&th, NULL, churn_main, &ch), 0);
	wait_for(&ch.started, 1);
	for (int i = 0; i < 2000; i++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		assert_counters(s);
		exited += sprobe_snapshot__stats(s)->dropped[SPROBE_DROP_EXITED];
	}
	atomic_store_explicit(&ch.stop, 1, memory_order_release);
	assert_int_equal(pthread_join(th, NULL), 0);
	print_message("%d threads churned, %u drops as exited over 2000 captures\n",
		      atomic_load(&ch.started), exited);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

static void test_bad_options_are_refused(void **state)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o), .signo = 34 };

	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	o.signo = 0;
	o.method = SPROBE_METHOD_VM_READV;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(sprobe_capturer__capture(NULL, NULL), -EINVAL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_known_blocked_stack_contains_marker),
	cmocka_unit_test(test_every_sibling_is_counted),
	cmocka_unit_test(test_more_threads_than_slots_are_dropped_no_slot),
	cmocka_unit_test(test_cap_truncates_deep_stack),
	cmocka_unit_test(test_threads_exiting_during_captures),
	cmocka_unit_test(test_bad_options_are_refused),
};

SPROBE_TEST_MAIN(tests)
