/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The wrappers of every libc entry point that sets a signal disposition
 * or blocks a signal. Every non-static function here is a libc wrapper,
 * listed in userspace/libstackprobe.map (tests/exports_test.sh checks).
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#include "backends/linux/chain.h"
#include "userspace/agent/agent_internal.h"

/*
 * The capture signal is shared (userspace/agent/signal_share.c,
 * backends/linux/chain.c): a program that installs its own handler for it,
 * whenever it does, gets every delivery that is not one of the probe's
 * captures with its own flags and mask, reads back its own disposition,
 * and sampling goes on. The wrappers route a call on the shared signal to
 * signal_share.c and every other call to libc.
 *
 * Every libc entry point that sets a disposition is wrapped, because libc
 * calls its internal sigaction, which an interposer never sees: sigaction,
 * __sigaction, signal, bsd_signal, ssignal, sysv_signal and __sysv_signal
 * (what signal() becomes in a program built without _DEFAULT_SOURCE, e.g.
 * -std=c11), sigset, sigignore. A raw rt_sigaction system call (the Go
 * runtime's) is seen by the capture backend before its next capture round
 * and moved behind the capture handler the same way (chain.c).
 *
 * Sharing is impossible when the program blocks the capture signal to
 * receive it with sigwait/signalfd: a queued capture would be taken by its
 * sigwait. A program that blocks it (sigprocmask, pthread_sigmask, sighold,
 * sigset(SIG_HOLD)) without blocking every real-time signal means to do
 * that: the agent yields the signal (sampling stops, the data file is
 * finished, a line on stderr says why) and the program's call goes through
 * unchanged. A set holding every real-time signal (sigfillset: a thread
 * that wants no signal at all) is not a use of ours: that thread is
 * dropped as "blocked" in each capture, and the others are sampled.
 *
 * The wrappers may run in any thread, and signal()-style re-installs even
 * in a signal handler: they read sprobe_ag.signo atomically, find the next
 * definition resolved at load time, and only the first call that takes the
 * signal stops the sampler.
 */
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef sighandler_t (*signal_fn)(int, sighandler_t);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);
typedef int (*sigint_fn)(int);

/* Exported by glibc, declared by no header (or only under old feature
 * macros). */
int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
sighandler_t bsd_signal(int sig, sighandler_t handler);
sighandler_t ssignal(int sig, sighandler_t handler);
sighandler_t sysv_signal(int sig, sighandler_t handler);
sighandler_t __sysv_signal(int sig, sighandler_t handler);

/* dlsym(RTLD_NEXT) once per entry point: the mask calls can be hot.
 * Relaxed load and store: racing threads store the same value, and the
 * pointer is to immutable code. */
static void *next_cached(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_RELAXED);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELAXED);
	}
	return f;
}

/* One slot per wrapped entry point, all resolved by wrappers_init() at
 * load time, so that a first call made from a signal handler (the mask
 * functions and signal() are async-signal-safe in libc) runs no dlsym. */
enum {
	NX_SIGACTION, NX___SIGACTION, NX_SIGNAL, NX_BSD_SIGNAL, NX_SSIGNAL, NX_SYSV_SIGNAL,
	NX___SYSV_SIGNAL, NX_SIGSET, NX_SIGIGNORE, NX_SIGHOLD, NX_SIGPROCMASK,
	NX_PTHREAD_SIGMASK, NX__COUNT
};
static const char *const next_names[NX__COUNT] = {
	"sigaction", "__sigaction", "signal", "bsd_signal", "ssignal", "sysv_signal",
	"__sysv_signal", "sigset", "sigignore", "sighold", "sigprocmask", "pthread_sigmask",
};
static void *next_slots[NX__COUNT];

#define NEXT(type, idx) ((type)next_cached(&next_slots[idx], next_names[idx]))

__attribute__((constructor)) static void wrappers_init(void)
{
	for (int i = 0; i < NX__COUNT; i++)
		next_cached(&next_slots[i], next_names[i]);
}

/* The program takes sig (verb: what it does to it). Stops sampling once. */
static void agent_yield_signal(int sig, const char *verb)
{
	int expect = sig;

	if (sig <= 0 || !sprobe_agent__active())
		return;
	/* Acq_rel; pairs with itself in a racing wrapper: one thread wins. */
	if (!__atomic_compare_exchange_n(&sprobe_ag.signo, &expect, 0, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	char what[96];
	snprintf(what, sizeof(what), "%s signal %d", verb, sig);
	sprobe_agent__msg("the program %s, the capture signal: sampling stopped%s (set STACKPROBE_SIGNAL "
			  "to a signal it does not use)", what, "");
	sprobe_agent__stop();
}

static int capture_signo(void)
{
	return __atomic_load_n(&sprobe_ag.signo, __ATOMIC_RELAXED);
}

/* Does this mask change block the capture signal on purpose? (see above) */
static bool targets_capture_signal(int how, const sigset_t *set)
{
	int sig = capture_signo();

	if (!sig || !set || how == SIG_UNBLOCK || sigismember(set, sig) != 1)
		return false;
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		if (s != sig && sigismember(set, s) != 1)
			return true;
	return false; /* every real-time signal: "block everything" */
}

/* sigaction() and glibc's __sigaction: same shape, a different next
 * definition. A query (act NULL) takes nothing. */
#define SIGACTION_WRAPPER(name, idx)                                                   \
	int name(int sig, const struct sigaction *act, struct sigaction *old)           \
	{                                                                               \
		sigaction_fn f = NEXT(sigaction_fn, idx);                               \
		if (sprobe_lx_chain_owns(sig))                                          \
			return sprobe_agent__share_sigaction(sig, act, old);            \
		if (!f) {                                                               \
			errno = ENOSYS;                                                 \
			return -1;                                                      \
		}                                                                       \
		/* the program's handler behind a trampoline (handler_table.c) */     \
		return sprobe_agent__sigaction(f, sig, act, old);                       \
	}

SIGACTION_WRAPPER(sigaction, NX_SIGACTION)
SIGACTION_WRAPPER(__sigaction, NX___SIGACTION)

/* signal() and its aliases: same shape, a different next definition. */
#define SIGNAL_WRAPPER(name, idx, flavour)                                        \
	sighandler_t name(int sig, sighandler_t handler)                          \
	{                                                                         \
		signal_fn f = NEXT(signal_fn, idx);                               \
		if (sprobe_lx_chain_owns(sig))                                    \
			return sprobe_agent__share_signal(sig, handler, flavour); \
		if (!f) {                                                         \
			errno = ENOSYS;                                           \
			return SIG_ERR;                                           \
		}                                                                 \
		/* the program's handler behind a trampoline (handler_table.c) */ \
		return sprobe_agent__signal(f, sig, handler);                     \
	}

SIGNAL_WRAPPER(signal, NX_SIGNAL, SPROBE_SHARE_BSD)
SIGNAL_WRAPPER(bsd_signal, NX_BSD_SIGNAL, SPROBE_SHARE_BSD)
SIGNAL_WRAPPER(ssignal, NX_SSIGNAL, SPROBE_SHARE_BSD)
SIGNAL_WRAPPER(sysv_signal, NX_SYSV_SIGNAL, SPROBE_SHARE_SYSV)
SIGNAL_WRAPPER(__sysv_signal, NX___SYSV_SIGNAL, SPROBE_SHARE_SYSV)

sighandler_t sigset(int sig, sighandler_t disp)
{
	signal_fn f = NEXT(signal_fn, NX_SIGSET);
	if (disp == SIG_HOLD)
		agent_yield_signal(sig, "blocks");
	else if (sprobe_lx_chain_owns(sig))
		return sprobe_agent__share_signal(sig, disp, SPROBE_SHARE_SIGSET);
	if (!f) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	/* the program's handler behind a trampoline (handler_table.c) */
	return sprobe_agent__signal(f, sig, disp);
}

int sigignore(int sig)
{
	sigint_fn f = NEXT(sigint_fn, NX_SIGIGNORE);
	if (sprobe_lx_chain_owns(sig))
		return sprobe_agent__share_signal(sig, SIG_IGN, SPROBE_SHARE_BSD) == SIG_ERR ? -1 : 0;
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(sig);
}

int sighold(int sig)
{
	sigint_fn f = NEXT(sigint_fn, NX_SIGHOLD);
	agent_yield_signal(sig, "blocks");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(sig);
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	sigmask_fn f = NEXT(sigmask_fn, NX_SIGPROCMASK);
	if (targets_capture_signal(how, set))
		agent_yield_signal(capture_signo(), "blocks");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(how, set, old);
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigmask_fn f = NEXT(sigmask_fn, NX_PTHREAD_SIGMASK);
	if (targets_capture_signal(how, set))
		agent_yield_signal(capture_signo(), "blocks");
	if (!f)
		return ENOSYS;
	return f(how, set, old);
}
