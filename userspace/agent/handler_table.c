/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The program's signal handlers, each behind a trampoline that counts its
 * runs per thread (docs/AGENT.md "The program's signal handlers").
 *
 * Why: Linux fails a blocking call with EINTR only when a signal handler
 * ran on that thread during the call (a stop/continue or an ignored signal
 * restarts it or leaves it alone). The wait wrappers (wait_wrappers.c)
 * resume a call that failed with EINTR when no handler *of the program*
 * ran meanwhile: then the handler that ran was the capture handler. To
 * know, every handler the program installs is reached through
 * handler_trampoline(), which increments a per-thread counter before
 * calling it; a wrapper compares the counter before and after its call.
 *
 * What the program sees: its read-back (sigaction's old action, signal()'s
 * return value) is its own handler and flags, never the trampoline; under
 * its handler in a stack trace there is one extra frame
 * (handler_trampoline). The kernel holds the program's flags and mask as
 * given, plus SA_SIGINFO (the trampoline takes three arguments).
 *
 * Not trampolined, installed exactly as given: SIG_DFL, SIG_IGN, the
 * capture signal while it is not shared (signal_share.c: while it is, the
 * capture backend's record stands in for the kernel), and any handler that is a function of
 * this library (the capture handler, whichever signal the backend picks:
 * counting it as the program's would defeat the point). With
 * STACKPROBE_RESUME_WAITS=0 nothing is trampolined.
 *
 * The table: one slot per signal, the program's handler (atomic pointer)
 * and its flags (atomic int). Installs run in any thread and, for
 * signal()-style re-installs, in signal handlers: no lock, no allocation,
 * only atomics and the real sigaction. A slot is written before the
 * trampoline is installed, so a signal delivered at any time finds the new
 * handler or the old one. Two threads installing handlers for the same
 * signal at the same time may see each other's handler as "old": the same
 * race as without the agent, one of the two wins.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/linux/chain.h"
#include "userspace/agent/agent_internal.h"

/* Initial-exec: the library is preloaded (static TLS), and an access is a
 * thread-pointer-relative load, safe in a signal handler (no
 * __tls_get_addr, which may allocate). */
__thread unsigned long sprobe_agent__handler_runs __attribute__((tls_model("initial-exec")));
__thread unsigned sprobe_agent__in_handler __attribute__((tls_model("initial-exec")));

#define NSIG_TABLE 65 /* signals 1..64 */

struct slot {
	void *handler;	/* the program's sa_handler / sa_sigaction */
	int flags;	/* the program's sa_flags (SA_SIGINFO, SA_RESETHAND matter) */
};
static struct slot table[NSIG_TABLE];

static sprobe_sigaction_fn real_sigaction;

/* This library's code, [lo, hi): handlers there are the agent's own. */
static uintptr_t self_lo, self_hi;

static void handler_trampoline(int sig, siginfo_t *si, void *uc);

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t me = (uintptr_t)data, lo = UINTPTR_MAX, hi = 0;
	bool mine = false;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + p->p_vaddr, b = a + p->p_memsz;
		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
		mine |= me >= a && me < b;
	}
	if (!mine)
		return 0;
	self_lo = lo;
	self_hi = hi;
	return 1;
}

/* Resolved at load (a first install may come from a signal handler, where
 * dlsym and dl_iterate_phdr are not safe), and again on the first install
 * if another library's constructor installs a handler before ours ran. */
__attribute__((constructor)) static void handler_table_init(void)
{
	if (!__atomic_load_n(&real_sigaction, __ATOMIC_RELAXED))
		__atomic_store_n(&real_sigaction,
				 (sprobe_sigaction_fn)dlsym(RTLD_NEXT, "sigaction"),
				 __ATOMIC_RELAXED);
	if (!self_hi)
		dl_iterate_phdr(find_self, (void *)(uintptr_t)handler_trampoline);
}

static bool is_handler(void *h)
{
	return h != (void *)SIG_DFL && h != (void *)SIG_IGN && h != (void *)SIG_ERR &&
	       h != (void *)SIG_HOLD;
}

/* Does an install of handler h on sig go through the trampoline? */
static bool trampolined(int sig, void *h)
{
	uintptr_t a = (uintptr_t)h;

	if (sig < 1 || sig >= NSIG_TABLE || sig == SIGKILL || sig == SIGSTOP || !is_handler(h))
		return false;
	if (!sprobe_agent__resume_waits())
		return false;
	handler_table_init();
	if (!real_sigaction || (a >= self_lo && a < self_hi))
		return false;
	/* The capture signal only while it is shared (signal_share.c): the
	 * program's handler is then called by the capture handler, through
	 * the trampoline like any other. */
	return sig != sprobe_agent__capture_signo() || sprobe_lx_chain_owns(sig);
}

/*
 * The program's handler runs here. The counter is incremented before the
 * call so that a handler that never returns (siglongjmp) is counted too.
 *
 * The program's handler is always called with three arguments: a
 * one-argument handler (installed without SA_SIGINFO) called with three is
 * ABI-safe on x86_64 and aarch64 (the only architectures stackprobe
 * builds on): arguments travel in registers, the caller cleans up, and the
 * callee ignores the registers it does not read.
 */
static void handler_trampoline(int sig, siginfo_t *si, void *uc)
{
	__atomic_fetch_add(&sprobe_agent__handler_runs, 1, __ATOMIC_RELAXED);
	struct slot *s = &table[sig];
	void *h = __atomic_load_n(&s->handler, __ATOMIC_ACQUIRE);
	int flags = __atomic_load_n(&s->flags, __ATOMIC_RELAXED);

	/* SA_RESETHAND: the kernel already reset the disposition to SIG_DFL
	 * on delivery; the table follows (unless another install replaced
	 * the slot meanwhile: then that one stands). */
	if (flags & SA_RESETHAND) {
		void *expect = h;
		__atomic_compare_exchange_n(&s->handler, &expect, (void *)SIG_DFL, false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	}
	if (h == (void *)SIG_IGN)
		return;
	if (!is_handler(h)) {
		/* Only in a race with an install of SIG_DFL (the kernel still
		 * had the trampoline): give the signal its default action. It
		 * is blocked while this runs (or SA_NODEFER: then it is
		 * delivered at once), so it lands when the handler returns. */
		int saved = errno;
		struct sigaction dfl;
		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		if (real_sigaction)
			real_sigaction(sig, &dfl, NULL);
		syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
		errno = saved;
		return;
	}
	__atomic_fetch_add(&sprobe_agent__in_handler, 1, __ATOMIC_RELAXED);
	((void (*)(int, siginfo_t *, void *))h)(sig, si, uc);
	__atomic_fetch_sub(&sprobe_agent__in_handler, 1, __ATOMIC_RELAXED);
}

/* What the program sees of a disposition the kernel holds: the trampoline
 * becomes the program's handler and flags (as the slot was before an
 * install: prev). */
static void translate(struct sigaction *sa, const struct slot *prev)
{
	/* SA_RESETHAND ran: the kernel reset the handler but kept the flags,
	 * with the SA_SIGINFO that was the trampoline's, not the program's. */
	if (sa->sa_handler == SIG_DFL && prev->handler == (void *)SIG_DFL &&
	    (prev->flags & SA_RESETHAND) && !(prev->flags & SA_SIGINFO)) {
		sa->sa_flags &= ~SA_SIGINFO;
		return;
	}
	if (!(sa->sa_flags & SA_SIGINFO) || sa->sa_sigaction != handler_trampoline)
		return;
	if (prev->flags & SA_SIGINFO) {
		sa->sa_sigaction = (void (*)(int, siginfo_t *, void *))prev->handler;
	} else {
		sa->sa_handler = (sighandler_t)prev->handler;
		sa->sa_flags &= ~SA_SIGINFO;
	}
}

static void load_slot(int sig, struct slot *out)
{
	out->handler = __atomic_load_n(&table[sig].handler, __ATOMIC_ACQUIRE);
	out->flags = __atomic_load_n(&table[sig].flags, __ATOMIC_RELAXED);
}

/* Flags first, then the handler (release): the trampoline loads the
 * handler (acquire), then the flags. */
static void store_slot(int sig, void *h, int flags)
{
	__atomic_store_n(&table[sig].flags, flags, __ATOMIC_RELAXED);
	__atomic_store_n(&table[sig].handler, h, __ATOMIC_RELEASE);
}

int sprobe_agent__sigaction(sprobe_sigaction_fn next, int sig, const struct sigaction *act,
			    struct sigaction *old)
{
	struct slot prev = { 0 };
	int r;

	if (sig >= 1 && sig < NSIG_TABLE)
		load_slot(sig, &prev);
	if (act && trampolined(sig, (void *)act->sa_handler)) {
		struct sigaction t = *act;
		store_slot(sig, (void *)act->sa_handler, act->sa_flags);
		t.sa_sigaction = handler_trampoline;
		t.sa_flags |= SA_SIGINFO;
		r = next(sig, &t, old);
		if (r != 0)
			store_slot(sig, prev.handler, prev.flags);
	} else {
		r = next(sig, act, old);
		/* The kernel no longer holds the trampoline: the slot must not
		 * describe this disposition (translate's SA_RESETHAND case). */
		if (r == 0 && act && sig >= 1 && sig < NSIG_TABLE)
			store_slot(sig, NULL, 0);
	}
	if (r == 0 && old)
		translate(old, &prev);
	return r;
}

/* A handler the signal()-family returned: the trampoline is the program's
 * previous handler. */
static sighandler_t translate_handler(sighandler_t h, const struct slot *prev)
{
	return h == (sighandler_t)(void *)handler_trampoline ? (sighandler_t)prev->handler : h;
}

/*
 * signal(), bsd_signal, ssignal, sysv_signal, __sysv_signal, sigset. The
 * real call installs first, so the kernel holds the exact flags and mask
 * that libc gives this flavour (BSD or System V semantics); they are read
 * back and the same disposition is installed again with the trampoline in
 * place of the handler. Between the two installs the program's handler is
 * installed directly: a signal landing in that window runs uncounted (its
 * EINTR would be resumed, as if it had arrived just before the call).
 */
sighandler_t sprobe_agent__signal(sprobe_signal_fn next, int sig, sighandler_t handler)
{
	struct slot prev = { 0 };
	struct sigaction cur;
	sighandler_t r;

	if (sig >= 1 && sig < NSIG_TABLE)
		load_slot(sig, &prev);
	r = next(sig, handler);
	if (r == SIG_ERR)
		return r;
	if (trampolined(sig, (void *)handler) && real_sigaction(sig, NULL, &cur) == 0 &&
	    !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == handler) {
		store_slot(sig, (void *)handler, cur.sa_flags);
		cur.sa_sigaction = handler_trampoline;
		cur.sa_flags |= SA_SIGINFO;
		if (real_sigaction(sig, &cur, NULL) != 0)
			store_slot(sig, prev.handler, prev.flags);
	} else if ((handler == SIG_DFL || handler == SIG_IGN) && sig >= 1 && sig < NSIG_TABLE) {
		store_slot(sig, NULL, 0); /* as in sprobe_agent__sigaction */
	}
	return translate_handler(r, &prev);
}
