/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program that takes a real-time signal for itself through one libc entry
 * point, for test_signal_entry_points (tests/test_failure_modes_signals.c): run
 * under the agent with STACKPROBE_SIGNAL naming that signal, the program
 * must keep working and the agent must say it gave the signal up.
 *
 *   sigown VIA SIG [EVENTS]
 *
 * VIA: sigaction __sigaction signal bsd_signal ssignal sysv_signal
 * __sysv_signal sigset sigset_hold sighold sigignore sigprocmask
 * pthread_sigmask raw (a raw rt_sigaction system call, which no wrapper
 * can see) raw_ign (SIG_IGN by the raw system call, then exec itself as
 * `sigown inherited SIG`, which prints "inherited ignore|default|..." on
 * stdout: SIG_IGN is the one disposition exec keeps).
 *
 * Computes for a while (so there is something to sample), takes SIG through
 * VIA, sends itself SIG EVENTS times with pthread_kill() and
 * receives each (in a handler, or with sigwaitinfo() when VIA blocks it),
 * computes again, then prints on stdout:
 *   seen N          signals of its own it received (must be EVENTS; 0 for
 *                   sigignore)
 *   foreign N       signals it received that it did not send (siginfo
 *                   handlers and sigwaitinfo only; must be 0)
 *   work N          the result of the computation
 * and, from a destructor that runs after the agent has stopped, on stderr:
 *   disposition handler|ignore|default   what SIG is set to at the very end
 * Exit status 0, 2 on a usage error, 3 when a call failed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Deprecated or GNU-only entry points, declared here so every one of them
 * is reachable whatever the headers' feature macros say. */
typedef void (*handler_t)(int);
extern handler_t bsd_signal(int, handler_t);
extern handler_t ssignal(int, handler_t);
extern handler_t sysv_signal(int, handler_t);
extern handler_t __sysv_signal(int, handler_t);
extern handler_t sigset(int, handler_t);
extern int sighold(int);
extern int sigignore(int);
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

static int sig;
static const char *via;
static _Atomic unsigned long seen, foreign;

static void fail(const char *what)
{
	fprintf(stderr, "sigown: %s: %s\n", what, strerror(errno));
	exit(3);
}

static void plain_handler(int s)
{
	atomic_fetch_add(&seen, 1);
	/* System V semantics reset the disposition before the handler runs:
	 * the classic program re-installs it. */
	if (!strcmp(via, "sysv_signal"))
		sysv_signal(s, plain_handler);
	else if (!strcmp(via, "__sysv_signal"))
		__sysv_signal(s, plain_handler);
}

/* pthread_kill() to oneself arrives as SI_TKILL in a handler, SI_USER
 * through sigwaitinfo() (glibc); the capture's signals are SI_QUEUE. */
static bool own(const siginfo_t *si)
{
	return (si->si_code == SI_TKILL || si->si_code == SI_USER) && si->si_pid == getpid();
}

static void info_handler(int s, siginfo_t *si, void *uc)
{
	if (own(si))
		atomic_fetch_add(&seen, 1);
	else
		atomic_fetch_add(&foreign, 1);
}

/* The kernel's struct sigaction on x86_64 and aarch64. */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

/* Install info_handler (or SIG_IGN) with the rt_sigaction system call,
 * bypassing libc. x86_64 needs a restorer: borrow libc's, from a signal
 * libc set up. */
static void raw_install(bool ign)
{
	struct sigaction sa;
	struct ksigaction k, probe;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGURG, &sa, NULL) != 0) /* SIGURG: ignored by default anyway */
		fail("sigaction SIGURG");
	if (syscall(SYS_rt_sigaction, SIGURG, NULL, &probe, sizeof(uint64_t)) != 0)
		fail("rt_sigaction query");
	memset(&k, 0, sizeof(k));
	k.handler = ign ? (void *)SIG_IGN : (void *)info_handler;
	k.flags = SA_SIGINFO | SA_RESTART | (probe.flags & 0x04000000 /* SA_RESTORER */);
	k.restorer = probe.restorer;
	if (syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof(uint64_t)) != 0)
		fail("rt_sigaction");
}

static unsigned long work(unsigned long n)
{
	volatile unsigned long x = 1;
	for (unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

static bool blocks(void)
{
	return !strcmp(via, "sighold") || !strcmp(via, "sigset_hold") ||
	       !strcmp(via, "sigprocmask") || !strcmp(via, "pthread_sigmask");
}

static const char *disposition(void)
{
	struct sigaction cur;

	if (sigaction(sig, NULL, &cur) != 0)
		return "unknown";
	return cur.sa_handler == SIG_IGN   ? "ignore"
			: cur.sa_handler == SIG_DFL ? "default"
			: (cur.sa_flags & SA_SIGINFO) ? (cur.sa_sigaction == info_handler ? "handler" : "other")
			: cur.sa_handler == plain_handler ? "handler"
							  : "other";
}

__attribute__((destructor)) static void report_disposition(void)
{
	char line[64];

	if (!sig)
		return;
	int n = snprintf(line, sizeof(line), "disposition %s\n", disposition());
	if (write(2, line, (size_t)n) < 0)
		_exit(3);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: sigown VIA SIG [EVENTS]\n");
		return 2;
	}
	via = argv[1];
	sig = atoi(argv[2]);
	int events = argc > 3 ? atoi(argv[3]) : 100;
	if (sig < SIGRTMIN || sig > SIGRTMAX || events < 1)
		return 2;
	if (!strcmp(via, "inherited")) {
		printf("inherited %s\n", disposition());
		return 0;
	}
	unsigned long w = work(100000000);

	struct sigaction sa;
	sigset_t set;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = info_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (!strcmp(via, "sigaction")) {
		if (sigaction(sig, &sa, NULL) != 0)
			fail(via);
	} else if (!strcmp(via, "__sigaction")) {
		if (__sigaction(sig, &sa, NULL) != 0)
			fail(via);
	} else if (!strcmp(via, "signal")) {
		if (signal(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "bsd_signal")) {
		if (bsd_signal(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "ssignal")) {
		if (ssignal(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "sysv_signal")) {
		if (sysv_signal(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "__sysv_signal")) {
		if (__sysv_signal(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "sigset")) {
		if (sigset(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "sigset_hold")) {
		if (sigset(sig, SIG_HOLD) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "sighold")) {
		if (sighold(sig) != 0)
			fail(via);
	} else if (!strcmp(via, "sigignore")) {
		if (sigignore(sig) != 0)
			fail(via);
	} else if (!strcmp(via, "sigprocmask")) {
		if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
			fail(via);
	} else if (!strcmp(via, "pthread_sigmask")) {
		if ((errno = pthread_sigmask(SIG_BLOCK, &set, NULL)) != 0)
			fail(via);
	} else if (!strcmp(via, "raw")) {
		raw_install(false);
	} else if (!strcmp(via, "raw_ign")) {
		raw_install(true);
	} else {
		fprintf(stderr, "sigown: unknown VIA %s\n", via);
		return 2;
	}

	for (int i = 0; i < events; i++) {
		if ((errno = pthread_kill(pthread_self(), sig)) != 0)
			fail("pthread_kill");
		if (blocks()) {
			siginfo_t si;
			int r;
			while ((r = sigwaitinfo(&set, &si)) < 0 && errno == EINTR)
				;
			if (r < 0)
				fail("sigwaitinfo");
			if (own(&si))
				atomic_fetch_add(&seen, 1);
			else
				atomic_fetch_add(&foreign, 1);
		}
	}
	w += work(100000000);
	printf("seen %lu\nforeign %lu\nwork %lu\n", atomic_load(&seen), atomic_load(&foreign), w);
	if (!strcmp(via, "raw_ign")) {
		fflush(stdout);
		execl("/proc/self/exe", "sigown", "inherited", argv[2], (char *)NULL);
		fail("execl");
	}
	return 0;
}
