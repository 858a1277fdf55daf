/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zero-pause where the kernel's view of a thread cannot be trusted: under
 * qemu-user, /proc/self/task/T/syscall describes the emulator's host
 * thread (host syscall numbers and registers), and process_vm_readv is
 * ENOSYS. The capturer's self-test must refuse zero-pause there, say why,
 * and every capture must come through the signal path with the right
 * stack. Built for aarch64 and run under qemu by `make test-aarch64-zp`
 * (mk/zeropause.mk); natively the same checks expect zero-pause on.
 * Capture part only (backend + frame-pointer unwinder): built with
 * -fno-omit-frame-pointer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>

#include "sprobe_test.h"

static int g_rfd;
static _Atomic pid_t g_tid;
static uint64_t g_fn[3];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void q_leaf(void)
{
	char ch;

	atomic_store(&g_tid, (pid_t)syscall(SYS_gettid));
	while (read(g_rfd, &ch, 1) < 0 && errno == EINTR)
		;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void q_mid(void)
{
	q_leaf();
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void q_top(void)
{
	q_mid();
	__asm__ volatile("" ::: "memory");
}

static void *q_main(void *arg)
{
	(void)arg;
	q_top();
	return NULL;
}

/* Is some frame's pc inside fn (a return address within 256 bytes)? */
static bool has_fn(const struct sprobe_thread_sample *t, uint64_t fn)
{
	for (uint32_t i = 0; i < t->nframes; i++)
		if (t->frames[i].pc > fn && t->frames[i].pc - fn < 256)
			return true;
	return false;
}

static void test_zero_pause_trusted_or_refused(void **state)
{
	bool qemu = getenv("SPROBE_TEST_QEMU") != NULL;
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .timeout_ns = qemu ? 30000000000ull : 0 };
	int fds[2];
	pthread_t th;
	char why[256];

	(void)state;
	g_fn[0] = (uint64_t)(uintptr_t)q_leaf;
	g_fn[1] = (uint64_t)(uintptr_t)q_mid;
	g_fn[2] = (uint64_t)(uintptr_t)q_top;
	assert_int_equal(pipe(fds), 0);
	g_rfd = fds[0];
	struct sprobe_capturer *c = sprobe_capturer__new(&o);
	assert_non_null(c);
	int zp = sprobe_capturer__zero_pause(c, why, sizeof(why));
	print_message("zero-pause %s%s%s\n", zp == 1 ? "on" : "off", zp == 1 ? "" : ": ",
		      zp == 1 ? "" : why);
	if (qemu) {
		/* Refused, with a reason. */
		assert_int_equal(zp, 0);
		assert_true(strlen(why) > 0);
	} else {
		assert_int_equal(zp, 1);
	}
	struct sprobe_snapshot *s = sprobe_snapshot__new(16, 64 * 1024);
	assert_non_null(s);
	assert_int_equal(pthread_create(&th, NULL, q_main, NULL), 0);
	uint64_t deadline = now_ns() + (qemu ? 60000000000ull : 5000000000ull);
	while (!atomic_load(&g_tid)) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	/* Most likely in read() after this; not required: blocked or not,
	 * every capture below must be right. */
	struct timespec ts = { 0, 50000000 };
	nanosleep(&ts, NULL);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		struct sprobe_thread_sample *t = NULL;
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++)
			if (sprobe_snapshot__thread(s, i)->tid == atomic_load(&g_tid))
				t = sprobe_snapshot__thread(s, i);
		assert_non_null(t);
		assert_int_equal(t->stage, SPROBE_STAGE_RAW);
		if (qemu)
			assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
		if (t->method == SPROBE_METHOD_SIGNAL) {
			/* The frame-pointer chain is whole in a signal copy. */
			assert_true(sprobe_unwind_fp(t) >= 3);
			assert_true(has_fn(t, g_fn[1]) && has_fn(t, g_fn[2]));
		}
	}
	assert_int_equal(write(fds[1], "x", 1), 1);
	pthread_join(th, NULL);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
	close(fds[0]);
	close(fds[1]);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_zero_pause_trusted_or_refused),
};

SPROBE_TEST_MAIN(tests)
