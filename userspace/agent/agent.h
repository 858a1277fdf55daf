/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the agent's files share (userspace/agent/): the LD_PRELOAD agent's
 * start/stop and the libc wrappers around it.
 *
 * Hidden: these are shared between the agent's files, not interposed, so
 * they must not be exported (the version script's sprobe_* pattern would
 * export them otherwise; tests/exports_test.sh checks).
 */
#ifndef SPROBE_USERSPACE_AGENT_AGENT_H
#define SPROBE_USERSPACE_AGENT_AGENT_H

#include <signal.h>
#include <stdbool.h>

#pragma GCC visibility push(hidden)

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

/* ---- the wait wrappers (wait_wrappers.c) ---- */
/* false when STACKPROBE_RESUME_WAITS=0: no resume, no trampoline. */
bool sprobe_agent__resume_waits(void);

#pragma GCC visibility pop

#endif
