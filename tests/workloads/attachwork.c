/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A running program started without the agent, for `record -p`
 * (tests/test_external_attach.c, bench/ext_pause.sh). It says it is
 * ready on stdout ("ready PID"), then does what each line on stdin says:
 *
 *   attachwork work MS    thread spin-a spins in attach_spin_a from the
 *                         start; at "go": a thread spin-b spins MS ms of
 *                         CPU in attach_spin_b, a forked child MS ms in
 *                         attach_child_spin (exit 3); then the process
 *                         exits with status 5
 *   attachwork spin       spin-a spins until stdin closes; exit 0
 *   attachwork nodump     the same, not dumpable first (as a set-ID
 *                         program is): prctl(PR_SET_DUMPABLE, 0)
 *   attachwork churn MS   four threads start one thread after another
 *                         (each "churn", MS ms of CPU in attach_churn_spin,
 *                         then it exits), also while record attaches; at
 *                         "go" each makes 8 more, then the process exits 0
 *
 * Handshakes only (stdin, stdout): no sleeps.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop_a;
static volatile unsigned long sink;

static double cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Each spins in its own body (no callee), so it is the sampled function. */
#define BURN()                                                  \
	do {                                                    \
		for (int i = 0; i < 20000; i++)                 \
			sink += (unsigned long)i * 2654435761u; \
	} while (0)

__attribute__((noinline)) void attach_spin_a(void)
{
	while (!atomic_load(&stop_a))
		BURN();
}

__attribute__((noinline)) void attach_spin_b(double ms)
{
	for (double t0 = cpu_ms(); cpu_ms() - t0 < ms;)
		BURN();
}

__attribute__((noinline)) void attach_child_spin(double ms)
{
	for (double t0 = cpu_ms(); cpu_ms() - t0 < ms;)
		BURN();
}

__attribute__((noinline)) void attach_churn_spin(double ms)
{
	for (double t0 = cpu_ms(); cpu_ms() - t0 < ms;)
		BURN();
}

static atomic_int churn_go;

static void *churn_one(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "churn");
	attach_churn_spin(*(double *)arg);
	return NULL;
}

static void *churn_maker(void *arg)
{
	for (int after = 0; after < 8; after += atomic_load(&churn_go)) {
		pthread_t t;
		if (pthread_create(&t, NULL, churn_one, arg) == 0)
			pthread_join(t, NULL);
	}
	return NULL;
}

static void *thread_a(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "spin-a");
	attach_spin_a();
	return NULL;
}

static double work_ms;

static void *thread_b(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "spin-b");
	attach_spin_b(work_ms);
	return NULL;
}

int main(int argc, char **argv)
{
	char line[64];
	pthread_t a, b;

	if (argc < 2 || ((!strcmp(argv[1], "work") || !strcmp(argv[1], "churn")) && argc < 3)) {
		fprintf(stderr, "usage: attachwork work MS | churn MS | spin | nodump\n");
		return 2;
	}
	if (strcmp(argv[1], "nodump") == 0)
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	work_ms = argc > 2 ? atof(argv[2]) : 0;
	if (strcmp(argv[1], "churn") == 0) {
		pthread_t m[4];
		for (int i = 0; i < 4; i++)
			pthread_create(&m[i], NULL, churn_maker, &work_ms);
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
		atomic_store(&churn_go, 1);
		for (int i = 0; i < 4; i++)
			pthread_join(m[i], NULL);
		return 0;
	}
	pthread_create(&a, NULL, thread_a, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (strcmp(argv[1], "work") != 0) {
		while (fgets(line, sizeof(line), stdin))
			;
		atomic_store(&stop_a, 1);
		pthread_join(a, NULL);
		return 0;
	}
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	pthread_create(&b, NULL, thread_b, NULL);
	pid_t c = fork();
	if (c == 0) {
		attach_child_spin(work_ms);
		_exit(3);
	}
	pthread_join(b, NULL);
	int st;
	waitpid(c, &st, 0);
	atomic_store(&stop_a, 1);
	pthread_join(a, NULL);
	return 5;
}
