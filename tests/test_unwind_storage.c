/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Where walks keep their frames (struct sprobe_thread_sample, "Frames are
 * stored apart"), built -O2 -fomit-frame-pointer as test_unwind.c: a
 * snapshot's slot costs its header plus the frames its walk found, not
 * SPROBE_MAX_FRAMES of them; a deep stack still gets all its frames, in
 * storage that grows for it and shrinks back; a walk of a struct copy
 * leaves the original's frames alone; a zeroed sample walks into the
 * unwinder's buffer.
 */

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <ucontext.h>

#include <stackprobe/capture.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "sprobe_test.h"
#include "unwind_fixture.h"

#define IDLE 48

/* Resident bytes of the pages holding [p, p + len). */
static size_t resident(const void *p, size_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	uintptr_t hi = ((uintptr_t)p + len + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
	size_t npg = (hi - lo) / (size_t)pg, n = 0;
	unsigned char *vec = malloc(npg);

	assert_non_null(vec);
	assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
	for (size_t i = 0; i < npg; i++)
		n += vec[i] & 1;
	free(vec);
	return n * (size_t)pg;
}

/* Bytes malloc has handed out and not taken back (all arenas). */
static size_t heap_in_use(void)
{
	struct mallinfo2 m = mallinfo2();

	return m.uordblks + m.hblkhd;
}

/* Capture into s until one capture has every parked thread (a thread
 * still leaving the previous capture's handler is dropped as blocked). */
static void capture_all(struct env *e, struct sprobe_snapshot *s, struct parked *p, int n)
{
	uint64_t end = deadline_ns();
	int missing;

	do {
		assert_int_equal(sprobe_capturer__capture(e->cap, s), 0);
		missing = 0;
		for (int i = 0; i < n; i++)
			missing += find_tid(s, atomic_load(&p[i].tid))->stage == SPROBE_STAGE_EMPTY;
	} while (missing && now_ns() < end);
	if (missing)
		fail_msg("%d threads never captured", missing);
}

/* Idle threads are a few frames deep: their slots must cost about their
 * header and those frames. With SPROBE_MAX_FRAMES frames inline, each slot
 * was 3.4 KiB, all of it resident once its header was written. */
static void test_short_walks_cost_little(void **state)
{
	static struct parked p[IDLE];
	struct env e;
	struct sprobe_snapshot *warm, *s;
	size_t heap0, heap1, heap, res, per_slot, stored = 0;
	uint32_t n, frames = 0;

	env_open(&e, 0);
	for (int i = 0; i < IDLE; i++) {
		park_start(&p[i], PARK_FUTEX);
		park_go(&p[i]);
	}
	/* The unwinder's caches fill on the first walks of these stacks:
	 * made on another snapshot, so that what the measured one adds is
	 * its frames' storage alone. */
	warm = sprobe_snapshot__new(256, 0);
	s = sprobe_snapshot__new(256, 0);
	assert_non_null(warm);
	assert_non_null(s);
	capture_all(&e, warm, p, IDLE);
	assert_true(sprobe_unwinder__unwind_snapshot(e.u, warm) >= IDLE);
	capture_all(&e, s, p, IDLE);
	heap0 = heap_in_use();
	assert_true(sprobe_unwinder__unwind_snapshot(e.u, s) >= IDLE);
	heap1 = heap_in_use();

	n = sprobe_snapshot__nthreads(s);
	for (uint32_t i = 0; i < n; i++)
		stored += sprobe_snapshot__thread(s, i)->frames_cap * sizeof(struct sprobe_frame);
	for (int i = 0; i < IDLE; i++) {
		struct sprobe_thread_sample *t = find_tid(s, atomic_load(&p[i].tid));

		assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
		assert_true(frame_named(e.mods, t, 0, "unw_blocked_futex") >= 0);
		frames += t->nframes;
	}
	/* The headers of the slots in use (resident: each was written), and
	 * what the walks of this snapshot took from malloc (or, where
	 * mallinfo2() does not tell, under ASan, the storage they hold). */
	res = resident(sprobe_snapshot__thread(s, 0), (size_t)n * sizeof(struct sprobe_thread_sample));
	heap = heap1 > heap0 ? heap1 - heap0 : 0;
	if (heap < stored)
		heap = stored;
	per_slot = (res + heap) / n;
	print_message("  %u slots, %.1f frames a walk: %zu bytes a slot (%zu resident for the "
		      "headers, %zu for the frames)\n",
		      n, (double)frames / IDLE, per_slot, res, heap);
	assert_true(per_slot < 1024);

	sprobe_snapshot__free(warm);
	sprobe_snapshot__free(s);
	for (int i = 0; i < IDLE; i++)
		park_stop(&p[i]);
	env_close(&e);
}

/* A stack deeper than 100 frames gets every frame; its slot's storage,
 * grown for it, is reused while later walks fit and shrinks once a walk
 * needs far less. */
static void test_deep_stack_all_frames(void **state)
{
	struct env e;
	struct parked deep, idle;
	struct sprobe_thread_sample *t, *slot;
	enum sprobe_unwind_stop why;
	const struct sprobe_frame *storage;
	int first, n;

	env_open(&e, 0);
	park_start(&deep, PARK_DEEP);
	deep.depth = 110;
	park_go(&deep);
	t = capture_tid(&e, deep.tid);
	n = sprobe_unwinder__unwind(e.u, t, &why);
	print_stack(e.mods, t, why);
	assert_int_equal(why, SPROBE_UNWIND_END);
	assert_true(n > 110 && n < SPROBE_MAX_FRAMES);
	first = frame_named(e.mods, t, 0, "unw_recurse");
	assert_true(first >= 0);
	for (int i = first; i < first + 110; i++)
		assert_int_equal(frame_named(e.mods, t, (uint32_t)i, "unw_recurse"), i);
	assert_true(t->frames_cap >= (uint32_t)n);

	/* The same walk again: the storage is reused as it is. */
	storage = t->frames;
	slot = t;
	t = capture_tid(&e, deep.tid);
	assert_ptr_equal(t, slot);
	assert_int_equal(sprobe_unwinder__unwind(e.u, t, &why), n);
	assert_ptr_equal(t->frames, storage);
	park_stop(&deep);

	/* The slot now holds an idle thread's few frames (the only thread
	 * listed: slot 0 again): shrunk to them. */
	park_start(&idle, PARK_FUTEX);
	park_go(&idle);
	t = capture_tid(&e, idle.tid);
	assert_ptr_equal(t, slot);
	n = sprobe_unwinder__unwind(e.u, t, &why);
	assert_true(n > 2);
	assert_true(frame_named(e.mods, t, 0, "unw_blocked_futex") >= 0);
	assert_true(t->frames_cap >= (uint32_t)n && t->frames_cap <= 2u * (uint32_t)n + 8);
	park_stop(&idle);
	env_close(&e);
}

/* A struct copy shares the original's frames: walking it writes elsewhere
 * (the unwinder's buffer), and the original keeps its walk. A zeroed
 * sample has no storage: the unwinder's buffer too; the frame-pointer
 * walker, which has none, refuses. */
static void test_copies_and_zeroed_samples(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t, copy, bare;
	struct sprobe_frame before[SPROBE_MAX_FRAMES];
	uint32_t n;

	env_open(&e, 0);
	park_start(&p, PARK_DEEP);
	p.depth = 20;
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, NULL) > 20);
	n = t->nframes;
	memcpy(before, t->frames, n * sizeof(*before));

	copy = *t;
	copy.ip = 0; /* a different walk: the interrupted ip only */
	assert_int_equal(sprobe_unwinder__unwind(e.u, &copy, NULL), 0);
	assert_ptr_not_equal(copy.frames, t->frames);
	copy = *t;
	assert_int_equal(sprobe_unwinder__unwind(e.u, &copy, NULL), (int)n);
	assert_ptr_not_equal(copy.frames, t->frames);
	assert_int_equal(t->nframes, n);
	assert_memory_equal(t->frames, before, n * sizeof(*before));
	assert_memory_equal(copy.frames, before, n * sizeof(*before));

	memset(&bare, 0, sizeof(bare));
	memcpy(&bare, t, offsetof(struct sprobe_thread_sample, nframes));
	assert_int_equal(sprobe_unwind_fp(&bare), -ENOBUFS);
	assert_int_equal(sprobe_unwinder__unwind(e.u, &bare, NULL), (int)n);
	assert_non_null(bare.frames);
	assert_memory_equal(bare.frames, before, n * sizeof(*before));
	park_stop(&p);
	env_close(&e);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_short_walks_cost_little),
	cmocka_unit_test(test_deep_stack_all_frames),
	cmocka_unit_test(test_copies_and_zeroed_samples),
};

SPROBE_TEST_MAIN(tests)
