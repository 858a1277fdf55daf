/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Windows capture backend against other threads, built with mingw-w64 at
 * -O2 and run under wine by `make test-windows` (mk/windows.mk): threads
 * exiting while captures run, no heap lock taken in the window, many
 * threads every one resumed, more threads than slots. Nothing asserts a
 * time; waits are on events or bounded polls with generous deadlines.
 */

#ifndef _WIN32
#error "Windows-only test: built by mk/windows.mk with mingw-w64, run under wine"
#endif

#include <windows.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <stackprobe.h>
#include <stackprobe/win.h>

#include "sprobe_test.h"
#include "windows_capture_fixture.h"

/* ---- threads exiting while captures run ----------------------------- */

struct churn {
	volatile LONG stop;
	volatile LONG spawned;
};

static DWORD WINAPI short_lived(void *arg)
{
	(void)arg;
	return 0;
}

static DWORD WINAPI churn_thread(void *arg)
{
	struct churn *ch = arg;
	while (!ch->stop) {
		/* One short-lived thread at a time per churner: enough to race
		 * the captures, not enough to starve wineserver. */
		HANDLE h = CreateThread(NULL, 0, short_lived, NULL, 0, NULL);
		if (h) {
			InterlockedIncrement(&ch->spawned);
			WaitForSingleObject(h, INFINITE);
			CloseHandle(h);
		}
	}
	return 0;
}

static DWORD WINAPI spinner_thread(void *arg)
{
	volatile LONG *stop = arg;
	while (!*stop)
		YieldProcessor();
	return 0;
}

static void test_threads_exiting_mid_capture(void **state)
{
	(void)state;
	struct churn ch = { 0 };
	volatile LONG stop_spin = 0;
	DWORD spin_tid = 0;
	HANDLE churners[2], spin;
	for (int i = 0; i < 2; i++) {
		churners[i] = CreateThread(NULL, 0, churn_thread, &ch, 0, NULL);
		assert_non_null(churners[i]);
	}
	spin = CreateThread(NULL, 0, spinner_thread, (void *)&stop_spin, 0, &spin_tid);
	assert_non_null(spin);

	struct sprobe_capturer *c = new_capturer();
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 16384);
	assert_non_null(s);
	uint32_t exited = 0, captured = 0;
	for (int iter = 0; iter < 30; iter++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		check_stats(s);
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
		exited += st->dropped[SPROBE_DROP_EXITED];
		captured += st->threads_captured;
		/* The long-lived sibling is captured every time. */
		struct sprobe_thread_sample *t = find_tid(s, spin_tid);
		assert_non_null(t);
		if (t->stage != SPROBE_STAGE_RAW)
			fail_msg("long-lived sibling not captured: %s",
				 sprobe_drop_reason__str(t->drop_reason));
		/* Unwinding whatever was captured must not crash. */
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
			struct sprobe_thread_sample *x = sprobe_snapshot__thread(s, i);
			if (x->stage == SPROBE_STAGE_RAW)
				assert_true(sprobe_unwind_pe(x) >= 1);
		}
	}
	InterlockedExchange(&ch.stop, 1);
	InterlockedExchange(&stop_spin, 1);
	assert_int_equal(WaitForMultipleObjects(2, churners, TRUE, DEADLINE_MS), WAIT_OBJECT_0);
	assert_int_equal(WaitForSingleObject(spin, DEADLINE_MS), WAIT_OBJECT_0);
	for (int i = 0; i < 2; i++)
		CloseHandle(churners[i]);
	CloseHandle(spin);
	assert_true(ch.spawned > 0);
	/* Informational: how often the race was actually hit. */
	print_message("churn: %ld threads spawned, %u captured, %u dropped as exited\n",
		      (long)ch.spawned, captured, exited);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

/* ---- no allocation / no lock in the window --------------------------- */

/*
 * A window that allocated (or took any heap lock) would deadlock the first
 * time it suspended a thread holding that lock. These threads hold the
 * process heap's lock and the CRT allocator's as often as they can, and the
 * captures run in a thread the test watches with a deadline: a deadlock is
 * reported as a failure instead of hanging the lane.
 */
struct heap_torture {
	volatile LONG stop;
	volatile LONG rounds;
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	int captures;
	volatile LONG done;
	int err;
	DWORD tid;
};

static DWORD WINAPI heap_locker(void *arg)
{
	struct heap_torture *ht = arg;
	HANDLE heap = GetProcessHeap();
	while (!ht->stop) {
		if (HeapLock(heap)) {
			for (int i = 0; i < 200; i++)
				YieldProcessor();
			HeapUnlock(heap);
		}
		InterlockedIncrement(&ht->rounds);
	}
	return 0;
}

static DWORD WINAPI malloc_hammer(void *arg)
{
	struct heap_torture *ht = arg;
	while (!ht->stop) {
		void *p = malloc(64 + (ht->rounds & 1023));
		void *q = HeapAlloc(GetProcessHeap(), 0, 128);
		sink += p != NULL;
		free(p);
		HeapFree(GetProcessHeap(), 0, q);
		InterlockedIncrement(&ht->rounds);
	}
	return 0;
}

static DWORD WINAPI capture_loop(void *arg)
{
	struct heap_torture *ht = arg;
	ht->tid = GetCurrentThreadId();
	for (int i = 0; i < ht->captures && !ht->err; i++) {
		ht->err = sprobe_capturer__capture(ht->c, ht->s);
		if (!ht->err && sprobe_snapshot__stats(ht->s)->threads_captured == 0)
			ht->err = -ENODATA;
	}
	InterlockedExchange(&ht->done, 1);
	return 0;
}

static void test_window_takes_no_heap_lock(void **state)
{
	(void)state;
	struct heap_torture ht = { .captures = 40 };
	HANDLE th[4];
	ht.c = new_capturer();
	ht.s = sprobe_snapshot__new(0, 0);
	assert_non_null(ht.s);
	th[0] = CreateThread(NULL, 0, heap_locker, &ht, 0, NULL);
	th[1] = CreateThread(NULL, 0, heap_locker, &ht, 0, NULL);
	th[2] = CreateThread(NULL, 0, malloc_hammer, &ht, 0, NULL);
	th[3] = CreateThread(NULL, 0, malloc_hammer, &ht, 0, NULL);
	for (int i = 0; i < 4; i++)
		assert_non_null(th[i]);
	HANDLE cap = CreateThread(NULL, 0, capture_loop, &ht, 0, NULL);
	assert_non_null(cap);

	DWORD w = WaitForSingleObject(cap, DEADLINE_MS);
	InterlockedExchange(&ht.stop, 1);
	if (w != WAIT_OBJECT_0) {
		/* A thread is stuck suspended holding the heap lock: neither
		 * cmocka's output nor a normal exit can be trusted to finish
		 * (both may need that lock). Say so without the heap and end
		 * the process with a failure status. */
		static const char msg[] = "FAIL: test_window_takes_no_heap_lock: captures did not "
					  "finish within 60 s: a suspend window waited for a lock "
					  "held by a suspended thread\n";
		DWORD wr;
		WriteFile(GetStdHandle(STD_OUTPUT_HANDLE), msg, sizeof(msg) - 1, &wr, NULL);
		TerminateProcess(GetCurrentProcess(), 3);
	}
	assert_int_equal(ht.err, 0);
	assert_int_equal(WaitForMultipleObjects(4, th, TRUE, DEADLINE_MS), WAIT_OBJECT_0);
	for (int i = 0; i < 4; i++)
		CloseHandle(th[i]);
	CloseHandle(cap);
	check_stats_by(ht.s, ht.tid);
	assert_true(ht.rounds > 0);
	sprobe_snapshot__free(ht.s);
	sprobe_capturer__free(ht.c);
}

/* ---- torture: many threads, every one resumed ------------------------ */

#define NTORTURE 48

struct worker {
	volatile LONG *stop;
	volatile LONG progress;
	CRITICAL_SECTION *cs;
	DWORD tid;
};

__attribute__((noinline, noclone)) static int busy(struct worker *w, int depth)
{
	if (depth > 0)
		return busy(w, depth - 1) + 1;
	switch (w->progress & 3) {
	case 0: {
		void *p = malloc(32);
		free(p);
		break;
	}
	case 1:
		EnterCriticalSection(w->cs);
		LeaveCriticalSection(w->cs);
		break;
	case 2:
		SwitchToThread();
		break;
	default:
		for (int i = 0; i < 100; i++)
			YieldProcessor();
	}
	return 0;
}

static DWORD WINAPI torture_worker(void *arg)
{
	struct worker *w = arg;
	w->tid = GetCurrentThreadId();
	while (!*w->stop) {
		sink += busy(w, (int)(w->progress % 7));
		InterlockedIncrement(&w->progress);
	}
	return 0;
}

static void test_torture_many_threads(void **state)
{
	(void)state;
	static struct worker w[NTORTURE];
	HANDLE th[NTORTURE];
	volatile LONG stop = 0;
	CRITICAL_SECTION cs;
	InitializeCriticalSection(&cs);
	for (int i = 0; i < NTORTURE; i++) {
		w[i] = (struct worker){ .stop = &stop, .cs = &cs };
		th[i] = CreateThread(NULL, 0, torture_worker, &w[i], 0, NULL);
		assert_non_null(th[i]);
	}
	for (int i = 0; i < NTORTURE; i++)
		wait_flag(&w[i].progress);

	struct sprobe_capturer *c = new_capturer();
	struct sprobe_snapshot *s = sprobe_snapshot__new(0, 32768);
	assert_non_null(s);
	for (int iter = 0; iter < 10; iter++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		check_stats(s);
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
		assert_true(st->threads_total >= NTORTURE);
		/* None of these threads exits: every one is captured. */
		for (int i = 0; i < NTORTURE; i++) {
			struct sprobe_thread_sample *t = find_tid(s, w[i].tid);
			assert_non_null(t);
			assert_int_equal(t->stage, SPROBE_STAGE_RAW);
			assert_true(sprobe_unwind_pe(t) >= 1);
		}
	}
	/* Every thread was resumed: each one makes progress again. */
	LONG before[NTORTURE];
	for (int i = 0; i < NTORTURE; i++)
		before[i] = w[i].progress;
	DWORD t0 = GetTickCount();
	for (int i = 0; i < NTORTURE; i++) {
		while (w[i].progress == before[i]) {
			if (GetTickCount() - t0 > DEADLINE_MS)
				fail_msg("thread %d (tid %lu) made no progress after the captures: "
					 "left suspended?", i, (unsigned long)w[i].tid);
			SwitchToThread();
		}
	}
	InterlockedExchange(&stop, 1);
	for (int i = 0; i < NTORTURE; i++) {
		assert_int_equal(WaitForSingleObject(th[i], DEADLINE_MS), WAIT_OBJECT_0);
		CloseHandle(th[i]);
	}
	DeleteCriticalSection(&cs);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

/* ---- more threads than slots ----------------------------------------- */

static void test_more_threads_than_slots(void **state)
{
	(void)state;
	volatile LONG stop = 0;
	HANDLE th[6];
	for (int i = 0; i < 6; i++) {
		th[i] = CreateThread(NULL, 0, spinner_thread, (void *)&stop, 0, NULL);
		assert_non_null(th[i]);
	}
	struct sprobe_capturer *c = new_capturer();
	struct sprobe_snapshot *s = sprobe_snapshot__new(2, 4096);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	InterlockedExchange(&stop, 1);
	check_stats(s);
	const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
	assert_true(st->threads_total >= 6);
	assert_int_equal(sprobe_snapshot__nthreads(s), 2);
	assert_int_equal(st->dropped[SPROBE_DROP_NO_SLOT], st->threads_total - 2);
	assert_int_equal(WaitForMultipleObjects(6, th, TRUE, DEADLINE_MS), WAIT_OBJECT_0);
	for (int i = 0; i < 6; i++)
		CloseHandle(th[i]);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_threads_exiting_mid_capture),
	cmocka_unit_test(test_window_takes_no_heap_lock),
	cmocka_unit_test(test_torture_many_threads),
	cmocka_unit_test(test_more_threads_than_slots),
};

SPROBE_TEST_MAIN(tests)
