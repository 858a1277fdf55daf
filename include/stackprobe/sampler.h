/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe sampler: the probe thread that ties the parts together.
 *
 * Started inside the profiled process (by the LD_PRELOAD agent, or by an
 * application that embeds libstackprobe), it captures every sibling thread at
 * a fixed rate, unwinds the copies after every thread runs again, publishes
 * each thread's latest stack in the shared-memory node table, and streams
 * samples to a data file through a bounded queue that never blocks the probe.
 *
 * Modes:
 *   wall  every thread, running or blocked, once per period: where time goes.
 *         Threads blocked in the kernel are read without a signal
 *         (zero-pause, docs/capture.md) unless opts.no_zero_pause; one
 *         whose stack needs registers the kernel does not show (frame
 *         pointers) is re-captured with a signal when the round is
 *         processed. Rounds are pipelined: each wake-up finishes the
 *         capture started at the previous one (its handlers ran while the
 *         probe slept), processes it and starts the next
 *         (sprobe_capturer__capture_start()).
 *   cpu   each thread on its own CPU time: a per-thread perf event
 *         (task-clock) or, if forced, a POSIX timer on the thread's CPU
 *         clock signals the thread itself after every 1/F of CPU time it
 *         consumed, and the handler copies the stack where that CPU was
 *         spent (sprobe_capturer__cpu_collect(), opts.cpu_engine). Where
 *         perf events are not allowed, the POLL engine captures as wall
 *         mode does, at random instants, and weights each stack by the
 *         CPU its thread used since its previous capture. The probe collects the finished samples every
 *         1/F of wall time (timers: max(1/F, half a scheduler tick), as
 *         the kernel fires those at its tick), each
 *         weighted by the expirations it stands for (overruns included): a
 *         blocked thread is never signalled and has no samples; a busy one
 *         gets weights adding up to about F per CPU-second.
 *         A thread without samples stays in the node table while it lives.
 *         Every ~100 ms the probe reads each thread's CPU clock and
 *         writes it to the data file (THREAD_CPU records), so a report
 *         can name threads whose CPU went unsampled (a thread that blocks
 *         the capture signal is also listed as dropped BLOCKED).
 *
 * Threads that block the capture signal (both modes): while such a thread
 * runs, the probe samples it without a signal by a per-thread perf event
 * (task-clock, one sample per 1/F of its CPU time, registers and user
 * stack copied by the kernel: userspace/sampler/blocked_perf.h), unwound
 * like any other copy; samples have method SPROBE_METHOD_PERF_EVENT. In
 * wall mode they stand for the time the thread ran, not the time it was
 * runnable and waiting (docs/AGENT.md).
 *
 * stackprobe's own threads (the data stream's writer) are excluded from the
 * captures in both modes.
 *
 * Threading: one sampler per process (the capture signal handler is
 * process-wide). The functions below are not async-signal-safe; call them
 * from ordinary thread context. __stop() may be called from an atexit
 * handler.
 */
#ifndef STACKPROBE_SAMPLER_H
#define STACKPROBE_SAMPLER_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum sprobe_sampler_mode {
	SPROBE_MODE_WALL = 0,
	SPROBE_MODE_CPU = 1,
};

/*
 * Live counters the sampler publishes for another process (the `record`
 * command maps the same memory). Written by the probe thread with relaxed
 * stores once per round; readers get each counter whole, not a consistent
 * set (a status line needs no more).
 */
struct sprobe_sampler_status {
	_Atomic uint64_t rounds;
	_Atomic uint64_t samples;
	_Atomic uint64_t threads_dropped;
	_Atomic uint64_t stream_dropped;
	_Atomic uint64_t window_median_ns;
	_Atomic uint32_t threads;
	_Atomic uint64_t rounds_failed;	/* see sprobe_sampler_stats */
	_Atomic uint64_t rounds_skipped; /* see sprobe_sampler_stats */
	_Atomic uint64_t carried_lost;	/* see sprobe_sampler_stats */
};

struct sprobe_sampler_opts {
	size_t sz;		   /* sizeof(struct sprobe_sampler_opts) */
	double freq_hz;		   /* 0: 99 */
	uint32_t mode;		   /* enum sprobe_sampler_mode */
	const char *output;	   /* data file path; NULL: no data file */
	const char *table_path;	   /* NULL: /dev/shm/stackprobe-<pid>.table */
	bool no_table;		   /* do not publish a node table */
	uint32_t table_capacity;   /* 0: 1024 nodes */
	uint32_t max_threads;	   /* 0: 16384 */
	size_t max_stack_bytes;	   /* 0: SPROBE_MAX_STACK_BYTES */
	size_t queue_bytes;	   /* stream queue; 0: stream default */
	int signo;		   /* 0: pick a free real-time signal */
	double duration_s;	   /* 0: until __stop() */
	const char *command_line;  /* recorded in the header; NULL: /proc */
	struct sprobe_sampler_status *status; /* optional, borrowed */
	/* Wall mode reads threads blocked in the kernel without a signal
	 * (zero-pause, docs/capture.md) unless this is set; where the
	 * kernel's view cannot be trusted (qemu-user) it is off anyway:
	 * sprobe_sampler__zero_pause() says why. */
	bool no_zero_pause;
	/* Images of this pid before this one (execs that kept the pid),
	 * written in the PROCESS record that follows the header. */
	uint32_t exec_index;
	/* Longest time a record waits in the stream before it reaches the
	 * file (what a process killed by a signal loses); 0: the stream's
	 * default (100 ms). */
	uint64_t flush_interval_ns;
	/* Zero-pause's self-test already passed in this kernel (see
	 * sprobe_capture_opts.zero_pause_pretested). */
	bool zero_pause_pretested;
	/* Write no srcline records (inlined frames and source lines from
	 * DWARF, docs/FORMAT.md type 12): symbol names only, less work at
	 * flush. */
	bool no_lines;
	/* Write srclines only once the sampler has run this long (0: at
	 * once); the pcs named before get theirs then, and a sampler stopped
	 * earlier writes none. Their first lookup in a module reads its
	 * DWARF (tens of ms of CPU for libc's debug file): a process tree's
	 * short processes (a build's compilers) would each pay it. */
	uint64_t lines_after_ns;
	/* cpu mode's engine (enum sprobe_cpu_engine, capture.h): AUTO (0)
	 * takes the perf-event engine where the kernel allows it, else
	 * POLL (captures at randomised intervals, each stack weighted by the
	 * CPU its thread used since its previous capture: no aliasing with
	 * the tick, no perf events); PERF fails the start (errno from the
	 * kernel) rather than fall back; TIMER forces the tick-bound CPU
	 * timers. Which one runs, and why: sprobe_sampler__cpu_engine(); it
	 * is also in the data file header. */
	uint32_t cpu_engine;
	/* A thread of the caller's to leave out of every capture, as the
	 * sampler's own threads are (the agent's control thread,
	 * userspace/agent/control.c); 0: none. */
	pid_t exclude_tid;
	/* Called (from the probe thread, at most once per sampler) with one
	 * line, no newline, when a thread that blocks the capture signal
	 * was found and the perf-event fallback that samples such threads
	 * without a signal is refused (perf_event_paranoid, a seccomp
	 * profile): the line says why. NULL: nothing is said (the report
	 * still lists the thread's CPU as unsampled). The agent prints it
	 * as "stackprobe: ...". */
	void (*notice)(void *ctx, const char *line);
	void *notice_ctx;
	/* Leave the names of pcs in a module file with a build-id to the
	 * data file's reader: their symbol records carry the module and the
	 * offset from its load bias and no name (`stackprobe record` names
	 * them after the merge, userspace/cli/record_lines.c), so no symbol
	 * table is read into the program. Implies no_lines (set
	 * lines_by_reader for the reader to add them). pcs in no file (JIT
	 * maps, the vDSO) are still named here. The data file header says so
	 * (SPROBE_DF_HEADER_NAMES_BY_READER). */
	bool names_by_reader;
	/* Write no srcline records and say so in the data file header
	 * (SPROBE_DF_HEADER_LINES_BY_READER): the reader makes them from the
	 * module files (`stackprobe record` after the merge, `stackprobe
	 * report`), so no DWARF is read into the program. Implies no_lines. */
	bool lines_by_reader;
};

struct sprobe_sampler_stats {
	uint64_t rounds;	   /* captures performed */
	uint64_t samples;	   /* thread samples emitted, weighted (cpu mode) */
	uint64_t threads_dropped;  /* capture drops, all reasons */
	uint64_t stream_dropped;   /* records the queue had to drop */
	uint64_t table_errors;	   /* table inserts refused (full) */
	uint64_t last_window_median_ns;
	uint32_t threads;	   /* threads in the last round (cpu mode: sampled) */
	/* Rounds whose capture was refused, and the last refusal's -errno:
	 * -EBUSY once the program replaced the capture signal's handler
	 * behind the agent's back (a raw rt_sigaction); nothing is sent then. */
	int32_t last_error;
	uint64_t rounds_failed;
	/* Wall mode: periods with no round, because the round before ran
	 * past the next period's start (the rate asked could not be kept). */
	uint64_t rounds_skipped;
	/* Wall mode, blocked threads carried forward: captures of a carried
	 * thread that no record holds (its stack was gone when its weight
	 * came to be written: a failed round left it behind, or the thread
	 * went before the capture that writes it). Each is one thread-capture
	 * not in the profile, counted instead of dropped silently. */
	uint64_t carried_lost;
};

struct sprobe_sampler;

/*
 * Start sampling the calling process: creates the probe thread, the table
 * and the data file. Returns NULL with errno set: EINVAL (bad options),
 * EBUSY (a sampler already runs, or the capture signal is taken), EEXIST
 * (the table path exists), EACCES, ENOMEM, ENOTSUP (no capture backend).
 * cpu mode with per-thread sources, called on the main thread: returns
 * once the probe's first collect made them (at most 200 ms), so the
 * caller's CPU from here on is sampled.
 */
SPROBE_API
struct sprobe_sampler *sprobe_sampler__start(const struct sprobe_sampler_opts *opts);

/*
 * Stop: joins the probe thread, writes symbols and the trailer, closes the
 * data file and removes the table. Returns 0 or the first -errno met while
 * writing. Frees the sampler (even on error). Accepts NULL (returns 0).
 * Exception: -ETIMEDOUT when the probe thread has not ended within
 * SPROBE_SAMPLER_STOP_TIMEOUT_S seconds and is inside the dynamic loader
 * then, i.e. it waits for the loader's lock the caller holds (stop run
 * from exit() called by a library's constructor during dlopen): then
 * nothing is freed or finished (the probe may still run; the data file
 * reads as cut short; the table's name is removed) and no other sampler
 * can start in this process, on-demand restarts and fork children
 * included. A probe that is only slow is waited for, however long.
 */
#define SPROBE_SAMPLER_STOP_TIMEOUT_S 3
SPROBE_API
int sprobe_sampler__stop(struct sprobe_sampler *s);

/*
 * In the child of a fork(), on its only thread: give up sampler S
 * inherited from the parent (its probe and writer threads did not survive
 * the fork) without touching its threads, files or table, so that a new
 * sampler can start in the child. The capture signal's disposition goes
 * back to what S found at start. S's memory is abandoned: never use or
 * stop S afterwards. The caller closes the inherited descriptors (the
 * agent: the descriptor registry's atfork reset). Returns 0, or -ENOTSUP
 * where the backend cannot (then no sampler can start in the child).
 */
SPROBE_API
int sprobe_sampler__forget(struct sprobe_sampler *s);

/* A consistent copy of the counters; thread-safe (relaxed atomics). */
SPROBE_API
void sprobe_sampler__stats(const struct sprobe_sampler *s, struct sprobe_sampler_stats *out);

/* Whether the sampler's wall captures use zero-pause: 1 yes, 0 no (why,
 * if not NULL, gets the reason: "" when not asked for or in cpu mode),
 * -EINVAL for NULL. Thread-safe (fixed at start). */
SPROBE_API
int sprobe_sampler__zero_pause(const struct sprobe_sampler *s, char *why, size_t len);

/* cpu mode: the engine that runs (enum sprobe_cpu_engine, > 0), why (if
 * not NULL) gets one line "cpu engine: NAME (...)" saying why it was
 * chosen; 0 in wall mode (why ""), -EINVAL for NULL. Thread-safe (fixed
 * at start). */
SPROBE_API
int sprobe_sampler__cpu_engine(const struct sprobe_sampler *s, char *why, size_t len);

/* "wall" / "cpu" -> enum value, or -EINVAL. */
SPROBE_API
int sprobe_sampler_mode__parse(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_SAMPLER_H */
