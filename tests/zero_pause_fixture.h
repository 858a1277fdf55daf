/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the zero-pause tests (test_zero_pause.c, test_zero_pause_torn.c,
 * test_zero_pause_kept.c): threads parked in a known chain
 * (tests/zeropause/chain.c) and blocked in a known syscall, the one
 * capturer of the process, and the checks on a walk.
 */
#ifndef SPROBE_ZERO_PAUSE_FIXTURE_H
#define SPROBE_ZERO_PAUSE_FIXTURE_H

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/sampler.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "chain.h"
#include "sprobe_test.h"

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A pause of ms milliseconds while a bounded wait loop polls. */
static inline void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static inline void on_usr2(int sig)
{
	(void)sig;
}

/* ---- parked threads ---------------------------------------------------- */

struct parked {
	struct zp_park p;
	int wfd;
	pthread_t th;
	bool fp;
};

static inline bool nr_matches(int kind, long nr)
{
	switch (kind) {
	case ZP_READ:
		return nr == SYS_read;
	case ZP_FUTEX:
		return nr == SYS_futex;
	case ZP_POLL:
		return nr == SYS_poll || nr == SYS_ppoll;
	case ZP_NANOSLEEP:
		return nr == SYS_nanosleep || nr == SYS_clock_nanosleep;
	case ZP_SELECT:
		return nr == SYS_select || nr == SYS_pselect6;
	}
	return false;
}

/* Wait (bounded) until tid shows as blocked in its kind's syscall. */
static inline void wait_blocked(pid_t tid, int kind)
{
	char path[64], buf[256];
	uint64_t deadline = now_ns() + 5000000000ull;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	for (;;) {
		FILE *f = fopen(path, "r");
		long nr = -2;

		assert_non_null(f);
		if (fgets(buf, sizeof(buf), f) && buf[0] != 'r')
			nr = strtol(buf, NULL, 10);
		fclose(f);
		if (nr_matches(kind, nr))
			return;
		assert_true(now_ns() < deadline);
		pause_ms(1);
	}
}

static inline void park_start(struct parked *w, int kind, bool fp)
{
	int fds[2];

	memset(w, 0, sizeof(*w));
	assert_int_equal(pipe(fds), 0);
	w->p.kind = kind;
	w->p.rfd = fds[0];
	w->wfd = fds[1];
	w->fp = fp;
	assert_int_equal(pthread_create(&w->th, NULL, fp ? zp_park_main_fp : zp_park_main_nofp,
					&w->p),
			 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	/* Acquire; pairs with the release store in zp_park_main. */
	while (!atomic_load_explicit(&w->p.tid, memory_order_acquire)) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(w->p.tid, kind);
}

static inline void park_stop(struct parked *w)
{
	uint64_t deadline = now_ns() + 5000000000ull;

	atomic_store(&w->p.stop, 1);
	for (;;) {
		/* Whatever it blocks in, one of these ends it. */
		if (write(w->wfd, "x", 1) < 0)
			fail_msg("write: %s", strerror(errno));
		atomic_store(&w->p.word, 1);
		syscall(SYS_futex, &w->p.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		syscall(SYS_tgkill, getpid(), w->p.tid, SIGUSR2);
		if (pthread_tryjoin_np(w->th, NULL) == 0)
			break;
		assert_true(now_ns() < deadline);
		pause_ms(1);
	}
	/* pthread_join() returns when the thread has cleared its tid, before
	 * the kernel takes it off /proc/self/task (~0.3 % of joins here): a
	 * thread still listed shifts the slots of the next test's capture, and
	 * a thread that changed slot is copied again, not kept (its kept walk
	 * is its slot's). The next test starts with this one gone. */
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d", (int)w->p.tid);
	while (access(path, F_OK) == 0) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	close(w->p.rfd);
	close(w->wfd);
}

static inline int setup_usr2(void **state)
{
	struct sigaction sa;

	(void)state;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr2; /* no SA_RESTART: nanosleep returns EINTR */
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGUSR2, &sa, NULL);
}

/* One capturer (and sampler) per process: a failed test must not leave
 * its own behind for the next ones; the teardown frees it. */
static struct sprobe_capturer *g_cap;
static struct sprobe_sampler *g_sampler;

static inline struct sprobe_capturer *cap_new(const struct sprobe_capture_opts *o)
{
	g_cap = sprobe_capturer__new(o);
	return g_cap;
}

static inline void cap_free(struct sprobe_capturer *c)
{
	if (c == g_cap)
		g_cap = NULL;
	sprobe_capturer__free(c);
}

static inline int teardown(void **state)
{
	(void)state;
	sprobe_capturer__free(g_cap);
	g_cap = NULL;
	if (g_sampler)
		sprobe_sampler__stop(g_sampler);
	g_sampler = NULL;
	return 0;
}

static inline struct sprobe_capturer *zp_capturer(bool on)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = on };
	struct sprobe_capturer *c = cap_new(&o);
	char why[200];

	assert_non_null(c);
	int zp = sprobe_capturer__zero_pause(c, why, sizeof(why));
	if (on && zp != 1)
		fail_msg("zero-pause refused on this kernel: %s", why);
	if (!on) {
		assert_int_equal(zp, 0);
		assert_string_equal(why, "");
	}
	return c;
}

static inline int find_tid(struct sprobe_snapshot *s, pid_t tid)
{
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++)
		if (sprobe_snapshot__thread(s, i)->tid == tid)
			return (int)i;
	fail_msg("thread %d not in the snapshot", (int)tid);
	return -1;
}

/* Does the walk contain the chain a <- b <- c, in that order outward? */
static inline bool has_chain(struct sprobe_unwinder *u, const struct sprobe_thread_sample *t,
		      const char *const names[3])
{
	struct sprobe_modules *mods = sprobe_unwinder__modules(u);
	int want = 2; /* innermost first: c, then b, then a */

	for (uint32_t i = 0; i < t->nframes && want >= 0; i++) {
		struct sprobe_symbol sym;

		if (sprobe_modules__symbolize(mods, sprobe_frame_lookup_pc(&t->frames[i]), &sym) == 0 &&
		    sym.name && strcmp(sym.name, names[want]) == 0)
			want--;
	}
	return want < 0;
}

static const char *const kind_names[] = { "read", "futex", "poll", "nanosleep", "select" };

/* Capture until the parked thread's sample is zero-pause (a thread just
 * woken by a stray wake-up would take the signal path); returns its index. */
static inline int capture_zp(struct sprobe_capturer *c, struct sprobe_snapshot *s, pid_t tid)
{
	for (int attempt = 0; attempt < 100; attempt++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		int i = find_tid(s, tid);
		if (sprobe_snapshot__thread(s, (uint32_t)i)->method == SPROBE_METHOD_ZERO_PAUSE)
			return i;
	}
	fail_msg("thread %d never captured with zero-pause", (int)tid);
	return -1;
}

#endif
