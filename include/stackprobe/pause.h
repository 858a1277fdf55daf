/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe pause: the eBPF companion and the merge of its windows with the
 * capture backend's self-reported ones (docs/PAUSE.md).
 *
 * A suspend window seen from the kernel (struct sprobe_pause_kwindow):
 *   generate   the capture signal is queued for the thread
 *   deliver    the thread dequeues it, about to build the signal frame
 *   sigreturn  the handler is done, the thread enters rt_sigreturn
 *   offcpu_ns  time switched out between deliver and sigreturn
 * and from the handler itself (struct sprobe_pause_swindow, the capture
 * backend's sprobe_thread_sample signal_ns/entry_ns/exit_ns):
 *   signal     the probe read the clock just before sending the signal
 *   entry/exit the handler's first and last clock reads
 * All CLOCK_MONOTONIC ns (bpf_ktime_get_ns() is that clock), so a matched
 * pair satisfies  signal <= generate <= deliver <= entry <= exit <= sigreturn.
 *
 * Three pieces, usable apart:
 *  - the loader (sprobe_pause__*): load and attach the BPF programs for one
 *    target process (optionally with every process it forks) and signal,
 *    collect the kernel windows and, for each followed process, its exit;
 *  - the matcher (sprobe_pause_merge__*): a pure function of the two lists;
 *  - the statistics it returns per thread and overall.
 *
 * Errors: int functions return 0 (or a count) or -errno; pointer functions
 * return NULL and set errno.
 */
#ifndef STACKPROBE_PAUSE_H
#define STACKPROBE_PAUSE_H

#include <stackprobe/api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <stackprobe/capture.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Windows                                                             */

/* Bits of sprobe_pause_kwindow.flags (same values as bpf/pause.h). */
#define SPROBE_PAUSE_KW_NO_GENERATE (1u << 0) /* generation not seen */
#define SPROBE_PAUSE_KW_GROUP	    (1u << 1) /* process-directed signal */
#define SPROBE_PAUSE_KW_INCOMPLETE  (1u << 2) /* no rt_sigreturn seen */
#define SPROBE_PAUSE_KW_NESTED	    (1u << 3) /* another handler ran inside */
#define SPROBE_PAUSE_KW_QUEUED	    (1u << 4) /* more generations waited */
/* Switched out inside the window and no switch-in event was seen before
 * rt_sigreturn: offcpu_ns counts that segment up to rt_sigreturn (an upper
 * bound). runq_ns / nruns are unaffected. */
#define SPROBE_PAUSE_KW_SWITCH_IN_UNSEEN (1u << 5)

/* One window as the kernel saw it. */
struct sprobe_pause_kwindow {
	pid_t tid;
	int signo;
	int si_code;		/* of the generating siginfo; 0 if unknown */
	uint32_t flags;		/* SPROBE_PAUSE_KW_* */
	uint64_t generate_ns;	/* 0 with SPROBE_PAUSE_KW_NO_GENERATE */
	uint64_t deliver_ns;
	uint64_t sigreturn_ns;	/* 0 with SPROBE_PAUSE_KW_INCOMPLETE */
	uint64_t offcpu_ns;	/* switched out: sched_switch out -> in pairs */
	uint64_t runq_ns;	/* runnable, waiting for a CPU: the task's own
				 * sched_info.run_delay delta (0 without
				 * CONFIG_SCHED_INFO) */
	uint32_t nswitches;	/* switched out inside the window */
	uint32_t npreempt;	/* ... of which involuntarily */
	uint32_t nruns;		/* given a CPU inside the window (pcount delta) */
	/* The thread's process (its tgid; with follow_children, any process
	 * of the tree). 0 when unknown: windows read back from a data file. */
	pid_t tgid;
};

/* One window as the handler reported it (sprobe_thread_sample's
 * signal_ns / entry_ns / exit_ns). signal_ns may be 0 (unknown). */
struct sprobe_pause_swindow {
	pid_t tid;
	uint32_t _pad;
	uint64_t signal_ns;
	uint64_t entry_ns;
	uint64_t exit_ns;
};

/*
 * Fill *out from one captured thread's sample (its signal_ns, entry_ns,
 * exit_ns). A sample the capturer dropped after sending the signal becomes
 * a window with entry_ns = exit_ns = 0, which the matcher reports as
 * SPROBE_PAUSE_R_SELF_DROPPED. Returns 0, -EINVAL (NULL), or -ENOENT when
 * the sample has no window at all (never signalled: no timestamps, or a
 * zero-pause sample: read without a signal). Pure; thread-safe; async-signal-safe.
 */
SPROBE_API
int sprobe_pause_swindow__from_sample(struct sprobe_pause_swindow *out,
				      const struct sprobe_thread_sample *s);

/* ------------------------------------------------------------------ */
/* Loader                                                              */

enum sprobe_pause_mode {
	/* The probe thread inside the target sends the signal to one thread
	 * (tgkill / rt_tgsigqueueinfo): only those generations count. */
	SPROBE_PAUSE_MODE_PROBE = 0,
	/* CPU mode: a timer generates the signal, from any context, possibly
	 * process-directed; the timer's generation starts the window. */
	SPROBE_PAUSE_MODE_TIMER = 1,
};

struct sprobe_pause_opts {
	size_t sz;		/* sizeof(struct sprobe_pause_opts) */
	pid_t tgid;		/* target process; required, > 0 */
	int signo;		/* capture signal; required, 1..SIGRTMAX */
	uint32_t mode;		/* enum sprobe_pause_mode */
	bool verbose;		/* pass libbpf's debug output to stderr */
	bool quiet;		/* do not print the failure message */
	uint32_t max_threads;	/* per-tid map size; 0: 16384 (all processes) */
	uint32_t ringbuf_bytes;	/* power of 2 >= 4096; 0: 256 KiB */
	/* Fields below are read only when sz covers them. */
	/* Follow tgid's descendants: every process forked (fork, vfork,
	 * posix_spawn, clone without CLONE_THREAD) by a followed process after
	 * sprobe_pause__new() returns is followed from its first instruction,
	 * through execs, until its last thread exits: its windows are measured
	 * (kwindow.tgid tells whose) and its exit recorded. The kernel adds
	 * the child at fork (sched_process_fork), so no short-lived child
	 * escapes. A process outside the tree is never followed, even in
	 * timer mode. */
	bool follow_children;
	/* Processes followed at once, the target included; 0: 4096. A fork
	 * that finds the map full is not followed and counted
	 * (sprobe_pause_stats.procs_full). Ignored without follow_children. */
	uint32_t max_procs;
};

/* Counters kept by the BPF side (and the loader). */
struct sprobe_pause_stats {
	uint64_t generated;	 /* capture-signal generations seen */
	uint64_t not_queued;	 /* generations the kernel did not queue */
	uint64_t delivered;	 /* deliveries to a handler */
	uint64_t emitted;	 /* windows written to the ring buffer */
	uint64_t lost;		 /* windows dropped: ring buffer full */
	uint64_t no_state;	 /* windows not tracked: per-tid map full */
	uint64_t gen_ring_full;	 /* generations dropped: too many queued */
	uint64_t nested;	 /* other handlers run inside a window */
	uint64_t abandoned;	 /* windows without rt_sigreturn */
	uint64_t received;	 /* windows read by the loader */
	/* Program runs the kernel skipped because a program was already
	 * running on that CPU (bpf_prog_info.recursion_misses, summed; e.g. a
	 * timer interrupt generating our signal while signal_generate ran for
	 * another process). A missed generate/deliver/sigreturn can leave a
	 * window without a start or an end. */
	uint64_t missed;
	/* Processes followed so far, the target included (1 without
	 * follow_children). */
	uint64_t followed;
	/* Forks of a followed process NOT followed: the process map was full
	 * (opts.max_procs). Their windows and exits are missing. */
	uint64_t procs_full;
	uint64_t exits;		 /* exit records written by the kernel side */
	uint64_t exits_lost;	 /* exit records dropped: ring buffer full */
};

/*
 * The end of a followed process, as the kernel saw it when its last thread
 * exited (sched_process_exit). Only the eBPF companion has this: it is how
 * `record` learns the wait status of processes it is not the parent of
 * (grandchildren, daemonised children), which waitpid() cannot give.
 */
struct sprobe_pause_exit {
	pid_t tgid;
	pid_t ppid;		/* tgid of the process that forked it, at fork
				 * time; 0 for the target (opts.tgid) */
	pid_t tid;		/* the thread whose exit ended the process */
	/* The wait(2) status its parent gets, as the kernel holds it
	 * (task exit_code, or the group's after exit_group/a fatal signal):
	 * WIFEXITED/WEXITSTATUS/WIFSIGNALED/WTERMSIG/WCOREDUMP apply. E.g.
	 * exit(3) gives 3 << 8, SIGKILL gives 9. */
	int exit_code;
	uint64_t fork_ns;	/* CLOCK_MONOTONIC; 0 for the target */
	uint64_t exit_ns;	/* CLOCK_MONOTONIC */
	char comm[16];		/* task name at exit (after any exec), NUL-ended */
};

/* Per-program cost, from the kernel's BPF run-time statistics (only counted
 * while someone holds bpf_enable_stats(BPF_STATS_RUN_TIME) open). */
struct sprobe_pause_prog_stats {
	const char *name;	/* static string, e.g. "sys_enter" */
	uint64_t run_cnt;	/* invocations, matching or not */
	uint64_t run_time_ns;	/* total time spent in the program */
	uint64_t missed;	/* runs skipped: recursion on that CPU */
};
#define SPROBE_PAUSE_NPROGS 6

struct sprobe_pause;

/*
 * Check, without loading anything that stays, that this kernel and this
 * process can run the companion: kernel BTF, raw tracepoint programs, ring
 * buffer maps, the six tracepoints, and the privilege to load them.
 * Returns 0, or -ENOTSUP (kernel lacks a feature), -EPERM (missing
 * capability or setting), another -errno. If msg is not NULL, writes a
 * one-line explanation (what is missing and what to do) there, always
 * NUL-terminated. Thread-safe; not async-signal-safe.
 */
SPROBE_API
int sprobe_pause__probe(char *msg, size_t msg_len);

/*
 * Feature-probe, open, load and attach the companion for opts->tgid and
 * opts->signo. Returns a new handle owned by the caller (free with
 * sprobe_pause__free()), or NULL with errno set: EINVAL for bad options,
 * EPERM/EACCES for missing privilege, ENOTSUP for a kernel (or build)
 * without what is needed, another errno otherwise. Unless opts->quiet, a
 * failure prints ONE line to stderr saying what is missing and what to do
 * (sprobe_pause__strerror's text); the caller can carry on without the
 * companion. Not thread-safe with respect to the same opts; not
 * async-signal-safe.
 */
SPROBE_API
struct sprobe_pause *sprobe_pause__new(const struct sprobe_pause_opts *opts);

/* Detach, unload and free. Accepts NULL. Windows returned by
 * sprobe_pause__windows() are freed with it. */
SPROBE_API
void sprobe_pause__free(struct sprobe_pause *p);

/*
 * Read the windows the BPF side has closed so far, and the exits of
 * followed processes, waiting up to timeout_ms (0: do not wait, -1:
 * forever) for the first. Appends them to the handle's lists. Returns the
 * number of records (windows + exits) appended, or -errno (-ENOMEM: a list
 * could not grow; the records read so far are kept). Not thread-safe: one
 * reader per handle.
 */
SPROBE_API
int sprobe_pause__poll(struct sprobe_pause *p, int timeout_ms);

/* The windows collected so far, in arrival order (per thread that is time
 * order). Owned by p; valid until the next poll, clear or free. *n gets the
 * count. Never NULL when p is not NULL. Not thread-safe with poll. */
SPROBE_API
const struct sprobe_pause_kwindow *sprobe_pause__windows(const struct sprobe_pause *p,
							  size_t *n);

/*
 * The exits of followed processes collected so far, in the order the
 * kernel saw them (each process once). The kernel writes a record before
 * the process becomes a zombie, so once its parent's wait(2) has returned,
 * sprobe_pause__poll(p, 0) finds it. Owned by p; valid until the next
 * poll, clear or free. *n gets the count. Never NULL when p is not NULL.
 * Not thread-safe with poll.
 */
SPROBE_API
const struct sprobe_pause_exit *sprobe_pause__exits(const struct sprobe_pause *p, size_t *n);

/*
 * Rewrite the data file at path with the kernel windows kw[0..nk) inserted
 * as KWINDOW records before its trailer (appended, for a file cut short,
 * which stays cut short). The new file is written next to it (path.tmp)
 * and replaces it with rename(2), so a failure loses nothing. Returns 0 or
 * -errno (EINVAL, ENOMEM, the reader's or the writer's). Not thread-safe with
 * another writer of path.
 */
SPROBE_API
int sprobe_pause__splice_windows(const char *path, const struct sprobe_pause_kwindow *kw,
				 size_t nk);

/*
 * sprobe_pause__splice_windows() of only the windows of process tgid
 * (kw[i].tgid == tgid): one process's part of a tree's recording. tgid 0
 * takes every window. When no window matches the file is not touched (and
 * not read: 0 is returned). Same returns and thread-safety otherwise.
 */
SPROBE_API
int sprobe_pause__splice_windows_of(const char *path, const struct sprobe_pause_kwindow *kw,
				    size_t nk, pid_t tgid);

/* Forget the collected windows and exits (counters are kept). */
SPROBE_API
void sprobe_pause__clear(struct sprobe_pause *p);

/* Copy the counters into *out (missed is read from the kernel's program
 * info). Returns 0, -EINVAL, or -errno from the kernel. Thread-safe. */
SPROBE_API
int sprobe_pause__stats(const struct sprobe_pause *p, struct sprobe_pause_stats *out);

/* Fill out[0..SPROBE_PAUSE_NPROGS) with each program's run count and run
 * time. Returns the number filled or -errno. Thread-safe. */
SPROBE_API
int sprobe_pause__prog_stats(const struct sprobe_pause *p,
			     struct sprobe_pause_prog_stats *out, size_t n);

/*
 * The perf-style explanation of err (a negative errno returned by the
 * loader) for the current process: which capability or setting is missing
 * and the exact next step. Writes at most len bytes, NUL-terminated.
 * Returns buf. Thread-safe.
 */
SPROBE_API
const char *sprobe_pause__strerror(int err, char *buf, size_t len);

/* ------------------------------------------------------------------ */
/* Matcher                                                             */

/* Why a window has no partner. */
enum sprobe_pause_reason {
	SPROBE_PAUSE_R_NONE = 0,
	/* kernel side */
	SPROBE_PAUSE_R_INCOMPLETE,     /* kernel window has no deliver/sigreturn */
	SPROBE_PAUSE_R_NO_SELF,	       /* handler reported nothing for it (dropped
					* by the capturer, e.g. timed out) */
	SPROBE_PAUSE_R_OUTSIDE_SELF,   /* before the first / after the last self-
					* reported window of that thread */
	/* self side */
	SPROBE_PAUSE_R_NO_KERNEL,      /* the kernel saw no window around it */
	SPROBE_PAUSE_R_KERNEL_LOST,    /* ... and the companion lost events */
	SPROBE_PAUSE_R_OUTSIDE_KERNEL, /* before / after the companion ran */
	SPROBE_PAUSE_R_NOT_CONTAINED,  /* a kernel window overlaps it but does
					* not contain it: clocks disagree */
	SPROBE_PAUSE_R_BAD,	       /* entry > exit or zero timestamps */
	SPROBE_PAUSE_R_SELF_DROPPED,   /* the probe sent the signal but the
					* handler reported no window (capture
					* timed out, thread exited): entry 0,
					* signal_ns set */
	SPROBE_PAUSE_R__COUNT
};

/* Static name of a reason, e.g. "no-self-report". Never NULL. */
SPROBE_API
const char *sprobe_pause_reason__str(enum sprobe_pause_reason r);

struct sprobe_pause_pair {
	uint32_t kernel_idx;	/* index into the kernel input */
	uint32_t self_idx;	/* index into the self input */
};

enum sprobe_pause_side { SPROBE_PAUSE_KERNEL = 0, SPROBE_PAUSE_SELF = 1 };

struct sprobe_pause_unmatched {
	uint32_t side;		/* enum sprobe_pause_side */
	uint32_t idx;		/* index into that side's input */
	uint32_t reason;	/* enum sprobe_pause_reason */
	pid_t tid;
};

/*
 * Distribution of one quantity over matched windows (or, for delivery and
 * off-CPU, over complete kernel windows). Percentiles are nearest-rank:
 * the value at sorted index ceil(q * count) - 1, so median = p50 is an
 * observed value (the lower middle for an even count). All 0 if count 0.
 */
struct sprobe_pause_dist {
	uint64_t count;
	uint64_t median;
	uint64_t p99;
	uint64_t max;
	uint64_t total;
};

struct sprobe_pause_summary {
	pid_t tid;		/* 0 for the overall summary */
	uint32_t matched;
	uint32_t kernel_only;
	uint32_t self_only;
	uint32_t unmatched_by_reason[SPROBE_PAUSE_R__COUNT];
	struct sprobe_pause_dist delivery;    /* deliver - generate */
	struct sprobe_pause_dist kernel_pause;/* sigreturn - deliver */
	struct sprobe_pause_dist self_pause;  /* exit - entry (matched) */
	struct sprobe_pause_dist difference;  /* kernel - self pause (matched) */
	struct sprobe_pause_dist offcpu;      /* offcpu_ns (complete windows) */
	struct sprobe_pause_dist runq;	      /* runq_ns (complete windows) */
	/* kernel_pause.total / wall_ns (opts), 0 if wall_ns is 0. */
	double pause_share;
};

struct sprobe_pause_merge_opts {
	size_t sz;		/* sizeof(struct sprobe_pause_merge_opts) */
	/* Allowed clock disagreement when testing containment
	 * (deliver <= entry + slack, exit <= sigreturn + slack). 0: exact. */
	uint64_t slack_ns;
	/* Wall time of the recording, for pause_share; 0: not computed. */
	uint64_t wall_ns;
	/* The companion's lost + no_state + missed counters: non-zero turns
	 * NO_KERNEL into KERNEL_LOST. */
	uint64_t kernel_lost;
};

struct sprobe_pause_merge;

/*
 * Match kernel windows kw[0..nk) with self-reported windows sw[0..ns): a
 * pair is a kernel window of the same tid that contains the self window
 * (deliver <= entry and exit <= sigreturn, within slack). Within a thread
 * windows do not overlap, so each side is walked in time order and every
 * window is in at most one pair. Inputs may be in any order; they are not
 * modified and not kept. Pure: the result depends on the inputs only.
 * Returns a new result owned by the caller (sprobe_pause_merge__free()),
 * or NULL with errno EINVAL (NULL array with a non-zero count, counts above
 * UINT32_MAX) or ENOMEM. Thread-safe (no shared state).
 */
SPROBE_API
struct sprobe_pause_merge *sprobe_pause_merge__new(const struct sprobe_pause_kwindow *kw,
						   size_t nk,
						   const struct sprobe_pause_swindow *sw,
						   size_t ns,
						   const struct sprobe_pause_merge_opts *opts);
/* Accepts NULL. */
SPROBE_API
void sprobe_pause_merge__free(struct sprobe_pause_merge *m);

/* The pairs, ordered by tid then time. Owned by m. */
SPROBE_API
const struct sprobe_pause_pair *sprobe_pause_merge__pairs(const struct sprobe_pause_merge *m,
							   size_t *n);
/* Windows without a partner, with the reason. Owned by m. */
SPROBE_API
const struct sprobe_pause_unmatched *
sprobe_pause_merge__unmatched(const struct sprobe_pause_merge *m, size_t *n);
/* One summary per thread seen on either side, ordered by tid. Owned by m. */
SPROBE_API
const struct sprobe_pause_summary *sprobe_pause_merge__threads(const struct sprobe_pause_merge *m,
							       size_t *n);
/* The summary over all threads (tid 0). Owned by m. */
SPROBE_API
const struct sprobe_pause_summary *sprobe_pause_merge__overall(const struct sprobe_pause_merge *m);

/*
 * Print the pause section (overall, then per thread) as text. Returns 0 or
 * -errno (-EIO on a write error). Not async-signal-safe.
 */
SPROBE_API
int sprobe_pause_merge__print(const struct sprobe_pause_merge *m, FILE *f);

/* ------------------------------------------------------------------ */
/* Zero-pause check                                                    */

/* One zero-pause sample (method SPROBE_METHOD_ZERO_PAUSE): the thread was
 * read without a signal during [start_ns, end_ns] (its capture round). */
struct sprobe_pause_zp_sample {
	pid_t tid;
	uint32_t _pad;
	uint64_t start_ns, end_ns;
};

/* What the kernel says about the zero-pause samples. */
struct sprobe_pause_zp_check {
	uint64_t samples;	/* zero-pause samples checked */
	/* Inside the span the companion observed (its first to its last
	 * window) and no capture signal of that thread was generated or
	 * delivered during the sample's round: the kernel confirms 0 ns. */
	uint64_t confirmed;
	/* A capture signal of that thread was generated or delivered during
	 * the round: the sample's "no signal" claim is contradicted. */
	uint64_t signalled;
	/* Outside the span the companion observed (or no kernel windows at
	 * all): no claim either way. */
	uint64_t outside;
	/* The companion lost events (kernel_lost != 0): a confirmation is
	 * only as good as the trace. */
	uint64_t kernel_lost;
};

/*
 * Check zero-pause samples zs[0..nz) against the kernel windows kw[0..nk)
 * of the same recording (the eBPF companion sees every capture signal
 * generated for, and delivered to, each thread of the target). Fills *out.
 * Returns 0, -EINVAL (NULL out, or NULL array with a non-zero count),
 * -ENOMEM. Pure (allocates scratch); thread-safe; not async-signal-safe.
 */
SPROBE_API
int sprobe_pause_zp__check(const struct sprobe_pause_kwindow *kw, size_t nk,
			   const struct sprobe_pause_zp_sample *zs, size_t nz,
			   uint64_t kernel_lost, struct sprobe_pause_zp_check *out);

/* Print a check as the pause report's "zero-pause" lines. */
SPROBE_API
void sprobe_pause_zp__print(const struct sprobe_pause_zp_check *c, FILE *o);

#ifdef __cplusplus
}
#endif
#endif /* STACKPROBE_PAUSE_H */
