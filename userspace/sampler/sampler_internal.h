/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Private to the sampler stage: the sampler's state, shared by its life
 * cycle (sampler.c), the probe thread's rounds (probe.c), the threads
 * table (threads.c) and the records they emit into the stream (emit.c).
 * One way: sampler.c starts probe.c, which calls threads.c, which calls
 * emit.c; none calls back. Everything but the life cycle runs on the
 * probe thread, outside any window.
 */
#ifndef SPROBE_USERSPACE_SAMPLER_INTERNAL_H
#define SPROBE_USERSPACE_SAMPLER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/sampler.h>
#include <stackprobe/stream.h>
#include <stackprobe/table.h>
#include <stackprobe/unwind.h>

struct thread_ent {
	pid_t tid;		/* 0: empty hash slot */
	uint32_t node;		/* table node index, 0: none */
	uint64_t round;		/* last round the thread was enumerated */
	bool named;		/* a THREAD record was pushed */
	/* cpu engine POLL (threads.c, sprobe_sampler_poll__weight()): the thread's CPU clock
	 * when first seen and at its last capture, CPU not yet turned into
	 * weight (< one period), the value last written as THREAD_CPU, and
	 * whether a capture found it blocking the signal. */
	uint64_t cpu_first, cpu_last, cpu_carry, cpu_emitted;
	bool cpu_known, cpu_blocked;
	/* Wall mode and cpu-poll: the thread's CPU clock at its last
	 * 'blocked' drop, to tell a blocked thread that runs (sampled by a
	 * perf event, blocked_perf.h) from one that waits. */
	uint64_t blk_cpu;
	bool blk_known;
	/* Its slot in the last capture that did not carry it forward: where
	 * the sweep looks while it is carried (sprobe_snapshot__carried()). */
	uint32_t slot;
};

struct pc_set {
	uint64_t *keys;		/* 0: empty */
	size_t cap, used;
};

struct emitted_module {
	uint64_t start, bias;
	char *path;
};

struct sprobe_sampler {
	struct sprobe_sampler_opts opts;
	pthread_t probe;
	/* 0 while running, 1 once __stop() asks the probe to end. The probe
	 * sleeps on it (FUTEX_WAIT_BITSET with an absolute CLOCK_MONOTONIC
	 * deadline: one system call per round, where a condition variable
	 * took two or three); __stop() stores 1 (seq_cst) then wakes it, so
	 * the probe either sees 1 before sleeping or is woken. */
	_Atomic uint32_t stop;
	/* cpu mode with per-thread sources: 1 once the probe's first
	 * collect made them (or the probe ended); __start() waits for it, a
	 * futex word. */
	_Atomic uint32_t sources_ready;
	int probe_error;	/* -errno that ended the probe early (probe only) */
	uint64_t jitter_state;	/* wall mode's interval draw (probe only; probe.c) */

	struct sprobe_capturer *capturer;
	struct sprobe_snapshot *snap;
	struct sprobe_unwinder *unwinder;
	struct sprobe_table *table;

	int fd;			/* the data file: a handle of fds.h, or -1 */
	struct sprobe_datafile_writer *writer;
	struct sprobe_stream *stream;
	bool writer_excluded;	/* the stream's writer is out of captures */
	bool zero_pause;	/* wall captures use zero-pause */
	uint32_t cpu_engine;	/* cpu mode: enum sprobe_cpu_engine that runs */
	char cpu_engine_why[512]; /* and the line that says why */
	struct sprobe_cpu_usage *usage; /* scratch: max_threads entries */
	/* Threads that block the capture signal, sampled by per-thread perf
	 * events (blocked_perf.h); NULL if it could not be made. noticed:
	 * the line saying it is refused was given to opts.notice. */
	struct sprobe_blocked_perf *bperf;
	bool bperf_noticed;
	bool unsourced_noticed; /* cpu mode: threads without a signal source said */
	/* Libraries opened on first use whose failed load was said (bit i:
	 * libs_notice()'s table). */
	uint32_t libs_noticed;

	/* threads[0..nents) dense, found by tid through tidx (open
	 * addressing, threads_cap slots, a power of two; pos 0: empty, else
	 * 1 + the entry's index): threads.c. */
	struct thread_ent *threads;
	struct thread_idx {
		pid_t tid;
		uint32_t pos;
	} *tidx;
	size_t threads_cap;
	size_t nents;		/* entries in threads[] */
	size_t nseen;		/* of them, marked seen this round */
	size_t ncarried;	/* and carried forward this round (not marked) */
	/* Per snapshot slot: the round its thread's carried spell began (0:
	 * none), whose weight (the rounds since, this one included) its next
	 * record adds: at the spell's LAST, with the stack it was carried
	 * with, or at its next capture (it ran meanwhile: the error is
	 * within one turn). A slot carried on is not read at all in between
	 * (sprobe_snapshot__touched()). max_threads entries. */
	uint64_t *carry_from;
	/* Whose spell carry_from[i] is: a failed round can leave it while
	 * the next list moves another thread into the slot, which must not
	 * inherit it. Weight so orphaned (its stack is gone), or dropped with
	 * its thread at an unforeseen check, is counted in carry_lost. */
	pid_t *carry_tid;
	uint64_t carry_lost;
	struct pc_set pcs;
	/* Source lines deferred (opts.lines_after_ns): frames named without
	 * their srcline yet, and when the sampler started. */
	struct sprobe_frame *lines_pending;
	size_t nlines_pending, caplines_pending;
	uint64_t t_start_ns;
	struct emitted_module *mods;
	size_t nmods, mods_cap;
	uint64_t mods_generation;
	uint64_t round;
	uint64_t last_sweep_ns;	/* cpu mode: last keep-alive + sweep */
	size_t keep_next;	/* cpu mode: the keep-alive rotation's next entry */
	uint64_t keep_ns;	/* when it last ran (0: never) */
	bool started;		/* wall mode: a capture into snap is started */
	uint64_t started_ns;	/* and when */
	uint64_t *windows;	/* scratch: window lengths of one round */
	struct sprobe_df_dropped *dropped; /* scratch */

	_Atomic uint64_t st_rounds_failed, st_rounds_skipped, st_carry_lost;
	_Atomic int32_t st_last_error;
	_Atomic uint64_t st_rounds, st_samples, st_threads_dropped, st_table_errors,
		st_window_median;
	_Atomic uint32_t st_threads;
};

/* ---- records into the stream (emit.c) ----------------------------------- */

/* The HEADER record: the process, the clocks, the options. */
void sprobe_sampler_emit__header(struct sprobe_sampler *s);
/* A THREAD record with tid's name. */
void sprobe_sampler_emit__thread_name(struct sprobe_sampler *s, pid_t tid);
/* MODULE and SYMBOL records for the pcs of ts not symbolized before (each
 * pc once per sampler, each module once). */
void sprobe_sampler_emit__symbols(struct sprobe_sampler *s, const struct sprobe_thread_sample *ts);
/* Deferred source lines: once the sampler has run opts.lines_after_ns,
 * write the srclines of the frames named before (each round calls it). */
void sprobe_sampler_emit__pending_lines(struct sprobe_sampler *s);

/* ---- the threads (threads.c); probe thread only ---------------------------- */

/* Find or insert tid (*fresh: inserted). NULL only when the table is full. */
struct thread_ent *sprobe_sampler_threads__get(struct sprobe_sampler *s, pid_t tid, bool *fresh);
/* e was listed by this round's capture: the sweep keeps it. */
void sprobe_sampler_threads__seen(struct sprobe_sampler *s, struct thread_ent *e);
/* Remove the entries not seen this round, with their table nodes (POLL
 * engine: their last CPU time written first). */
void sprobe_sampler_threads__sweep(struct sprobe_sampler *s);
/* cpu mode: mark seen every entry whose thread still lives (tgkill 0). */
void sprobe_sampler_threads__keep_alive(struct sprobe_sampler *s);
/* e's node in the node table gets ts's stack (captured at now). */
void sprobe_sampler_threads__publish(struct sprobe_sampler *s, struct thread_ent *e,
				     const struct sprobe_thread_sample *ts, uint64_t now);
/* A THREAD record for tid unless one was pushed. */
void sprobe_sampler_threads__name_once(struct sprobe_sampler *s, pid_t tid);
/* Thread tid's CPU clock of this process; false when it is gone. */
bool sprobe_sampler_threads__cpu_clock(pid_t tid, uint64_t *ns);
/* THREAD_CPU records: the CPU time the capturer read (cpu mode). Returns
 * how many entries of s->usage it filled (>= 0). */
int sprobe_sampler_threads__cpu_usage(struct sprobe_sampler *s, uint64_t now, bool all);

/* cpu mode with the POLL engine: wall-style captures weighted by CPU. */
bool sprobe_sampler_poll__engine(const struct sprobe_sampler *s);
/* The CPU periods e used since its previous capture that this stack
 * stands for (0 when not running: the CPU waits for a running capture). */
uint32_t sprobe_sampler_poll__weight(struct sprobe_sampler *s, struct thread_ent *e, bool running);
/* A THREAD_CPU record for e if its CPU changed (flags: EXITED when swept);
 * __emit_usage: for every thread. */
void sprobe_sampler_poll__emit_one(struct sprobe_sampler *s, struct thread_ent *e, uint64_t now,
				   uint32_t flags);
void sprobe_sampler_poll__emit_usage(struct sprobe_sampler *s, uint64_t now);

/* ---- the probe thread (probe.c) ----------------------------------------- */

/* The probe thread's body (arg: the sampler), started by __start(). */
void *sprobe_sampler_probe__main(void *arg);

#endif
