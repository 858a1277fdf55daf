/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program that takes the capture signal for itself while the agent
 * samples it, for tests/test_signal_share.c: the agent must share the
 * signal (its captures go on, the program gets exactly its own signals).
 *
 *   sigshare VIA SIG [EVENTS]
 *
 * VIA: sigaction (SA_SIGINFO handler, SIGUSR1 in sa_mask), signal
 * (one-argument handler, BSD semantics), sysv (sysv_signal: SA_RESETHAND,
 * the handler re-installs itself), raw (SA_SIGINFO handler installed with
 * the rt_sigaction system call, as the Go runtime does), ign (SIG_IGN),
 * dfl (nothing installed: the first signal must end the process by its
 * default action, as it would without the agent).
 *
 * Computes (so the agent samples something), installs, prints
 *   installed_ns T        CLOCK_MONOTONIC right after the install
 *   readback ok|bad       sigaction(SIG, NULL, &old) names its handler
 * then sends itself SIG EVENTS times with kill() and EVENTS times with
 * sigqueue() (values 0x5150000 + i), each time waiting until its handler
 * saw it (not for ign), computes again (in after_install(), a function the
 * test looks for in the samples), and prints
 *   user N                kill()s received (SI_USER from its own pid)
 *   queue N               sigqueue()s received, each value once
 *   strays N              SI_TIMER, or SI_QUEUE from its own pid with a
 *                         value it did not send: captures (after a raw
 *                         install, until the probe's next round)
 *   foreign N             anything else
 *   maskbad N             handler runs without SIG or sa_mask blocked
 *   work N                the computation's result
 * Exit status 0, 2 on a usage error, 3 when a call failed or a signal
 * never arrived (10 s).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef void (*handler_t)(int);
extern handler_t sysv_signal(int, handler_t);

#define VALUE_BASE 0x5150000

static int sig;
static const char *via;
static _Atomic unsigned long user, queued, foreign, strays, maskbad, plain;
static _Atomic uint64_t qseen[4]; /* bitmap of sigqueue values seen */

static void fail(const char *what)
{
	fprintf(stderr, "sigshare: %s: %s\n", what, strerror(errno));
	exit(3);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The kernel's mask for the handler: SIG itself (no SA_NODEFER) and, for
 * sigaction, the SIGUSR1 of its sa_mask. */
static void check_mask(bool usr1)
{
	sigset_t cur;

	if (pthread_sigmask(SIG_BLOCK, NULL, &cur) != 0 || sigismember(&cur, sig) != 1 ||
	    (usr1 && sigismember(&cur, SIGUSR1) != 1))
		atomic_fetch_add(&maskbad, 1);
}

static void info_handler(int s, siginfo_t *si, void *uc)
{
	(void)uc;
	if (s != sig) {
		atomic_fetch_add(&foreign, 1);
		return;
	}
	check_mask(!strcmp(via, "sigaction"));
	long v = (long)si->si_value.sival_int;
	if (si->si_code == SI_USER && si->si_pid == getpid()) {
		atomic_fetch_add(&user, 1);
	} else if (si->si_code == SI_QUEUE && si->si_pid == getpid() && v >= VALUE_BASE &&
		   v < VALUE_BASE + 256) {
		uint64_t bit = 1ull << ((v - VALUE_BASE) % 64);
		uint64_t was = atomic_fetch_or(&qseen[(v - VALUE_BASE) / 64], bit);
		if (was & bit)
			atomic_fetch_add(&foreign, 1); /* the same value twice */
		else
			atomic_fetch_add(&queued, 1);
	} else if (si->si_code == SI_TIMER || (si->si_code == SI_QUEUE && si->si_pid == getpid())) {
		atomic_fetch_add(&strays, 1); /* what a capture looks like */
	} else {
		atomic_fetch_add(&foreign, 1);
	}
}

static void plain_handler(int s)
{
	if (s != sig) {
		atomic_fetch_add(&foreign, 1);
		return;
	}
	/* sysv: SA_NODEFER, the signal is not blocked in the handler. */
	if (strcmp(via, "sysv") != 0)
		check_mask(false);
	atomic_fetch_add(&plain, 1);
	if (!strcmp(via, "sysv"))
		sysv_signal(s, plain_handler); /* SA_RESETHAND reset it */
}

/* The kernel's struct sigaction on x86_64 and aarch64. */
struct ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

/* info_handler with the rt_sigaction system call, bypassing libc (and the
 * agent). x86_64 needs a restorer: borrow libc's from a signal it set up. */
static void raw_install(void)
{
	struct sigaction sa;
	struct ksigaction k, probe;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGURG, &sa, NULL) != 0)
		fail("sigaction SIGURG");
	if (syscall(SYS_rt_sigaction, SIGURG, NULL, &probe, sizeof(uint64_t)) != 0)
		fail("rt_sigaction query");
	memset(&k, 0, sizeof(k));
	k.handler = (void *)info_handler;
	k.flags = SA_SIGINFO | SA_RESTART | (probe.flags & 0x04000000 /* SA_RESTORER */);
	k.restorer = probe.restorer;
	if (syscall(SYS_rt_sigaction, sig, &k, NULL, sizeof(uint64_t)) != 0)
		fail("rt_sigaction");
}

__attribute__((noinline)) static unsigned long work(unsigned long n)
{
	volatile unsigned long x = 1;
	for (unsigned long i = 0; i < n; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

/* The computation after the install: its samples show sampling went on. */
__attribute__((noinline)) static unsigned long after_install(unsigned long n)
{
	unsigned long r = work(n);
	__asm__ volatile("" ::: "memory");
	return r;
}

static bool readback(void)
{
	struct sigaction cur;

	if (sigaction(sig, NULL, &cur) != 0)
		return false;
	if (!strcmp(via, "sigaction") || !strcmp(via, "raw"))
		return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == info_handler &&
		       (strcmp(via, "sigaction") || sigismember(&cur.sa_mask, SIGUSR1) == 1);
	if (!strcmp(via, "signal") || !strcmp(via, "sysv"))
		return !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == plain_handler;
	if (!strcmp(via, "ign"))
		return cur.sa_handler == SIG_IGN;
	return cur.sa_handler == SIG_DFL;
}

static unsigned long received(void)
{
	return atomic_load(&user) + atomic_load(&queued) + atomic_load(&foreign) +
	       atomic_load(&plain); /* not strays: those are not the program's */
}

/* Spin until the handler has seen `want` signals (10 s at most). */
static void wait_for(unsigned long want)
{
	uint64_t t0 = now_ns();

	while (received() < want)
		if (now_ns() - t0 > 10000000000ull) {
			fprintf(stderr, "sigshare: signal %lu never arrived\n", want);
			exit(3);
		}
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: sigshare VIA SIG [EVENTS]\n");
		return 2;
	}
	via = argv[1];
	sig = atoi(argv[2]);
	int events = argc > 3 ? atoi(argv[3]) : 50;
	if (sig < SIGRTMIN || sig > SIGRTMAX || events < 1 || events > 256)
		return 2;
	unsigned long w = work(50000000);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = info_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	if (!strcmp(via, "sigaction")) {
		if (sigaction(sig, &sa, NULL) != 0)
			fail(via);
	} else if (!strcmp(via, "signal")) {
		if (signal(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "sysv")) {
		if (sysv_signal(sig, plain_handler) == SIG_ERR)
			fail(via);
	} else if (!strcmp(via, "raw")) {
		raw_install();
	} else if (!strcmp(via, "ign")) {
		if (signal(sig, SIG_IGN) == SIG_ERR)
			fail(via);
	} else if (strcmp(via, "dfl") != 0) {
		fprintf(stderr, "sigshare: unknown VIA %s\n", via);
		return 2;
	}
	printf("installed_ns %llu\nreadback %s\n", (unsigned long long)now_ns(),
	       readback() ? "ok" : "bad");
	fflush(stdout);

	bool wait = strcmp(via, "ign") != 0;
	for (int i = 0; i < events; i++) {
		if (kill(getpid(), sig) != 0)
			fail("kill");
		if (wait)
			wait_for((unsigned long)i + 1);
	}
	for (int i = 0; i < events; i++) {
		union sigval v = { .sival_int = VALUE_BASE + i };
		if (sigqueue(getpid(), sig, v) != 0)
			fail("sigqueue");
		if (wait)
			wait_for((unsigned long)events + (unsigned long)i + 1);
	}
	w += after_install(200000000);
	printf("user %lu\nqueue %lu\nforeign %lu\nstrays %lu\nplain %lu\nmaskbad %lu\nwork %lu\n",
	       atomic_load(&user), atomic_load(&queued), atomic_load(&foreign),
	       atomic_load(&strays), atomic_load(&plain), atomic_load(&maskbad), w);
	return 0;
}
