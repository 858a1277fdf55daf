/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the agent's files share (userspace/agent/): the LD_PRELOAD agent's
 * state and configuration (state.c, a leaf every other file reads), its
 * start (agent.c, the one file that orchestrates), and the libc wrappers
 * around it. Shared by the folder only: no agent_internal.c, so including
 * it is no dependency on any one file.
 *
 * Hidden: these are shared between the agent's files, not interposed, so
 * they must not be exported (the version script's sprobe_* pattern would
 * export them otherwise; tests/exports_test.sh checks).
 */
#ifndef SPROBE_USERSPACE_AGENT_AGENT_INTERNAL_H
#define SPROBE_USERSPACE_AGENT_AGENT_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <stackprobe/sampler.h>

#pragma GCC visibility push(hidden)

/* ---- the agent's state (state.c) ---- */
/* Written by the constructor (agent.c) before any thread of the agent
 * runs and, for sampler and signo, by whoever starts or stops a sampler
 * (ondemand.c under od_lock, sprobe_agent__stop, the signal wrappers);
 * read anywhere. */
struct sprobe_agent_state {
	/* This image's one sampler (NULL: none); a fork child inherits the
	 * pointer but not its threads: pid tells. Acquire/release exchanges
	 * in sprobe_agent__stop() and ondemand.c. */
	struct sprobe_sampler *sampler;
	pid_t pid;
	/* The capture signal chosen (0: none); relaxed loads by the
	 * wrappers, compare-exchange when the program takes it. */
	int signo;
	bool quiet;
	/* Where data goes (one of dir, output), whether children are
	 * followed, this image's exec index, whether this process descends
	 * from the one the recording started in, the rate. */
	char *dir;
	char *output;
	bool inherit;
	unsigned exec_index;
	bool descendant;
	double freq;
	bool exit_registered;
	/* On demand (ondemand.c): the control channel or continuous
	 * profiling runs (control); STACKPROBE_AGENT=idle keeps no sampler
	 * between recordings (idle); STACKPROBE_SIGNAL was given
	 * (signo_fixed); STACKPROBE_PPROF_DIR drives the samplers
	 * (continuous). base: the options the constructor read, for the
	 * samplers started later (its strings owned here). Release stores,
	 * once: base is complete (base_ready) or the constructor gave up
	 * (ctor_done); acquire loads in sprobe_agent__ondemand_ready(). */
	bool control, idle, signo_fixed, continuous;
	bool base_ready, ctor_done;
	struct sprobe_sampler_opts base;
	/* Serialises on-demand starts and stops with each other and with
	 * sprobe_agent__stop() (exit, exec). */
	pthread_mutex_t od_lock;
};
extern struct sprobe_agent_state sprobe_ag;

/* A message for the person recording: to DIR/events under `record`
 * (record prints it), else to stderr; nothing with STACKPROBE_QUIET=1.
 * msg formats fmt with two strings after "stackprobe agent: ". notice is
 * sprobe_sampler_opts.notice. Not async-signal-safe. */
void sprobe_agent__say(const char *prefix, const char *text);
void sprobe_agent__msg(const char *fmt, const char *a, const char *b);
void sprobe_agent__notice(void *ctx, const char *line);
/* Register the on_exit handler that stops the sampler and notes the exit
 * status in DIR/events, once per process tree (a fork child inherits it
 * and it checks the pid). */
void sprobe_agent__at_exit_once(void);

/* The capture signal of the sampler the agent runs in this process, 0 when
 * it runs none (never started, stopped, or the signal was yielded to the
 * program). Any thread; async-signal-safe (one relaxed load). */
int sprobe_agent__capture_signo(void);

/* ---- the program's handlers behind trampolines (handler_table.c) ---- */
typedef int (*sprobe_sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*sprobe_signal_fn)(int, sighandler_t);

/* How many times a handler of the program ran on this thread (any
 * handler installed through the wrappers; never the capture handler). A
 * wait wrapper that sees it unchanged across a call that failed with
 * EINTR knows the capture handler interrupted it. */
extern __thread unsigned long sprobe_agent__handler_runs __attribute__((tls_model("initial-exec")));

/* Program handlers running on this thread now (nested count). A handler
 * that leaves by longjmp leaves it raised: readers treat > 0 as "maybe in
 * a handler", which only costs them the work they skip there. */
extern __thread unsigned sprobe_agent__in_handler __attribute__((tls_model("initial-exec")));

/* sigaction(sig, act, old) through next (the real one), with act's handler
 * behind the trampoline and old's translated back. For the sigaction and
 * __sigaction wrappers. */
int sprobe_agent__sigaction(sprobe_sigaction_fn next, int sig, const struct sigaction *act,
			    struct sigaction *old);
/* next(sig, handler) (signal() and its aliases, sigset), then the same
 * disposition re-installed with the trampoline; returns the program's
 * previous handler. */
sighandler_t sprobe_agent__signal(sprobe_signal_fn next, int sig, sighandler_t handler);

/* ---- the shared capture signal (signal_share.c) ---- */
/* The flavours of signal(): what glibc makes of each as a sigaction. */
enum { SPROBE_SHARE_BSD, SPROBE_SHARE_SYSV, SPROBE_SHARE_SIGSET };

/* sigaction(sig, act, old) on the shared capture signal: the program's
 * disposition in the capture backend's record (backends/linux/chain.h),
 * through the handler table. 0, or -1 with errno. */
int sprobe_agent__share_sigaction(int sig, const struct sigaction *act, struct sigaction *old);
/* signal()-family on the shared capture signal (flavour SPROBE_SHARE_*):
 * the program's previous handler, or SIG_ERR with errno. */
sighandler_t sprobe_agent__share_signal(int sig, sighandler_t handler, int flavour);

/* ---- the wait wrappers' switch (state.c) ---- */
/* false when STACKPROBE_RESUME_WAITS=0: no resume, no trampoline. */
bool sprobe_agent__resume_waits(void);

/* ---- the environment (state.c) ---- */
/* getenv/setenv/unsetenv as libc has them, whatever the program defines:
 * bash exports its own getenv and setenv, which read and write its shell
 * variables (after bash's setenv, its getenv no longer sees the
 * environment at all; and its getenv result is freed by the next call).
 * sprobe_agent__getenv() scans libc's environ: the result stays valid
 * until the environment changes. */
const char *sprobe_agent__getenv(const char *name);
int sprobe_agent__setenv(const char *name, const char *value);
int sprobe_agent__unsetenv(const char *name);

/* ---- the process tree (state.c, process_wrappers.c) ---- */
/* Is the agent sampling in this very process (not a forked child that
 * has not started its own sampler)? Any thread. */
bool sprobe_agent__active(void);
/* Stop sampling in this process (flush, trailer); no-op elsewhere. Not
 * async-signal-safe. */
void sprobe_agent__stop(void);
/* The recording's directory (STACKPROBE_OUTPUT_DIR) or NULL: where the
 * parts go and the events file is appended to. */
const char *sprobe_agent__dir(void);
/* This image's exec index, and whether children are followed. */
unsigned sprobe_agent__exec_index(void);
bool sprobe_agent__inherit(void);
/* The capture rate (for the forked child's start delay). */
double sprobe_agent__freq(void);
/* Append one line to DIR/events (no-op without a directory). How each
 * process ended, as its agent or its parent saw it, and processes the
 * agent could not enter:
 *   "exit PID EXEC HOW CODE MONO_NS"  (HOW: enum sprobe_df_exit_how)
 *   "unsampled PID EXEC MONO_NS PATH\tREASON"
 * One write(2) per line to an O_APPEND file: lines never interleave. */
void sprobe_agent__event(const char *line, size_t len);
/* In a fork child: did the parent sample (its inert sampler came along)?
 * And give that copy up (sprobe_sampler__forget(), the descriptor
 * registry's atfork reset) so that a new sampler can start. */
bool sprobe_agent__forked_from_sampler(void);
void sprobe_agent__forget_parent(void);
/* Register the fork handler (process_wrappers.c); called by the agent's
 * constructor when it samples (later calls do nothing). In a fork child
 * of a sampling process, a thread calls start_forked one capture period
 * later: it starts the child's sampler (a new part, exec index 0). */
void sprobe_agent__process_init(void (*start_forked)(void));
/* Is the program at PATH one the agent cannot enter (statically linked,
 * set-user/group-ID)? Returns SPROBE_ENTER_STATIC or _SETID with why
 * filled ("statically linked: ..."), else SPROBE_ENTER_OK (0)
 * (userspace/common/enterable.h). */
int sprobe_agent__unenterable(const char *path, char *why, size_t len);

/* Ask `record` to sample this process through the kernel from its next
 * image (exec_index next_exec) on, before an exec of path, which the
 * agent cannot enter for why (userspace/agent/external_request.c). True
 * when record took it; false with answer saying why not ("" when there
 * is no record to ask). Blocks up to a few seconds. */
bool sprobe_agent__ask_external(unsigned next_exec, const char *path, const char *why,
				char *answer, size_t alen);
/* The same for a set-ID program, which the kernel can only sample once it
 * runs: record attaches right after the exec (external_request.c). */
bool sprobe_agent__ask_attach_at_exec(unsigned next_exec, const char *path, const char *why,
				      char *answer, size_t alen);
/* The same for a static or set-ID child posix_spawn made (it has exec'd):
 * record attaches to it now. */
bool sprobe_agent__ask_attach_spawned(pid_t child, const char *path, const char *why,
				      char *answer, size_t alen);
/* An exec returned (it failed): forget a pending set-ID request. */
void sprobe_agent__exec_failed(void);

/* ---- on demand (ondemand.c, control.c, continuous.c; docs/AGENT.md "On demand") ---- */
/* Start the control channel's thread (control.c): 0, or -errno after
 * saying why on stderr (unless quiet). Called once by the constructor. */
int sprobe_agent__control_start(bool quiet);
/* The control thread's tid (0: none), left out of every capture. */
pid_t sprobe_agent__control_tid(void);
/* Continuous profiling (continuous.c): start its thread writing a pprof
 * profile per period into DIR; 0 or -errno (said on stderr unless quiet).
 * Its tid (0: none) is left out of the captures. */
int sprobe_agent__continuous_start(const char *dir, bool quiet);
pid_t sprobe_agent__continuous_tid(void);
/* Has the constructor finished with the sampler options (saved, or given
 * up on a bad setting)? Any thread. */
bool sprobe_agent__ondemand_ready(void);
/* Start a sampler writing DIR/PID.EXEC.part (freq <= 0: the rate and mode
 * of the environment) at freq in mode (enum
 * sprobe_sampler_mode), with the options the constructor read; the
 * STACKPROBE_AGENT=1 table sampler makes way meanwhile. *exec_index gets
 * EXEC. 0 or -errno (-EBUSY: no free capture signal). Control thread. */
int sprobe_agent__ondemand_start(const char *dir, double freq, uint32_t mode,
				 unsigned *exec_index);
/* Stop it (trailer written; the table sampler starts again): 0, the
 * -errno of finishing the part, or -ESRCH when it had stopped already
 * (the program exec'd, exited or took the capture signal). */
int sprobe_agent__ondemand_stop(void);

#pragma GCC visibility pop

#endif
