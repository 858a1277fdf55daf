/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the Windows capture tests (test_windows_capture.c,
 * test_windows_capture_threads.c): the capturer, the invariants every
 * capture keeps, and bounded waits. The functions are static and not
 * inline, as they were in test_windows_capture.c.
 */
#ifndef SPROBE_WINDOWS_CAPTURE_FIXTURE_H
#define SPROBE_WINDOWS_CAPTURE_FIXTURE_H

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

#define DEADLINE_MS 60000u

/* ---- helpers -------------------------------------------------------- */

static __attribute__((unused)) struct sprobe_capturer *new_capturer(void)
{
	struct sprobe_capture_opts o = {
		.sz = sizeof(o),
		/* Wine suspends slowly; a deadline is not what these tests
		 * are about. */
		.timeout_ns = 120ull * 1000 * 1000 * 1000,
	};
	struct sprobe_capturer *c = sprobe_capturer__new(&o);
	assert_non_null(c);
	return c;
}

/* The invariants every capture must keep, whatever happened to threads. */
static __attribute__((unused)) void check_stats_by(struct sprobe_snapshot *s, DWORD capturer_tid)
{
	const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
	uint32_t sum = 0, raw = 0, empty = 0;

	assert_non_null(st);
	for (int r = 0; r < SPROBE_DROP__COUNT; r++)
		sum += st->dropped[r];
	assert_int_equal(st->dropped[SPROBE_DROP_NONE], 0);
	assert_int_equal(sum, st->threads_dropped);
	assert_int_equal(st->threads_total, st->threads_captured + st->threads_dropped);
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);
		assert_non_null(t);
		if (t->stage == SPROBE_STAGE_RAW) {
			raw++;
			assert_int_equal(t->drop_reason, SPROBE_DROP_NONE);
			assert_int_equal(t->method, SPROBE_METHOD_SUSPEND);
			/* Copy starts at sp and never passes the stack base. */
			assert_true(t->stack_len > 0);
			assert_true(t->stack_addr == t->sp);
			assert_true(t->stack_addr + t->stack_len <= t->stack_top);
			assert_true(t->truncated ==
				    (t->stack_addr + t->stack_len < t->stack_top));
			assert_true(t->exit_ns >= t->entry_ns && t->entry_ns > 0);
			/* The capturing thread never captures itself. */
			assert_true(t->tid != (pid_t)capturer_tid);
		} else {
			empty++;
			assert_int_equal(t->stage, SPROBE_STAGE_EMPTY);
			assert_true(t->drop_reason > SPROBE_DROP_NONE &&
				    t->drop_reason < SPROBE_DROP__COUNT);
		}
	}
	assert_int_equal(raw, st->threads_captured);
	assert_int_equal(raw + empty + st->dropped[SPROBE_DROP_NO_SLOT], st->threads_total);
}

static __attribute__((unused)) void check_stats(struct sprobe_snapshot *s)
{
	check_stats_by(s, GetCurrentThreadId());
}

static __attribute__((unused)) struct sprobe_thread_sample *find_tid(struct sprobe_snapshot *s, DWORD tid)
{
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);
		if (t && t->tid == (pid_t)tid)
			return t;
	}
	return NULL;
}

/* [begin, end) of the function containing addr, from its unwind entry. */
static __attribute__((unused)) void func_range(const void *fn, uint64_t *begin, uint64_t *end)
{
	DWORD64 base = 0;
	PRUNTIME_FUNCTION fe = RtlLookupFunctionEntry((DWORD64)(uintptr_t)fn, &base, NULL);
	assert_non_null(fe);
	*begin = base + fe->BeginAddress;
	*end = base + fe->EndAddress;
}

/* Bounded wait for *flag != 0 (the other thread got there). */
static __attribute__((unused)) void wait_flag(volatile LONG *flag)
{
	DWORD t0 = GetTickCount();
	while (!InterlockedCompareExchange(flag, 0, 0)) {
		assert_true(GetTickCount() - t0 < DEADLINE_MS);
		SwitchToThread();
	}
}

static volatile int sink;


#endif
