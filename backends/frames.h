/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Where a walk writes a sample's frames: the storage contract of struct
 * sprobe_thread_sample (include/stackprobe/capture.h), for the walkers
 * (userspace/unwind, backends/windows/unwind_pe.c). Implemented in
 * backends/snapshot.c, since a snapshot owns its samples' storage.
 *
 * A walk does not know its depth before it ends, and a snapshot's slot
 * keeps only what its last walk found (a few frames for an idle thread,
 * not SPROBE_MAX_FRAMES), so the walker writes into a scratch buffer of
 * SPROBE_MAX_FRAMES of its own and the frames are then copied into the
 * slot's storage, which is grown or shrunk to fit on the walking thread:
 *
 *	struct sprobe_frames_walk w;
 *	uint32_t max = sprobe__frames_begin(t, scratch, &w);
 *	... write t->frames[0 .. at most max), set t->nframes ...
 *	sprobe__frames_end(t, &w);
 *
 * Outside any window only (end may call malloc). Not thread-safe for one
 * sample; different samples are independent.
 */
#ifndef SPROBE_BACKENDS_FRAMES_H
#define SPROBE_BACKENDS_FRAMES_H

#include <stdint.h>

#include <stackprobe/capture.h>

enum sprobe_frames_kind {
	SPROBE_FRAMES_OWNED = 0, /* a snapshot's sample: its storage, resized */
	SPROBE_FRAMES_CALLER,	 /* the caller's array of frames_cap entries */
	SPROBE_FRAMES_NONE,	 /* none of its own: the walker's scratch */
};

struct sprobe_frames_walk {
	struct sprobe_frame *keep; /* OWNED: the storage, while t->frames is scratch */
	uint32_t keep_cap;
	uint32_t kind;		   /* enum sprobe_frames_kind */
};

/* Which storage t has. */
uint32_t sprobe__frames_kind(const struct sprobe_thread_sample *t);

/* Point t->frames where the walk writes: the caller's array itself, else
 * scratch (SPROBE_MAX_FRAMES entries; for NONE it stays t's storage after
 * the walk, so it must outlive t's use: an unwinder's buffer). Returns
 * how many frames the walk may write (SPROBE_MAX_FRAMES, or frames_cap). */
uint32_t sprobe__frames_begin(struct sprobe_thread_sample *t, struct sprobe_frame *scratch,
			      struct sprobe_frames_walk *w);

/* After the walk: an OWNED sample's t->nframes frames are copied into its
 * storage, grown (or shrunk, when it holds far more than the walk) to fit.
 * Returns 0, or -ENOMEM: the storage could not grow, and nframes is cut to
 * what it holds. CALLER and NONE: nothing to do, 0. */
int sprobe__frames_end(struct sprobe_thread_sample *t, struct sprobe_frames_walk *w);

#endif /* SPROBE_BACKENDS_FRAMES_H */
