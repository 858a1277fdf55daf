/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Worker threads for the capture tests: each parks in a known way (spinning,
 * blocked on a pipe, blocking the capture signal, hammering malloc) until
 * told to stop. Header-only so the native tests and the aarch64 lane build
 * it the same way.
 */
#ifndef SPROBE_CAPTURE_FIXTURE_H
#define SPROBE_CAPTURE_FIXTURE_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>

enum park_mode {
	PARK_SPIN,	/* busy loop on an atomic */
	PARK_PIPE,	/* blocked in read(2) on a pipe */
	PARK_SIGBLOCK,	/* blocks the capture signal, then read(2) */
	PARK_MALLOC,	/* malloc/free in a loop */
};

struct worker {
	pthread_t th;
	enum park_mode mode;
	int signo;		/* for PARK_SIGBLOCK */
	int pipe[2];
	_Atomic pid_t tid;
	_Atomic int ready;
	_Atomic int stop;
	unsigned long iterations;
};

static inline uint64_t fx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How generous deadlines are: qemu delivers a signal in up to ~0.5 s. */
static inline uint64_t fx_timeout_ns(void)
{
	const char *slow = getenv("SPROBE_TEST_SLOW");

	return slow && *slow == '1' ? 20000000000ull : 5000000000ull;
}

/* Bounded wait until *flag is non-zero. Returns 0 or -ETIMEDOUT. */
static inline int fx_wait_flag(_Atomic int *flag, uint64_t timeout_ns)
{
	uint64_t end = fx_now_ns() + timeout_ns;

	while (!atomic_load(flag)) {
		if (fx_now_ns() > end)
			return -ETIMEDOUT;
		sched_yield();
	}
	return 0;
}

static void *fx_worker_main(void *arg)
{
	struct worker *w = arg;
	char c;

	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	switch (w->mode) {
	case PARK_SPIN:
		atomic_store(&w->ready, 1);
		while (!atomic_load_explicit(&w->stop, memory_order_relaxed))
			w->iterations++;
		break;
	case PARK_SIGBLOCK: {
		sigset_t set;

		sigemptyset(&set);
		sigaddset(&set, w->signo);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	}
		/* fall through */
	case PARK_PIPE:
		atomic_store(&w->ready, 1);
		while (read(w->pipe[0], &c, 1) < 0 && errno == EINTR)
			w->iterations++;
		break;
	case PARK_MALLOC:
		atomic_store(&w->ready, 1);
		while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
			void *p = malloc(16 + (w->iterations % 4096));

			memset(p, 1, 16);
			free(p);
			w->iterations++;
		}
		break;
	}
	return NULL;
}

static inline int fx_worker_start(struct worker *w, enum park_mode mode, int signo)
{
	memset(w, 0, sizeof(*w));
	w->mode = mode;
	w->signo = signo;
	if (pipe(w->pipe) < 0)
		return -errno;
	if (pthread_create(&w->th, NULL, fx_worker_main, w)) {
		close(w->pipe[0]);
		close(w->pipe[1]);
		return -EAGAIN;
	}
	return fx_wait_flag(&w->ready, fx_timeout_ns());
}

static inline void fx_worker_stop(struct worker *w)
{
	char c = 'x';

	atomic_store(&w->stop, 1);
	while (write(w->pipe[1], &c, 1) < 0 && errno == EINTR)
		;
	pthread_join(w->th, NULL);
	close(w->pipe[0]);
	close(w->pipe[1]);
}

/* The sample of tid in s, or NULL. */
static inline struct sprobe_thread_sample *fx_find(struct sprobe_snapshot *s, pid_t tid)
{
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

		if (t->tid == tid)
			return t;
	}
	return NULL;
}

/* total = captured + dropped, and the per-reason counts add up. */
static inline int fx_stats_consistent(const struct sprobe_snapshot_stats *st)
{
	uint32_t sum = 0;

	for (int r = 0; r < SPROBE_DROP__COUNT; r++)
		sum += st->dropped[r];
	return st->threads_total == st->threads_captured + st->threads_dropped &&
	       sum == st->threads_dropped && st->dropped[SPROBE_DROP_NONE] == 0;
}

#endif
