/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zero-pause capture of blocked threads (docs/capture.md "Zero-pause"):
 *  - a thread parked in a known chain (tests/zeropause/chain.c, built with
 *    and without frame pointers) and blocked in read, futex, poll and
 *    nanosleep gives the same frames read without a signal as through the
 *    signal path; where the walk of the zero-pause copy needs the frame
 *    pointer (the register gap) the sample is re-captured with a signal;
 *  - a thread woken again and again while its stack is copied is never
 *    reported with a torn stack: it writes a sequence pattern over a 64 KiB
 *    array of its stack each time it wakes, and every zero-pause sample
 *    must hold one whole pattern (without the schedstat check this fails:
 *    see docs/capture.md); every 64th capture comes after it has certainly
 *    blocked again, so zero-pause samples exist even when busy CPUs make
 *    every other capture find it running;
 *  - the same, deterministically: a hook wakes the thread between the
 *    read of its SP/PC and the copy; the copy must be refused;
 *  - poll/select loops under a 999 Hz wall sampler see no EINTR with
 *    zero-pause, and do see it through the signal path (the control);
 *  - the switch, the stats and bad arguments.
 * No timing is asserted. Real threads, real signals, real /proc.
 */
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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A pause of ms milliseconds while a bounded wait loop polls. */
static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void on_usr2(int sig)
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

static bool nr_matches(int kind, long nr)
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
static void wait_blocked(pid_t tid, int kind)
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

static void park_start(struct parked *w, int kind, bool fp)
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

static void park_stop(struct parked *w)
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

static int setup_usr2(void **state)
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

static struct sprobe_capturer *cap_new(const struct sprobe_capture_opts *o)
{
	g_cap = sprobe_capturer__new(o);
	return g_cap;
}

static void cap_free(struct sprobe_capturer *c)
{
	if (c == g_cap)
		g_cap = NULL;
	sprobe_capturer__free(c);
}

static int teardown(void **state)
{
	(void)state;
	sprobe_capturer__free(g_cap);
	g_cap = NULL;
	if (g_sampler)
		sprobe_sampler__stop(g_sampler);
	g_sampler = NULL;
	return 0;
}

static struct sprobe_capturer *zp_capturer(bool on)
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

static int find_tid(struct sprobe_snapshot *s, pid_t tid)
{
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++)
		if (sprobe_snapshot__thread(s, i)->tid == tid)
			return (int)i;
	fail_msg("thread %d not in the snapshot", (int)tid);
	return -1;
}

/* Does the walk contain the chain a <- b <- c, in that order outward? */
static bool has_chain(struct sprobe_unwinder *u, const struct sprobe_thread_sample *t,
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
static int capture_zp(struct sprobe_capturer *c, struct sprobe_snapshot *s, pid_t tid)
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

static void test_frames_match_signal_path(void **state)
{
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	static struct sprobe_frame zpf[SPROBE_MAX_FRAMES];
	unsigned short_walks[2] = { 0, 0 };

	(void)state;
	assert_non_null(s);
	assert_non_null(u);
	for (int fp = 0; fp < 2; fp++) {
		for (int kind = ZP_READ; kind <= ZP_NANOSLEEP; kind++) {
			struct parked w;
			enum sprobe_unwind_stop zwhy, swhy;

			park_start(&w, kind, fp);
			int i = capture_zp(c, s, w.p.tid);
			struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, (uint32_t)i);
			assert_int_equal(t->stage, SPROBE_STAGE_RAW);
			assert_int_equal(t->signal_ns, 0);
			assert_true(t->exit_ns >= t->entry_ns && t->entry_ns > 0);
			assert_int_equal(sprobe_modules__refresh(sprobe_unwinder__modules(u)) < 0, 0);
			int nz = sprobe_unwinder__unwind(u, t, &zwhy);
			assert_true(nz >= 1);
			memcpy(zpf, t->frames, (size_t)nz * sizeof(zpf[0]));

			/* The same thread, same slot, through the signal path. */
			uint32_t idx = (uint32_t)i;
			assert_int_equal(sprobe_capturer__recapture(c, s, &idx, 1), 0);
			assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
			assert_int_equal(t->stage, SPROBE_STAGE_RAW);
			assert_int_equal(sprobe_snapshot__stats(s)->zp_recaptured, 1);
			int ns = sprobe_unwinder__unwind(u, t, &swhy);
			assert_int_equal(swhy, SPROBE_UNWIND_END);
			assert_true(has_chain(u, t, fp ? zp_chain_names_fp : zp_chain_names_nofp));

			print_message("  %-4s %-9s zero-pause %2d frames (%s), signal %2d frames\n",
				      fp ? "fp" : "nofp", kind_names[kind], nz,
				      sprobe_unwind_stop__str(zwhy), ns);
			if (zwhy == SPROBE_UNWIND_END) {
				/* Frame 0: the signal path may see the syscall
				 * instruction itself (SA_RESTART rewinds the ip
				 * by its length); every caller is identical. */
				assert_int_equal(nz, ns);
				uint64_t d = zpf[0].pc > t->frames[0].pc ? zpf[0].pc - t->frames[0].pc
									 : t->frames[0].pc - zpf[0].pc;
				assert_true(d <= 16);
				for (int k = 1; k < nz; k++)
					assert_int_equal(zpf[k].pc, t->frames[k].pc);
			} else {
				short_walks[fp]++;
			}
			park_stop(&w);
		}
	}
	print_message("  zero-pause walks short of the thread start: nofp %u/4, fp %u/4\n",
		      short_walks[0], short_walks[1]);
	/* Without frame pointers DWARF needs SP and PC only. Under a
	 * sanitizer the blocking calls go through its interceptors, which
	 * keep frame pointers: the register gap then applies to them too. */
	if (!getenv("SPROBE_TEST_SANITIZER"))
		assert_int_equal(short_walks[0], 0);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* What test_copy_stops_at_the_tcb's capturing thread did. */
struct tcb_run {
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	struct sprobe_unwinder *u;
	pid_t tid;
	int idx, nz, err;
	enum sprobe_unwind_stop why;
};

/* Capture and unwind from a thread glibc created, as the sampler's probe
 * does (the main thread's TCB is not on its stack: nothing to learn
 * there). No assertion here: cmocka's belong to the test's thread. */
static void *tcb_capture_main(void *arg)
{
	struct tcb_run *r = arg;

	r->idx = -1;
	for (int attempt = 0; attempt < 100 && r->idx < 0; attempt++) {
		r->err = sprobe_capturer__capture(r->c, r->s);
		if (r->err)
			return NULL;
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(r->s); i++) {
			struct sprobe_thread_sample *t = sprobe_snapshot__thread(r->s, i);

			if (t->tid == r->tid && t->method == SPROBE_METHOD_ZERO_PAUSE)
				r->idx = (int)i;
		}
	}
	if (r->idx >= 0) {
		r->err = sprobe_modules__refresh(sprobe_unwinder__modules(r->u)) < 0;
		r->nz = sprobe_unwinder__unwind(r->u, sprobe_snapshot__thread(r->s, (uint32_t)r->idx),
						&r->why);
	}
	return NULL;
}

/* A glibc thread's zero-pause copy stops at its thread control block
 * (zero_pause.c, zp_tcb_guess(): the TLS and struct pthread above it are
 * not stack), where the handler's copy stops (its thread pointer), and
 * walks to the thread's start frame for frame as the signal path's does. x86_64 glibc only, where the TCB is
 * recognised; elsewhere the copy goes to the mapping's end as before. */
static void test_copy_stops_at_the_tcb(void **state)
{
#if defined(__x86_64__) && defined(__GLIBC__)
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	static struct sprobe_frame zpf[SPROBE_MAX_FRAMES];
	struct tcb_run r = { .c = c, .s = s, .u = u };
	enum sprobe_unwind_stop swhy;
	struct parked w;
	pthread_t th;

	(void)state;
	assert_non_null(s);
	assert_non_null(u);
	park_start(&w, ZP_FUTEX, false);
	r.tid = w.p.tid;
	assert_int_equal(pthread_create(&th, NULL, tcb_capture_main, &r), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(r.err, 0);
	if (r.idx < 0)
		fail_msg("thread %d never captured with zero-pause", (int)r.tid);
	struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, (uint32_t)r.idx);
	/* glibc's pthread_t is the address of the thread's TCB. */
	assert_int_equal(t->stack_top, (uint64_t)w.th);
	assert_int_equal(t->stack_addr + t->stack_len, t->stack_top);
	assert_false(t->truncated);
	print_message("  copy %zu bytes, to the TCB at %#llx\n", t->stack_len,
		      (unsigned long long)t->stack_top);
	assert_int_equal(r.why, SPROBE_UNWIND_END);
	assert_true(r.nz >= 1);
	memcpy(zpf, t->frames, (size_t)r.nz * sizeof(zpf[0]));

	uint32_t idx = (uint32_t)r.idx;
	assert_int_equal(sprobe_capturer__recapture(c, s, &idx, 1), 0);
	assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
	/* The handler stops at its thread pointer: the same place. */
	assert_int_equal(t->stack_top, (uint64_t)w.th);
	int ns = sprobe_unwinder__unwind(u, t, &swhy);
	assert_int_equal(swhy, SPROBE_UNWIND_END);
	assert_int_equal(ns, r.nz);
	for (int k = 1; k < ns; k++)
		assert_int_equal(zpf[k].pc, t->frames[k].pc);
	park_stop(&w);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
	cap_free(c);
#else
	(void)state;
	print_message("  not x86_64 glibc: the copy goes to the mapping's end\n");
#endif
}

/* sprobe_capture_and_resolve(): a frame-pointer chain whose zero-pause
 * walk falls short comes back complete, re-captured with a signal in the
 * same call; a chain without frame pointers stays zero-pause. */
static void test_gap_closed_by_recapture(void **state)
{
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	struct parked a, b;
	struct sprobe_unwinder_stats st;

	(void)state;
	/* FUTEX: a raw syscall(), which no sanitizer intercepts (their read
	 * interceptor keeps a frame pointer: the gap would hit b too). */
	park_start(&a, ZP_FUTEX, true);
	park_start(&b, ZP_FUTEX, false);
	bool seen_fp_zp = false, seen_nofp_zp = false;
	for (int round = 0; round < 20 && !(seen_fp_zp && seen_nofp_zp); round++) {
		assert_int_equal(sprobe_capture_and_resolve(c, s, u), 0);
		const struct sprobe_snapshot_stats *ss = sprobe_snapshot__stats(s);
		assert_int_equal(ss->threads_total, ss->threads_captured + ss->threads_dropped);
		struct sprobe_thread_sample *ta = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, a.p.tid));
		struct sprobe_thread_sample *tb = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, b.p.tid));
		assert_int_equal(ta->stage, SPROBE_STAGE_UNWOUND);
		assert_int_equal(tb->stage, SPROBE_STAGE_UNWOUND);
		assert_true(has_chain(u, ta, zp_chain_names_fp));
		assert_true(has_chain(u, tb, zp_chain_names_nofp));
		uint32_t nzp = 0;
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++)
			nzp += sprobe_snapshot__thread(s, i)->method == SPROBE_METHOD_ZERO_PAUSE;
		assert_int_equal(ss->zp_captured, nzp);
		/* The fp thread came through the signal path after its
		 * zero-pause walk fell short, and it was counted. */
		if (ta->method == SPROBE_METHOD_SIGNAL && ss->zp_recaptured >= 1)
			seen_fp_zp = true;
		if (tb->method == SPROBE_METHOD_ZERO_PAUSE)
			seen_nofp_zp = true;
	}
	assert_true(seen_fp_zp);
	assert_true(seen_nofp_zp);
	assert_int_equal(sprobe_unwinder__stats(u, &st), 0);
	print_message("  zero-pause walks %llu, short (re-captured) %llu\n",
		      (unsigned long long)st.zp_walks, (unsigned long long)st.zp_short);
	assert_true(st.zp_short >= 1 && st.zp_short < st.zp_walks);
	park_stop(&a);
	park_stop(&b);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* The unwinder only reports a short zero-pause walk
 * (sprobe_unwinder__short_walks()); re-capturing is the orchestrator's
 * (sprobe_unwinder__resolve(), userspace/sampler/resolve.c): after
 * capture + unwind_snapshot the fp thread's sample is still the zero-pause
 * one, listed as short, and nothing was re-captured. */
static void test_unwinder_reports_short_walks(void **state)
{
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	struct parked a;
	bool seen = false;

	(void)state;
	park_start(&a, ZP_FUTEX, true);
	for (int round = 0; round < 20 && !seen; round++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		int ia = find_tid(s, a.p.tid);
		struct sprobe_thread_sample *ta = sprobe_snapshot__thread(s, (uint32_t)ia);
		bool zp = ta->method == SPROBE_METHOD_ZERO_PAUSE && ta->stage == SPROBE_STAGE_RAW;

		assert_true(sprobe_unwinder__unwind_snapshot(u, s) >= 1);
		const uint32_t *idx = NULL;
		uint32_t n = sprobe_unwinder__short_walks(u, &idx);
		bool listed = false;
		for (uint32_t k = 0; k < n; k++)
			listed |= idx[k] == (uint32_t)ia;
		assert_true(n == 0 || idx != NULL);
		/* Nothing re-captured: the sample is the one the capture took. */
		assert_int_equal(sprobe_snapshot__stats(s)->zp_recaptured, 0);
		if (zp && listed) {
			assert_int_equal(ta->method, SPROBE_METHOD_ZERO_PAUSE);
			seen = true;
		}
	}
	assert_true(seen);
	assert_int_equal(sprobe_unwinder__short_walks(NULL, NULL), 0);
	park_stop(&a);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* ---- torn copies --------------------------------------------------------- */

#define TORN_WORDS 8192 /* 64 KiB of the woken thread's stack */

struct torn {
	int rfd, wfd;
	_Atomic uint32_t seq;	/* fills completed; the writer's futex word */
	_Atomic int stop;
	_Atomic pid_t tid;
	_Atomic uint64_t arr;	/* address of the pattern array */
	_Atomic uint64_t filled; /* n of the last complete fill: pattern(n) */
	/* The test holds the writer to make the reader block for certain:
	 * hold is the writer's futex word while held, held_gen its answer
	 * (the hold round it has stopped for, after its last wake-up's fill). */
	_Atomic uint32_t hold, hold_gen, held_gen;
};

static uint64_t pattern(uint64_t n)
{
	return n * 0x9e3779b97f4a7c15ull | 1;
}

/* Blocks in read(); every wake-up writes pattern(n) over the whole array,
 * then tells the writer. It writes from the top down while the probe's
 * copy reads upwards, so a copy that overlaps a fill in time crosses it
 * and holds two patterns. */
static void *torn_main(void *arg)
{
	struct torn *t = arg;
	volatile uint64_t arr[TORN_WORDS];

	for (int i = 0; i < TORN_WORDS; i++)
		arr[i] = pattern(0);
	atomic_store(&t->arr, (uint64_t)(uintptr_t)arr);
	atomic_store_explicit(&t->tid, (pid_t)syscall(SYS_gettid), memory_order_release);
	for (uint64_t n = 1; !atomic_load(&t->stop); n++) {
		char ch;

		if (read(t->rfd, &ch, 1) <= 0)
			continue;
		for (int i = TORN_WORDS - 1; i >= 0; i--)
			arr[i] = pattern(n);
		atomic_store(&t->filled, n);
		atomic_fetch_add(&t->seq, 1);
		syscall(SYS_futex, &t->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

/* Wakes the reader, waits until it has filled the array, again. */
static void *torn_writer(void *arg)
{
	struct torn *t = arg;

	while (!atomic_load(&t->stop)) {
		uint32_t seen = atomic_load(&t->seq);
		struct timespec ts = { 0, 10000000 };

		if (atomic_load(&t->hold)) {
			/* Its last wake-up has been filled (the wait below), so
			 * the reader goes back to read() and blocks there. */
			atomic_store(&t->held_gen, atomic_load(&t->hold_gen));
			syscall(SYS_futex, &t->held_gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
			while (atomic_load(&t->hold) && !atomic_load(&t->stop))
				syscall(SYS_futex, &t->hold, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
			continue;
		}
		if (write(t->wfd, "x", 1) != 1)
			break;
		while (atomic_load(&t->seq) == seen && !atomic_load(&t->stop))
			syscall(SYS_futex, &t->seq, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
	}
	return NULL;
}

/* Hold the writer and wait (bounded) until the reader, whose last wake-up
 * has been filled, is blocked in read() again: nothing can wake it until
 * torn_release(). Polls /proc with sched_yield (no sleep decides). */
static void torn_hold(struct torn *t)
{
	uint32_t gen = atomic_load(&t->hold_gen) + 1;
	uint64_t deadline = now_ns() + 5000000000ull;
	struct timespec ts = { 0, 10000000 };
	char path[64], buf[256];

	atomic_store(&t->hold_gen, gen);
	atomic_store(&t->hold, 1);
	for (uint32_t g; (g = atomic_load(&t->held_gen)) != gen;) {
		assert_true(now_ns() < deadline);
		syscall(SYS_futex, &t->held_gen, FUTEX_WAIT_PRIVATE, g, &ts, NULL, 0);
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)atomic_load(&t->tid));
	for (;;) {
		FILE *f = fopen(path, "r");

		assert_non_null(f);
		/* "running" while on a CPU; the syscall number once off it. */
		bool blocked = fgets(buf, sizeof(buf), f) && buf[0] != 'r' &&
			       strtol(buf, NULL, 10) == SYS_read;
		fclose(f);
		if (blocked)
			return;
		assert_true(now_ns() < deadline);
		sched_yield();
	}
}

static void torn_release(struct torn *t)
{
	atomic_store(&t->hold, 0);
	syscall(SYS_futex, &t->hold, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Whether the zero-pause copy X holds the array in one piece; *first is
 * its first word (the pattern it holds, if whole). */
static bool torn_copy_whole(const struct sprobe_thread_sample *x, uint64_t arr, uint64_t *first)
{
	static uint64_t copy[TORN_WORDS];

	/* The array lives in torn_main's frame, above the SP of the
	 * read() it blocks in: inside every copy. */
	assert_true(arr >= x->stack_addr && arr + sizeof(copy) <= x->stack_addr + x->stack_len);
	memcpy(copy, x->stack + (arr - x->stack_addr), sizeof(copy));
	*first = copy[0];
	for (int i = 1; i < TORN_WORDS; i++)
		if (copy[i] != copy[0])
			return false;
	return true;
}

static void test_woken_thread_never_torn(void **state)
{
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(16, 0);
	struct torn t;
	pthread_t th, wr;
	int fds[2];
	unsigned zp = 0, sig = 0, torn = 0, fallback = 0, captures = 0, kept = 0;

	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(pipe(fds), 0);
	t.rfd = fds[0];
	t.wfd = fds[1];
	assert_int_equal(pthread_create(&th, NULL, torn_main, &t), 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (!atomic_load_explicit(&t.tid, memory_order_acquire)) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	assert_int_equal(pthread_create(&wr, NULL, torn_writer, &t), 0);

	uint64_t arr = atomic_load(&t.arr), end = now_ns() + 1500000000ull;
	uint32_t last_seq = 0;
	unsigned quiet = 0, released = 0;
	bool just_released = false;
	while (now_ns() < end && captures < 20000) {
		const struct sprobe_thread_sample *x;
		uint64_t w;

		if (captures % 64 == 0) {
			/* The reader has certainly blocked again after its last
			 * wake-up (torn_hold): this capture must be zero-pause
			 * and hold that wake-up's fill, whole. A loaded machine
			 * cannot take these away, where it can make every racing
			 * capture below find the reader running. */
			torn_hold(&t);
			assert_int_equal(sprobe_capturer__capture(c, s), 0);
			captures++;
			fallback += sprobe_snapshot__stats(s)->zp_fallback;
			kept += sprobe_snapshot__stats(s)->zp_unchanged;
			x = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, t.tid));
			assert_int_equal(x->stage, SPROBE_STAGE_RAW);
			assert_int_equal(x->method, SPROBE_METHOD_ZERO_PAUSE);
			assert_true(torn_copy_whole(x, arr, &w));
			assert_true(w == pattern(atomic_load(&t.filled)));
			quiet++;
			/* The next capture starts while the reader is still
			 * blocked and the writer is about to wake it: the copy
			 * races the wake-up and the fill. */
			torn_release(&t);
			last_seq = atomic_load(&t.seq);
			just_released = true;
			continue;
		}
		/* Otherwise one capture per wake-up of the reader: it has run
		 * since the last capture (so its previous copy cannot simply
		 * be kept) and is about to block and be woken again. */
		if (!just_released) {
			for (int spin = 0; atomic_load(&t.seq) == last_seq && spin < 100000; spin++)
				sched_yield();
			last_seq = atomic_load(&t.seq);
		}
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		captures++;
		fallback += sprobe_snapshot__stats(s)->zp_fallback;
		kept += sprobe_snapshot__stats(s)->zp_unchanged;
		x = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, t.tid));
		if (x->stage != SPROBE_STAGE_RAW || x->method != SPROBE_METHOD_ZERO_PAUSE) {
			sig += x->stage == SPROBE_STAGE_RAW;
			just_released = false;
			continue;
		}
		zp++;
		released += just_released;
		just_released = false;
		if (!torn_copy_whole(x, arr, &w))
			torn++;
	}
	atomic_store(&t.stop, 1);
	print_message("  %u captures: %u zero-pause after the reader certainly blocked (none "
		      "torn: asserted), %u racing zero-pause (%u of them right after the "
		      "writer's release; %u torn), %u signal, %u zero-pause copies refused "
		      "(schedstat changed); %u samples of any thread kept unchanged\n",
		      captures, quiet, zp, released, torn, sig, fallback, kept);
	if (!zp)
		print_message("  no racing capture found the reader blocked on this machine "
			      "(busy CPUs): the race was tried %u times, the property checked on "
			      "the %u certain ones only\n", captures - quiet, quiet);
	assert_int_equal(torn, 0);
	assert_true(quiet > 0);
	/* Shut down: the reader may be blocked in read, the writer in its
	 * futex wait (10 ms timeout, re-checks stop). */
	if (write(t.wfd, "x", 1) != 1)
		fail_msg("write");
	pthread_join(wr, NULL);
	for (uint64_t d = now_ns() + 5000000000ull; pthread_tryjoin_np(th, NULL) != 0;) {
		assert_true(now_ns() < d);
		if (write(t.wfd, "x", 1) != 1)
			fail_msg("write");
		pause_ms(1);
	}
	close(fds[0]);
	close(fds[1]);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* The schedstat check itself, deterministically: the hook wakes the
 * parked thread between the probe's read of its SP/PC and the copy, and
 * waits until it has run (and blocked again). The copy must be refused
 * and the thread captured through the signal path instead. */
struct wake_ctx {
	struct parked *w;
	unsigned hooked;
};

static void wake_before_copy(void *ctx, pid_t tid)
{
	struct wake_ctx *x = ctx;
	unsigned wakes = atomic_load(&x->w->p.wakes);
	uint64_t deadline = now_ns() + 5000000000ull;

	if (tid != x->w->p.tid)
		return;
	x->hooked++;
	assert_int_equal(write(x->w->wfd, "x", 1), 1);
	while (atomic_load(&x->w->p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
}

static void test_thread_that_ran_is_refused(void **state)
{
	struct parked w;
	struct wake_ctx x = { .w = &w };
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .before_zp_copy = wake_before_copy, .hook_ctx = &x };
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);

	(void)state;
	park_start(&w, ZP_READ, false);
	struct sprobe_capturer *c = cap_new(&o);
	assert_non_null(c);
	assert_int_equal(sprobe_capturer__zero_pause(c, NULL, 0), 1);
	for (int k = 0; k < 5; k++) {
		wait_blocked(w.p.tid, ZP_READ);
		unsigned before = x.hooked;
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		assert_int_equal(x.hooked, before + 1);
		const struct sprobe_thread_sample *t =
			sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
		assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
		assert_true(sprobe_snapshot__stats(s)->zp_fallback >= 1);
	}
	cap_free(c);
	sprobe_snapshot__free(s);
	park_stop(&w);
}

/* A thread not switched in since its last zero-pause copy keeps that copy
 * (one schedstat read): same registers, same bytes. Once it has run, or
 * in another snapshot, it is copied afresh. */
struct copy_count {
	pid_t tid;
	unsigned copies; /* full-path attempts for tid (the hook runs there) */
};

static void count_copy(void *ctx, pid_t tid)
{
	struct copy_count *x = ctx;

	if (tid == x->tid)
		x->copies++;
}

static void test_unchanged_thread_keeps_its_copy(void **state)
{
	struct parked w;
	struct copy_count cc = { 0 };
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .before_zp_copy = count_copy, .hook_ctx = &cc };
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0), *s2 = sprobe_snapshot__new(64, 0);
	static uint8_t first[SPROBE_MAX_STACK_BYTES + 256];
	uint64_t ip, sp, len, addr;
	unsigned copies;

	(void)state;
	park_start(&w, ZP_READ, false);
	cc.tid = w.p.tid;
	struct sprobe_capturer *c = cap_new(&o);
	assert_non_null(c);
	int i = capture_zp(c, s, w.p.tid);
	const struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, (uint32_t)i);
	ip = t->ip;
	sp = t->sp;
	len = t->stack_len;
	addr = t->stack_addr;
	assert_true(len <= sizeof(first));
	memcpy(first, t->stack, len);

	copies = cc.copies;
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
	assert_int_equal(t->method, SPROBE_METHOD_ZERO_PAUSE);
	assert_int_equal(cc.copies, copies); /* not copied again */
	assert_true(sprobe_snapshot__stats(s)->zp_unchanged >= 1);
	assert_int_equal(t->ip, ip);
	assert_int_equal(t->sp, sp);
	assert_int_equal(t->stack_addr, addr);
	assert_int_equal(t->stack_len, len);
	assert_memory_equal(t->stack, first, len);
	assert_true(t->entry_ns > 0 && t->exit_ns >= t->entry_ns);

	/* Another snapshot: its slot holds nothing of ours. */
	assert_int_equal(sprobe_capturer__capture(c, s2), 0);
	assert_int_equal(sprobe_snapshot__stats(s2)->zp_unchanged, 0);
	assert_int_equal(cc.copies, copies + 1);
	/* Back to s: s2 was captured into since, so no reuse either. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_int_equal(sprobe_snapshot__stats(s)->zp_unchanged, 0);
	assert_int_equal(cc.copies, copies + 2);

	/* The thread runs (one byte read, back into read()): fresh copy. */
	unsigned wakes = atomic_load(&w.p.wakes);
	assert_int_equal(write(w.wfd, "x", 1), 1);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (atomic_load(&w.p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(w.p.tid, ZP_READ);
	copies = cc.copies;
	i = capture_zp(c, s, w.p.tid);
	assert_true(cc.copies > copies); /* copied afresh */
	cap_free(c);
	sprobe_snapshot__free(s);
	sprobe_snapshot__free(s2);
	park_stop(&w);
}

/* An unchanged thread also keeps its walk: the second capture hands back
 * the sample already UNWOUND with the same frames, and resolve() does not
 * walk it again; once the thread has run, it is walked afresh. */
static void test_unchanged_thread_keeps_its_walk(void **state)
{
	struct parked w;
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	struct sprobe_unwinder_stats st0, st1;
	static struct sprobe_frame frames[SPROBE_MAX_FRAMES];
	uint32_t nframes = 0;
	struct sprobe_thread_sample *t = NULL;

	(void)state;
	assert_non_null(c);
	assert_non_null(u);
	/* No frame pointers: the zero-pause walk is complete (not re-captured). */
	park_start(&w, ZP_FUTEX, false);
	for (int round = 0; round < 20; round++) {
		assert_int_equal(sprobe_capture_and_resolve(c, s, u), 0);
		t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
		if (t->method == SPROBE_METHOD_ZERO_PAUSE && t->stage == SPROBE_STAGE_UNWOUND)
			break;
	}
	assert_int_equal(t->method, SPROBE_METHOD_ZERO_PAUSE);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_true(has_chain(u, t, zp_chain_names_nofp));
	nframes = t->nframes;
	assert_true(nframes > 3);
	memcpy(frames, t->frames, nframes * sizeof(frames[0]));

	/* Not run since: the capture itself returns the walk. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
	assert_true(sprobe_snapshot__stats(s)->zp_unchanged >= 1);
	assert_int_equal(t->method, SPROBE_METHOD_ZERO_PAUSE);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_int_equal(t->nframes, nframes);
	assert_memory_equal(t->frames, frames, nframes * sizeof(frames[0]));
	assert_int_equal(sprobe_unwinder__stats(u, &st0), 0);
	assert_true(sprobe_unwinder__resolve(u, c, s) >= 1);
	assert_int_equal(sprobe_unwinder__stats(u, &st1), 0);
	assert_int_equal(st1.zp_walks, st0.zp_walks); /* not walked again */
	assert_int_equal(t->nframes, nframes);
	assert_memory_equal(t->frames, frames, nframes * sizeof(frames[0]));

	/* It runs (wake the futex, it waits again): a fresh copy, walked. */
	unsigned wakes = atomic_load(&w.p.wakes);
	/* word stays 0: it returns from the wait and waits again */
	syscall(SYS_futex, &w.p.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (atomic_load(&w.p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(w.p.tid, ZP_FUTEX);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid));
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_int_equal(t->nframes, 0);
	assert_true(sprobe_unwinder__resolve(u, c, s) >= 1);
	assert_int_equal(sprobe_unwinder__stats(u, &st1), 0);
	assert_true(st1.zp_walks > st0.zp_walks);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_true(has_chain(u, t, zp_chain_names_nofp));

	park_stop(&w);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* Resident pages of [p, p + len) (mincore: the kernel's page tables, real). */
static unsigned resident_pages(const void *p, size_t len)
{
	uintptr_t lo = (uintptr_t)p & ~(uintptr_t)4095;
	uintptr_t hi = ((uintptr_t)p + len + 4095) & ~(uintptr_t)4095;
	unsigned char vec[SPROBE_MAX_STACK_BYTES / 4096 + 2];
	unsigned n = 0;

	assert_true((hi - lo) / 4096 <= sizeof(vec));
	assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
	for (size_t k = 0; k < (hi - lo) / 4096; k++)
		n += vec[k] & 1;
	return n;
}

/* N blocked threads cost no resident copy between captures once they
 * have stayed blocked for a round: sprobe_snapshot__trim() gives back the
 * copies the capture kept (mincore says the pages are gone), not the
 * fresh ones; the next capture keeps the unchanged threads' walks without
 * copying (their buffers stay unpopulated); and a copy that was not
 * unwound is never reused once given back (it is copied afresh). */
#define TRIM_N 12
static void test_trim_gives_blocked_copies_back(void **state)
{
	struct parked w[TRIM_N];
	struct copy_count cc = { 0 };
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .before_zp_copy = count_copy, .hook_ctx = &cc };
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	const uint8_t *buf[TRIM_N];
	size_t len[TRIM_N];
	int idx[TRIM_N];
	bool all = false;

	(void)state;
	assert_non_null(s);
	assert_non_null(u);
	for (int k = 0; k < TRIM_N; k++)
		park_start(&w[k], ZP_FUTEX, false); /* no frame pointers: complete walks */
	struct sprobe_capturer *c = cap_new(&o);
	assert_non_null(c);
	assert_int_equal(sprobe_capturer__zero_pause(c, NULL, 0), 1);
	/* Rounds until one in which every parked thread's copy was kept
	 * (blocked since the round before; one just created may still be
	 * on its way into the wait). A fresh copy is not given back. */
	for (int round = 0; round < 50 && !all; round++) {
		assert_int_equal(sprobe_capture_and_resolve(c, s, u), 0);
		all = sprobe_snapshot__stats(s)->zp_unchanged >= TRIM_N;
		for (int k = 0; k < TRIM_N; k++) {
			const struct sprobe_thread_sample *t =
				sprobe_snapshot__thread(s, (uint32_t)(idx[k] = find_tid(s, w[k].p.tid)));

			all &= t->method == SPROBE_METHOD_ZERO_PAUSE &&
			       t->stage == SPROBE_STAGE_UNWOUND && t->stack_len > 0;
			buf[k] = t->stack;
			len[k] = t->stack_len;
		}
		if (round == 0) /* the first copies are all fresh: none given back */
			assert_int_equal(sprobe_snapshot__trim(s), 0);
	}
	assert_true(all);
	for (int k = 0; k < TRIM_N; k++)
		assert_true(resident_pages(buf[k], len[k]) >= 1); /* the copy is there */

	int given = sprobe_snapshot__trim(s);
	assert_true(given >= TRIM_N);
	for (int k = 0; k < TRIM_N; k++) {
		const struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, (uint32_t)idx[k]);

		assert_int_equal(t->stack_len, 0);
		assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND); /* the walk stays */
		assert_true(t->nframes > 3);
		assert_int_equal(resident_pages(buf[k], len[k]), 0);
	}
	assert_int_equal(sprobe_snapshot__trim(s), 0); /* nothing left to give */

	/* Not run since: walks kept, nothing copied, buffers still empty. */
	unsigned copies, kept = 0;
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	for (int k = 0; k < TRIM_N; k++) {
		const struct sprobe_thread_sample *t =
			sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w[k].p.tid));

		if (t->method == SPROBE_METHOD_ZERO_PAUSE && t->stage == SPROBE_STAGE_UNWOUND) {
			kept++;
			assert_int_equal(t->stack_len, 0);
			assert_true(has_chain(u, t, zp_chain_names_nofp));
			assert_int_equal(resident_pages(buf[k], len[k]), 0);
		}
	}
	print_message("  %u of %d blocked threads kept their walk without a copy\n", kept, TRIM_N);
	assert_true(kept >= 1);
	assert_true(sprobe_snapshot__stats(s)->zp_unchanged >= kept);

	/* A copy given back before it was unwound is not reused: the thread
	 * runs, is copied afresh (not unwound), kept by the next capture,
	 * given back; the capture after copies it afresh, resident again. */
	cc.tid = w[0].p.tid;
	unsigned wakes = atomic_load(&w[0].p.wakes);
	syscall(SYS_futex, &w[0].p.word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (atomic_load(&w[0].p.wakes) == wakes) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(w[0].p.tid, ZP_FUTEX);
	const struct sprobe_thread_sample *t0 = NULL;
	for (int attempt = 0; attempt < 100; attempt++) {
		int i0 = capture_zp(c, s, w[0].p.tid);

		t0 = sprobe_snapshot__thread(s, (uint32_t)i0);
		if (t0->stage == SPROBE_STAGE_RAW && t0->stack_len > 0 && sprobe_snapshot__trim(s) >= 1 &&
		    t0->stack_len == 0)
			break; /* this capture kept the copy: it went back */
		t0 = NULL;
	}
	assert_non_null(t0);
	copies = cc.copies;
	int i0 = capture_zp(c, s, w[0].p.tid);
	t0 = sprobe_snapshot__thread(s, (uint32_t)i0);
	assert_true(cc.copies > copies); /* copied afresh, not "unchanged" */
	assert_int_equal(t0->stage, SPROBE_STAGE_RAW);
	assert_true(t0->stack_len > 0);
	assert_true(resident_pages(t0->stack, t0->stack_len) >= 1);

	assert_int_equal(sprobe_snapshot__trim(NULL), -EINVAL);
	cap_free(c);
	for (int k = 0; k < TRIM_N; k++)
		park_stop(&w[k]);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
}

/* ---- EINTR under a 999 Hz wall sampler ------------------------------------ */

/* Two poll and two select loops (10 s timeouts, no frame pointers) under a
 * 999 Hz wall sampler for at least 500 rounds; returns the EINTRs seen. */
static unsigned eintr_run(bool zero_pause, uint64_t *rounds, uint64_t *samples)
{
	struct parked w[4];
	struct sprobe_sampler_opts o = {
		.sz = sizeof(o),
		.freq_hz = 999,
		.mode = SPROBE_MODE_WALL,
		.no_table = true,
		.no_zero_pause = !zero_pause,
	};
	struct sprobe_sampler_stats st;
	unsigned eintr = 0;
	char why[200];

	for (int i = 0; i < 4; i++)
		park_start(&w[i], i < 2 ? ZP_POLL : ZP_SELECT, false);
	for (int i = 0; i < 4; i++)
		atomic_store(&w[i].p.eintr, 0);
	struct sprobe_sampler *s = sprobe_sampler__start(&o);
	assert_non_null(s);
	g_sampler = s;
	assert_int_equal(sprobe_sampler__zero_pause(s, why, sizeof(why)), zero_pause ? 1 : 0);
	uint64_t deadline = now_ns() + 10000000000ull;
	do {
		pause_ms(20);
		sprobe_sampler__stats(s, &st);
		assert_true(now_ns() < deadline);
	} while (st.rounds < 500);
	g_sampler = NULL;
	assert_int_equal(sprobe_sampler__stop(s), 0);
	for (int i = 0; i < 4; i++)
		eintr += atomic_load(&w[i].p.eintr);
	for (int i = 0; i < 4; i++)
		park_stop(&w[i]);
	*rounds = st.rounds;
	*samples = st.samples;
	return eintr;
}

static void test_no_eintr_with_zero_pause(void **state)
{
	uint64_t rounds, samples;

	(void)state;
	unsigned zp = eintr_run(true, &rounds, &samples);
	print_message("  zero-pause on:  %llu rounds, %llu samples, %u EINTR in poll/select\n",
		      (unsigned long long)rounds, (unsigned long long)samples, zp);
	assert_int_equal(zp, 0);
	/* Control: the signal path wakes each blocked thread; poll and
	 * select are never restarted, whatever SA_RESTART says. */
	unsigned sig = eintr_run(false, &rounds, &samples);
	print_message("  zero-pause off: %llu rounds, %llu samples, %u EINTR in poll/select\n",
		      (unsigned long long)rounds, (unsigned long long)samples, sig);
	assert_true(sig > 0);
}

/* ---- switch, stats, arguments --------------------------------------------- */

static void test_off_means_signals_only(void **state)
{
	struct sprobe_capturer *c = zp_capturer(false);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct parked w;

	(void)state;
	park_start(&w, ZP_READ, false);
	for (int k = 0; k < 5; k++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
		assert_int_equal(st->zp_captured, 0);
		assert_int_equal(st->zp_fallback, 0);
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++)
			assert_int_not_equal(sprobe_snapshot__thread(s, i)->method,
					     SPROBE_METHOD_ZERO_PAUSE);
		assert_int_equal(sprobe_snapshot__thread(s, (uint32_t)find_tid(s, w.p.tid))->method,
				 SPROBE_METHOD_SIGNAL);
	}
	park_stop(&w);
	sprobe_snapshot__free(s);
	cap_free(c);
}

/* A thread that blocks every signal is dropped by the signal path
 * (SPROBE_DROP_BLOCKED) but, sleeping in read(), is read by zero-pause. */
static void *masked_main(void *arg)
{
	struct zp_park *p = arg;
	sigset_t all;
	char ch;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	atomic_store_explicit(&p->tid, (pid_t)syscall(SYS_gettid), memory_order_release);
	while (read(p->rfd, &ch, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void test_signal_blocking_thread_captured(void **state)
{
	struct zp_park p;
	pthread_t th;
	int fds[2];

	(void)state;
	memset(&p, 0, sizeof(p));
	assert_int_equal(pipe(fds), 0);
	p.rfd = fds[0];
	p.kind = ZP_READ;
	assert_int_equal(pthread_create(&th, NULL, masked_main, &p), 0);
	uint64_t deadline = now_ns() + 5000000000ull;
	while (!atomic_load_explicit(&p.tid, memory_order_acquire)) {
		assert_true(now_ns() < deadline);
		sched_yield();
	}
	wait_blocked(p.tid, ZP_READ);

	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_capturer *c = zp_capturer(false);
	/* The signal path: dropped, blocked (the status check runs once the
	 * thread is known to block; the first capture finds out). */
	const struct sprobe_thread_sample *t;
	for (int k = 0; k < 2; k++)
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = sprobe_snapshot__thread(s, (uint32_t)find_tid(s, p.tid));
	assert_int_equal(t->stage, SPROBE_STAGE_EMPTY);
	assert_int_equal(t->drop_reason, SPROBE_DROP_BLOCKED);
	cap_free(c);
	c = zp_capturer(true);
	int i = capture_zp(c, s, p.tid);
	t = sprobe_snapshot__thread(s, (uint32_t)i);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_int_equal(t->drop_reason, SPROBE_DROP_NONE);
	cap_free(c);
	sprobe_snapshot__free(s);
	assert_int_equal(write(fds[1], "x", 1), 1);
	pthread_join(th, NULL);
	close(fds[0]);
	close(fds[1]);
}

static void test_bad_arguments(void **state)
{
	struct sprobe_capturer *c = zp_capturer(true);
	struct sprobe_snapshot *s = sprobe_snapshot__new(8, 0);
	uint32_t idx = 7;
	char why[8];

	(void)state;
	assert_int_equal(sprobe_capturer__zero_pause(NULL, why, sizeof(why)), -EINVAL);
	assert_int_equal(sprobe_capturer__recapture(NULL, s, &idx, 1), -EINVAL);
	assert_int_equal(sprobe_capturer__recapture(c, NULL, &idx, 1), -EINVAL);
	assert_int_equal(sprobe_capturer__recapture(c, s, NULL, 1), -EINVAL);
	assert_int_equal(sprobe_capturer__recapture(c, s, NULL, 0), 0);
	/* Nothing captured into s yet: index 7 names no sample. */
	assert_int_equal(sprobe_capturer__recapture(c, s, &idx, 1), -EINVAL);
	assert_int_equal(sprobe_unwinder__resolve(NULL, c, s), -EINVAL);
	/* VM_READV parks every thread: zero-pause is refused, with a reason. */
	cap_free(c);
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true,
					 .method = SPROBE_METHOD_VM_READV };
	c = cap_new(&o);
	assert_non_null(c);
	char reason[200];
	assert_int_equal(sprobe_capturer__zero_pause(c, reason, sizeof(reason)), 0);
	assert_non_null(strstr(reason, "VM_READV"));
	cap_free(c);
	sprobe_snapshot__free(s);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup_teardown(test_frames_match_signal_path, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_copy_stops_at_the_tcb, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_gap_closed_by_recapture, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_unwinder_reports_short_walks, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_woken_thread_never_torn, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_thread_that_ran_is_refused, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_unchanged_thread_keeps_its_copy, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_unchanged_thread_keeps_its_walk, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_trim_gives_blocked_copies_back, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_no_eintr_with_zero_pause, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_off_means_signals_only, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_signal_blocking_thread_captured, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_bad_arguments, setup_usr2, teardown),
};

SPROBE_TEST_MAIN(tests)
