/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The program's calls on the shared capture signal (docs/AGENT.md "The
 * capture signal is shared"): the agent's sigaction and signal wrappers
 * (signal_wrappers.c) send a call on the capture signal here while a sampler runs.
 * The program's disposition is recorded by the capture backend
 * (backends/linux/chain.c), which keeps its handler in front in the kernel
 * and gives the program every delivery that is not a capture.
 *
 * A sigaction() goes through the handler table (handler_table.c) like any
 * other, with the backend's record in place of the kernel: the program's
 * handler is reached through the trampoline that counts its runs (the wait
 * wrappers need to know a handler of the program ran), and read-backs are
 * the program's own handler and flags.
 *
 * signal() and its aliases have no sigaction to read back their flags
 * from here (calling libc's would install into the kernel): they become
 * the sigaction glibc makes of them: BSD semantics (signal, bsd_signal,
 * ssignal: SA_RESTART, the signal blocked in its handler), System V
 * (sysv_signal, __sysv_signal: SA_RESETHAND | SA_NODEFER) or sigset's
 * (no flags, the signal unblocked).
 *
 * Async-signal-safe, any thread: atomics and raw system calls underneath
 * (a handler may re-install itself with signal()).
 */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "backends/linux/chain.h"
#include "userspace/agent/agent_internal.h"

static sprobe_sigaction_fn real_sigaction;
static int (*real_sigprocmask)(int, const sigset_t *, sigset_t *);

/* At load: a first call may come from a signal handler (no dlsym there). */
__attribute__((constructor)) static void signal_share_init(void)
{
	real_sigaction = (sprobe_sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	real_sigprocmask = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "sigprocmask");
}

/* sigaction-shaped: the backend's record, or libc's if the sampler
 * stopped sharing between the wrapper's check and here. */
static int chain_next(int sig, const struct sigaction *act, struct sigaction *old)
{
	int r = sprobe_lx_chain_sigaction(sig, act, old);

	if (r == -ENOENT) {
		if (!real_sigaction) {
			errno = ENOSYS;
			return -1;
		}
		return real_sigaction(sig, act, old);
	}
	if (r) {
		errno = -r;
		return -1;
	}
	return 0;
}

int sprobe_agent__share_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return sprobe_agent__sigaction(chain_next, sig, act, old);
}

sighandler_t sprobe_agent__share_signal(int sig, sighandler_t handler, int flavour)
{
	struct sigaction sa, old;
	sigset_t one;

	if (handler == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	if (flavour == SPROBE_SHARE_BSD) {
		sigaddset(&sa.sa_mask, sig);
		sa.sa_flags = SA_RESTART;
	} else if (flavour == SPROBE_SHARE_SYSV) {
		sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	}
	if (sprobe_agent__share_sigaction(sig, &sa, &old) != 0)
		return SIG_ERR;
	if (flavour == SPROBE_SHARE_SIGSET && real_sigprocmask) {
		sigemptyset(&one);
		sigaddset(&one, sig);
		real_sigprocmask(SIG_UNBLOCK, &one, NULL);
	}
	return old.sa_handler;
}
