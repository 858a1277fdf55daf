/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A long-running service for tests/test_ondemand.c (`record -p PID`):
 * it runs until its stdin reaches end of file, so the test decides its
 * lifetime without a timer, and it never exits by itself otherwise.
 *
 *   od-hot      od_serve -> od_compute: busy arithmetic (on CPU)
 *   od-wait     od_wait_request -> poll() on a pipe nobody writes (blocked)
 *   main        reads stdin until EOF, then stops the threads, exits 0
 *
 * Prints "ready\n" on stdout once both threads run (stdout is then closed).
 * noipa: every name is a real frame with its own symbol.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

static atomic_bool stopping;
static atomic_int running;
static int idle_pipe[2];

__attribute__((noipa)) static unsigned long od_compute(unsigned long x)
{
	for (int i = 0; i < 100000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

__attribute__((noipa)) static void *od_serve(void *arg)
{
	volatile unsigned long sink = 0;

	(void)arg;
	atomic_fetch_add(&running, 1);
	while (!atomic_load(&stopping))
		sink += od_compute(sink);
	return NULL;
}

__attribute__((noipa)) static void od_wait_request(void)
{
	struct pollfd p = { .fd = idle_pipe[0], .events = POLLIN };
	poll(&p, 1, -1);
}

static void *od_waiter(void *arg)
{
	(void)arg;
	atomic_fetch_add(&running, 1);
	while (!atomic_load(&stopping))
		od_wait_request();
	return NULL;
}

int main(void)
{
	pthread_t hot, wait;
	char buf[256];

	if (pipe(idle_pipe) != 0)
		return 1;
	if (pthread_create(&hot, NULL, od_serve, NULL) != 0 ||
	    pthread_create(&wait, NULL, od_waiter, NULL) != 0)
		return 1;
	pthread_setname_np(hot, "od-hot");
	pthread_setname_np(wait, "od-wait");
	while (atomic_load(&running) < 2)
		sched_yield();
	fputs("ready\n", stdout);
	fclose(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	atomic_store(&stopping, true);
	(void)!write(idle_pipe[1], "x", 1);
	pthread_join(hot, NULL);
	pthread_join(wait, NULL);
	return 0;
}
