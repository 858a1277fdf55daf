/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zero-pause capture (docs/capture.md "Zero-pause"), copies kept between
 * captures: a thread not switched in since its last copy keeps that copy
 * and its walk, and blocked threads' copies are trimmed back to no
 * resident pages. No timing is asserted. Real threads, real /proc.
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

/* A thread not switched in since its last zero-pause copy keeps that copy
 * (one schedstat read): same registers, same bytes. Once it has run, or
 * in another snapshot, it is copied afresh. */
struct copy_count {
	pid_t tid;
	unsigned copies; /* full-path attempts for tid (the hook runs there) */
};

static void count_copy(void *ctx, pid_t tid)
{
	struct copy_count *x = ctx;

	if (tid == x->tid)
		x->copies++;
}

static void test_unchanged_thread_keeps_its_copy(void **state)
{
	struct parked w;
	struct copy_count cc = { 0 };
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .before_zp_copy = count_copy, .hook_ctx = &cc };
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0), *s2 = sprobe_snapshot__new(64, 0);
	static uint8_t first[SPROBE_MAX_STACK_BYTES + 256];
	uint64_t ip, sp, len, addr;
	unsigned copies;

	(void)state;
	park_start(&w, ZP_READ, false);
	cc.tid = w.p.tid;
	struct sprobe_capturer *c = cap_new(&o);
	assert_non_null(c);
	int i = capture_zp(c, s, w.p.tid);
	const struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, (uint32_t)i);
	ip = t->ip;
	sp = t->sp;
	len = t->stack_len;
	addr = t->stack_addr;
	assert_true(len <= sizeof(first));
	memcpy(first, t->stack, len);

	copies = cc.copies;
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
	assert_int_equal(t->method, SPROBE_METHOD_ZERO_PAUSE);
	assert_int_equal(cc.copies, copies); /* not copied again */
	assert_true(sprobe_snapshot__stats(s)->zp_unchanged >= 1);
	assert_int_equal(t->ip, ip);
	assert_int_equal(t->sp, sp);
	assert_int_equal(t->stack_addr, addr);
	assert_int_equal(t->stack_len, len);
	assert_memory_equal(t->stack, first, len);
	assert_true(t->entry_ns > 0 && t->exit_ns >= t->entry_ns);

	/* Another snapshot: its slot holds nothing of ours. */
	assert_int_equal(sprobe_capturer__capture(c, s2), 0);
	assert_int_equal(sprobe_snapshot__stats(s2)->zp_unchanged, 0);
	assert_int_equal(cc.copies, copies + 1);
	/* Back to s: s2 was captured into since, so no reuse either. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_int_equal(sprobe_snapshot__stats(s)->zp_unchanged, 0);
	assert_int_equal(cc.copies, copies + 2);

	/* The thread runs (one byte read, back into read()): fresh copy. */
	unsigned wakes = atomic_load(&w.p.wakes);
	assert_int_equal(write(w.wfd, "x", 1), 1);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (atomic_load(&w.p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(w.p.tid, ZP_READ);
	copies = cc.copies;
	i = capture_zp(c, s, w.p.tid);
	assert_true(cc.copies > copies); /* copied afresh */
	cap_free(c);
	sprobe_snapshot__free(s);
	sprobe_snapshot__free(s2);
	park_stop(&w);
}

/* An unchanged thread also keeps its walk: the second capture hands back
 * the sample already UNWOUND with the same frames, and resolve() does not
 * walk it again; once the thread has run, it is walked afresh. */
static void test_unchanged_thread_keeps_its_walk(void **state)
{
	struct parked w;
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	struct sprobe_unwinder_stats st0, st1;
	static struct sprobe_frame frames[SPROBE_MAX_FRAMES];
	uint32_t nframes = 0;
	struct sprobe_thread_sample *t = NULL;

	(void)state;
	assert_non_null(c);
	assert_non_null(u);
	/* No frame pointers: the zero-pause walk is complete (not re-captured). */
	park_start(&w, ZP_FUTEX, false);
	for (int round = 0; round < 20; round++) {
		assert_int_equal(sprobe_capture_and_resolve(c, s, u), 0);
		t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
		if (t->method == SPROBE_METHOD_ZERO_PAUSE && t->stage == SPROBE_STAGE_UNWOUND)
			break;
	}
	assert_int_equal(t->method, SPROBE_METHOD_ZERO_PAUSE);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_true(has_chain(u, t, zp_chain_names_nofp));
	nframes = t->nframes;
	assert_true(nframes > 3);
	memcpy(frames, t->frames, nframes * sizeof(frames[0]));

	/* Not run since: the capture itself returns the walk. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
	assert_true(sprobe_snapshot__stats(s)->zp_unchanged >= 1);
	assert_int_equal(t->method, SPROBE_METHOD_ZERO_PAUSE);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_int_equal(t->nframes, nframes);
	assert_memory_equal(t->frames, frames, nframes * sizeof(frames[0]));
	assert_int_equal(sprobe_unwinder__stats(u, &st0), 0);
	assert_true(sprobe_unwinder__resolve(u, c, s) >= 1);
	assert_int_equal(sprobe_unwinder__stats(u, &st1), 0);
	assert_int_equal(st1.zp_walks, st0.zp_walks); /* not walked again */
	assert_int_equal(t->nframes, nframes);
	assert_memory_equal(t->frames, frames, nframes * sizeof(frames[0]));

	/* It runs (wake the futex, it waits again): a fresh copy, walked. */
	unsigned wakes = atomic_load(&w.p.wakes);
	/* word stays 0: it returns from the wait and waits again */
	syscall(SYS_futex, &w.p.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (atomic_load(&w.p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(w.p.tid, ZP_FUTEX);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_int_equal(t->nframes, 0);
	assert_true(sprobe_unwinder__resolve(u, c, s) >= 1);
	assert_int_equal(sprobe_unwinder__stats(u, &st1), 0);
	assert_true(st1.zp_walks > st0.zp_walks);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_true(has_chain(u, t, zp_chain_names_nofp));

	park_stop(&w);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* Resident pages of [p, p + len) (mincore: the kernel's page tables, real). */
static unsigned resident_pages(const void *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095;
	uintptr_t hi = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;
	unsigned char vec[SPROBE_MAX_STACK_BYTES / 4096 + 2];
	unsigned n = 0;

	assert_true((hi - lo) / 4096 <= sizeof(vec));
	assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
	for (size_t k = 0; k < (hi - lo) / 4096; k++)
		n += vec[k] & 1;
	return n;
}

/* N blocked threads cost no resident copy between captures once they
 * have stayed blocked for a round: sprobe_snapshot__trim() gives back the
 * copies the capture kept (mincore says the pages are gone), not the
 * fresh ones; the next capture keeps the unchanged threads' walks without
 * copying (their buffers stay unpopulated); and a copy that was not
 * unwound is never reused once given back (it is copied afresh). */
#define TRIM_N 12
static void test_trim_gives_blocked_copies_back(void **state)
{
	struct parked w[TRIM_N];
	struct copy_count cc = { 0 };
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .before_zp_copy = count_copy, .hook_ctx = &cc };
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	const uint8_t *buf[TRIM_N];
	size_t len[TRIM_N];
	int idx[TRIM_N];
	bool all = false;

	(void)state;
	assert_non_null(s);
	assert_non_null(u);
	for (int k = 0; k < TRIM_N; k++)
		park_start(&w[k], ZP_FUTEX, false); /* no frame pointers: complete walks */
	struct sprobe_capturer *c = cap_new(&o);
	assert_non_null(c);
	assert_int_equal(sprobe_capturer__zero_pause(c, NULL, 0), 1);
	/* Rounds until one in which every parked thread's copy was kept
	 * (blocked since the round before; one just created may still be
	 * on its way into the wait). A fresh copy is not given back. */
	for (int round = 0; round < 50 && !all; round++) {
		assert_int_equal(sprobe_capture_and_resolve(c, s, u), 0);
		all = sprobe_snapshot__stats(s)->zp_unchanged >= TRIM_N;
		for (int k = 0; k < TRIM_N; k++) {
			const struct sprobe_thread_sample *t =
				sprobe_snapshot__thread(s, (uint32_t)(idx[k] = find_tid(s, w[k].p.tid)));

			all &= t->method == SPROBE_METHOD_ZERO_PAUSE &&
			       t->stage == SPROBE_STAGE_UNWOUND && t->stack_len > 0;
			buf[k] = t->stack;
			len[k] = t->stack_len;
		}
		if (round == 0) /* the first copies are all fresh: none given back */
			assert_int_equal(sprobe_snapshot__trim(s), 0);
	}
	assert_true(all);
	for (int k = 0; k < TRIM_N; k++)
		assert_true(resident_pages(buf[k], len[k]) >= 1); /* the copy is there */

	int given = sprobe_snapshot__trim(s);
	assert_true(given >= TRIM_N);
	for (int k = 0; k < TRIM_N; k++) {
		const struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, (uint32_t)idx[k]);

		assert_int_equal(t->stack_len, 0);
		assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND); /* the walk stays */
		assert_true(t->nframes > 3);
		assert_int_equal(resident_pages(buf[k], len[k]), 0);
	}
	assert_int_equal(sprobe_snapshot__trim(s), 0); /* nothing left to give */

	/* Not run since: walks kept, nothing copied, buffers still empty. */
	unsigned copies, kept = 0;
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	for (int k = 0; k < TRIM_N; k++) {
		const struct sprobe_thread_sample *t =
			sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w[k].p.tid));

		if (t->method == SPROBE_METHOD_ZERO_PAUSE && t->stage == SPROBE_STAGE_UNWOUND) {
			kept++;
			assert_int_equal(t->stack_len, 0);
			assert_true(has_chain(u, t, zp_chain_names_nofp));
			assert_int_equal(resident_pages(buf[k], len[k]), 0);
		}
	}
	print_message("  %u of %d blocked threads kept their walk without a copy\n", kept, TRIM_N);
	assert_true(kept >= 1);
	assert_true(sprobe_snapshot__stats(s)->zp_unchanged >= kept);

	/* A copy given back before it was unwound is not reused: the thread
	 * runs, is copied afresh (not unwound), kept by the next capture,
	 * given back; the capture after copies it afresh, resident again. */
	cc.tid = w[0].p.tid;
	unsigned wakes = atomic_load(&w[0].p.wakes);
	syscall(SYS_futex, &w[0].p.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (atomic_load(&w[0].p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(w[0].p.tid, ZP_FUTEX);
	const struct sprobe_thread_sample *t0 = NULL;
	for (int attempt = 0; attempt < 100; attempt++) {
		int i0 = capture_zp(c, s, w[0].p.tid);

		t0 = sprobe_snapshot__thread(s, (uint32_t)i0);
		if (t0->stage == SPROBE_STAGE_RAW && t0->stack_len > 0 && sprobe_snapshot__trim(s) >= 1 &&
		    t0->stack_len == 0)
			break; /* this capture kept the copy: it went back */
		t0 = NULL;
	}
	assert_non_null(t0);
	copies = cc.copies;
	int i0 = capture_zp(c, s, w[0].p.tid);
	t0 = sprobe_snapshot__thread(s, (uint32_t)i0);
	assert_true(cc.copies > copies); /* copied afresh, not "unchanged" */
	assert_int_equal(t0->stage, SPROBE_STAGE_RAW);
	assert_true(t0->stack_len > 0);
	assert_true(resident_pages(t0->stack, t0->stack_len) >= 1);

	assert_int_equal(sprobe_snapshot__trim(NULL), -EINVAL);
	cap_free(c);
	for (int k = 0; k < TRIM_N; k++)
		park_stop(&w[k]);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup_teardown(test_unchanged_thread_keeps_its_copy, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_unchanged_thread_keeps_its_walk, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_trim_gives_blocked_copies_back, setup_usr2, teardown),
};

SPROBE_TEST_MAIN(tests)
