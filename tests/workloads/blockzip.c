/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A small real program whose workers block every signal once they run
 * (the pattern of worker pools that block signals
 * so that only one thread handles them, after pthread_create): THREADS
 * workers each compress a 4 MiB buffer of text-like data with zlib
 * (compress2, level 6) ROUNDS times. The zlib code is Debian's libz.so.1
 * (no frame pointers, no .symtab). For comparing stackprobe's perf-event
 * fallback with `perf record --call-graph dwarf` on the same run
 * (docs/PERFORMANCE.md "Threads that block the capture signal").
 *
 *   blockzip [THREADS [ROUNDS]]   (defaults 2 8)
 * Prints "worker TID CPU_NS" per worker (its CLOCK_THREAD_CPUTIME_ID).
 * BLOCKZIP_OPEN=1: the workers leave their signals open (the same work
 * through the signal path, for bench/blocked_perf.py).
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define LEN (4u << 20)

static unsigned rounds = 8;
static int open_signals;
static unsigned char *input;

static void fill(unsigned char *p, size_t n)
{
	static const char *words[] = { "stack ", "probe ", "sample ", "thread ", "signal ",
				       "blocked ", "perf ", "event ", "unwind ", "frame\n" };
	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i < n;) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		const char *w = words[x % 10];
		for (; *w && i < n; w++)
			p[i++] = (unsigned char)*w;
	}
}

__attribute__((noinline)) static unsigned long compress_once(unsigned char *out, uLongf cap)
{
	uLongf len = cap;

	if (compress2(out, &len, input, LEN, 6) != Z_OK)
		abort();
	return len;
}

static void *worker(void *arg)
{
	sigset_t all;
	uLongf cap = compressBound(LEN);
	unsigned char *out = malloc(cap);
	unsigned long sum = 0;
	struct timespec ts;

	(void)arg;
	/* Only main handles signals: every worker blocks them all once it
	 * runs (the agent's pthread_create wrapper cannot see this). */
	sigfillset(&all);
	if (!open_signals)
		pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (unsigned r = 0; r < rounds; r++)
		sum += compress_once(out, cap);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	printf("worker %ld %llu (%lu bytes out)\n", (long)syscall(SYS_gettid),
	       (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec, sum);
	free(out);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
	pthread_t th[64];

	open_signals = getenv("BLOCKZIP_OPEN") && strcmp(getenv("BLOCKZIP_OPEN"), "1") == 0;
	if (argc > 2)
		rounds = (unsigned)atoi(argv[2]);
	if (n < 1 || n > 64 || rounds < 1)
		return 2;
	input = malloc(LEN);
	if (!input)
		return 1;
	fill(input, LEN);
	for (unsigned i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, worker, NULL))
			return 1;
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	free(input);
	return 0;
}
