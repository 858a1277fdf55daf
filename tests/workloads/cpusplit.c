/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Workloads with a known CPU split, for cpu mode's accuracy
 * (tests/test_cpuclock.c, bench/cpuclock.sh). Phases are measured on the
 * thread's own CPU clock, and the program prints the truth it measured
 * itself, so preemption on a loaded machine changes the truth, not the
 * test.
 *
 *   cpusplit phases A_US B_US MS
 *       One thread alternates phase_a() for A_US us and phase_b() for
 *       B_US us of its CPU time, for MS ms of wall time. With A+B = 4 ms
 *       (or a divisor or multiple of it) the phases line up with the
 *       scheduler tick at HZ=250. Prints "truth phase_a NS phase_b NS".
 *   cpusplit threads MS
 *       Four threads, work1..work4: thread k spins k ms of its CPU time,
 *       then sleeps 10-k ms, for MS ms (a 1:2:3:4 split, one core in
 *       all). Prints "truth workK NS" for each.
 *   cpusplit children N US
 *       Starts N short processes one after the other (fork, exec of
 *       "cpusplit child US"), as a build loop starts compilers: each spins
 *       US us of its CPU time in child_work(), then exits. Prints "truth
 *       child PID NS" for each, NS its user + system time from wait4(),
 *       and "truth parent NS" for the parent's own.
 */
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t sink;

/* Spin until this thread's CPU clock reaches end; returns the clock. */
static inline uint64_t spin_to(uint64_t end)
{
	uint64_t now, x = sink;

	while ((now = ns(CLOCK_THREAD_CPUTIME_ID)) < end)
		for (int i = 0; i < 50; i++)
			x = x * 6364136223846793005ull + 1;
	sink = x;
	return now;
}

__attribute__((noinline)) uint64_t phase_a(uint64_t end)
{
	return spin_to(end);
}

__attribute__((noinline)) uint64_t phase_b(uint64_t end)
{
	return spin_to(end);
}

static int phases(uint64_t a_ns, uint64_t b_ns, uint64_t ms)
{
	uint64_t wall_end = ns(CLOCK_MONOTONIC) + ms * 1000000ull;
	uint64_t ta = 0, tb = 0, t = ns(CLOCK_THREAD_CPUTIME_ID);

	while (ns(CLOCK_MONOTONIC) < wall_end) {
		uint64_t t1 = phase_a(t + a_ns);
		uint64_t t2 = phase_b(t1 + b_ns);

		ta += t1 - t;
		tb += t2 - t1;
		t = t2;
	}
	printf("truth phase_a %llu phase_b %llu\n", (unsigned long long)ta, (unsigned long long)tb);
	return 0;
}

struct worker {
	int k;
	uint64_t wall_end, cpu;
	pthread_t th;
};

#define WORK(k)                                                                            \
	__attribute__((noinline)) void work##k(struct worker *w)                          \
	{                                                                                  \
		while (ns(CLOCK_MONOTONIC) < w->wall_end) {                                \
			spin_to(ns(CLOCK_THREAD_CPUTIME_ID) + (uint64_t)(k) * 1000000ull); \
			struct timespec d = { 0, (long)(10 - (k)) * 1000000l };            \
			nanosleep(&d, NULL);                                               \
		}                                                                          \
	}
WORK(1)
WORK(2)
WORK(3)
WORK(4)

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	static void (*const fn[4])(struct worker *) = { work1, work2, work3, work4 };

	fn[w->k - 1](w);
	w->cpu = ns(CLOCK_THREAD_CPUTIME_ID);
	return NULL;
}

static int threads(uint64_t ms)
{
	struct worker w[4];
	uint64_t end = ns(CLOCK_MONOTONIC) + ms * 1000000ull;

	for (int i = 0; i < 4; i++) {
		w[i] = (struct worker){ .k = i + 1, .wall_end = end };
		if (pthread_create(&w[i].th, NULL, worker_main, &w[i]))
			return 1;
	}
	for (int i = 0; i < 4; i++)
		pthread_join(w[i].th, NULL);
	for (int i = 0; i < 4; i++)
		printf("truth work%d %llu\n", i + 1, (unsigned long long)w[i].cpu);
	return 0;
}

__attribute__((noinline)) uint64_t child_work(uint64_t end)
{
	return spin_to(end);
}

static uint64_t tv_ns(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static int children(int n, const char *us)
{
	for (int i = 0; i < n; i++) {
		struct rusage ru;
		int st;
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0) {
			execl("/proc/self/exe", "cpusplit", "child", us, (char *)NULL);
			_exit(127);
		}
		if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
		printf("truth child %d %llu\n", (int)pid,
		       (unsigned long long)(tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime)));
	}
	struct rusage self;

	getrusage(RUSAGE_SELF, &self);
	printf("truth parent %llu\n", (unsigned long long)(tv_ns(self.ru_utime) + tv_ns(self.ru_stime)));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "child")) {
		child_work(ns(CLOCK_THREAD_CPUTIME_ID) + strtoull(argv[2], NULL, 10) * 1000ull);
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "children"))
		return children(atoi(argv[2]), argv[3]);
	if (argc == 5 && !strcmp(argv[1], "phases"))
		return phases(strtoull(argv[2], NULL, 10) * 1000ull, strtoull(argv[3], NULL, 10) * 1000ull,
			      strtoull(argv[4], NULL, 10));
	if (argc == 3 && !strcmp(argv[1], "threads"))
		return threads(strtoull(argv[2], NULL, 10));
	fprintf(stderr, "usage: cpusplit phases A_US B_US MS | cpusplit threads MS | cpusplit children N US\n");
	return 2;
}
