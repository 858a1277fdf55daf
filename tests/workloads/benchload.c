/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The workload of the record benchmark (bench/record_vs.py): the same
 * program runs unprofiled and under every profiler, so its CPU time is the
 * yardstick of each profiler's overhead.
 *
 * THREADS worker threads each run ROUNDS requests. A request descends
 * DEPTH frames of mutual recursion (four distinct functions, so stacks read
 * as a call chain, not one symbol repeated) and, at the bottom, does a fixed
 * amount of work: an LCG loop, malloc/free of a few blocks of varying size
 * (so the samples also land inside libc's allocator, which has no frame
 * pointers), and a short critical section under one of a few shared
 * mutexes (so some threads block and wake through futexes).
 *
 * The amount of work is fixed by the arguments, not by a clock: every run
 * does the same instructions whatever the profiler or the machine's load,
 * so CPU times are comparable. The main thread only starts and joins the
 * workers (blocked in pthread_join: it has no CPU samples).
 *
 * Built -O2 -g with frame pointers (mk/benchrec.mk) so that `perf record -g`
 * gets the frame-pointer chain it needs through the program's own frames;
 * libc is built without them, as on any Debian system.
 *
 * Usage: benchload [THREADS [ROUNDS [DEPTH]]]   (defaults 4 2000 40)
 * Prints one checksum line (the work cannot be optimised away) and exits 0;
 * exit 2 on a bad argument.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE static __attribute__((noipa))

#define NLOCKS 4
#define LEAF_LCG_ROUNDS 4000u /* ~ 5-10 us of CPU per request */
#define LEAF_ALLOCS 8u

static pthread_mutex_t locks[NLOCKS] = {
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
	PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
};
static uint64_t shared[NLOCKS]; /* each guarded by locks[i] */

struct worker {
	pthread_t thread;
	unsigned id;
	unsigned long rounds;
	unsigned depth;
	uint64_t sum;
};

NOINLINE uint64_t lcg_work(uint64_t x, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

NOINLINE uint64_t alloc_work(uint64_t x)
{
	void *blocks[LEAF_ALLOCS];

	for (unsigned i = 0; i < LEAF_ALLOCS; i++) {
		size_t sz = 16 + (size_t)((x >> (i * 5)) & 1023);

		blocks[i] = malloc(sz);
		if (!blocks[i])
			abort();
		memset(blocks[i], (int)(x & 0xff), sz < 64 ? sz : 64);
		x ^= (uint64_t)((unsigned char *)blocks[i])[sz / 2 < 64 ? sz / 2 : 63];
	}
	for (unsigned i = 0; i < LEAF_ALLOCS; i++)
		free(blocks[(i * 3) % LEAF_ALLOCS]);
	return x;
}

NOINLINE uint64_t locked_update(uint64_t x)
{
	unsigned k = (unsigned)(x >> 60) % NLOCKS;

	pthread_mutex_lock(&locks[k]);
	/* The shared value depends on the threads' interleaving; it is never
	 * fed back into x, so the amount of work stays fixed. */
	shared[k] = lcg_work(shared[k] ^ x, 64);
	pthread_mutex_unlock(&locks[k]);
	return x + k;
}

NOINLINE uint64_t leaf(uint64_t x)
{
	x = lcg_work(x, LEAF_LCG_ROUNDS);
	x = alloc_work(x);
	x = locked_update(x);
	return x;
}

/* Four functions calling each other round-robin. Each keeps a little live
 * state across the call so the call is not a tail call (no frame vanishes)
 * and each frame holds a few words, as real code does. */
NOINLINE uint64_t descend_a(uint64_t x, unsigned left);
NOINLINE uint64_t descend_b(uint64_t x, unsigned left);
NOINLINE uint64_t descend_c(uint64_t x, unsigned left);
NOINLINE uint64_t descend_d(uint64_t x, unsigned left);

#define DESCEND_BODY(next)                                      \
	volatile uint64_t keep[3] = { x, x + left, x ^ left };  \
	uint64_t r = left == 0 ? leaf(x) : next(x + 1, left - 1); \
	return r ^ keep[0] ^ keep[1] ^ keep[2];

NOINLINE uint64_t descend_a(uint64_t x, unsigned left) { DESCEND_BODY(descend_b) }
NOINLINE uint64_t descend_b(uint64_t x, unsigned left) { DESCEND_BODY(descend_c) }
NOINLINE uint64_t descend_c(uint64_t x, unsigned left) { DESCEND_BODY(descend_d) }
NOINLINE uint64_t descend_d(uint64_t x, unsigned left) { DESCEND_BODY(descend_a) }

NOINLINE void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull * (w->id + 1);

	for (unsigned long i = 0; i < w->rounds; i++)
		x = descend_a(x + i, w->depth);
	w->sum = x;
	return NULL;
}

static int parse_ul(const char *s, unsigned long lo, unsigned long hi, unsigned long *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long nthreads = 4, rounds = 2000, depth = 40;

	if (argc > 4 ||
	    (argc > 1 && parse_ul(argv[1], 1, 256, &nthreads)) ||
	    (argc > 2 && parse_ul(argv[2], 1, 100000000, &rounds)) ||
	    (argc > 3 && parse_ul(argv[3], 1, 1000, &depth))) {
		fprintf(stderr, "usage: benchload [THREADS(1-256) [ROUNDS [DEPTH(1-1000)]]]\n");
		return 2;
	}

	struct worker *w = calloc(nthreads, sizeof(*w));
	if (!w) {
		perror("benchload: calloc");
		return 1;
	}
	for (unsigned long i = 0; i < nthreads; i++) {
		w[i].id = (unsigned)i;
		w[i].rounds = rounds;
		w[i].depth = (unsigned)depth;
		int err = pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
		if (err) {
			fprintf(stderr, "benchload: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	uint64_t sum = 0;
	for (unsigned long i = 0; i < nthreads; i++) {
		pthread_join(w[i].thread, NULL);
		sum ^= w[i].sum;
	}
	/* Deterministic: the per-thread sums only (shared[] is not). */
	printf("benchload: %lu threads x %lu rounds, depth %lu, checksum %016llx\n",
	       nthreads, rounds, depth, (unsigned long long)sum);
	free(w);
	return 0;
}
