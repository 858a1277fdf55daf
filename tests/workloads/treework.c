/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A process tree for tests/test_tree.c: each mode burns CPU in a function
 * of its own name, so the report says which process did the work.
 *
 *   treework spin MS            spin_leaf for MS ms of CPU, exit 0
 *   treework fork N MS          N children forked without exec, each in
 *                               fork_child_spin for MS ms; the parent in
 *                               fork_parent_spin, then reaps them
 *   treework forkstorm K G      K children one after another, each forking
 *                               G grandchildren 0.2 ms apart (each spins
 *                               4 ms, long enough for its sampler to
 *                               start) while its own sampler starts
 *   treework chain K MS         exec itself K times, then chain_end_spin
 *   treework killed MS          a child in victim_spin, killed with SIGKILL
 *                               by the parent after MS ms of its CPU
 *   treework _exit CODE MS      spin MS ms, then _exit(CODE)
 *   treework ready MS           print "ready" once MS ms of CPU are spent,
 *                               then spin until a signal ends it
 *   treework threxec PROG ARGS  a second thread execs PROG ARGS (the
 *                               kernel makes it the process's only thread)
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double cpu_ms(void)
{
	struct timespec ts;

	/* This thread's CPU: not the agent's threads' (they run in the same process). */
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

#define SPIN_FN(name)                                                    \
	__attribute__((noinline)) static void name(double ms)           \
	{                                                                \
		double end = cpu_ms() + ms;                              \
		while (cpu_ms() < end)                                   \
			for (int i = 0; i < 20000; i++)                  \
				sink += (unsigned long)i * 2654435761u;  \
		__asm__ volatile("" ::: "memory");                       \
	}

SPIN_FN(spin_leaf)
SPIN_FN(fork_child_spin)
SPIN_FN(fork_parent_spin)
SPIN_FN(chain_end_spin)
SPIN_FN(victim_spin)
SPIN_FN(ready_spin)

static void *exec_thread(void *arg)
{
	char **argv = arg;

	execv(argv[0], argv);
	perror("execv");
	_exit(127);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "threxec") == 0) {
		pthread_t t;

		if (pthread_create(&t, NULL, exec_thread, argv + 2) != 0)
			return 1;
		pthread_join(t, NULL); /* the exec ends this thread with the image */
		return 1;
	}
	if (argc >= 3 && strcmp(argv[1], "spin") == 0) {
		spin_leaf(atof(argv[2]));
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "fork") == 0) {
		int n = atoi(argv[2]);
		double ms = atof(argv[3]);

		for (int i = 0; i < n; i++) {
			pid_t p = fork();

			if (p == 0) {
				fork_child_spin(ms);
				exit(10 + i);
			}
			if (p < 0)
				return 1;
		}
		fork_parent_spin(ms / 2);
		int bad = 0;
		for (int i = 0; i < n; i++) {
			int st;

			if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) < 10)
				bad = 1;
		}
		return bad;
	}
	if (argc >= 4 && strcmp(argv[1], "forkstorm") == 0) {
		int k = atoi(argv[2]), g = atoi(argv[3]), bad = 0;

		for (int i = 0; i < k; i++) {
			pid_t c = fork();
			int st;

			if (c == 0) {
				for (int j = 0; j < g; j++) {
					pid_t gc = fork();

					if (gc == 0) {
						fork_child_spin(4);
						_exit(0);
					}
					fork_parent_spin(0.2);
				}
				while (wait(NULL) > 0)
					;
				_exit(0);
			}
			if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st))
				bad = 1;
		}
		puts(bad ? "forkstorm: a child failed" : "forkstorm: done");
		return bad;
	}
	if (argc >= 4 && strcmp(argv[1], "chain") == 0) {
		int k = atoi(argv[2]);

		if (k > 0) {
			char left[16];

			snprintf(left, sizeof(left), "%d", k - 1);
			execl("/proc/self/exe", argv[0], "chain", left, argv[3], (char *)NULL);
			return 127;
		}
		chain_end_spin(atof(argv[3]));
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "killed") == 0) {
		int pfd[2];
		char c;

		if (pipe(pfd))
			return 1;
		pid_t p = fork();
		if (p == 0) {
			close(pfd[0]);
			victim_spin(atof(argv[2]));
			/* Say so, then go on until killed. */
			if (write(pfd[1], "x", 1) != 1)
				_exit(1);
			for (;;)
				victim_spin(1000);
		}
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1)
			return 1;
		kill(p, SIGKILL);
		int st;
		if (waitpid(p, &st, 0) != p || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
			return 1;
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "_exit") == 0) {
		spin_leaf(atof(argv[3]));
		_exit(atoi(argv[2]));
	}
	if (argc >= 3 && strcmp(argv[1], "ready") == 0) {
		ready_spin(atof(argv[2]));
		printf("ready\n");
		fflush(stdout);
		for (;;)
			ready_spin(1000);
	}
	fprintf(stderr, "usage: treework spin|fork|chain|killed|_exit|ready ...\n");
	return 2;
}
