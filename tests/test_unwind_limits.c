/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Deferred unwinding of real captures at its limits, built -O2
 * -fomit-frame-pointer as test_unwind.c: truncated copies give partial
 * frames and keep the truncated flag; random bytes terminate; the frame
 * limit holds; warm caches skip the unwind-table search; capture + resolve;
 * bad input.
 */

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ucontext.h>

#include <stackprobe/capture.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "sprobe_test.h"
#include "unwind_fixture.h"

/* A copy cut short by the capture cap: partial frames, flag kept, and the
 * frames found agree with those of a full copy. */
static void test_truncated_copy(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t, full;
	struct sprobe_snapshot *small;
	enum sprobe_unwind_stop why;
	uint8_t *fullstack;
	int n;

	env_open(&e, 0);
	park_start(&p, PARK_DEEP);
	p.depth = 60;
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_false(t->truncated);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 60);
	assert_int_equal(why, SPROBE_UNWIND_END);
	full = *t;
	fullstack = malloc(t->stack_len);
	assert_non_null(fullstack);
	memcpy(fullstack, t->stack, t->stack_len);
	full.stack = fullstack;

	/* A real truncated capture: 1 KiB of a much deeper stack. */
	small = sprobe_snapshot__new(64, 1024);
	assert_non_null(small);
	t = capture_into(&e, small, p.tid);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_true(t->truncated);
	n = sprobe_unwinder__unwind(e.u, t, &why);
	print_stack(e.mods, t, why);
	assert_true(n >= 3);
	assert_true((uint32_t)n < full.nframes);
	assert_int_equal(why, SPROBE_UNWIND_TRUNCATED);
	assert_true(t->truncated);
	for (int i = 1; i < n; i++)
		assert_int_equal(t->frames[i].pc, full.frames[i].pc);
	sprobe_snapshot__free(small);

	/* Every cut of the full copy: a prefix of the full walk, never more. */
	for (size_t len = 16; len < full.stack_len; len += len / 3 + 8) {
		struct sprobe_thread_sample cut = full;

		cut.stack_len = len;
		cut.truncated = true;
		n = sprobe_unwinder__unwind(e.u, &cut, &why);
		assert_true(n >= 1 && (uint32_t)n <= full.nframes);
		assert_true(cut.truncated);
		for (int i = 1; i < n; i++)
			assert_int_equal(cut.frames[i].pc, full.frames[i].pc);
		if ((uint32_t)n < full.nframes && why != SPROBE_UNWIND_TRUNCATED)
			fail_msg("cut at %zu: %d of %u frames, stop %s", len, n, full.nframes,
				 sprobe_unwind_stop__str(why));
	}
	free(fullstack);
	park_stop(&p);
	env_close(&e);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random bytes where the stack was, random registers: the walk ends, within
 * the limit, without touching anything it should not. */
static void test_random_bytes_terminate(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t, r;
	const struct sprobe_module *exe;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint8_t *junk;
	enum sprobe_unwind_stop why;
	unsigned stops[SPROBE_UNWIND__COUNT] = { 0 };

	env_open(&e, 0);
	park_start(&p, PARK_KNOWN);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	exe = sprobe_modules__find(e.mods, t->ip);
	assert_non_null(exe);
	junk = malloc(t->stack_len);
	assert_non_null(junk);
	for (int iter = 0; iter < 3000; iter++) {
		for (size_t i = 0; i + 8 <= t->stack_len; i += 8) {
			uint64_t v = xorshift(&seed);

			/* Some words look like stack or code addresses, the
			 * kind of garbage that gets furthest. */
			if ((v & 3) == 0)
				v = t->stack_addr + (v >> 8) % t->stack_len;
			else if ((v & 3) == 1)
				v = exe->start + (v >> 8) % (exe->end - exe->start);
			memcpy(junk + i, &v, 8);
		}
		r = *t;
		r.stack = junk;
		if (iter % 3 == 1) {
			for (int k = 0; k < SPROBE_NREGS; k++)
				r.regs[k] = xorshift(&seed);
			r.ip = exe->start + xorshift(&seed) % (exe->end - exe->start);
			r.fp = t->stack_addr + xorshift(&seed) % t->stack_len;
		} else if (iter % 3 == 2) {
			r.ip = xorshift(&seed);
			r.sp = xorshift(&seed);
			r.fp = xorshift(&seed);
		}
		int n = sprobe_unwinder__unwind(e.u, &r, &why);

		assert_true(n >= 0 && n <= SPROBE_MAX_FRAMES);
		assert_int_equal(r.stage, SPROBE_STAGE_UNWOUND);
		stops[why]++;
	}
	print_message("  3000 random copies: end %u, fp-end %u, truncated %u, bad %u, loop %u, max %u\n",
		      stops[0], stops[1], stops[2], stops[3], stops[4], stops[5]);
	free(junk);
	park_stop(&p);
	env_close(&e);
}

static void test_frame_limit(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	struct sprobe_unwinder_opts o = { .sz = sizeof(o), .max_frames = 8 };
	struct sprobe_unwinder *u8;

	env_open(&e, 0);
	park_start(&p, PARK_DEEP);
	p.depth = 200;
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_int_equal(sprobe_unwinder__unwind(e.u, t, &why), SPROBE_MAX_FRAMES);
	assert_int_equal(why, SPROBE_UNWIND_MAX_FRAMES);
	for (uint32_t i = 2; i < t->nframes; i++)
		assert_true(t->frames[i].fp > t->frames[i - 1].fp);
	u8 = sprobe_unwinder__new(&o);
	assert_non_null(u8);
	assert_int_equal(sprobe_unwinder__unwind(u8, t, &why), 8);
	assert_int_equal(why, SPROBE_UNWIND_MAX_FRAMES);
	sprobe_unwinder__free(u8);
	park_stop(&p);
	env_close(&e);
}

/* Repeated captures of the same code need no new unwind-table searches. */
static void test_warm_cache_skips_table_search(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	struct sprobe_unwinder_stats a, b;
	uint64_t pcs[SPROBE_MAX_FRAMES];
	uint32_t n;

	env_open(&e, 0);
	park_start(&p, PARK_FUTEX);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, NULL) > 3);
	n = t->nframes;
	for (uint32_t i = 0; i < n; i++)
		pcs[i] = t->frames[i].pc;
	assert_int_equal(sprobe_unwinder__stats(e.u, &a), 0);
	assert_true(a.table_lookups >= n - 1);
	/* A second capture of the same blocked thread. */
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, NULL) > 3);
	assert_int_equal(sprobe_unwinder__stats(e.u, &b), 0);
	assert_int_equal(t->nframes, n);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(t->frames[i].pc, pcs[i]);
	assert_int_equal(b.table_lookups, a.table_lookups);
	assert_int_equal(b.samples, a.samples + 1);
	park_stop(&p);
	env_close(&e);
}

static void test_capture_and_resolve(void **state)
{
	struct env e;
	struct parked p[2];
	struct sprobe_thread_sample *t;

	env_open(&e, 0);
	park_start(&p[0], PARK_KNOWN);
	park_go(&p[0]);
	park_start(&p[1], PARK_READ);
	park_go(&p[1]);
	assert_int_equal(sprobe_capture_and_resolve(e.cap, e.snap, e.u), 0);
	assert_true(sprobe_snapshot__frames_resolved(e.snap));
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(e.snap); i++) {
		t = sprobe_snapshot__thread(e.snap, i);
		if (t->stage != SPROBE_STAGE_EMPTY) {
			assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
			assert_true(t->nframes >= 1);
		}
	}
	t = find_tid(e.snap, p[0].tid);
	assert_int_equal(frame_named(e.mods, t, 1, "unw_caller"), 1);
	t = find_tid(e.snap, p[1].tid);
	assert_true(frame_named(e.mods, t, 1, "unw_blocked_read") > 0);
	park_stop(&p[0]);
	park_stop(&p[1]);
	env_close(&e);
}

static void test_bad_input(void **state)
{
	struct sprobe_unwinder *u = sprobe_unwinder__new(NULL);
	struct sprobe_thread_sample t;
	struct sprobe_unwinder_opts o = { .sz = 1 };

	assert_non_null(u);
	memset(&t, 0, sizeof(t));
	assert_int_equal(sprobe_unwinder__unwind(NULL, &t, NULL), -EINVAL);
	assert_int_equal(sprobe_unwinder__unwind(u, NULL, NULL), -EINVAL);
	assert_int_equal(sprobe_unwinder__unwind(u, &t, NULL), -EINVAL); /* stage EMPTY */
	t.stage = SPROBE_STAGE_RAW;
	assert_int_equal(sprobe_unwinder__unwind(u, &t, NULL), -EINVAL); /* no stack */
	assert_int_equal(sprobe_unwinder__unwind_snapshot(u, NULL), -EINVAL);
	assert_int_equal(sprobe_capture_and_resolve(NULL, NULL, u), -EINVAL);
	assert_int_equal(sprobe_unwinder__stats(u, NULL), -EINVAL);
	assert_null(sprobe_unwinder__new(&o));
	assert_int_equal(errno, EINVAL);

	/* An inventory of another process is read from its files (the
	 * external tier: tests/test_external.c). */
	struct sprobe_modules_opts mo = { .sz = sizeof(mo), .pid = getppid() };
	struct sprobe_modules *other = sprobe_modules__new(&mo);

	if (other) {
		struct sprobe_unwinder_opts uo = { .sz = sizeof(uo), .modules = other };
		struct sprobe_unwinder *ou = sprobe_unwinder__new(&uo);

		assert_non_null(ou);
		assert_ptr_equal(sprobe_unwinder__modules(ou), other);
		sprobe_unwinder__free(ou);
		sprobe_modules__free(other);
	}
	/* Nor can an offline one (module records from a data file). */
	struct sprobe_modules_opts eo = { .sz = sizeof(eo), .empty = true };
	struct sprobe_modules *offline = sprobe_modules__new(&eo);
	struct sprobe_unwinder_opts uo2 = { .sz = sizeof(uo2), .modules = offline };

	assert_non_null(offline);
	assert_null(sprobe_unwinder__new(&uo2));
	assert_int_equal(errno, EINVAL);
	sprobe_modules__free(offline);
	sprobe_unwinder__free(u);
	sprobe_unwinder__free(NULL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_truncated_copy),
	cmocka_unit_test(test_random_bytes_terminate),
	cmocka_unit_test(test_frame_limit),
	cmocka_unit_test(test_warm_cache_skips_table_search),
	cmocka_unit_test(test_capture_and_resolve),
	cmocka_unit_test(test_bad_input),
};

SPROBE_TEST_MAIN(tests)
