/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The cost of the agent's wait wrappers on a call that is not interrupted
 * (userspace/agent/wait_wrappers.c; make bench; docs/PERFORMANCE.md "Wait
 * wrappers").
 *
 * The same loops run in three child processes of this program: without
 * the agent (libc's calls), with build/libstackprobe.so preloaded (the
 * wrappers interpose; no sampler runs, which changes nothing on the path
 * of a call that returns normally), and preloaded with
 * STACKPROBE_RESUME_WAITS=0. Each loop: batches of calls, ns per call,
 * median over batches; each configuration runs ROUNDS times interleaved
 * with the others and the lowest median is kept (a shared VM: other
 * work inflates some rounds, never deflates one).
 *
 *   poll(NULL, 0, 0)             a system call, no timeout to track
 *   nanosleep({0, 0})            a system call that sleeps the timer slack
 *                                (~50 us); rem is the wrapper's
 *   poll(ready pipe, 1, 1000)    a positive timeout: the wrapper reads
 *                                CLOCK_MONOTONIC before the call
 *   sem_timedwait(posted)        no system call at all (glibc's fast
 *                                path): the wrapper's cost alone, as a
 *                                share of a ~10 ns call
 *   clock_gettime(MONOTONIC)     not wrapped: what the positive-timeout
 *                                wrappers add (the vDSO read)
 *
 *   build/bench/bench_wait_wrappers [batches] [calls per batch]
 */
#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 7
#define NLOOPS 5
static const char *const loop_names[NLOOPS] = {
	"poll(NULL, 0, 0)",
	"nanosleep({0, 0})",
	"poll(ready pipe, 1, 1000)",
	"sem_timedwait(posted)",
	"clock_gettime(MONOTONIC)",
};

/* This thread's CPU time: time spent preempted by the other work of a
 * shared VM is not the call's. */
static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The child: median ns per call of each loop, one line each. */
static int child(int batches, int calls)
{
	double *ns = calloc((size_t)batches, sizeof(double));
	struct timespec zero = { 0, 0 }, far;
	int p[2];
	sem_t sem;

	if (!ns || pipe(p) != 0 || write(p[1], "x", 1) != 1 || sem_init(&sem, 0, 0) != 0)
		return 1;
	struct pollfd pfd = { .fd = p[0], .events = POLLIN };
	clock_gettime(CLOCK_REALTIME, &far);
	far.tv_sec += 3600;
	for (int l = 0; l < NLOOPS; l++) {
		/* nanosleep 0 still arms a timer and sleeps for the timer
		 * slack (~50 us): fewer calls per batch. */
		int n = l == 1 ? calls / 50 : calls;
		for (int b = 0; b < batches; b++) {
			double t0 = now_ns();
			for (int i = 0; i < n; i++) {
				switch (l) {
				case 0:
					poll(NULL, 0, 0);
					break;
				case 1:
					nanosleep(&zero, NULL);
					break;
				case 2:
					if (poll(&pfd, 1, 1000) != 1)
						return 1;
					break;
				case 3:
					sem_post(&sem);
					sem_timedwait(&sem, &far);
					break;
				case 4: {
					struct timespec t;
					clock_gettime(CLOCK_MONOTONIC, &t);
					break;
				}
				}
			}
			ns[b] = (now_ns() - t0) / n;
		}
		qsort(ns, (size_t)batches, sizeof(double), cmp_double);
		printf("%.1f\n", ns[batches / 2]);
	}
	return 0;
}

/* Run this program as a child in configuration cfg; fill med[NLOOPS]. */
static int run_child(const char *self, int cfg, const char *batches, const char *calls,
		     double *med)
{
	int p[2];
	if (pipe(p) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		setenv("BENCH_WAIT_CHILD", "1", 1);
		unsetenv("STACKPROBE_OUTPUT");
		unsetenv("STACKPROBE_AGENT");
		if (cfg >= 1)
			setenv("LD_PRELOAD", "build/libstackprobe.so", 1);
		if (cfg == 2)
			setenv("STACKPROBE_RESUME_WAITS", "0", 1);
		execl(self, self, batches, calls, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	FILE *f = fdopen(p[0], "r");
	int n = 0;
	while (f && n < NLOOPS && fscanf(f, "%lf", &med[n]) == 1)
		n++;
	if (f)
		fclose(f);
	int st;
	waitpid(pid, &st, 0);
	return n == NLOOPS && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *batches = argc > 1 ? argv[1] : "31";
	const char *calls = argc > 2 ? argv[2] : "20000";
	static const char *const cfg_names[3] = { "plain libc", "agent preloaded",
						  "preloaded, RESUME_WAITS=0" };
	double best[3][NLOOPS];

	if (getenv("BENCH_WAIT_CHILD"))
		return child(atoi(batches), atoi(calls));
	if (access("build/libstackprobe.so", R_OK) != 0) {
		fprintf(stderr, "bench_wait_wrappers: run from the top of the tree after make\n");
		return 1;
	}
	for (int c = 0; c < 3; c++)
		for (int l = 0; l < NLOOPS; l++)
			best[c][l] = 1e30;
	for (int r = 0; r < ROUNDS; r++)
		for (int c = 0; c < 3; c++) {
			double med[NLOOPS];
			if (run_child("/proc/self/exe", c, batches, calls, med) != 0) {
				fprintf(stderr, "bench_wait_wrappers: child %d failed\n", c);
				return 1;
			}
			for (int l = 0; l < NLOOPS; l++)
				best[c][l] = med[l] < best[c][l] ? med[l] : best[c][l];
		}
	printf("wait wrappers: ns of thread CPU time per call, median of %s batches of %s calls, best of %d rounds\n",
	       batches, calls, ROUNDS);
	printf("%-28s %12s %16s %26s %10s\n", "call", cfg_names[0], cfg_names[1], cfg_names[2],
	       "wrapper");
	for (int l = 0; l < NLOOPS; l++)
		printf("%-28s %12.1f %16.1f %26.1f %+10.1f\n", loop_names[l], best[0][l], best[1][l],
		       best[2][l], best[1][l] - best[0][l]);
	return 0;
}
