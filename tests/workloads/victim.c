/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program that does what real programs do and profilers break: installs
 * its own signal handlers, creates and exits threads quickly, forks without
 * exec, forks and execs, and finally execs itself. Its output is fully
 * determined by its work, so a run with the agent must print exactly what a
 * run without it prints, and exit with the same status (42).
 *
 *   victim          the whole sequence, ending in exec of "victim --after-exec"
 *   victim --after-exec   second image: a little more work, exit 42
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t usr1_count, alrm_count;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_count++;
}

static void on_alrm(int sig)
{
	(void)sig;
	alrm_count++;
}

static void *short_thread(void *arg)
{
	uintptr_t n = (uintptr_t)arg, x = n;
	for (int i = 0; i < 20000; i++)
		x = x * 2862933555777941757ull + 3037000493ull;
	__asm__ volatile("" : "+r"(x));
	return (void *)(n * 3);
}

static uint64_t busy(uint64_t rounds)
{
	uint64_t x = 1;
	for (uint64_t i = 0; i < rounds; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--after-exec") == 0) {
		printf("after exec: busy=%llx\n", (unsigned long long)busy(100000000));
		return 42;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	/* For the test only: where to find our pid (not printed: the output
	 * must not depend on it). */
	const char *pidfile = getenv("VICTIM_PIDFILE");
	if (pidfile) {
		FILE *f = fopen(pidfile, "w");
		if (f) {
			fprintf(f, "%d\n", (int)getpid());
			fclose(f);
		}
	}

	/* 1. Own handlers, for a signal the agent must not take. */
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_alrm;
	sigaction(SIGALRM, &sa, NULL);
	for (int i = 0; i < 100; i++) {
		raise(SIGUSR1);
		raise(SIGALRM);
	}
	struct sigaction cur;
	sigaction(SIGUSR1, NULL, &cur);
	printf("signals: usr1=%d alrm=%d handler-kept=%d\n", (int)usr1_count, (int)alrm_count,
	       cur.sa_handler == on_usr1);
	sigaction(SIGPROF, NULL, &cur);
	printf("SIGPROF default=%d\n", cur.sa_handler == SIG_DFL);

	/* 2. Threads that come and go quickly. */
	uint64_t sum = 0;
	for (int round = 0; round < 50; round++) {
		pthread_t t[8];
		for (uintptr_t i = 0; i < 8; i++)
			if (pthread_create(&t[i], NULL, short_thread, (void *)(i + 1)) != 0)
				return 1;
		for (int i = 0; i < 8; i++) {
			void *r;
			pthread_join(t[i], &r);
			sum += (uintptr_t)r;
		}
	}
	printf("threads: sum=%llu\n", (unsigned long long)sum);

	/* 3. fork without exec: the child computes and exits 3. */
	pid_t c = fork();
	if (c == 0)
		_exit(busy(1000000) ? 3 : 4);
	int st;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	printf("fork child: exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);

	/* 4. fork + exec of another program. */
	c = fork();
	if (c == 0) {
		execlp("sh", "sh", "-c", "echo exec child says hi; exit 5", (char *)NULL);
		_exit(127);
	}
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	printf("exec child: exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);

	printf("busy=%llx\n", (unsigned long long)busy(30000000));

	/* 5. exec ourselves: sampling continues in the new image. */
	execl("/proc/self/exe", argv[0], "--after-exec", (char *)NULL);
	perror("exec");
	return 1;
}
