/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zero-pause capture of blocked threads (docs/capture.md "Zero-pause"):
 *  - a thread parked in a known chain (tests/zeropause/chain.c, built with
 *    and without frame pointers) and blocked in read, futex, poll and
 *    nanosleep gives the same frames read without a signal as through the
 *    signal path; where the walk of the zero-pause copy needs the frame
 *    pointer (the register gap) the sample is re-captured with a signal;
 *  - poll/select loops under a 999 Hz wall sampler see no EINTR with
 *    zero-pause, and do see it through the signal path (the control);
 *  - the switch, the stats and bad arguments.
 * Torn copies are in test_zero_pause_torn.c, copies kept between captures
 * in test_zero_pause_kept.c; the fixtures in zero_pause_fixture.h.
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
#include "zero_pause_fixture.h"

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
	cmocka_unit_test_setup_teardown(test_no_eintr_with_zero_pause, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_off_means_signals_only, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_signal_blocking_thread_captured, setup_usr2, teardown),
	cmocka_unit_test_setup_teardown(test_bad_arguments, setup_usr2, teardown),
};

SPROBE_TEST_MAIN(tests)
