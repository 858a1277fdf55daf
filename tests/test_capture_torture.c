/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Capture torture: 64 threads doing what real programs do (malloc/free,
 * mutexes, read(2) on pipes, poll(2), nanosleep(2), creating and joining
 * threads, blocking the capture signal, running handlers on a
 * sigaltstack, plain computation) while the test thread captures them
 * over and over.
 *
 * Claims checked: no hang (every capture returns; run-tests.sh kills a
 * hang), no crash, total = captured + dropped on every capture with only
 * the expected drop reasons, every captured copy inside its bounds and
 * unwindable, and every worker's own results unchanged (checksums,
 * counters, pipe sequences, sleep durations), with EINTR handled the way
 * any program with a signal-based profiler must.
 *
 * SPROBE_TORTURE_CAPTURES overrides the number of captures (make soak uses
 * 100000).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "capture_fixture.h"
#include "sprobe_test.h"

enum role {
	R_MALLOC,
	R_MUTEX,
	R_PIPE_W,
	R_PIPE_R,
	R_POLL,
	R_SLEEP,
	R_SPAWN,
	R_SIGBLOCK,
	R_ALTSTACK,
	R_COMPUTE,
	R__COUNT
};

#define NTHREADS 64

struct tw {
	pthread_t th;
	enum role role;
	int idx;
	int fd_r, fd_w; /* pipe pairs: writer idx, reader idx+1 */
	_Atomic pid_t tid;
	unsigned long ops;
	unsigned long errors;
};

static struct {
	_Atomic int stop;
	_Atomic int started;
	int signo;
	pthread_mutex_t lock;
	unsigned long counter;		/* guarded by lock */
	_Atomic unsigned long mutex_ops; /* increments made */
	struct tw w[NTHREADS];
} T;

static unsigned long rnd(unsigned long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* Deep-ish recursion with a verifiable result: sum of 1..n. */
__attribute__((noinline)) static unsigned long rsum(unsigned n)
{
	volatile char pad[64];

	pad[0] = (char)n;
	if (n == 0)
		return pad[0];
	return n + rsum(n - 1) + (unsigned long)pad[0] * 0;
}

static void do_malloc(struct tw *w)
{
	unsigned long seed = (unsigned long)w->idx + 1;

	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		size_t n = 1 + rnd(&seed) % 8192;
		unsigned char *p = malloc(n), v = (unsigned char)rnd(&seed);

		if (!p) {
			w->errors++;
			continue;
		}
		memset(p, v, n);
		for (size_t i = 0; i < n; i += 97)
			if (p[i] != v)
				w->errors++;
		free(p);
		if (++w->ops % 64 == 0)
			sched_yield();
	}
}

static void do_mutex(struct tw *w)
{
	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		pthread_mutex_lock(&T.lock);
		T.counter++;
		pthread_mutex_unlock(&T.lock);
		atomic_fetch_add(&T.mutex_ops, 1);
		if (++w->ops % 16 == 0) {
			struct timespec ts = { 0, 500000 };

			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
}

static void do_pipe_w(struct tw *w)
{
	unsigned char seq = 0;

	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		ssize_t n = write(w->fd_w, &seq, 1);

		if (n == 1) {
			seq++;
			w->ops++;
			struct timespec ts = { 0, 1000000 };
			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		} else if (!(n < 0 && errno == EINTR)) {
			w->errors++;
		}
	}
	close(w->fd_w); /* EOF for the reader */
}

static void do_pipe_r(struct tw *w)
{
	unsigned char expect = 0, b;

	for (;;) {
		ssize_t n = read(w->fd_r, &b, 1);

		if (n == 0)
			break;
		if (n < 0) {
			if (errno != EINTR)
				w->errors++;
			continue;
		}
		if (b != expect)
			w->errors++; /* lost, duplicated or reordered byte */
		expect = (unsigned char)(b + 1);
		w->ops++;
	}
	close(w->fd_r);
}

static void do_poll(struct tw *w)
{
	int p[2];

	if (pipe(p) < 0) {
		w->errors++;
		return;
	}
	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		int r = poll(&pfd, 1, 5);

		/* Nothing is ever written: 0 (timeout) or EINTR only. */
		if (r > 0 || (r < 0 && errno != EINTR))
			w->errors++;
		w->ops++;
	}
	close(p[0]);
	close(p[1]);
}

static void do_sleep(struct tw *w)
{
	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		struct timespec ts = { 0, 2000000 }, rem;
		uint64_t t0 = fx_now_ns();
		int r;

		while ((r = nanosleep(&ts, &rem)) < 0 && errno == EINTR)
			ts = rem;
		/* The full duration is slept despite interruptions. */
		if (r < 0 || fx_now_ns() - t0 < 2000000)
			w->errors++;
		w->ops++;
	}
}

static void *short_thread(void *arg)
{
	unsigned long *out = arg;

	*out = rsum(20);
	return NULL;
}

static void do_spawn(struct tw *w)
{
	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		pthread_t th;
		unsigned long r = 0;

		if (pthread_create(&th, NULL, short_thread, &r)) {
			w->errors++;
			continue;
		}
		pthread_join(th, NULL);
		if (r != 210)
			w->errors++;
		w->ops++;
		struct timespec ts = { 0, 100000 };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

static void do_sigblock(struct tw *w)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, T.signo);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		if (rsum(100) != 5050)
			w->errors++;
		w->ops++;
		struct timespec ts = { 0, 100000 };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}

/* SIGUSR1 runs on the thread's altstack and computes there. */
/* volatile: written by a signal handler. */
static __thread volatile unsigned long t_alt_result;
static void alt_handler(int sig)
{
	(void)sig;
	t_alt_result = rsum(200);
}

static void do_altstack(struct tw *w)
{
	size_t sz = 64 * 1024;
	void *mem = malloc(sz);
	stack_t ss = { .ss_sp = mem, .ss_size = sz };

	if (!mem || sigaltstack(&ss, NULL) < 0) {
		w->errors++;
		return;
	}
	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		t_alt_result = 0;
		pthread_kill(pthread_self(), SIGUSR1);
		if (t_alt_result != 20100)
			w->errors++;
		if (++w->ops % 8 == 0) {
			struct timespec ts = { 0, 100000 };

			while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
				;
		}
	}
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	free(mem);
}

static void do_compute(struct tw *w)
{
	while (!atomic_load_explicit(&T.stop, memory_order_relaxed)) {
		if (rsum(300) != 45150)
			w->errors++;
		if (++w->ops % 32 == 0)
			sched_yield();
	}
}

static void *tw_main(void *arg)
{
	struct tw *w = arg;

	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	atomic_fetch_add(&T.started, 1);
	switch (w->role) {
	case R_MALLOC: do_malloc(w); break;
	case R_MUTEX: do_mutex(w); break;
	case R_PIPE_W: do_pipe_w(w); break;
	case R_PIPE_R: do_pipe_r(w); break;
	case R_POLL: do_poll(w); break;
	case R_SLEEP: do_sleep(w); break;
	case R_SPAWN: do_spawn(w); break;
	case R_SIGBLOCK: do_sigblock(w); break;
	case R_ALTSTACK: do_altstack(w); break;
	case R_COMPUTE: do_compute(w); break;
	default: break;
	}
	return NULL;
}

/* 64 roles: mostly threads that block or sleep (as in real servers), a few
 * that burn CPU (2 cores here: every runnable thread delays delivery). */
static enum role role_of(int i)
{
	static const enum role mix[16] = {
		R_PIPE_W, R_PIPE_R, R_POLL, R_SLEEP, R_MUTEX, R_PIPE_W, R_PIPE_R, R_SLEEP,
		R_POLL, R_SIGBLOCK, R_ALTSTACK, R_MUTEX, R_SLEEP, R_POLL, R_SPAWN, R_SLEEP,
	};

	if (i == 3 || i == 35) /* in place of sleepers, not pipe ends */
		return R_MALLOC;
	if (i == 19)
		return R_COMPUTE;
	return mix[i % 16];
}

static unsigned long captures_wanted(void)
{
	const char *e = getenv("SPROBE_TORTURE_CAPTURES");
	char *end;
	unsigned long n;

	if (!e || !*e)
		return 10000;
	n = strtoul(e, &end, 10);
	return *end || n == 0 ? 10000 : n;
}

static void test_torture(void **state)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o) };
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	struct sigaction sa;
	unsigned long ncap = captures_wanted(), captured = 0, dropped[SPROBE_DROP__COUNT] = { 0 };
	unsigned long frames = 0, blocked_seen = 0;
	pid_t self = (pid_t)syscall(SYS_gettid);
	uint64_t t0, capture_ns = 0, prep_ns = 0, send_ns = 0, wait_ns = 0, tail_ns = 0;

	c = sprobe_capturer__new(&o);
	assert_non_null(c);
	s = sprobe_snapshot__new(256, 0);
	assert_non_null(s);
	T.signo = sprobe_capturer__signo(c);
	pthread_mutex_init(&T.lock, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = alt_handler;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);

	for (int i = 0; i < NTHREADS; i++) {
		struct tw *w = &T.w[i];

		w->idx = i;
		w->role = role_of(i);
		if (w->role == R_PIPE_W) {
			int p[2];

			assert_int_equal(pipe(p), 0);
			w->fd_w = p[1];
			T.w[i + 1].fd_r = p[0];
		}
	}
	for (int i = 0; i < NTHREADS; i++)
		assert_int_equal(pthread_create(&T.w[i].th, NULL, tw_main, &T.w[i]), 0);
	while (atomic_load(&T.started) < NTHREADS)
		sched_yield();

	t0 = fx_now_ns();
	for (unsigned long k = 0; k < ncap; k++) {
		const struct sprobe_snapshot_stats *st;

		uint64_t before = fx_now_ns(), after, sig0 = ~0ull, sig1 = 0, exit1 = 0;

		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		after = fx_now_ns();
		st = sprobe_snapshot__stats(s);
		assert_true(fx_stats_consistent(st));
		capture_ns += st->capture_ns;
		/* 64 workers (+ short-lived ones) and never the caller. */
		assert_true(st->threads_total >= NTHREADS);
		for (int r = 0; r < SPROBE_DROP__COUNT; r++)
			dropped[r] += st->dropped[r];
		captured += st->threads_captured;
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
			struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

			assert_int_not_equal(t->tid, self);
			if (t->signal_ns && t->signal_ns < sig0)
				sig0 = t->signal_ns;
			if (t->signal_ns > sig1)
				sig1 = t->signal_ns;
			if (t->exit_ns > exit1)
				exit1 = t->exit_ns;
			if (t->stage == SPROBE_STAGE_EMPTY) {
				assert_int_not_equal(t->drop_reason, SPROBE_DROP_NONE);
				blocked_seen += t->drop_reason == SPROBE_DROP_BLOCKED;
				continue;
			}
			assert_int_equal(t->drop_reason, SPROBE_DROP_NONE);
			assert_true(t->stack_addr <= t->sp);
			assert_true(t->sp - t->stack_addr <= SPROBE_REDZONE);
			assert_true(t->stack_len >= t->sp - t->stack_addr);
			assert_true(t->stack_len - (t->sp - t->stack_addr) <= SPROBE_MAX_STACK_BYTES);
			assert_true(t->stack_addr + t->stack_len <= t->stack_top);
			assert_true(t->truncated ==
				    (t->stack_top - t->sp > SPROBE_MAX_STACK_BYTES));
			assert_true(t->entry_ns <= t->exit_ns);
		}
		/* Where the time goes (diagnostic, not asserted). */
		if (sig1 && exit1 > sig1) {
			prep_ns += sig0 - before;
			send_ns += sig1 - sig0;
			wait_ns += exit1 - sig1;
			tail_ns += after - exit1;
		}
		if (k % 16 == 0) {
			assert_int_equal(sprobe_snapshot__unwind_fp(s), 0);
			for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
				struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

				if (t->stage == SPROBE_STAGE_UNWOUND) {
					assert_true(t->nframes >= 1 && t->nframes <= SPROBE_MAX_FRAMES);
					frames += t->nframes;
				}
			}
		}
	}
	uint64_t elapsed = fx_now_ns() - t0;

	atomic_store(&T.stop, 1);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(T.w[i].th, NULL);

	print_message("torture: %lu captures in %.1f s (%.2f ms in capture each),"
		      " %lu threads captured, %lu frames;"
		      " dropped: exited %lu blocked %lu timeout %lu no-stack %lu error %lu\n",
		      ncap, (double)elapsed / 1e9, (double)capture_ns / 1e6 / (double)ncap,
		      captured, frames, dropped[SPROBE_DROP_EXITED],
		      dropped[SPROBE_DROP_BLOCKED], dropped[SPROBE_DROP_TIMEOUT],
		      dropped[SPROBE_DROP_NO_STACK], dropped[SPROBE_DROP_ERROR]);
	print_message("torture: per capture: %.0f us before the first signal, %.0f us sending,"
		      " %.0f us until the last handler exits, %.0f us to return\n",
		      (double)prep_ns / 1e3 / (double)ncap, (double)send_ns / 1e3 / (double)ncap,
		      (double)wait_ns / 1e3 / (double)ncap, (double)tail_ns / 1e3 / (double)ncap);
	/* The workloads' own results. */
	unsigned long ops[R__COUNT] = { 0 };
	for (int i = 0; i < NTHREADS; i++) {
		if (T.w[i].errors)
			print_message("worker %d (role %d): %lu errors\n", i, T.w[i].role,
				      T.w[i].errors);
		assert_int_equal(T.w[i].errors, 0);
		ops[T.w[i].role] += T.w[i].ops;
	}
	assert_int_equal(T.counter, atomic_load(&T.mutex_ops));
	for (int r = 0; r < R__COUNT; r++)
		assert_true(ops[r] > 0); /* every kind of work ran */
	/* Pipe readers got every byte their writers wrote. */
	for (int i = 0; i < NTHREADS; i++)
		if (T.w[i].role == R_PIPE_W)
			assert_int_equal(T.w[i].ops, T.w[i + 1].ops);
	/* The threads that block the signal were seen and dropped as such. */
	assert_true(blocked_seen >= ncap);
	assert_int_equal(dropped[SPROBE_DROP_NO_STACK], 0);
	assert_int_equal(dropped[SPROBE_DROP_ERROR], 0);
	assert_int_equal(dropped[SPROBE_DROP_NO_SLOT], 0);
	assert_true(captured > 0);

	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGUSR1, &sa, NULL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_torture),
};

SPROBE_TEST_MAIN(tests)
