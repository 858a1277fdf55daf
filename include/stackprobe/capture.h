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
 * once, at the top of backends/linux.c.
 *
 * Errors: functions returning int return 0 or -errno. Functions returning a
 * pointer return NULL and set errno. An unsupported platform returns
 * -ENOTSUP, never an empty snapshot.
 */
#ifndef STACKPROBE_CAPTURE_H
#define STACKPROBE_CAPTURE_H

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
	uint64_t pc;	 /* return address (or IP for frame 0) */
	uint64_t fp;	 /* frame pointer / CFA of this frame, 0 if unknown */
	uint32_t method; /* enum sprobe_frame_method */
	uint32_t _pad;
};

/*
 * One thread's capture. Owned by its snapshot; valid until the next capture
 * into the same snapshot or until the snapshot is freed.
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
	 * the clock (the self-reported window). 0 when not applicable. */
	uint64_t signal_ns, entry_ns, exit_ns;
	/* Frames, once unwound (stage == UNWOUND). nframes may be 0 for an
	 * unwalkable stack: check sprobe_snapshot__frames_resolved(). */
	uint32_t nframes;
	struct sprobe_frame frames[SPROBE_MAX_FRAMES];
};

struct sprobe_snapshot_stats {
	uint32_t threads_total;	   /* siblings enumerated (caller excluded) */
	uint32_t threads_captured;
	uint32_t threads_dropped;
	uint32_t dropped[SPROBE_DROP__COUNT]; /* by reason; sums to dropped */
	uint64_t pause_ns;	   /* sum over captured threads of exit - entry */
	uint64_t capture_ns;	   /* whole capture, probe side */
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
};

struct sprobe_capturer;
struct sprobe_snapshot;

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_CAPTURE_H */
