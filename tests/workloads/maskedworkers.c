/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Worker threads created the way xz, GLib and thread pools create them:
 * every signal blocked around pthread_create, so each worker starts with a
 * full mask (tests/test_threads.c).
 *
 *   maskedworkers MS [late|attr]
 *       Two workers spin in masked_spin() for MS ms; main waits in
 *       pthread_join. "attr": the full mask is given in the thread
 *       attributes (pthread_attr_setsigmask_np) instead of inherited. "late": each worker blocks every signal itself once
 *       running (raw rt_sigprocmask, which no wrapper sees), so no signal
 *       can reach it; it then prints its CPU time in ns as "cpu TID NS HOW"
 *       (HOW: pthread_sigmask or rt_sigprocmask, the call that blocked).
 *       "latemix": as late, but worker 0 blocks them with sigfillset +
 *       pthread_sigmask (the agent's wrapper lets a full set through)
 *       and worker 1 with the raw system call (tests/test_blocked_perf.c).
 *       "unblock": as late, but after MS/2 ms each worker opens every
 *       signal again (raw rt_sigprocmask), prints "unblocked TID NS" (its
 *       CPU time then) and spins MS/2 ms more in unblocked_spin().
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned long ms;
static int late, by_attr, mix, unblock;
static volatile unsigned long sink;

static unsigned long long ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

__attribute__((noinline)) void masked_spin(unsigned long long end)
{
	unsigned long x = sink;

	while (ns(CLOCK_MONOTONIC) < end)
		for (int i = 0; i < 1000; i++)
			x = x * 6364136223846793005ul + 1;
	sink = x;
}

/* "unblock": the second half, once the signals are open again. */
__attribute__((noinline)) void unblocked_spin(unsigned long long end)
{
	masked_spin(end);
	__asm__ volatile("" ::: "memory"); /* not a tail call: keep this frame */
}

static void *worker(void *arg)
{
	if (late) {
		sigset_t all;

		sigfillset(&all);
		if (mix && arg == NULL)
			pthread_sigmask(SIG_BLOCK, &all, NULL);
		else
			syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
	}
	else {
		/* The program's mask stands, but for at most one real-time
		 * signal (the capture signal, when an agent is loaded). */
		sigset_t cur;
		int open_rt = 0, open_other = 0;

		pthread_sigmask(SIG_SETMASK, NULL, &cur);
		for (int s = 1; s < NSIG; s++) {
			if (s == SIGKILL || s == SIGSTOP || (s > 31 && s < SIGRTMIN))
				continue;
			if (sigismember(&cur, s) != 1)
				*(s >= SIGRTMIN ? &open_rt : &open_other) += 1;
		}
		printf("mask %s (%d real-time signals open)\n", open_other == 0 && open_rt <= 1 ? "ok" : "CHANGED", open_rt);
	}
	if (unblock) {
		/* Half the time blocked, then every signal open again: the
		 * capture signal reaches it, the normal path takes it back. */
		sigset_t all;

		masked_spin(ns(CLOCK_MONOTONIC) + ms * 500000ull);
		sigfillset(&all);
		syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &all, NULL, 8);
		printf("unblocked %ld %llu\n", (long)syscall(SYS_gettid), ns(CLOCK_THREAD_CPUTIME_ID));
		unblocked_spin(ns(CLOCK_MONOTONIC) + ms * 500000ull);
	} else {
		masked_spin(ns(CLOCK_MONOTONIC) + ms * 1000000ull);
	}
	if (late)
		printf("cpu %ld %llu %s\n", (long)syscall(SYS_gettid), ns(CLOCK_THREAD_CPUTIME_ID),
		       mix && arg == NULL ? "pthread_sigmask" : "rt_sigprocmask");
	return NULL;
}

int main(int argc, char **argv)
{
	sigset_t all, old;
	pthread_t th[2];

	if (argc < 2)
		return 2;
	ms = strtoul(argv[1], NULL, 10);
	mix = argc > 2 && strcmp(argv[2], "latemix") == 0;
	unblock = argc > 2 && strcmp(argv[2], "unblock") == 0;
	late = mix || unblock || (argc > 2 && strcmp(argv[2], "late") == 0);
	by_attr = argc > 2 && strcmp(argv[2], "attr") == 0;
	sigfillset(&all);
	pthread_attr_t at;
	pthread_attr_init(&at);
	if (by_attr)
		pthread_attr_setsigmask_np(&at, &all);
	else
		pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], &at, worker, i ? &th[i] : NULL) != 0)
			return 1;
	if (!by_attr)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return 0;
}
