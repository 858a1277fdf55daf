/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe capture: cooperative all-thread stack capture.
 *
 * A probe thread inside the process captures every sibling thread. For each
 * thread it opens a *suspend window* in which exactly two things happen: the
 * thread's registers are read and a bounded slice of its stack is copied
 * into a buffer that was allocated before the window. Then the thread runs
 * again. Unwinding and symbolization happen afterwards, on the copy, while
 * every thread runs.
 *
 * The rule that makes this safe: a thread may be stopped while it holds any
 * lock (malloc's, the loader's, stdio's). So nothing that runs inside a
 * window may allocate, lock, log or look up a symbol. Every function on that
 * path is tagged ASYNC-SIGNAL-SAFE in backends/ and the reason is written
 * once, in backends/linux/linux.h.
 *
 * Zero-pause (opts.zero_pause, wall captures): a thread blocked in the
 * kernel is read without any window at all -- its SP and PC from
 * /proc/self/task/T/syscall, its stack copied by the probe, the copy kept
 * only if the thread provably did not run meanwhile (schedstat unchanged);
 * see docs/capture.md "Zero-pause".
 *
 * Errors: functions returning int return 0 or -errno. Functions returning a
 * pointer return NULL and set errno. An unsupported platform returns
 * -ENOTSUP, never an empty snapshot.
 */
#ifndef STACKPROBE_CAPTURE_H
#define STACKPROBE_CAPTURE_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Default and hard upper bound of the stack bytes copied per thread. */
#define SPROBE_MAX_STACK_BYTES (256u * 1024u)
/* Frames kept per thread once unwound (table nodes keep the same). */
#define SPROBE_MAX_FRAMES 128
/* Registers kept per sample, indexed by DWARF register number:
 * x86_64: 0 rax 1 rdx 2 rcx 3 rbx 4 rsi 5 rdi 6 rbp 7 rsp 8..15 r8..r15
 *         16 rip (the return-address column).
 * aarch64: 0..30 x0..x30 (29 fp, 30 lr), 31 sp, 32 pc. */
#define SPROBE_NREGS 33

/* What stage a sample is at. */
enum sprobe_stage {
	SPROBE_STAGE_EMPTY = 0,	 /* slot unused or thread dropped */
	SPROBE_STAGE_RAW,	 /* registers + stack bytes, not unwound */
	SPROBE_STAGE_UNWOUND,	 /* frames[] holds return addresses */
};

/* How the sample was taken. */
enum sprobe_method {
	SPROBE_METHOD_NONE = 0,
	SPROBE_METHOD_SIGNAL,	   /* handler copies its own stack (default) */
	SPROBE_METHOD_VM_READV,	   /* seed strategy: handler parks, probe copies */
	SPROBE_METHOD_ZERO_PAUSE,  /* blocked thread read without any signal */
	SPROBE_METHOD_SUSPEND,	   /* Windows / macOS thread suspension */
	SPROBE_METHOD_PERF_EVENT,  /* sampled by the kernel, no signal: the
				    * external tier (no code of ours in the
				    * target), or the sampler's per-thread
				    * event for a thread that blocks the
				    * capture signal (sampler/blocked_perf.h) */
};

/* Why a thread was not captured. total = captured + sum(dropped[reason]). */
enum sprobe_drop_reason {
	SPROBE_DROP_NONE = 0,
	SPROBE_DROP_EXITED,	/* thread gone before or during the window (ESRCH) */
	SPROBE_DROP_BLOCKED,	/* thread blocks the capture signal (SigBlk) */
	SPROBE_DROP_TIMEOUT,	/* handler did not finish before the deadline */
	SPROBE_DROP_NO_STACK,	/* stack bounds unknown or SP outside them */
	SPROBE_DROP_NO_SLOT,	/* more threads than the snapshot can hold */
	SPROBE_DROP_ERROR,	/* any other OS error */
	SPROBE_DROP__COUNT
};

/* How a frame was found. */
enum sprobe_frame_method {
	SPROBE_FRAME_IP = 0,	/* the interrupted instruction pointer */
	SPROBE_FRAME_LR,	/* aarch64 link register (leaf caller) */
	SPROBE_FRAME_FP,	/* frame-pointer chain */
	SPROBE_FRAME_DWARF,	/* DWARF CFI (libunwind) */
	SPROBE_FRAME_PE,	/* Windows unwind data */
};

struct sprobe_frame {
	/* Frame 0: the interrupted ip. Past it: the address after the one
	 * to name, pc - 1 being in the call (a return address) or, for a
	 * signal's trampoline and the pc it interrupted, the instruction
	 * itself (sprobe_frame_lookup_pc()). */
	uint64_t pc;
	uint64_t fp;	 /* frame pointer / CFA of this frame, 0 if unknown */
	uint32_t method; /* enum sprobe_frame_method */
	uint32_t _pad;
};

/*
 * One thread's capture. Owned by its snapshot; valid until the next capture
 * into the same snapshot or until the snapshot is freed.
 *
 * Frames are stored apart from the sample, so that a slot costs what its
 * walk holds, not SPROBE_MAX_FRAMES (docs/PERFORMANCE.md "Memory, per
 * thread"). Where a walk (sprobe_unwinder__unwind(), sprobe_unwind_fp(),
 * sprobe_unwind_pe()) stores them:
 *   - A snapshot's sample: storage of the snapshot's, made by the thread
 *     that walks (outside any window; never by a capture), sized to the
 *     walk and reused while later walks fit (a walk that does not fit
 *     moves it: read frames through the sample); it stays with the slot
 *     across captures (a thread carried forward keeps its walk) and is
 *     freed with the snapshot.
 *   - A sample you fill yourself: point frames at an array of frames_cap
 *     entries you own (SPROBE_MAX_FRAMES for whole stacks: a walk stops at
 *     frames_cap) and leave frames_owner NULL.
 *   - No storage (frames NULL, as in a zeroed struct) or a struct copy of
 *     another sample (which shares the original's frames, and must not
 *     write them: frames_owner tells): sprobe_unwinder__unwind() stores
 *     into the unwinder's own buffer, valid until its next walk or its
 *     free; sprobe_unwind_fp() and sprobe_unwind_pe() return -ENOBUFS.
 */
struct sprobe_thread_sample {
	pid_t tid;
	uint32_t stage;		/* enum sprobe_stage */
	uint32_t method;	/* enum sprobe_method */
	uint32_t drop_reason;	/* enum sprobe_drop_reason; NONE if captured */
	uint64_t ip, sp, fp;
	uint64_t lr;		/* aarch64 only; 0 elsewhere */
	bool has_lr;
	uint64_t regs[SPROBE_NREGS]; /* DWARF-numbered, see SPROBE_NREGS */
	/* Stack copy: stack_len bytes that lived at [stack_addr, stack_addr +
	 * stack_len) in the thread. stack_addr is sp minus the red zone on
	 * x86_64, sp on aarch64. */
	const uint8_t *stack;
	size_t stack_len;
	uint64_t stack_addr;
	uint64_t stack_top;	/* highest address of the thread's stack */
	bool truncated;		/* the stack was longer than the cap */
	/* Window timestamps, CLOCK_MONOTONIC ns. signal_ns: when the probe sent
	 * the signal; entry_ns/exit_ns: the handler's first and last reads of
	 * the clock (the self-reported window: it excludes the kernel's signal
	 * delivery before and sigreturn after, which the eBPF companion
	 * measures and can match by tid and time). 0 when not applicable.
	 * Method ZERO_PAUSE: signal_ns 0, entry_ns/exit_ns the probe's first
	 * and second schedstat reads (the span over which the thread is
	 * proven not to have run); the thread's own pause is 0. */
	uint64_t signal_ns, entry_ns, exit_ns;
	/* CPU-timer samples (sprobe_capturer__cpu_collect()): how many
	 * periods of the thread's CPU time this sample stands for (>= 1: its
	 * timer expired again before the probe collected it). 0 in a wall
	 * capture (one sample). */
	uint32_t weight;
	/* Frames, once unwound (stage == UNWOUND): frames[0..nframes). nframes
	 * may be 0 for an unwalkable stack: check
	 * sprobe_snapshot__frames_resolved(). */
	uint32_t nframes;
	/* Their storage, frames_cap entries (see above). Everything before
	 * frames is the sample's header: backends clear and copy it, never
	 * the storage. */
	struct sprobe_frame *frames;
	uint32_t frames_cap;
	uint32_t _pad;
	/* Private to the library: the sample whose snapshot owns frames
	 * (itself, for a snapshot's sample); NULL when the caller's. */
	const void *frames_owner;
};

struct sprobe_snapshot_stats {
	uint32_t threads_total;	   /* siblings enumerated (caller and
				    * excluded threads left out) */
	uint32_t threads_captured;
	uint32_t threads_dropped;
	uint32_t dropped[SPROBE_DROP__COUNT]; /* by reason; sums to dropped */
	uint64_t pause_ns;	   /* sum over captured threads of exit - entry
				    * (zero-pause samples count 0) */
	uint64_t capture_ns;	   /* whole capture, probe side */
	/* Zero-pause (opts.zero_pause, docs/capture.md "Zero-pause"):
	 * zp_captured: samples read without any signal (method ZERO_PAUSE);
	 * zp_fallback: threads found blocked whose copy could not be trusted
	 * (schedstat changed, a read failed, SP outside every known stack)
	 * and that went through the signal path in the same capture;
	 * zp_recaptured: zero-pause samples replaced by a signal capture
	 * because their deferred unwind did not reach the thread's start
	 * (sprobe_capturer__recapture()). */
	uint32_t zp_captured;
	uint32_t zp_fallback;
	uint32_t zp_recaptured;
	/* Of zp_captured: threads not switched in since their previous
	 * zero-pause capture into the same snapshot, whose copy was kept
	 * as it is (one schedstat read, no copy). */
	uint32_t zp_unchanged;
	/* Of zp_captured: threads carried forward without any system call
	 * (sprobe_capturer__zp_carry()): their slot is the previous
	 * capture's, unchecked this time (sprobe_snapshot__carried()). */
	uint32_t zp_carried;
};

enum sprobe_strategy {
	SPROBE_STRATEGY_PARALLEL = 0, /* signal all, wait for all (default) */
	SPROBE_STRATEGY_SEQUENTIAL,   /* one thread at a time */
};

/* Options for sprobe_capturer__new(). Zeroed fields take defaults. */
struct sprobe_capture_opts {
	size_t sz;		 /* sizeof(struct sprobe_capture_opts) */
	int signo;		 /* 0: pick a free real-time signal */
	size_t max_stack_bytes;	 /* 0: SPROBE_MAX_STACK_BYTES; capped there */
	uint64_t timeout_ns;	 /* per-capture deadline; 0: default */
	uint32_t strategy;	 /* enum sprobe_strategy */
	uint32_t method;	 /* SIGNAL (default) or VM_READV */
	uint32_t max_threads;	 /* slots preallocated; 0: default (1024) */
	/* Diagnostic hook, NULL for none: called by the capturing thread for
	 * each thread right before its capture signal is sent (after
	 * enumeration and the SigBlk check, outside any window, capturer
	 * lock held: must not call back into the capturer). Tests use it to
	 * make a thread exit or block the signal at exactly that point. */
	void (*before_signal)(void *ctx, pid_t tid);
	void *hook_ctx;
	/* Zero-pause capture of blocked threads (docs/capture.md): a wall
	 * capture reads every thread that is blocked in the kernel (its
	 * /proc/self/task/T/syscall is not "running") without signalling it:
	 * SP and PC from that file, the stack copied by the probe, the copy
	 * kept only if /proc/self/task/T/schedstat is the same before and
	 * after (the thread did not run meanwhile); anything else takes the
	 * signal path in the same capture. false (default): signals only.
	 * Refused silently (turned off, see sprobe_capturer__zero_pause())
	 * where the kernel's view cannot be trusted (qemu-user) or with
	 * method VM_READV. */
	bool zero_pause;
	/* Diagnostic hook, NULL for none: called by the capturing thread
	 * for each thread zero-pause found blocked, after reading its SP and
	 * PC and before copying its stack (outside any window, capturer lock
	 * held: must not call back into the capturer; gets hook_ctx). Tests
	 * use it to make the thread run right there, which the schedstat
	 * check must then catch. */
	void (*before_zp_copy)(void *ctx, pid_t tid);
	/* zero_pause: the kernel's view was already found trustworthy by the
	 * self-test in another process on this machine (the agent passes it
	 * down a process tree: see sprobe_capturer__zp_key()), so skip the
	 * self-test (a helper thread, a pipe, ~1 ms per process). */
	bool zero_pause_pretested;
};

/* What a passed zero-pause self-test is valid for: this kernel and this
 * machine architecture as the process sees them (under qemu-user, the
 * emulated one differs). Writes a NUL-terminated key into buf. */
SPROBE_API
void sprobe_capturer__zp_key(char *buf, size_t len);

struct sprobe_capturer;
struct sprobe_snapshot;

/* Bytes below SP that x86_64 leaf code may use (the SysV red zone, also on
 * macOS); the copy starts this far below SP there. 0 on aarch64, and on
 * Windows, whose x64 ABI has no red zone (the backend copies from SP). */
#if defined(__x86_64__) && !defined(_WIN32)
#define SPROBE_REDZONE 128u
#else
#define SPROBE_REDZONE 0u
#endif
/* Default per-capture deadline when opts.timeout_ns is 0. */
#define SPROBE_DEFAULT_TIMEOUT_NS (500ull * 1000 * 1000)
/* Default and maximum number of slots a capturer preallocates. */
#define SPROBE_DEFAULT_MAX_THREADS 1024u
#define SPROBE_MAX_THREADS_LIMIT 65535u

/*
 * Create the process's capturer: installs the capture signal handler on
 * opts->signo, or (signo 0) on the first real-time signal nobody handles.
 * SIGURG and SIGPROF are never used (Go and other profilers own them); a
 * signo outside SIGRTMIN..SIGRTMAX is refused with EINVAL.
 * opts may be NULL (all defaults); opts->sz must be set otherwise.
 * Returns the capturer (free with sprobe_capturer__free()), or NULL with
 * errno: EBUSY if the application already handles the requested signal (or
 * every real-time signal is taken) or if a capturer already exists (one per
 * process: the handler state is process-wide), EINVAL on bad options,
 * ENOTSUP on a platform without a backend, ENOMEM.
 * Thread-safe with respect to other threads; not async-signal-safe.
 */
SPROBE_API
struct sprobe_capturer *sprobe_capturer__new(const struct sprobe_capture_opts *opts);

/*
 * Uninstall the handler (the signal is set to SIG_IGN first, which discards
 * stale queued capture signals, then restored) and free the capturer.
 * Waits for any handler still running. Accepts NULL. Must not race with
 * sprobe_capturer__capture() on the same capturer. A capture started and
 * not finished is abandoned: its snapshot is left half filled (and still
 * refuses captures: free it too). Not async-signal-safe.
 */
SPROBE_API
void sprobe_capturer__free(struct sprobe_capturer *c);

/*
 * In the child of a fork(), on its only thread: give up capturer C
 * inherited from the parent without touching what did not survive the
 * fork (the parent's other threads, locks they held): the capture
 * signal's disposition goes back to what C found at start, and the
 * process-wide claim is released, so that a new capturer can be created.
 * C's memory is abandoned (never freed: it describes the parent).
 * -ENOTSUP where the backend has no fork (Windows) or does not support
 * this; 0 otherwise. Not async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__forget(struct sprobe_capturer *c);

/* The signal number the capturer uses, or -EINVAL for NULL. Thread-safe. */
SPROBE_API
int sprobe_capturer__signo(const struct sprobe_capturer *c);

/*
 * Whether wall captures use zero-pause (opts.zero_pause asked for it and the
 * self-test at sprobe_capturer__new() passed: a helper thread blocked in
 * read(2) must show that syscall, its fd and an SP inside its own stack in
 * /proc/self/task/T/syscall; under qemu-user that file shows the emulator's
 * host thread instead). Returns 1 (on), 0 (off; why, if not NULL, gets a
 * NUL-terminated reason, "" when simply not asked for), -EINVAL for NULL.
 * Thread-safe (the answer is fixed at creation); not async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__zero_pause(const struct sprobe_capturer *c, char *why, size_t len);

/*
 * Zero-pause with many threads (docs/capture.md "Many threads: carrying
 * blocked threads forward"). A thread whose last zero-pause sample is still
 * in its slot, unwound, is checked (one schedstat read) only in one capture
 * of every R, R = min(max_rounds, ceil(threads / min_checks)), its slot's
 * turn; in the others it is carried forward: its slot is left as it is
 * (same stack, same walk), with no system call, and
 * sprobe_snapshot__carried() says so. A thread that ran meanwhile is seen
 * at its next turn, within R captures. The thread list is then re-read
 * only when the thread count changed (one fstat) or once every R captures.
 * While carrying, a thread keeps its slot for as long as it lives: the
 * slot of a thread that left is closed by the capture that finds it gone
 * (CARRY_LAST, or dropped EXITED, with its tid) and is empty from the next
 * (tid 0, stage EMPTY, not in sprobe_snapshot__touched()) until a new
 * thread takes it, so empty slots may sit below nthreads.
 * max_rounds 0 or 1 (the default): every thread is checked at every
 * capture. Returns 0, or -EINVAL. Thread-safe (the capturer's lock).
 */
SPROBE_API
int sprobe_capturer__zp_carry(struct sprobe_capturer *c, uint32_t min_checks, uint32_t max_rounds);

/*
 * Re-capture samples idx[0..n) of s (indices into s, from the last wall
 * capture into s by c) through the signal path, now: each is replaced by
 * a signal capture of the same thread (method SIGNAL) or dropped with its
 * reason; stats are recomputed and zp_recaptured += n. For zero-pause
 * samples whose deferred unwind did not reach the thread's start (the
 * syscall file gives SP and PC only: see docs/capture.md), so the same
 * capture round still yields a complete stack.
 * Returns 0, -EINVAL (NULL, n == 0 with idx NULL is fine, an index >= the
 * snapshot's thread count or a sample that was never captured), -EBUSY
 * (CPU-timer capture running, or the handler was replaced), -ECHILD, or
 * -ENOTSUP. Allocates nothing. Serialised with captures by the capturer
 * lock; not async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__recapture(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			       const uint32_t *idx, uint32_t n);

/* How many threads one capturer can exclude. */
#define SPROBE_MAX_EXCLUDED 16u

/*
 * Leave thread tid (of this process) out of every later capture: it is not
 * signalled, gets no sample and is not counted in threads_total (like the
 * capturing thread itself). For stackprobe's own helper threads (the data
 * stream's writer), which would otherwise be profiled as application
 * threads. The exclusion outlives the thread: include it again if the tid
 * may be reused by an application thread.
 * Returns 0, -EINVAL (NULL or tid <= 0), -EEXIST (already excluded),
 * -ENOSPC (SPROBE_MAX_EXCLUDED already), -ENOTSUP (no backend).
 * Thread-safe (takes the capture lock, so it waits for a running capture);
 * not async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__exclude_tid(struct sprobe_capturer *c, pid_t tid);

/* Undo sprobe_capturer__exclude_tid(). Returns 0, -EINVAL, -ENOENT (tid was
 * not excluded), -ENOTSUP. Thread-safe; not async-signal-safe. */
SPROBE_API
int sprobe_capturer__include_tid(struct sprobe_capturer *c, pid_t tid);

/*
 * Allocate a reusable snapshot: max_threads samples (0: default 1024) each
 * with a stack buffer of max_stack_bytes (0: SPROBE_MAX_STACK_BYTES; at most
 * that) plus the red zone. Everything a capture writes is allocated here, so
 * capturing into it allocates nothing.
 * Returns the snapshot (caller owns it; free with sprobe_snapshot__free()),
 * or NULL with errno EINVAL / ENOMEM. Thread-safe; not async-signal-safe.
 */
SPROBE_API
struct sprobe_snapshot *sprobe_snapshot__new(uint32_t max_threads, size_t max_stack_bytes);

/* Free a snapshot and every buffer it owns. Accepts NULL. */
SPROBE_API
void sprobe_snapshot__free(struct sprobe_snapshot *s);

/*
 * Capture every sibling thread of the caller (the caller is excluded) into
 * s, replacing its previous content. Bytes copied per thread are capped at
 * min(opts.max_stack_bytes, the snapshot's max_stack_bytes). Threads that
 * could not be captured appear in the snapshot with stage EMPTY and their
 * drop_reason, and are counted in stats: total = captured + dropped.
 * frames_resolved is reset to false.
 * Returns 0 (even if some threads were dropped: check the stats), or -errno:
 * -EINVAL (NULL argument), -ENOTSUP (no backend on this platform: never an
 * empty snapshot), -ECHILD (called in a child forked after the capturer was
 * made: free it and make a new one there), -EBUSY (the application
 * replaced the capture signal's handler after sprobe_capturer__new(); no
 * signal was sent), -EMFILE/-ENOMEM/-EIO (could not read /proc/self).
 * Allocates nothing once c and s have been used once at this thread count.
 * Serialised per capturer by an internal lock (callable from several
 * threads); not async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__capture(struct sprobe_capturer *c, struct sprobe_snapshot *s);

/*
 * sprobe_capturer__capture() in two halves, so that the caller need not
 * wait for the handlers (Linux only). __start() does everything up to the
 * signals (enumeration, zero-pause reads, one signal per remaining
 * thread) and returns at once; the handlers fill s meanwhile. __finish()
 * waits for what is still outstanding (the same deadline and drop rules
 * as __capture(), counted from the signals), and leaves s exactly as
 * __capture() would. A sampler that calls __finish() at its next wake-up
 * and then __start() again sleeps once per round instead of twice, and no
 * handler makes the wake-up system call (docs/PERFORMANCE.md, "Record").
 * Between the two, s belongs to the capturer: do not read, reset or
 * capture into it; every other capture call on c returns -EBUSY.
 * stats.capture_ns counts the time spent in the two calls, not between.
 * (A capturer made with method VM_READV, whose handlers wait for the
 * probe, does all of it in __start().)
 * A thread whose handler ran after the deadline (the finish came late, at
 * a low rate) is dropped as TIMEOUT: its stack is from when it answered.
 * __start() returns 0 or what __capture() returns, plus -EBUSY (a capture
 * is already started, on c or into s). __finish() returns 0, -EINVAL
 * (NULL, or s is not the started snapshot), -ECHILD (forked child). Thread-safe like __capture() (__finish() may
 * come from another thread); not async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__capture_start(struct sprobe_capturer *c, struct sprobe_snapshot *s);
SPROBE_API
int sprobe_capturer__capture_finish(struct sprobe_capturer *c, struct sprobe_snapshot *s);

/* Number of samples in s: one per enumerated sibling that got a slot,
 * captured or dropped. 0 for NULL. Not synchronised with a running capture. */
SPROBE_API
uint32_t sprobe_snapshot__nthreads(const struct sprobe_snapshot *s);

/* Sample i (0 <= i < nthreads), owned by s and valid until the next capture
 * into s or its free; NULL (errno EINVAL/ERANGE) otherwise. */
SPROBE_API
struct sprobe_thread_sample *sprobe_snapshot__thread(struct sprobe_snapshot *s, uint32_t i);

/* Was sample i of the last capture into s carried forward
 * (sprobe_capturer__zp_carry())? NONE: captured or dropped as usual (also
 * for NULL, i out of range, or a capture in flight). MORE: its slot holds
 * the previous capture's sample of the same thread, unchecked, and the
 * next capture may carry it again. LAST: the same, but the next capture
 * checks it (which may drop it) or re-reads the thread list (which may
 * move it to another slot): a user that defers carried weight writes it
 * now. */
enum sprobe_carry {
	SPROBE_CARRY_NONE = 0,
	SPROBE_CARRY_MORE = 1,
	SPROBE_CARRY_LAST = 2,
};
SPROBE_API
int sprobe_snapshot__carried(const struct sprobe_snapshot *s, uint32_t i);

/*
 * The slots the last capture into s visited: checked, captured, dropped,
 * or whose carried spell began or ends (CARRY_LAST). Returns how many;
 * *idx (if idx) gets them in ascending order, or NULL when every slot
 * below sprobe_snapshot__nthreads() was visited. A slot not listed was
 * carried forward unchanged (CARRY_MORE) from the capture before, and
 * nothing about it changed: a round that reads only the listed slots
 * costs the threads that were checked, not every thread. Valid until the
 * next capture into s. 0 for NULL.
 */
SPROBE_API
uint32_t sprobe_snapshot__touched(const struct sprobe_snapshot *s, const uint32_t **idx);

/* The stats of the last capture into s (owned by s), or NULL for NULL. */
SPROBE_API
const struct sprobe_snapshot_stats *sprobe_snapshot__stats(const struct sprobe_snapshot *s);

/* Whether frames[] of every captured sample has been filled by an unwinder
 * since the last capture. Check this, not nframes (an unwalkable stack also
 * yields no frames). */
SPROBE_API
bool sprobe_snapshot__frames_resolved(const struct sprobe_snapshot *s);
SPROBE_API
void sprobe_snapshot__set_frames_resolved(struct sprobe_snapshot *s, bool v);

/*
 * Give back the memory of the zero-pause copies in s that the last capture
 * kept (samples of method ZERO_PAUSE whose thread was not switched in since
 * the capture before: stats zp_unchanged), for a caller done with them
 * (unwound, published): each such sample's stack_len becomes 0 and its
 * buffer's pages go back to the kernel (MADV_DONTNEED; zero-filled when a
 * later capture writes them). Registers, frames and stage stay. While the
 * thread stays blocked, a later capture into s keeps an UNWOUND sample's
 * walk without copying its stack again (zp_unchanged); a sample not
 * unwound is copied afresh instead. Copies made afresh by the last
 * capture (the thread ran since the one before, and likely runs again)
 * and copies of running threads (method SIGNAL) are left: giving them back
 * would cost page faults at the next copy. Why: otherwise every blocked
 * thread holds a page or more of copy between captures
 * (docs/PERFORMANCE.md "Memory, per thread").
 * Returns the number of copies given back (>= 0), -EINVAL (NULL), -EBUSY
 * (a started capture owns s), or -errno of madvise. Allocates nothing.
 * Not thread-safe against a capture into s; not async-signal-safe. A
 * no-op on Windows (no zero-pause there).
 */
SPROBE_API
int sprobe_snapshot__trim(struct sprobe_snapshot *s);

/* A short static name for a drop reason ("exited", "blocked", ...). */
SPROBE_API
const char *sprobe_drop_reason__str(uint32_t reason);

/*
 * Frame-pointer unwinding of one captured sample, entirely inside its copy:
 * frame 0 is the IP; on aarch64 the LR follows when the leaf has not saved
 * it yet; then the frame-record chain. Every read is bounds-checked against
 * the copy; the walk stops at a NULL or unaligned frame pointer, a frame
 * pointer that does not strictly increase (loops), a zero return address,
 * the end of the copy, or SPROBE_MAX_FRAMES (frames_cap for storage of the
 * caller's). Fills t->frames/nframes and sets stage UNWOUND.
 * Returns the number of frames (>= 1), -EINVAL for NULL, -ENODATA if t was
 * not captured (stage EMPTY), -ENOBUFS if t has no storage of its own (see
 * struct sprobe_thread_sample). A snapshot's sample whose walk outgrows its
 * storage gets more (malloc; if that fails, the walk is cut to what fits).
 * Reentrant (touches only t); async-signal-safe when t's storage is the
 * caller's.
 */
SPROBE_API
int sprobe_unwind_fp(struct sprobe_thread_sample *t);

/* sprobe_unwind_fp() on every captured sample of s, then sets
 * frames_resolved. Returns 0 or -EINVAL. Not thread-safe against a capture
 * into the same snapshot. */
SPROBE_API
int sprobe_snapshot__unwind_fp(struct sprobe_snapshot *s);

/*
 * CPU-timer capture: each thread is sampled on its own CPU time, not on the
 * wall clock. The first call starts it: for every sibling thread (caller
 * and excluded threads left out) the capturer creates a POSIX timer on that
 * thread's CPU clock that sends the capture signal to the thread itself
 * (SIGEV_THREAD_ID) every interval_ns of its CPU time; the handler copies
 * the stack where the CPU was being spent into a slot the capturer owns. A
 * thread that stays blocked consumes no CPU and is never signalled.
 * Every call (make one per interval_ns of wall time or so) collects into s
 * the samples finished since the previous call -- at most one per thread,
 * with `weight` = the CPU periods it stands for -- re-arms their slots,
 * deletes the timers of threads that exited and creates timers for new
 * ones. So the first call returns an empty snapshot. Samples have method
 * SIGNAL, signal_ns 0 (the kernel sent it) and entry/exit timestamps.
 * Stats count the collected samples only: threads_total = captured +
 * dropped (NO_STACK, or NO_SLOT when s is smaller than the thread count).
 * A late or stale timer signal can never write into a slot that was
 * reused: each timer carries its slot's generation (see
 * backends/linux/cputime.c).
 * While CPU-timer capture runs, sprobe_capturer__capture() returns -EBUSY.
 * Returns 0, or -EINVAL (NULL, interval_ns outside [10 us, 1 h], a
 * capturer made with method VM_READV),
 * -ECHILD (forked child), -EBUSY (handler replaced), -ENOMEM, -EMFILE/-EIO
 * (/proc/self), -ENOTSUP (no backend). A thread for which no timer can be
 * made (RLIMIT_SIGPENDING) is left out and tried again at the next call.
 * Allocates on the first call only (a snapshot of the capturer's
 * max_threads at s's stack size, plus small tables) and when threads or
 * mappings change. Serialised with captures by the capturer lock; not
 * async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__cpu_collect(struct sprobe_capturer *c, struct sprobe_snapshot *s,
				 uint64_t interval_ns);

/*
 * The engine behind sprobe_capturer__cpu_collect() (docs/capture.md "CPU
 * engines"):
 *   PERF   one software perf event per thread (PERF_COUNT_SW_TASK_CLOCK,
 *          hrtimer-driven: overflows at any point of the thread's CPU
 *          time, not only at the scheduler tick), its overflow sent as the
 *          capture signal to that thread (O_ASYNC, F_SETSIG, F_SETOWN_EX
 *          F_OWNER_TID). Each event is a descriptor in the library's
 *          registry (userspace/common/fds.h, top region, CACHE budget); a
 *          thread for which none fits gets a CPU timer instead
 *          (sprobe_capturer__cpu_on_timer() counts them).
 *   TIMER  a POSIX timer on each thread's CPU clock (timer_create). Linux
 *          checks those at its scheduler tick only, so a workload whose
 *          phases line up with the tick is sampled at a fixed phase.
 */
enum sprobe_cpu_engine {
	/* Capturer: PERF where the kernel allows it, else TIMER (the
	 * sampler's AUTO falls back on POLL instead). */
	SPROBE_CPU_ENGINE_AUTO = 0,
	SPROBE_CPU_ENGINE_PERF = 1,
	SPROBE_CPU_ENGINE_TIMER = 2,
	/* The sampler's (userspace/sampler/sampler.c), not a capturer
	 * engine: wall-style captures at randomised intervals, each
	 * thread's stack weighted by the CPU it used since its previous
	 * one; sprobe_capturer__cpu_engine() refuses it (-EINVAL). */
	SPROBE_CPU_ENGINE_POLL = 3,
};

/* "perf-event", "cpu-timer", "cpu-poll", "auto"; "unknown" otherwise.
 * Static string. */
SPROBE_API
const char *sprobe_cpu_engine__name(uint32_t engine);

/* "perf"/"perf-event", "timer"/"cpu-timer", "poll"/"cpu-poll", "auto" ->
 * enum value, or -EINVAL. */
SPROBE_API
int sprobe_cpu_engine__parse(const char *name);

/*
 * Choose the engine of the next CPU capture (before the first
 * sprobe_capturer__cpu_collect(), or after sprobe_capturer__cpu_stop()).
 * want AUTO: PERF if a task-clock event can be opened here (kernel and
 * user time; user time only when perf_event_paranoid forbids the kernel
 * side), else TIMER. want PERF: PERF or -EACCES/-EPERM/-ENOENT/-ENOSYS
 * (the kernel refused; why says which setting), never a silent TIMER.
 * want TIMER: TIMER. why (if not NULL) gets one line saying what was
 * chosen and, for a fallback, why (e.g. "perf events not allowed:
 * perf_event_paranoid=3 ..."). Returns the engine chosen (> 0) or -errno
 * (-EBUSY while CPU capture runs, -EINVAL). Not async-signal-safe.
 */
SPROBE_API
int sprobe_capturer__cpu_engine(struct sprobe_capturer *c, uint32_t want, char *why, size_t len);

/* Engine PERF: threads that got a CPU timer instead of a perf event (the
 * descriptor budget was spent, or their event could not be opened), since
 * the capturer was made. 0 for NULL. Thread-safe (relaxed read). */
SPROBE_API
uint32_t sprobe_capturer__cpu_on_timer(const struct sprobe_capturer *c);

/* Threads the last follow of the thread set left without a signal
 * source, so unsampled: the kernel refused one (their CPU is reported
 * with SPROBE_CPU_USAGE_NOSOURCE), or every slot of the capturer's
 * max_threads was taken. *why (if not NULL) gets the errno of the last
 * refusal (EAGAIN: the timers may take at most half of RLIMIT_SIGPENDING,
 * which all the user's processes share). 0 for NULL. Thread-safe
 * (relaxed reads). */
SPROBE_API
uint32_t sprobe_capturer__cpu_unsourced(const struct sprobe_capturer *c, int *why);

/* One thread's CPU time as the CPU engine saw it (sprobe_capturer__cpu_usage()). */
struct sprobe_cpu_usage {
	pid_t tid;
	uint32_t flags;		/* SPROBE_CPU_USAGE_* */
	/* CPU time (its CLOCK_THREAD_CPUTIME_ID) that could be sampled:
	 * since CPU capture started for a thread that existed then, all of
	 * it for a thread born later. */
	uint64_t cpu_ns;
};
#define SPROBE_CPU_USAGE_BLOCKED 0x1u /* blocks the capture signal: its CPU goes unsampled */
#define SPROBE_CPU_USAGE_EXITED 0x2u  /* gone: cpu_ns is the last value read */
#define SPROBE_CPU_USAGE_TIMER 0x4u   /* engine PERF, but this thread got a CPU timer */
/* No signal source: the kernel refused one (no perf event in the
 * descriptor budget and no room for a CPU timer in RLIMIT_SIGPENDING):
 * its CPU goes unsampled; later collects try again (64 threads a
 * second at most). */
#define SPROBE_CPU_USAGE_NOSOURCE 0x8u

/*
 * CPU coverage: reads the CPU clock of the threads the CPU engine tracks
 * and writes into out[0..max) one entry per thread whose CPU time or
 * flags changed since the previous call, exited threads (last value
 * read) included, and returns how many (a thread that did not fit is
 * reported at the next call). Each call reads the threads that delivered
 * a sample since the previous one and those flagged BLOCKED, plus a
 * rotating share of the others such that each is read at least once a
 * second (all of them while there are 64 or fewer): a thread without a
 * sample used less than a period since its last one, or blocks the
 * signal. A thread that used three periods of
 * CPU more than it delivered captures since the previous call (since its
 * signal source was made, at the first call) is checked for blocking the
 * capture signal (SigBlk): if so it
 * is flagged BLOCKED, its perf event is disabled (the kernel would queue
 * one signal per period until it falls back on SIGIO), and the capture
 * made at the next sprobe_capturer__cpu_collect() lists it as dropped
 * BLOCKED; it is checked again at each call and re-enabled once it takes
 * the signal again. Make a call every 100 ms or so of wall time. Returns
 * n >= 0 or -errno (-EINVAL, -ECHILD). Not async-signal-safe; serialised
 * with captures.
 */
SPROBE_API
int sprobe_capturer__cpu_usage(struct sprobe_capturer *c, struct sprobe_cpu_usage *out,
			       uint32_t max);

/* sprobe_capturer__cpu_usage() reading every tracked thread's clock (one
 * read per thread): the last call before a stop, whose values are final. */
SPROBE_API
int sprobe_capturer__cpu_usage_all(struct sprobe_capturer *c, struct sprobe_cpu_usage *out,
				   uint32_t max);

/* Stop CPU-timer capture: delete every timer, wait for running handlers;
 * uncollected samples are discarded. Wall captures work again afterwards.
 * sprobe_capturer__free() does this itself. Returns 0 (also when not
 * running) or -EINVAL for NULL. Thread-safe; not async-signal-safe. */
SPROBE_API
int sprobe_capturer__cpu_stop(struct sprobe_capturer *c);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_CAPTURE_H */
