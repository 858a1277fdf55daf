/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The memory benchmark's workload (bench/agent_cost.py):
 * N threads blocked in one condition variable for S seconds, so the RSS
 * of the process is the program's own plus what an agent adds to it.
 *
 * Also the many-threads workload (bench/threads.py, tests/test_carry.c):
 * with B, B more threads spin in busy_spin() meanwhile.
 *
 * Usage: idlethreads N S [B [masked]]
 * masked: each waiter blocks every signal itself first (the raw system
 * call, which no wrapper sees), as workers of thread pools do: no signal
 * can reach it, only a reader from outside (zero-pause).
 * Prints "ready PID" on stdout once every thread waits (the bench reads
 * /proc/PID/smaps_rollup from then on), wakes them after S seconds, joins
 * them and exits 0; exit 2 on a bad argument.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
/* Apart from cond: a waiter's "one more" wakes main only, not every
 * waiter already there (which would run them all once per new one). */
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int go, waiting, masked;
static atomic_int stop_busy;

__attribute__((noinline)) static void *busy_spin(void *arg)
{
	volatile unsigned long x = 0;

	(void)arg;
	while (!atomic_load_explicit(&stop_busy, memory_order_relaxed))
		x++;
	return NULL;
}

static void *waiter(void *arg)
{
	(void)arg;
	if (masked) {
		uint64_t all = ~0ull;

		syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof(all));
	}
	pthread_mutex_lock(&lock);
	waiting++;
	pthread_cond_signal(&ready_cond);
	while (!go)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

int main(int argc, char **argv)
{
	char *end = "";
	long n = -1, secs = -1, busy = 0;
	pthread_t *t, b[16];

	if (argc >= 3 && argc <= 5) {
		n = strtol(argv[1], &end, 10);
		if (!*end)
			secs = strtol(argv[2], &end, 10);
		if (!*end && argc >= 4)
			busy = strtol(argv[3], &end, 10);
		if (!*end && argc == 5 && strcmp(argv[4], "masked") != 0)
			end = "x";
		masked = argc == 5;
	}
	if (n < 1 || n > 10000 || secs < 0 || busy < 0 || busy > 16 || *end) {
		fprintf(stderr, "usage: idlethreads N SECONDS [BUSY [masked]]\n");
		return 2;
	}
	t = calloc((size_t)n, sizeof(*t));
	if (!t)
		return 1;
	for (long i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, waiter, NULL) != 0)
			return 1;
	pthread_mutex_lock(&lock);
	while (waiting < n)
		pthread_cond_wait(&ready_cond, &lock); /* woken by each waiter */
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < busy; i++)
		if (pthread_create(&b[i], NULL, busy_spin, NULL) != 0)
			return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	sleep((unsigned)secs);
	pthread_mutex_lock(&lock);
	go = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (long i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop_busy, 1);
	for (long i = 0; i < busy; i++)
		pthread_join(b[i], NULL);
	free(t);
	return 0;
}
