/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Threads that block the capture signal, sampled without a signal
 * (docs/AGENT.md "Threads that block every signal").
 *
 * A thread that blocks the capture signal while it runs (a full
 * sigprocmask after it started, or a raw rt_sigprocmask no wrapper sees)
 * is dropped 'blocked' by every signal capture. For such a thread, while
 * it is blocked and uses CPU, this mechanism holds one per-thread software
 * perf event (perf_event_open(pid = tid, cpu = -1), PERF_COUNT_SW_TASK_CLOCK,
 * one sample per period of the thread's CPU time) whose samples carry the
 * user registers and a bounded dump of the user stack (PERF_SAMPLE_REGS_USER
 * | PERF_SAMPLE_STACK_USER) into a small ring of its own (mmap). Nothing is
 * delivered as a signal (no O_ASYNC): the kernel copies the stack at the
 * overflow, in the thread's own context, and the probe drains the rings at
 * each round. Each record becomes a struct sprobe_thread_sample (registers
 * + stack bytes, method SPROBE_METHOD_PERF_EVENT, stage RAW) handed to a
 * callback, which feeds it to the same deferred unwinder as the signal
 * path's copies (this process's: the stack was copied, code is read live).
 *
 * Nothing here runs in a suspend window or in a signal handler. The sampler
 * (probe.c) decides when a thread is watched and unwatched; this file
 * only opens, drains and closes.
 *
 * Descriptors: each event is a CACHE descriptor of the registry
 * (userspace/common/fds.h, top region, within its budget); past the budget
 * a watch fails with -EDQUOT and the thread stays unsampled (its CPU is in
 * the coverage, with the reason).
 *
 * Errors: int functions return 0 or -errno. Thread-safety: one object is
 * used by one thread (the probe) at a time. None of it is
 * async-signal-safe.
 */
#ifndef SPROBE_USERSPACE_BLOCKED_PERF_H
#define SPROBE_USERSPACE_BLOCKED_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stackprobe/capture.h>

/* Default stack bytes dumped per sample (docs/PERFORMANCE.md, "Threads
 * that block the capture signal"), and the most the kernel can put in one
 * record (its size is a u16). */
#define SPROBE_BLOCKED_PERF_STACK_DEFAULT (16u * 1024u)
#define SPROBE_BLOCKED_PERF_STACK_MAX (63u * 1024u)
/* The ring of each event holds at least this many samples: the probe
 * drains every round (1/F of wall time) and a thread makes at most one
 * sample per 1/F of its CPU, so this is that many late rounds of slack.
 * What still overflows is counted (PERF_RECORD_LOST) and added to the
 * weight of the thread's next sample. The kernel writes that count only
 * with its next record: periods lost right before the event closes (the
 * thread exits while the probe is late) are not counted. */
#define SPROBE_BLOCKED_PERF_RING_SAMPLES 6u
/* An event that produced nothing for this long is closed (the thread is
 * blocked off-CPU); the sampler watches it again when it runs again. */
#define SPROBE_BLOCKED_PERF_IDLE_NS (2000ull * 1000 * 1000)

struct sprobe_blocked_perf_opts {
	size_t sz;		/* sizeof(struct sprobe_blocked_perf_opts) */
	uint64_t period_ns;	/* CPU time per sample (1/F); required */
	size_t stack_bytes;	/* 0: default; rounded down to 8, capped at MAX */
	uint32_t max_threads;	/* events held at once; 0: 64 */
};

struct sprobe_blocked_perf_stats {
	uint32_t watching;	/* events open now */
	uint64_t opened, closed;
	uint64_t samples;	/* records turned into samples */
	uint64_t lost;		/* samples the kernel could not write (ring full) */
	uint64_t refused;	/* watches that failed (any reason) */
	uint64_t bad;		/* records not usable (no user regs: kernel-only) */
};

/* Called for each sample drained: ts is owned by the mechanism and valid
 * only during the call (its stack buffer is reused by the next one);
 * time_ns is when the kernel took it (CLOCK_MONOTONIC). The callee may
 * unwind ts in place (frames, stage). */
typedef void (*sprobe_blocked_perf_cb)(void *ctx, struct sprobe_thread_sample *ts,
				       uint64_t time_ns);

struct sprobe_blocked_perf;

/* Make the (empty) set. Opens nothing: whether the kernel allows the
 * events is known at the first watch. NULL with errno EINVAL/ENOMEM.
 * Free with sprobe_blocked_perf__free(). */
struct sprobe_blocked_perf *sprobe_blocked_perf__new(const struct sprobe_blocked_perf_opts *o);

/* Close every event and free. Accepts NULL. Samples not drained are lost. */
void sprobe_blocked_perf__free(struct sprobe_blocked_perf *bp);

/*
 * Whether events can be opened: 1 (yes, or not tried yet), 0 (the kernel
 * refused the first one: perf_event_paranoid, a seccomp profile, no
 * software events; every later watch fails at once). why (if not NULL)
 * gets one line saying why, "" while available. -EINVAL for NULL.
 */
int sprobe_blocked_perf__available(const struct sprobe_blocked_perf *bp, char *why, size_t len);

/*
 * Start sampling thread tid (of this process) by a perf event. Returns 0,
 * -EEXIST (already watched), -EACCES/-EPERM/-ENOENT/-ENOSYS (refused:
 * sprobe_blocked_perf__available() is 0 from then on), -EDQUOT/-EMFILE (no
 * descriptor within the registry's budget), -ENOSPC (max_threads held),
 * -ESRCH (gone), -ENOMEM.
 * Kernel and user time are sampled; user time only when the kernel allows
 * no more (perf_event_paranoid, without CAP_PERFMON). A sample taken in
 * the kernel carries the user registers at its entry (where a signal would
 * have found the thread on its way back).
 */
int sprobe_blocked_perf__watch(struct sprobe_blocked_perf *bp, pid_t tid);

/* Is tid watched? */
bool sprobe_blocked_perf__watching(const struct sprobe_blocked_perf *bp, pid_t tid);

/* Drain tid's ring through cb, then close its event. -ENOENT if not
 * watched, else 0. */
int sprobe_blocked_perf__unwatch(struct sprobe_blocked_perf *bp, pid_t tid,
				 sprobe_blocked_perf_cb cb, void *ctx);

/*
 * Drain every ring through cb (oldest first per thread), then close the
 * events of threads that exited (the kernel hung the event up) and of
 * those idle for SPROBE_BLOCKED_PERF_IDLE_NS (now_ns: CLOCK_MONOTONIC).
 * Returns the samples delivered (>= 0) or -EINVAL.
 */
int sprobe_blocked_perf__drain(struct sprobe_blocked_perf *bp, uint64_t now_ns,
			       sprobe_blocked_perf_cb cb, void *ctx);

/* Counters since creation. */
void sprobe_blocked_perf__stats(const struct sprobe_blocked_perf *bp,
				struct sprobe_blocked_perf_stats *out);

#endif
