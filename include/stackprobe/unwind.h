/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe deferred unwinding: turn a captured thread sample (registers +
 * a copy of the stack bytes) into return addresses, after the thread runs
 * again.
 *
 * Method, per frame: DWARF CFI (libunwind's remote interface over our own
 * accessors) wherever the code has CFI; frame pointers from the first frame
 * that has none (JIT code, hand-written assembly without CFI). Each frame
 * records which method produced it (struct sprobe_frame.method). Reads of
 * stack memory come from the copy only; reads of code and unwind tables come
 * from the live process, and only inside the segments of a known module, so
 * garbage registers or a corrupted copy make the walk stop, never fault.
 *
 * The walk stops at the thread's start (the CFI of clone/_start marks the
 * return address undefined), at the end of the copy, on garbage (an address
 * in no module, a stack pointer going down), on a loop, or at max_frames
 * (at most SPROBE_MAX_FRAMES).
 *
 * Caches: the module inventory is refreshed before each snapshot is unwound
 * (one dl_iterate_phdr callback when nothing was loaded or unloaded). The
 * first time a procedure is met, libunwind searches the module's
 * PT_GNU_EH_FRAME index, parses its FDE and runs its CFI program
 * (unw_reg_states_iterate); every row of the result is kept with the module,
 * sorted by address. Later frames in that procedure replay the cached row
 * with unw_apply_reg_state(): no table search, no lock, no system call. (The
 * remote unw_step() path takes a mutex wrapped in two sigprocmask calls per
 * frame, which costs more than the unwinding itself.) Rows leave with their
 * module when a refresh sees it unloaded.
 *
 * Unloading: code and unwind tables are read live, so a library that
 * another thread dlclose()s after the refresh, or while the unwind runs,
 * must not be read once unmapped. Each round (one sprobe_unwinder__unwind()
 * call, or a whole sprobe_unwinder__unwind_snapshot()) pins a library
 * before its first live read: dlopen(RTLD_NOLOAD) plus a check that it is
 * still at the inventory's address; the pins are dropped (dlclose) when the
 * round ends. A library already gone is not read (frames there come from
 * cached rows, else frame pointers; stats.pin_failures counts it). A
 * library dlclose()d by the program during a round is unloaded at the end
 * of the round, by the unwinding thread (its destructors run there). The
 * warm path (cached rows) pins nothing on x86_64.
 *
 * Other processes: an unwinder made on an inventory of another process
 * (sprobe_modules_opts.pid > 0: `record`'s external tier, whose samples
 * are the kernel's copies of registers and user stack) never reads this
 * process's memory at the sample's addresses. Code and unwind tables come
 * from the module files: a runtime address in a read-only segment is the
 * file byte segment.file_offset + (address - segment.start), and the
 * .eh_frame_hdr index is found through the file's PT_GNU_EH_FRAME (a
 * static executable has none: the index is built from its .eh_frame; a Go
 * binary has no .eh_frame: its .debug_frame, in .eh_frame form, unwinds
 * the interrupted frame, frame pointers the rest, since Go's rules do not
 * say where the frame pointer was saved). Each
 * file is the inventory's own (opened through /proc/PID with the symbol
 * table, on the module's first use, build-id checked against the mapped
 * object; another process's vDSO is the copy the inventory read from
 * /proc/PID/mem), so the process may have exited by the time its samples
 * are unwound, as long as each module was used once while it lived
 * (sprobe_modules__symbolize() on any of its addresses opens it). A module
 * whose file is not at hand (unreadable, replaced: another build-id) has
 * no CFI: frame pointers from there (stats.pin_failures counts it). No
 * pins: nothing is unmapped under the reader. Writable segments are never
 * read (their file bytes are not what the process has there).
 *
 * Async-signal-safety: NONE of these functions is async-signal-safe, and
 * none of them ever runs inside a suspend window. sprobe_capture_and_resolve()
 * (the sampler stage's) captures first (the capture backend's window code is the only
 * async-signal-safe part), and unwinds only after every thread runs again.
 *
 * Thread-safety: an unwinder is used by one thread at a time. Different
 * unwinders are independent.
 */
#ifndef STACKPROBE_UNWIND_H
#define STACKPROBE_UNWIND_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackprobe/capture.h>
#include <stackprobe/symbolize.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Why a walk ended. */
enum sprobe_unwind_stop {
	SPROBE_UNWIND_END = 0,	  /* outermost frame: the thread's start */
	SPROBE_UNWIND_FP_END,	  /* the frame-pointer chain ended (start or garbage) */
	SPROBE_UNWIND_TRUNCATED,  /* needed stack bytes beyond the copy */
	SPROBE_UNWIND_BAD,	  /* garbage: unreadable memory, pc in no module... */
	SPROBE_UNWIND_LOOP,	  /* the same frame twice, or sp going down */
	SPROBE_UNWIND_MAX_FRAMES, /* frame limit reached */
	SPROBE_UNWIND__COUNT
};

/* Options for sprobe_unwinder__new(). Zeroed fields take defaults. */
struct sprobe_unwinder_opts {
	size_t sz;		   /* sizeof(struct sprobe_unwinder_opts) */
	uint32_t max_frames;	   /* 0: SPROBE_MAX_FRAMES; capped there */
	bool no_dwarf;		   /* frame pointers only */
	bool no_fp_fallback;	   /* DWARF only: stop where CFI is missing */
	struct sprobe_modules *modules; /* borrowed inventory of THIS process,
					 * or of another one (pid > 0: read
					 * from its files, see "Other
					 * processes"); NULL: the unwinder
					 * makes one of this process */
};

/* Counters since the unwinder was made (for tests, benchmarks, reports). */
struct sprobe_unwinder_stats {
	uint64_t samples;	/* samples unwound */
	uint64_t frames;	/* frames produced, all methods */
	uint64_t frames_by_method[5]; /* indexed by enum sprobe_frame_method */
	uint64_t stops[SPROBE_UNWIND__COUNT];
	uint64_t table_lookups;	/* .eh_frame_hdr searches (row-cache misses) */
	uint64_t table_failures;/* frames with no CFI (missed search, or pc in
				 * no module) */
	uint64_t module_refreshes; /* refreshes that changed the module set */
	/* sprobe_unwinder__unwind_snapshot(): zero-pause samples walked, and
	 * those whose walk did not reach the thread's start (the register
	 * gap, docs/capture.md; sprobe_unwinder__resolve() re-captures them
	 * through the signal path). */
	uint64_t zp_walks;
	uint64_t zp_short;
	uint64_t pins;		/* modules pinned (dlopen RTLD_NOLOAD) for a round */
	uint64_t pin_failures;	/* modules that could not be pinned (unloaded, or
				 * moved, since the inventory was refreshed):
				 * nothing of them read live that round */
};

struct sprobe_unwinder;

/*
 * Make an unwinder for samples of THIS process (or of the process
 * opts.modules describes). Returns an object the
 * caller frees with sprobe_unwinder__free(), or NULL with errno: EINVAL
 * (bad opts, or opts.modules is an offline inventory, opts.empty: it has
 * neither live memory nor files to read), ENOMEM. With an inventory of
 * another process the samples are that process's (see "Other processes").
 */
SPROBE_API
struct sprobe_unwinder *sprobe_unwinder__new(const struct sprobe_unwinder_opts *opts);

/* Free the unwinder (and its inventory if it made one). NULL is ok. */
SPROBE_API
void sprobe_unwinder__free(struct sprobe_unwinder *u);

/* The inventory the unwinder uses, for symbolizing its frames. Owned by the
 * unwinder (or borrowed from opts.modules). Never NULL. */
SPROBE_API
struct sprobe_modules *sprobe_unwinder__modules(struct sprobe_unwinder *u);

/*
 * Unwind one sample: fills s->frames / s->nframes and sets s->stage to
 * SPROBE_STAGE_UNWOUND. Leaves every other field of the header (truncated
 * included) untouched. Where the frames go (a snapshot's storage, grown
 * with malloc when the walk needs it; the caller's array, whose frames_cap
 * bounds the walk; else this unwinder's own buffer): struct
 * sprobe_thread_sample in <stackprobe/capture.h>. Does NOT refresh the inventory: call
 * sprobe_modules__refresh(sprobe_unwinder__modules(u)) first if objects may
 * have been loaded since (sprobe_unwinder__unwind_snapshot() does).
 * Returns the number of frames (>= 0; 0 only when even the ip is unusable),
 * -EINVAL when s is not a captured sample (stage EMPTY, no stack). *why, if
 * not NULL, gets the enum sprobe_unwind_stop.
 */
SPROBE_API
int sprobe_unwinder__unwind(struct sprobe_unwinder *u, struct sprobe_thread_sample *s,
			    enum sprobe_unwind_stop *why);

/*
 * Refresh the inventory and unwind every captured (RAW) thread of snap in
 * one pin round (each module pinned at most once for the whole snapshot),
 * then set its frames_resolved flag. A sample already UNWOUND (a zero-pause
 * copy of a thread that has not run since its last, complete, walk: the
 * capture keeps that walk) is counted but not walked again. Zero-pause
 * samples whose walk did not reach the thread's start are listed for
 * sprobe_unwinder__short_walks() and counted in the stats' zp_walks /
 * zp_short; the unwinder does not re-capture them (it never calls the
 * capturer: see sprobe_unwinder__resolve()). Returns the number of threads
 * unwound, or -errno (EINVAL on NULL arguments, ENOMEM).
 */
SPROBE_API
int sprobe_unwinder__unwind_snapshot(struct sprobe_unwinder *u, struct sprobe_snapshot *snap);

/*
 * The zero-pause samples of the last sprobe_unwinder__unwind_snapshot()
 * whose walk came up short: a zero-pause sample has SP and PC only, so a
 * walk that needs another register at its first frames (the frame pointer,
 * in code built with -fno-omit-frame-pointer) stops early. Short means the
 * walk did not reach the thread's start (stop END; MAX_FRAMES and a capped
 * copy count as reached). *idx (if not NULL) gets their indexes
 * (sprobe_snapshot__thread()), ascending, or NULL when there are none;
 * valid until the next unwind_snapshot() or free of u. Returns how many
 * (0 for NULL u).
 */
SPROBE_API
uint32_t sprobe_unwinder__short_walks(const struct sprobe_unwinder *u, const uint32_t **idx);

/* Drop every cached CFI row and eh_frame_hdr check of the inventory's
 * modules (memory back; the next unwinds are cold again). Returns 0,
 * -EINVAL on NULL. */
SPROBE_API
int sprobe_unwinder__flush(struct sprobe_unwinder *u);

/* Copy the counters into *out. Returns 0, -EINVAL on NULL. */
SPROBE_API
int sprobe_unwinder__stats(const struct sprobe_unwinder *u, struct sprobe_unwinder_stats *out);

/*
 * Orchestration: capture + unwind. Implemented by the sampler stage
 * (userspace/sampler/resolve.c), not by the unwinder: data flows one way
 * (capture -> unwind), and the policy "re-capture a thread whose zero-pause
 * walk came up short" belongs to the orchestrator. The sampler's rounds use
 * the same code.
 */

/*
 * sprobe_unwinder__unwind_snapshot() for a snapshot that c captured, then
 * closing the register gap: every zero-pause sample whose walk came up short
 * (sprobe_unwinder__short_walks()) is re-captured at once through the
 * signal path (sprobe_capturer__recapture(): same slot, method SIGNAL,
 * stats.zp_recaptured) and unwound again. Returns the number of threads
 * unwound (before re-capture), or -errno (EINVAL on NULL arguments, ENOMEM,
 * or the re-capture's error; the snapshot then keeps the short walks).
 * Not async-signal-safe; from the probe thread.
 */
SPROBE_API
int sprobe_unwinder__resolve(struct sprobe_unwinder *u, struct sprobe_capturer *c,
			     struct sprobe_snapshot *snap);

/*
 * Capture every sibling thread into snap with c, then — after every thread
 * runs again — unwind them all with u (DWARF with frame-pointer fallback)
 * through sprobe_unwinder__resolve() (zero-pause samples whose walk falls
 * short are re-captured with a signal) and set frames_resolved. Returns 0
 * or the capture's -errno (-ENOTSUP on an unsupported platform, never an
 * empty snapshot). Not async-signal-safe; call from the probe thread.
 */
SPROBE_API
int sprobe_capture_and_resolve(struct sprobe_capturer *c, struct sprobe_snapshot *snap,
			       struct sprobe_unwinder *u);

/* The address to symbolize for a frame: a return address minus one (so a
 * call at a function's very end is charged to that function), the ip as is
 * for the interrupted frame (frames a signal frame restores are stored one
 * past their pc: struct sprobe_frame). Thread-safe, async-signal-safe
 * (pure). */
static inline uint64_t sprobe_frame_lookup_pc(const struct sprobe_frame *f)
{
	return f->method == SPROBE_FRAME_IP || f->pc == 0 ? f->pc : f->pc - 1;
}

/* A short name for a stop reason ("end", "truncated", ...). Static string. */
SPROBE_API
const char *sprobe_unwind_stop__str(enum sprobe_unwind_stop why);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_UNWIND_H */
