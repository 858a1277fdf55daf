/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The sampler's threads table (userspace/sampler/threads.c: dense entries
 * found through a tid index) followed through the node table it keeps, a
 * wall sampler running: every live thread has one node; threads that exit
 * lose theirs (the sweep moves entries to keep them dense); threads made
 * afterwards get theirs, and the survivors keep theirs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/sampler.h>
#include <stackprobe/table.h>

#include "sprobe_test.h"

#define FIRST 40
#define LEAVE 28
#define LATER 24
#define NMAX (FIRST + LATER)

struct waiter {
	pthread_t th;
	_Atomic pid_t tid;
	_Atomic int stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->mu);
	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	while (!atomic_load(&w->stop))
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void waiter_start(struct waiter *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	assert_int_equal(pthread_create(&w->th, NULL, waiter_main, w), 0);
	while (!atomic_load(&w->tid))
		sched_yield();
}

static void waiter_stop(struct waiter *w)
{
	pthread_mutex_lock(&w->mu);
	atomic_store(&w->stop, 1);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	assert_int_equal(pthread_join(w->th, NULL), 0);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The tids of the table's live nodes into tids[0..max); returns how many
 * nodes, or -errno. */
static int live_tids(const char *path, pid_t *tids, int max)
{
	struct sprobe_table *t = sprobe_table__open_path(path, NULL);
	struct sprobe_table_node node;
	int n = 0, r;

	if (!t)
		return -errno;
	r = sprobe_table__iter_begin(t);
	while (r == 0 && (r = sprobe_table__iter_next(t, &node)) == 1) {
		if (n < max)
			tids[n++] = node.tid;
		r = 0;
	}
	sprobe_table__close(t);
	return r < 0 ? r : n;
}

/* Whether the table holds one node for each of want[0..nwant) (plus at
 * most `others` nodes of threads not in want: the caller's), and no
 * tid twice. */
static bool table_is(const char *path, const pid_t *want, int nwant, int others)
{
	pid_t got[NMAX + 16];
	int n = live_tids(path, got, NMAX + 16), extra = 0;

	if (n < 0)
		return false;
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (got[i] == got[j])
				return false;
	for (int k = 0; k < nwant; k++) {
		bool found = false;

		for (int i = 0; i < n; i++)
			found |= got[i] == want[k];
		if (!found)
			return false;
	}
	extra = n - nwant;
	return extra >= 0 && extra <= others;
}

/* Poll the table (the sampler runs on its own clock) until it is as
 * wanted, within a deadline. */
static void wait_table(const char *path, const pid_t *want, int nwant, const char *what)
{
	uint64_t end = mono_ns() + 20000000000ull;

	struct timespec pause = { 0, 2000000 };

	while (!table_is(path, want, nwant, 1)) {
		if (mono_ns() > end)
			fail_msg("the node table never matched %s (%d threads)", what, nwant);
		nanosleep(&pause, NULL); /* between polls: the probe needs the CPU */
	}
}

static void test_nodes_follow_threads(void **state)
{
	static struct waiter w[NMAX];
	char path[96];
	pid_t want[NMAX];
	int nwant = 0;

	(void)state;
	snprintf(path, sizeof(path), "/dev/shm/sprobe-test-threads-%d.table", (int)getpid());
	unlink(path);
	struct sprobe_sampler_opts o = {
		.sz = sizeof(o),
		.freq_hz = 499,
		.mode = SPROBE_MODE_WALL,
		.table_path = path,
		.max_threads = 256,
	};
	for (int i = 0; i < FIRST; i++)
		waiter_start(&w[i]);
	struct sprobe_sampler *s = sprobe_sampler__start(&o);
	assert_non_null(s);
	for (int i = 0; i < FIRST; i++)
		want[nwant++] = atomic_load(&w[i].tid);
	wait_table(path, want, nwant, "the first threads");

	/* Most leave, spread over the entries (holes at both ends). */
	nwant = 0;
	for (int i = 0; i < FIRST; i++) {
		if (i % 10 < 7)
			waiter_stop(&w[i]);
		else
			want[nwant++] = atomic_load(&w[i].tid);
	}
	assert_int_equal(nwant, FIRST - LEAVE);
	wait_table(path, want, nwant, "the survivors");

	/* New threads fill the holes; the survivors stay. */
	for (int i = FIRST; i < NMAX; i++) {
		waiter_start(&w[i]);
		want[nwant++] = atomic_load(&w[i].tid);
	}
	wait_table(path, want, nwant, "survivors and newcomers");

	assert_int_equal(sprobe_sampler__stop(s), 0);
	for (int i = 0; i < FIRST; i++)
		if (!atomic_load(&w[i].stop))
			waiter_stop(&w[i]);
	for (int i = FIRST; i < NMAX; i++)
		waiter_stop(&w[i]);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_nodes_follow_threads),
};

SPROBE_TEST_MAIN(tests)
