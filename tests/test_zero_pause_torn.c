/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zero-pause capture (docs/capture.md "Zero-pause"), torn copies:
 *  - a thread woken again and again while its stack is copied is never
 *    reported with a torn stack: it writes a sequence pattern over a 64 KiB
 *    array of its stack each time it wakes, and every zero-pause sample
 *    must hold one whole pattern (without the schedstat check this fails:
 *    see docs/capture.md); every 64th capture comes after it has certainly
 *    blocked again, so zero-pause samples exist even when busy CPUs make
 *    every other capture find it running;
 *  - the same, deterministically: a hook wakes the thread between the
 *    read of its SP/PC and the copy; the copy must be refused.
 * No timing is asserted. Real threads, real signals, real /proc.
 */

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/sampler.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "chain.h"
#include "sprobe_test.h"
#include "zero_pause_fixture.h"

/* ---- torn copies --------------------------------------------------------- */

#define TORN_WORDS 8192 /* 64 KiB of the woken thread's stack */

struct torn {
	int rfd, wfd;
	_Atomic uint32_t seq;	/* fills completed; the writer's futex word */
	_Atomic int stop;
	_Atomic pid_t tid;
	_Atomic uint64_t arr;	/* address of the pattern array */
	_Atomic uint64_t filled; /* n of the last complete fill: pattern(n) */
	/* The test holds the writer to make the reader block for certain:
	 * hold is the writer's futex word while held, held_gen its answer
	 * (the hold round it has stopped for, after its last wake-up's fill). */
	_Atomic uint32_t hold, hold_gen, held_gen;
};

static uint64_t pattern(uint64_t n)
{
	return n * 0x9e3779b97f4a7c15ull | 1;
}

/* Blocks in read(); every wake-up writes pattern(n) over the whole array,
 * then tells the writer. It writes from the top down while the probe's
 * copy reads upwards, so a copy that overlaps a fill in time crosses it
 * and holds two patterns. */
static void *torn_main(void *arg)
{
	struct torn *t = arg;
	volatile uint64_t arr[TORN_WORDS];

	for (int i = 0; i < TORN_WORDS; i++)
		arr[i] = pattern(0);
	atomic_store(&t->arr, (uint64_t)(uintptr_t)arr);
	atomic_store_explicit(&t->tid, (pid_t)syscall(SYS_gettid), memory_order_release);
	for (uint64_t n = 1; !atomic_load(&t->stop); n++) {
		char ch;

		if (read(t->rfd, &ch, 1) <= 0)
			continue;
		for (int i = TORN_WORDS - 1; i >= 0; i--)
			arr[i] = pattern(n);
		atomic_store(&t->filled, n);
		atomic_fetch_add(&t->seq, 1);
		syscall(SYS_futex, &t->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

/* Wakes the reader, waits until it has filled the array, again. */
static void *torn_writer(void *arg)
{
	struct torn *t = arg;

	while (!atomic_load(&t->stop)) {
		uint32_t seen = atomic_load(&t->seq);
		struct timespec ts = { 0, 10000000 };

		if (atomic_load(&t->hold)) {
			/* Its last wake-up has been filled (the wait below), so
			 * the reader goes back to read() and blocks there. */
			atomic_store(&t->held_gen, atomic_load(&t->hold_gen));
			syscall(SYS_futex, &t->held_gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
			while (atomic_load(&t->hold) && !atomic_load(&t->stop))
				syscall(SYS_futex, &t->hold, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
			continue;
		}
		if (write(t->wfd, "x", 1) != 1)
			break;
		while (atomic_load(&t->seq) == seen && !atomic_load(&t->stop))
			syscall(SYS_futex, &t->seq, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
	}
	return NULL;
}

/* Hold the writer and wait (bounded) until the reader, whose last wake-up
 * has been filled, is blocked in read() again: nothing can wake it until
 * torn_release(). Polls /proc with sched_yield (no sleep decides). */
static void torn_hold(struct torn *t)
{
	uint32_t gen = atomic_load(&t->hold_gen) + 1;
	uint64_t deadline = now_ns() + 5000000000ull;
	struct timespec ts = { 0, 10000000 };
	char path[64], buf[256];

	atomic_store(&t->hold_gen, gen);
	atomic_store(&t->hold, 1);
	for (uint32_t g; (g = atomic_load(&t->held_gen)) != gen;) {
		assert_true(now_ns() < deadline);
		syscall(SYS_futex, &t->held_gen, FUTEX_WAIT_PRIVATE, g, &ts, NULL, 0);
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)atomic_load(&t->tid));
	for (;;) {
		FILE *f = fopen(path, "r");

		assert_non_null(f);
		/* "running" while on a CPU; the syscall number once off it. */
		bool blocked = fgets(buf, sizeof(buf), f) && buf[0] != 'r' &&
			       strtol(buf, NULL, 10) == SYS_read;
		fclose(f);
		if (blocked)
			return;
		assert_true(now_ns() < deadline);
		sched_yield();
	}
}

static void torn_release(struct torn *t)
{
	atomic_store(&t->hold, 0);
	syscall(SYS_futex, &t->hold, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Whether the zero-pause copy X holds the array in one piece; *first is
 * its first word (the pattern it holds, if whole). */
static bool torn_copy_whole(const struct sprobe_thread_sample *x, uint64_t arr, uint64_t *first)
{
	static uint64_t copy[TORN_WORDS];

	/* The array lives in torn_main's frame, above the SP of the
	 * read() it blocks in: inside every copy. */
	assert_true(arr >= x->stack_addr && arr + sizeof(copy) <= x->stack_addr + x->stack_len);
	memcpy(copy, x->stack + (arr - x->stack_addr), sizeof(copy));
	*first = copy[0];
	for (int i = 1; i < TORN_WORDS; i++)
		if (copy[i] != copy[0])
			return false;
	return true;
}

static void test_woken_thread_never_torn(void **state)
{
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(16, 0);
	struct torn t;
	pthread_t th, wr;
	int fds[2];
	unsigned zp = 0, sig = 0, torn = 0, fallback = 0, captures = 0, kept = 0;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(pipe(fds), 0);
	t.rfd = fds[0];
	t.wfd = fds[1];
	assert_int_equal(pthread_create(&th, NULL, torn_main, &t), 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (!atomic_load_explicit(&t.tid, memory_order_acquire)) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	assert_int_equal(pthread_create(&wr, NULL, torn_writer, &t), 0);

	uint64_t arr = atomic_load(&t.arr), end = now_ns() + 1500000000ull;
	uint32_t last_seq = 0;
	unsigned quiet = 0, released = 0;
	bool just_released = false;
	while (now_ns() < end && captures < 20000) {
		const struct sprobe_thread_sample *x;
		uint64_t w;

		if (captures % 64 == 0) {
			/* The reader has certainly blocked again after its last
			 * wake-up (torn_hold): this capture must be zero-pause
			 * and hold that wake-up's fill, whole. A loaded machine
			 * cannot take these away, where it can make every racing
			 * capture below find the reader running. */
			torn_hold(&t);
			assert_int_equal(sprobe_capturer__capture(c, s), 0);
			captures++;
			fallback += sprobe_snapshot__stats(s)->zp_fallback;
			kept += sprobe_snapshot__stats(s)->zp_unchanged;
			x = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, t.tid));
			assert_int_equal(x->stage, SPROBE_STAGE_RAW);
			assert_int_equal(x->method, SPROBE_METHOD_ZERO_PAUSE);
			assert_true(torn_copy_whole(x, arr, &w));
			assert_true(w == pattern(atomic_load(&t.filled)));
			quiet++;
			/* The next capture starts while the reader is still
			 * blocked and the writer is about to wake it: the copy
			 * races the wake-up and the fill. */
			torn_release(&t);
			last_seq = atomic_load(&t.seq);
			just_released = true;
			continue;
		}
		/* Otherwise one capture per wake-up of the reader: it has run
		 * since the last capture (so its previous copy cannot simply
		 * be kept) and is about to block and be woken again. */
		if (!just_released) {
			for (int spin = 0; atomic_load(&t.seq) == last_seq && spin < 100000; spin++)
				sched_yield();
			last_seq = atomic_load(&t.seq);
		}
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		captures++;
		fallback += sprobe_snapshot__stats(s)->zp_fallback;
		kept += sprobe_snapshot__stats(s)->zp_unchanged;
		x = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, t.tid));
		if (x->stage != SPROBE_STAGE_RAW || x->method != SPROBE_METHOD_ZERO_PAUSE) {
			sig += x->stage == SPROBE_STAGE_RAW;
			just_released = false;
			continue;
		}
		zp++;
		released += just_released;
		just_released = false;
		if (!torn_copy_whole(x, arr, &w))
			torn++;
	}
	atomic_store(&t.stop, 1);
	print_message("  %u captures: %u zero-pause after the reader certainly blocked (none "
		      "torn: asserted), %u racing zero-pause (%u of them right after the "
		      "writer's release; %u torn), %u signal, %u zero-pause copies refused "
		      "(schedstat changed); %u samples of any thread kept unchanged\n",
		      captures, quiet, zp, released, torn, sig, fallback, kept);
	if (!zp)
		print_message("  no racing capture found the reader blocked on this machine "
			      "(busy CPUs): the race was tried %u times, the property checked on "
			      "the %u certain ones only\n", captures - quiet, quiet);
	assert_int_equal(torn, 0);
	assert_true(quiet > 0);
	/* Shut down: the reader may be blocked in read, the writer in its
	 * futex wait (10 ms timeout, re-checks stop). */
	if (write(t.wfd, "x", 1) != 1)
		fail_msg("write");
	pthread_join(wr, NULL);
	for (uint64_t d = now_ns() + 5000000000ull; pthread_tryjoin_np(th, NULL) != 0;) {
		assert_true(now_ns() < d);
		if (write(t.wfd, "x", 1) != 1)
			fail_msg("write");
		pause_ms(1);
	}
	close(fds[0]);
	close(fds[1]);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* The schedstat check itself, deterministically: the hook wakes the
 * parked thread between the probe's read of its SP/PC and the copy, and
 * waits until it has run (and blocked again). The copy must be refused
 * and the thread captured through the signal path instead. */
struct wake_ctx {
	struct parked *w;
	unsigned hooked;
};

static void wake_before_copy(void *ctx, pid_t tid)
{
	struct wake_ctx *x = ctx;
	unsigned wakes = atomic_load(&x->w->p.wakes);
	uint64_t deadline = now_ns() + 5000000000ull;

	if (tid != x->w->p.tid)
		return;
	x->hooked++;
	assert_int_equal(write(x->w->wfd, "x", 1), 1);
	while (atomic_load(&x->w->p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
}

static void test_thread_that_ran_is_refused(void **state)
{
	struct parked w;
	struct wake_ctx x = { .w = &w };
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .before_zp_copy = wake_before_copy, .hook_ctx = &x };
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);

	(void)state;
	park_start(&w, ZP_READ, false);
	struct sprobe_capturer *c = cap_new(&o);
	assert_non_null(c);
	assert_int_equal(sprobe_capturer__zero_pause(c, NULL, 0), 1);
	for (int k = 0; k < 5; k++) {
		wait_blocked(w.p.tid, ZP_READ);
		unsigned before = x.hooked;
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		assert_int_equal(x.hooked, before + 1);
		const struct sprobe_thread_sample *t =
			sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
		assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
		assert_true(sprobe_snapshot__stats(s)->zp_fallback >= 1);
	}
	cap_free(c);
	sprobe_snapshot__free(s);
	park_stop(&w);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup_teardown(test_woken_thread_never_torn, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_thread_that_ran_is_refused, setup_usr2, teardown),
};

SPROBE_TEST_MAIN(tests)
