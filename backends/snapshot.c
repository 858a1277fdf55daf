/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Portable half of capture: the snapshot object (allocated once, reused by
 * every capture), its accessors and its statistics. A leaf: it never calls
 * a backend (capture.c drives both). Nothing here runs inside a suspend
 * window except sprobe_now_ns().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef _WIN32
#include <sys/mman.h>
#endif

#include "backend.h"
#include "frames.h"

/* ASYNC-SIGNAL-SAFE: clock_gettime is on the POSIX async-signal-safe list
 * and is a vDSO call on Linux (no lock, no allocation). */
uint64_t sprobe_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct sprobe_snapshot *sprobe_snapshot__new(uint32_t max_threads, size_t max_stack_bytes)
{
	struct sprobe_snapshot *s;

	if (max_threads == 0)
		max_threads = SPROBE_DEFAULT_MAX_THREADS;
	if (max_stack_bytes == 0)
		max_stack_bytes = SPROBE_MAX_STACK_BYTES;
	if (max_threads > SPROBE_MAX_THREADS_LIMIT || max_stack_bytes > SPROBE_MAX_STACK_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->max_threads = max_threads;
	s->max_stack_bytes = max_stack_bytes;
	/* Every buffer starts a page (so it is 16-byte aligned for wide
	 * moves too): a copy of n bytes then touches ceil(n / 4096) pages,
	 * not one more whenever the slot's offset in its page pushes its end
	 * over (an idle thread's 3.6 KiB copy: one page instead of two; the
	 * copies stay resident between captures, docs/PERFORMANCE.md "What
	 * the agent costs its target"). The rounding is address space only. */
	s->slot_bytes = (max_stack_bytes + SPROBE_REDZONE + 4095) & ~(size_t)4095;
	s->samples = calloc(max_threads, sizeof(*s->samples));
	s->zp_kept = calloc(max_threads, 1);
	/* Pages are faulted in by the first capture that uses them (a kernel
	 * page fault is fine in a signal handler), after which the snapshot
	 * is warm. A mapping of our own, not malloc's, so that
	 * sprobe_snapshot__trim() may give pages of it back: whatever
	 * allocator the program brings may keep state in its chunks. */
	s->stack_bytes = (size_t)max_threads * s->slot_bytes;
#ifdef _WIN32
	s->stack_raw = malloc(s->stack_bytes + 4095);
	s->stack_mem = s->stack_raw ? (uint8_t *)(((uintptr_t)s->stack_raw + 4095) & ~(uintptr_t)4095)
				    : NULL;
#else
	s->stack_mem = mmap(NULL, s->stack_bytes, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->stack_mem == MAP_FAILED)
		s->stack_mem = NULL;
#endif
	if (!s->samples || !s->zp_kept || !s->stack_mem) {
		sprobe_snapshot__free(s);
		errno = ENOMEM;
		return NULL;
	}
	sprobe_snapshot__reset(s);
	return s;
}

void sprobe_snapshot__free(struct sprobe_snapshot *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; s->samples && i < s->inited; i++)
		if (s->samples[i].frames_owner == &s->samples[i])
			free(s->samples[i].frames);
	free(s->samples);
	free(s->zp_kept);
#ifdef _WIN32
	free(s->stack_raw);
#else
	if (s->stack_mem)
		munmap(s->stack_mem, s->stack_bytes);
#endif
	free(s);
}

void sprobe_snapshot__reset(struct sprobe_snapshot *s)
{
	s->nthreads = 0;
	memset(&s->stats, 0, sizeof(s->stats));
	s->frames_resolved = false;
	s->has_touched = false;
	s->touched = NULL;
	s->ntouched = s->untouched = 0;
}

uint32_t sprobe_snapshot__touched(const struct sprobe_snapshot *s, const uint32_t **idx)
{
	if (idx)
		*idx = s && s->has_touched ? s->touched : NULL;
	if (!s)
		return 0;
	return s->has_touched ? s->ntouched : s->nthreads;
}

uint8_t *sprobe_snapshot__buffer(struct sprobe_snapshot *s, uint32_t i)
{
	return s->stack_mem + (size_t)i * s->slot_bytes;
}

struct sprobe_thread_sample *sprobe_snapshot__sample_init(struct sprobe_snapshot *s,
							  uint32_t i, pid_t tid)
{
	struct sprobe_thread_sample *t = &s->samples[i];

	/* The frames' storage is left alone: nframes = 0 makes it empty, and
	 * the zero-pause kept walks live there (zero_pause.c zp_keep()). */
	memset(t, 0, offsetof(struct sprobe_thread_sample, frames));
	t->tid = tid;
	t->stage = SPROBE_STAGE_EMPTY;
	t->stack = sprobe_snapshot__buffer(s, i);
	t->frames_owner = t;
	s->zp_kept[i] = 0;
	if (i >= s->nthreads)
		s->nthreads = i + 1;
	if (i >= s->inited)
		s->inited = i + 1;
	return t;
}

/* ---- frame storage (frames.h) ------------------------------------------ */

/* Backends clear and copy a sample up to frames (its header, nframes
 * included), inside windows too: the storage must all lie past it. */
_Static_assert(offsetof(struct sprobe_thread_sample, nframes) <
		       offsetof(struct sprobe_thread_sample, frames) &&
	       offsetof(struct sprobe_thread_sample, frames) <
		       offsetof(struct sprobe_thread_sample, frames_cap) &&
	       offsetof(struct sprobe_thread_sample, frames_cap) <
		       offsetof(struct sprobe_thread_sample, frames_owner),
	       "the frames' storage follows the header");

uint32_t sprobe__frames_kind(const struct sprobe_thread_sample *t)
{
	if (t->frames_owner == t)
		return SPROBE_FRAMES_OWNED;
	/* Any other owner: a struct copy of a snapshot's sample (its frames
	 * are the original's), or a walker's scratch from an earlier walk. */
	if (!t->frames_owner && t->frames && t->frames_cap)
		return SPROBE_FRAMES_CALLER;
	return SPROBE_FRAMES_NONE;
}

uint32_t sprobe__frames_begin(struct sprobe_thread_sample *t, struct sprobe_frame *scratch,
			      struct sprobe_frames_walk *w)
{
	w->kind = sprobe__frames_kind(t);
	w->keep = t->frames;
	w->keep_cap = t->frames_cap;
	if (w->kind == SPROBE_FRAMES_CALLER)
		return t->frames_cap < SPROBE_MAX_FRAMES ? t->frames_cap : SPROBE_MAX_FRAMES;
	t->frames = scratch;
	t->frames_cap = SPROBE_MAX_FRAMES;
	/* NONE: not NULL, so that the next walk sees "not the caller's" and
	 * points it at that walker's scratch again. */
	if (w->kind == SPROBE_FRAMES_NONE)
		t->frames_owner = scratch;
	return SPROBE_MAX_FRAMES;
}

/* Entries a walk of n frames gets: a multiple of 8 (192 bytes), so that a
 * thread whose depth moves by a frame or two keeps its storage. */
static uint32_t frames_class(uint32_t n)
{
	return (n + 7) & ~7u;
}

int sprobe__frames_end(struct sprobe_thread_sample *t, struct sprobe_frames_walk *w)
{
	const struct sprobe_frame *walked = t->frames;
	uint32_t n = t->nframes, want = frames_class(n);
	int err = 0;

	if (w->kind != SPROBE_FRAMES_OWNED)
		return 0;
	t->frames = w->keep;
	t->frames_cap = w->keep_cap;
	/* Grown when the walk does not fit; shrunk when the storage is more
	 * than twice what it needs (a thread that was deep once does not keep
	 * 3 KiB for ever), never for an empty walk. */
	if (n > t->frames_cap || (n && t->frames_cap > 2 * want)) {
		struct sprobe_frame *f = malloc((size_t)want * sizeof(*f));

		if (f) {
			free(t->frames);
			t->frames = f;
			t->frames_cap = want;
		} else if (n > t->frames_cap) {
			n = t->nframes = t->frames_cap;
			err = -ENOMEM;
		}
	}
	if (n)
		memcpy(t->frames, walked, (size_t)n * sizeof(*walked));
	return err;
}

void sprobe_snapshot__drop(struct sprobe_snapshot *s, struct sprobe_thread_sample *t,
			   uint32_t reason)
{
	if (reason == SPROBE_DROP_NONE || reason >= SPROBE_DROP__COUNT)
		reason = SPROBE_DROP_ERROR;
	if (t) {
		t->stage = SPROBE_STAGE_EMPTY;
		t->drop_reason = reason;
		t->stack_len = 0;
	} else {
		/* No sample to carry the reason (NO_SLOT): count it here;
		 * sprobe_snapshot__finish() adds the samples' drops. */
		s->stats.dropped[reason]++;
	}
}

/* Buffers [first, first + n) back to the kernel: zero-filled on the next
 * touch. Our own mapping (see sprobe_snapshot__new()), so nothing else
 * lives there. Windows has no zero-pause samples to give back. */
static int give_back(struct sprobe_snapshot *s, uint32_t first, uint32_t n)
{
#ifndef _WIN32
	if (madvise(sprobe_snapshot__buffer(s, first), (size_t)n * s->slot_bytes,
		    MADV_DONTNEED) != 0)
		return -errno;
#else
	(void)s;
	(void)first;
	(void)n;
#endif
	return 0;
}

/*
 * A thread whose zero-pause copy was kept by this capture (not switched in
 * for a whole round) most likely stays blocked, and the next capture keeps
 * its walk without copying (sprobe_lx_zp_try()): its copy (one page for an
 * idle glibc thread) is dead weight held between captures; give it back.
 * A copy made afresh this round is left: its thread ran since the
 * previous capture and will likely run again, and a page given back costs
 * a fault at the next copy (docs/PERFORMANCE.md "Memory, per thread"). So a thread pays that at most once per blocked
 * spell of more than a round. Running threads' copies (method SIGNAL) are
 * left too: their slots are written again at the next capture, inside the
 * handler's window. Consecutive slots go back in one madvise (one TLB
 * shootdown for the process, not one per thread).
 */
int sprobe_snapshot__trim(struct sprobe_snapshot *s)
{
	uint32_t run = 0, nrun = 0, given = 0;

	if (!s)
		return -EINVAL;
	if (atomic_load(&s->inflight))
		return -EBUSY;
	/* Only a visited slot can hold a copy to give back (a slot carried
	 * on untouched gave its copy back when its spell began). */
	uint32_t nv = sprobe_snapshot__touched(s, NULL), prev = UINT32_MAX;

	for (uint32_t k = 0; k <= nv; k++) {
		uint32_t i = k == nv ? s->nthreads : s->has_touched ? s->touched[k] : k;
		struct sprobe_thread_sample *t = i < s->nthreads ? &s->samples[i] : NULL;

		/* A run of slots goes back in one call only if contiguous. */
		if (nrun && i != prev + 1) {
			int err = give_back(s, run, nrun);

			if (err)
				return err;
			nrun = 0;
		}
		prev = i;
		/* A carried slot is read only if its copy is held. */
		uint8_t kept = t ? s->zp_kept[i] : 0;
		bool zp = (kept == 1 || (kept & SPROBE_ZP_HELD)) &&
			  t->method == SPROBE_METHOD_ZERO_PAUSE && t->stack_len > 0 &&
			  t->stage != SPROBE_STAGE_EMPTY;

		if (zp) {
			if (!nrun)
				run = i;
			nrun++;
			t->stack_len = 0; /* the bytes are gone: nothing claims them */
			s->zp_kept[i] &= (uint8_t)~SPROBE_ZP_HELD;
			given++;
			continue;
		}
		if (!nrun)
			continue;
		int err = give_back(s, run, nrun);
		if (err)
			return err;
		nrun = 0;
	}
	return (int)given;
}

int sprobe_snapshot__finish(struct sprobe_snapshot *s)
{
	struct sprobe_snapshot_stats *st = &s->stats;
	/* Slots not visited were carried on: zero-pause samples, captured. */
	uint32_t r, captured = s->untouched, dropped = 0, zp = s->untouched;
	uint64_t pause = 0;
	uint32_t nv = sprobe_snapshot__touched(s, NULL);

	for (uint32_t k = 0; k < nv; k++) {
		uint32_t i = s->has_touched ? s->touched[k] : k;
		struct sprobe_thread_sample *t = &s->samples[i];

		if (s->zp_kept[i] > 1) {
			/* Carried: a zero-pause sample, not read again. */
			captured++;
			zp++;
			continue;
		}
		if (t->stage == SPROBE_STAGE_RAW || t->stage == SPROBE_STAGE_UNWOUND) {
			captured++;
			/* A zero-pause sample's entry/exit bracket the
			 * probe's reads: the thread itself paused 0 ns. */
			if (t->method == SPROBE_METHOD_ZERO_PAUSE)
				zp++;
			else if (t->exit_ns > t->entry_ns)
				pause += t->exit_ns - t->entry_ns;
		} else {
			if (t->drop_reason == SPROBE_DROP_NONE ||
			    t->drop_reason >= SPROBE_DROP__COUNT)
				t->drop_reason = SPROBE_DROP_ERROR;
			st->dropped[t->drop_reason]++;
		}
	}
	for (r = 0; r < SPROBE_DROP__COUNT; r++)
		dropped += st->dropped[r];
	st->threads_captured = captured;
	st->threads_dropped = dropped;
	st->pause_ns = pause;
	st->zp_captured = zp;
	return st->threads_total == captured + dropped ? 0 : -EPROTO;
}

int sprobe_snapshot__refinish(struct sprobe_snapshot *s)
{
	uint32_t no_slot = s->stats.dropped[SPROBE_DROP_NO_SLOT];

	/* Backends record only NO_SLOT without a sample (see
	 * sprobe_snapshot__drop()); every other count comes from samples. */
	uint32_t nv = sprobe_snapshot__touched(s, NULL);

	for (uint32_t k = 0; k < nv; k++) {
		uint32_t i = s->has_touched ? s->touched[k] : k;

		if (s->samples[i].stage == SPROBE_STAGE_EMPTY &&
		    s->samples[i].drop_reason == SPROBE_DROP_NO_SLOT)
			no_slot--;
	}
	memset(s->stats.dropped, 0, sizeof(s->stats.dropped));
	s->stats.dropped[SPROBE_DROP_NO_SLOT] = no_slot;
	return sprobe_snapshot__finish(s);
}

int sprobe_snapshot__carried(const struct sprobe_snapshot *s, uint32_t i)
{
	if (!s || i >= s->nthreads || atomic_load(&((struct sprobe_snapshot *)s)->inflight))
		return SPROBE_CARRY_NONE;
	uint8_t v = s->zp_kept[i] & (SPROBE_ZP_HELD - 1);

	return v > 1 ? v - 1 : SPROBE_CARRY_NONE;
}

uint32_t sprobe_snapshot__nthreads(const struct sprobe_snapshot *s)
{
	return s ? s->nthreads : 0;
}

struct sprobe_thread_sample *sprobe_snapshot__thread(struct sprobe_snapshot *s, uint32_t i)
{
	if (!s) {
		errno = EINVAL;
		return NULL;
	}
	if (i >= s->nthreads) {
		errno = ERANGE;
		return NULL;
	}
	return &s->samples[i];
}

const struct sprobe_snapshot_stats *sprobe_snapshot__stats(const struct sprobe_snapshot *s)
{
	return s ? &s->stats : NULL;
}

bool sprobe_snapshot__frames_resolved(const struct sprobe_snapshot *s)
{
	return s && s->frames_resolved;
}

void sprobe_snapshot__set_frames_resolved(struct sprobe_snapshot *s, bool v)
{
	if (s)
		s->frames_resolved = v;
}

const char *sprobe_drop_reason__str(uint32_t reason)
{
	static const char *const names[SPROBE_DROP__COUNT] = {
		[SPROBE_DROP_NONE] = "none",
		[SPROBE_DROP_EXITED] = "exited",
		[SPROBE_DROP_BLOCKED] = "blocked",
		[SPROBE_DROP_TIMEOUT] = "timeout",
		[SPROBE_DROP_NO_STACK] = "no-stack",
		[SPROBE_DROP_NO_SLOT] = "no-slot",
		[SPROBE_DROP_ERROR] = "error",
	};

	return reason < SPROBE_DROP__COUNT ? names[reason] : "unknown";
}
