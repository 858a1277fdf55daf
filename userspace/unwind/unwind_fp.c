/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Frame-pointer unwinding of a captured stack copy.
 *
 * Portable: it reads only the copy (never live memory), so it works on any
 * platform whose backend filled a sample, and on x86_64 and aarch64 alike:
 * both keep a frame record {saved frame pointer, return address} at the
 * frame pointer. Every read is checked against the copy, so garbage frame
 * pointers (code built without them) end the walk instead of faulting.
 */
#include <errno.h>
#include <string.h>

#include <stackprobe/capture.h>

#include "backends/frames.h"

#if defined(__APPLE__) && (defined(__aarch64__) || defined(__arm64__))
/* Apple arm64: system code is arm64e, whose saved return addresses carry a
 * pointer-authentication signature in the bits above the user address
 * space, which is 47 bits there (MACH_VM_MAX_ADDRESS < 2^47): a 48-bit mask
 * would keep bit 47 of a signed address. backends/macos.c strips LR with the
 * same mask. */
#define PC_MASK 0x00007fffffffffffull
#elif defined(__aarch64__)
/* Pointer authentication may sign saved return addresses; user addresses
 * fit in 48 bits (the kernel's default VA size), so drop the rest. */
#define PC_MASK 0x0000ffffffffffffull
#else
/* x86_64 has no pointer signing: a return address is used as saved. User
 * addresses are canonical and below 2^47 on macOS and on Linux with 4-level
 * paging (2^56 with 5-level), so nothing is masked; a garbage value is
 * caught by the frame-record checks, not here. */
#define PC_MASK (~0ull)
#endif

/* Anything below the first page is not code. */
#define MIN_PC 4096u

/* Read the frame record at fp from the copy. False if it is not inside. */
static bool read_record(const struct sprobe_thread_sample *t, uint64_t fp, uint64_t *next,
			uint64_t *ret)
{
	uint64_t lo = t->stack_addr, hi = t->stack_addr + t->stack_len;
	uint64_t w[2];

	/* A frame record lies at or above SP (only the red zone is below it),
	 * is 8-byte aligned, and both words must be in the copy. */
	if (fp & 7 || fp < t->sp || fp < lo || fp > hi || hi - fp < sizeof(w))
		return false;
	memcpy(w, t->stack + (fp - lo), sizeof(w));
	*next = w[0];
	*ret = w[1] & PC_MASK;
	return true;
}

static void push(struct sprobe_thread_sample *t, uint64_t pc, uint64_t fp, uint32_t method)
{
	struct sprobe_frame *f = &t->frames[t->nframes++];

	f->pc = pc;
	f->fp = fp;
	f->method = method;
	f->_pad = 0;
}

/* The walk, into t->frames[0..max). */
static int walk(struct sprobe_thread_sample *t, uint32_t max)
{
	uint64_t fp, next, ret;

	if (!max)
		return -ENOBUFS;
	t->nframes = 0;
	push(t, t->ip & PC_MASK, t->fp, SPROBE_FRAME_IP);
	fp = t->fp;

	/* aarch64: a leaf that has not stored its frame record keeps its
	 * return address only in LR, and x29 still points at the caller's
	 * record, whose return address is the grand-caller. So LR is a frame
	 * of its own unless it equals what the first record says (the
	 * function did save it). A non-leaf between calls has a stale LR
	 * pointing into itself: that costs one duplicate-looking frame; the
	 * DWARF unwinder is exact where this heuristic is not. */
	if (t->has_lr && (t->lr & PC_MASK) >= MIN_PC && t->nframes < max) {
		if (!read_record(t, fp, &next, &ret) || ret != (t->lr & PC_MASK))
			push(t, t->lr & PC_MASK, 0, SPROBE_FRAME_LR);
	}

	while (t->nframes < max) {
		if (!read_record(t, fp, &next, &ret))
			break;
		if (ret < MIN_PC)
			break; /* end of chain (thread start) or garbage */
		push(t, ret, next, SPROBE_FRAME_FP);
		/* Callers live at higher addresses: a record that does not
		 * move up is a loop or garbage. 0 ends the chain. */
		if (next <= fp)
			break;
		fp = next;
	}
	t->stage = SPROBE_STAGE_UNWOUND;
	return (int)t->nframes;
}

int sprobe_unwind_fp(struct sprobe_thread_sample *t)
{
	struct sprobe_frames_walk w;
	uint32_t max;

	if (!t)
		return -EINVAL;
	if (t->stage == SPROBE_STAGE_EMPTY || !t->stack)
		return -ENODATA;
	switch (sprobe__frames_kind(t)) {
	case SPROBE_FRAMES_CALLER:
		/* Straight into the caller's array: no scratch, no malloc
		 * (the async-signal-safe case). */
		return walk(t, t->frames_cap < SPROBE_MAX_FRAMES ? t->frames_cap : SPROBE_MAX_FRAMES);
	case SPROBE_FRAMES_OWNED: {
		/* A snapshot's sample: walked here, kept in its storage. */
		struct sprobe_frame scratch[SPROBE_MAX_FRAMES];

		max = sprobe__frames_begin(t, scratch, &w);
		walk(t, max);
		sprobe__frames_end(t, &w);
		return (int)t->nframes;
	}
	default:
		return -ENOBUFS;
	}
}

int sprobe_snapshot__unwind_fp(struct sprobe_snapshot *s)
{
	uint32_t n = sprobe_snapshot__nthreads(s);

	if (!s)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

		if (t->stage != SPROBE_STAGE_EMPTY)
			sprobe_unwind_fp(t);
	}
	sprobe_snapshot__set_frames_resolved(s, true);
	return 0;
}
