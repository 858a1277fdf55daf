/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private interface between the portable capture code and a platform
 * capture backend (backends/linux/, windows/, macos/, and unsupported/ for
 * a platform without one). Calls go one way: capture.c (the entry point)
 * calls the backend and snapshot.c; the backend calls snapshot.c; snapshot.c
 * calls neither.
 *
 * Exactly one backend is compiled in per platform, chosen by its folder:
 * the build compiles backends/<os>/ for that OS only (Makefile lib_srcs,
 * mk/windows.mk), so no backend file needs a whole-file #if.
 *
 * A backend implements:
 *   sprobe_capturer__new / __free / __signo  (public, declared in capture.h)
 *   sprobe_backend__capture()                (below)
 * and uses the snapshot helpers below to fill a snapshot it never allocates.
 */
#ifndef SPROBE_BACKENDS_BACKEND_H
#define SPROBE_BACKENDS_BACKEND_H

#include <stdatomic.h>
#include <stackprobe/capture.h>

/*
 * The snapshot. Opaque to users; backends fill it through the sample
 * pointers below. Everything is allocated by sprobe_snapshot__new() so a
 * capture into it allocates nothing.
 */
struct sprobe_snapshot {
	uint32_t max_threads;	/* samples[] length */
	uint32_t nthreads;	/* samples in use after the last capture */
	uint32_t inited;	/* 1 + highest sample ever initialised: only
				 * those may own frame storage */
	size_t max_stack_bytes; /* bytes above SP each buffer can hold */
	size_t slot_bytes;	/* bytes per stack buffer (cap + red zone,
				 * rounded up to a page) */
	struct sprobe_thread_sample *samples;
	uint8_t *stack_mem;	/* max_threads * slot_bytes, page-aligned:
				 * an anonymous mapping (Windows: malloc) */
	size_t stack_bytes;	/* its length */
	void *stack_raw;	/* Windows: what malloc gave for stack_mem */
	struct sprobe_snapshot_stats stats;
	bool frames_resolved;
	/* Per sample: the capture kept its previous zero-pause copy (the
	 * thread was not switched in since; the backend sets it, sample_init
	 * clears it). sprobe_snapshot__trim() gives back only those. */
	uint8_t *zp_kept;	/* 0, 1 (kept) or SPROBE_ZP_CARRIED* */
	/* The Linux backend's zero-pause stamp: which of its captures last
	 * wrote the slots (0: none, or something else wrote them since). */
	uint64_t zp_epoch;
	/* A capture into it was started and not finished
	 * (sprobe_capturer__capture_start()): handlers may still write into
	 * it, so nothing may reset it. Set and cleared under the capturer's
	 * lock; read without it only to refuse misuse (-EBUSY). */
	_Atomic bool inflight;
	/* Slots the last capture visited, ascending (capturer-owned array;
	 * has_touched false: every slot below nthreads). A slot below
	 * nthreads not listed was carried forward unchanged (CARRY_MORE)
	 * from the capture before: untouched counts them. Lets a round cost
	 * the threads it checked, not every thread (sprobe_snapshot__touched()). */
	const uint32_t *touched;
	uint32_t ntouched, untouched;
	bool has_touched;
};

/* zp_kept[i]: the slot was carried forward unchecked
 * (sprobe_capturer__zp_carry()), and its spell goes on or ends here;
 * plus SPROBE_ZP_HELD when its copy is still in its buffer (for
 * sprobe_snapshot__trim(), which then need not read the sample). */
#define SPROBE_ZP_CARRIED (1 + SPROBE_CARRY_MORE)
#define SPROBE_ZP_CARRIED_LAST (1 + SPROBE_CARRY_LAST)
#define SPROBE_ZP_HELD 4

/* Called by sprobe_capturer__capture() (capture.c) after argument checks and
 * sprobe_snapshot__reset(). Fills s->nthreads samples and s->stats, except
 * capture_ns and the totals, which sprobe_snapshot__finish() computes.
 * Returns 0 or -errno (-ENOTSUP where there is no backend). */
int sprobe_backend__capture(struct sprobe_capturer *c, struct sprobe_snapshot *s);

/* The capturer's handle (userspace/common/fds.h) on its directory of the
 * process's threads (Linux: /proc/self/task), for a caller that opens
 * per-thread files; -ENOTSUP where there is none. */
int sprobe_backend__task_dir(const struct sprobe_capturer *c);

/* Forget the previous capture: nthreads 0, stats zeroed, frames_resolved
 * false. Samples are reset lazily by sprobe_snapshot__sample_init(). */
void sprobe_snapshot__reset(struct sprobe_snapshot *s);

/* Prepare sample i for thread tid: header zeroed, stack pointing at its
 * buffer, stage EMPTY. Does not touch the stack buffer nor the frames'
 * storage (a walk kept by zero-pause or carried forward stays there). */
struct sprobe_thread_sample *sprobe_snapshot__sample_init(struct sprobe_snapshot *s,
							  uint32_t i, pid_t tid);

/* Buffer of sample i (slot_bytes long). */
uint8_t *sprobe_snapshot__buffer(struct sprobe_snapshot *s, uint32_t i);

/* Record a dropped thread in the stats (and in its sample if it has one). */
void sprobe_snapshot__drop(struct sprobe_snapshot *s, struct sprobe_thread_sample *t,
			   uint32_t reason);

/* Recompute captured/dropped/pause_ns from the samples plus extra_dropped
 * drops that have no sample (NO_SLOT), and check total = captured + dropped.
 * Returns 0, or -EPROTO if the counters disagree (a backend bug). */
int sprobe_snapshot__finish(struct sprobe_snapshot *s);

/* sprobe_snapshot__finish() again after samples were replaced (a
 * re-capture): the per-sample drop counts are recomputed from scratch, the
 * sample-less ones (NO_SLOT) kept. Same returns. */
int sprobe_snapshot__refinish(struct sprobe_snapshot *s);

/* CLOCK_MONOTONIC in ns. ASYNC-SIGNAL-SAFE: clock_gettime is (POSIX). */
uint64_t sprobe_now_ns(void);

#endif
