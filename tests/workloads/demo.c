/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The bundled demo workload for `make run`: a small "service" whose threads
 * have a known call structure, so a report can be checked by eye (and by
 * tests/test_record.c, which runs it with --check-shares).
 *
 *   compute-N  serve_requests -> handle_request -> { parse_json (3 units of
 *              work), compress_reply (1 unit) } -> churn: busy work, so
 *              3/4 of the thread's samples are under parse_json.
 *   io         io_loop -> wait_for_input -> read() on a pipe nobody writes
 *              until shutdown: always blocked.
 *   lock-N     lock_loop -> update_shared_counter: mutex traffic + malloc.
 *   timer      timer_loop -> sleep_until_tick -> nanosleep.
 *
 * Built with -O2 and without frame pointers on purpose: the names only come
 * out through DWARF unwinding.
 *
 * Usage: demo [SECONDS] (default 3). Prints a line of results and exits 0.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* noipa: no inlining, cloning or IPA changes, so every name below is a real
 * frame with its own symbol. */
#define NOINLINE static __attribute__((noipa))

static volatile int stop_flag;
static int io_pipe[2];
static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shared_counter;

/* Busy work: n rounds of an LCG. The asm barrier keeps the loop (and so
 * the frame) in this function. The split between the two callers is by
 * work, not by clock, so it holds whatever else the CPUs are doing. */
NOINLINE uint64_t churn(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

#define WORK_UNIT 100000ull

NOINLINE uint64_t parse_json(uint64_t x)
{
	x = churn(3 * WORK_UNIT, x); /* 3 units */
	__asm__ volatile("" : "+r"(x));
	return x;
}

NOINLINE uint64_t compress_reply(uint64_t x)
{
	x = churn(WORK_UNIT, x); /* 1 unit */
	__asm__ volatile("" : "+r"(x));
	return x;
}

NOINLINE uint64_t handle_request(uint64_t x)
{
	x = parse_json(x);
	x = compress_reply(x);
	__asm__ volatile("" : "+r"(x));
	return x;
}

NOINLINE void *serve_requests(void *arg)
{
	uint64_t x = (uintptr_t)arg, n = 0;
	while (!stop_flag) {
		x = handle_request(x);
		n++;
	}
	__asm__ volatile("" : "+r"(x));
	return (void *)(uintptr_t)n;
}

NOINLINE ssize_t wait_for_input(char *buf, size_t len)
{
	ssize_t r;
	do
		r = read(io_pipe[0], buf, len);
	while (r < 0 && errno == EINTR);
	__asm__ volatile("" ::: "memory");
	return r;
}

NOINLINE void *io_loop(void *arg)
{
	char buf[64];
	uint64_t bytes = 0;
	ssize_t r;
	while ((r = wait_for_input(buf, sizeof(buf))) > 0)
		bytes += (uint64_t)r;
	return (void *)(uintptr_t)bytes;
}

NOINLINE void update_shared_counter(void)
{
	char *p = malloc(128);
	memset(p, 1, 128);
	pthread_mutex_lock(&counter_lock);
	shared_counter += (uint64_t)p[7];
	pthread_mutex_unlock(&counter_lock);
	free(p);
}

NOINLINE void *lock_loop(void *arg)
{
	uint64_t n = 0;
	while (!stop_flag) {
		update_shared_counter();
		n++;
	}
	return (void *)(uintptr_t)n;
}

NOINLINE void sleep_until_tick(void)
{
	struct timespec ts = { 0, 2000000 }; /* 2 ms */
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

NOINLINE void *timer_loop(void *arg)
{
	uint64_t ticks = 0;
	while (!stop_flag) {
		sleep_until_tick();
		ticks++;
	}
	return (void *)(uintptr_t)ticks;
}

static void name_thread(pthread_t t, const char *name)
{
	pthread_setname_np(t, name);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : 3.0;
	pthread_t compute[2], io, lock[2], timer;
	char name[16];
	uint64_t requests = 0, lock_ops = 0, ticks;

	if (seconds <= 0 || seconds > 3600) {
		fprintf(stderr, "demo: SECONDS must be in (0, 3600]\n");
		return 2;
	}
	if (pipe(io_pipe) < 0) {
		perror("demo: pipe");
		return 1;
	}
	for (int i = 0; i < 2; i++) {
		pthread_create(&compute[i], NULL, serve_requests, (void *)(uintptr_t)(i + 1));
		snprintf(name, sizeof(name), "compute-%d", i);
		name_thread(compute[i], name);
		pthread_create(&lock[i], NULL, lock_loop, NULL);
		snprintf(name, sizeof(name), "lock-%d", i);
		name_thread(lock[i], name);
	}
	pthread_create(&io, NULL, io_loop, NULL);
	name_thread(io, "io");
	pthread_create(&timer, NULL, timer_loop, NULL);
	name_thread(timer, "timer");

	struct timespec ts = { (time_t)seconds,
			       (long)((seconds - (double)(time_t)seconds) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	stop_flag = 1;
	close(io_pipe[1]);

	for (int i = 0; i < 2; i++) {
		void *r;
		pthread_join(compute[i], &r);
		requests += (uintptr_t)r;
		pthread_join(lock[i], &r);
		lock_ops += (uintptr_t)r;
	}
	void *r;
	pthread_join(io, NULL);
	pthread_join(timer, &r);
	ticks = (uintptr_t)r;
	printf("demo: %llu requests, %llu lock ops, %llu ticks, counter %llu\n",
	       (unsigned long long)requests, (unsigned long long)lock_ops,
	       (unsigned long long)ticks, (unsigned long long)shared_counter);
	return requests > 0 && lock_ops > 0 ? 0 : 1;
}
