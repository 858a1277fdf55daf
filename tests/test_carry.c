/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Many threads: blocked threads carried forward (sprobe_capturer__zp_carry(),
 * docs/capture.md "Many threads"). A capture checks the threads that ran
 * plus one turn's share of the blocked ones, and carries the others
 * forward without a system call; a blocked thread still gets every
 * capture's weight in its blocking stack, and a thread that wakes and runs
 * is seen running within a turn.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/unwind.h>

#include "run_helper.h"
#include "sprobe_test.h"

#define NPARK 64

struct parked {
	int rfd, wfd;
	_Atomic pid_t tid;
	_Atomic int spinning;
	pthread_t th;
};

static struct parked g_park[NPARK];
static _Atomic int g_stop_spin;

/* Where a woken thread runs until told to stop. */
__attribute__((noinline)) static void spin_in_carry_test(struct parked *p)
{
	atomic_store(&p->spinning, 1);
	while (!atomic_load_explicit(&g_stop_spin, memory_order_relaxed))
		;
	atomic_store(&p->spinning, 0);
}

/* Blocks in read(); 's' spins, 'q' ends. Built without frame pointers and
 * reading with the system call itself, so that under ASan (whose build has
 * frame pointers and wraps read()) its zero-pause walk still reaches the
 * thread's start: a frame whose CFA is its frame pointer stops a walk from
 * the syscall file's SP and PC (docs/capture.md "The register gap"), and
 * such a thread is re-captured with a signal, never carried. */
__attribute__((optimize("omit-frame-pointer"))) static void *park_main(void *arg)
{
	struct parked *p = arg;
	char ch;

	atomic_store(&p->tid, (pid_t)syscall(SYS_gettid));
	for (;;) {
		ssize_t n = syscall(SYS_read, p->rfd, &ch, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n != 1 || ch == 'q')
			return NULL;
		if (ch == 's')
			spin_in_carry_test(p);
	}
}

/* Is tid blocked in a system call (its syscall file not "running")? */
static bool in_syscall(pid_t tid)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return buf[0] >= '0' && buf[0] <= '9';
}

static void park_all(void)
{
	atomic_store(&g_stop_spin, 0);
	for (int i = 0; i < NPARK; i++) {
		int fds[2];

		assert_int_equal(pipe(fds), 0);
		g_park[i] = (struct parked){ .rfd = fds[0], .wfd = fds[1] };
		assert_int_equal(pthread_create(&g_park[i].th, NULL, park_main, &g_park[i]), 0);
	}
	/* Polled, not slept on: each must show in its read(). */
	for (int i = 0; i < NPARK; i++)
		while (!atomic_load(&g_park[i].tid) || !in_syscall(atomic_load(&g_park[i].tid)))
			sched_yield();
}

static void unpark_all(void)
{
	atomic_store(&g_stop_spin, 1);
	for (int i = 0; i < NPARK; i++) {
		assert_int_equal(write(g_park[i].wfd, "q", 1), 1);
		pthread_join(g_park[i].th, NULL);
		close(g_park[i].rfd);
		close(g_park[i].wfd);
	}
}

static int find_tid(struct sprobe_snapshot *s, pid_t tid)
{
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++)
		if (sprobe_snapshot__thread(s, i)->tid == tid)
			return (int)i;
	return -1;
}

struct rig {
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	struct sprobe_unwinder *u;
};

/* A zero-pause capturer carrying blocked threads in turns of `rounds`
 * captures at most, 8 checks a capture at least. false: zero-pause is
 * off here (qemu-user), said. */
static bool rig_new(struct rig *r, uint32_t rounds)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true };
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	char why[200];

	r->c = sprobe_capturer__new(&o);
	assert_non_null(r->c);
	if (sprobe_capturer__zero_pause(r->c, why, sizeof(why)) != 1) {
		print_message("SKIP: zero-pause is off here: %s\n", why);
		sprobe_capturer__free(r->c);
		return false;
	}
	assert_int_equal(sprobe_capturer__zp_carry(r->c, 8, rounds), 0);
	r->s = sprobe_snapshot__new(256, 0);
	r->u = sprobe_unwinder__new(&uo);
	assert_non_null(r->s);
	assert_non_null(r->u);
	return true;
}

static void rig_free(struct rig *r)
{
	sprobe_unwinder__free(r->u);
	sprobe_snapshot__free(r->s);
	sprobe_capturer__free(r->c);
}

/* Parked threads, a rig (turns of at most 16) and three captures to warm
 * it: false when zero-pause is off here (said; the threads unparked). */
static bool rig_start(struct rig *r)
{
	park_all();
	if (!rig_new(r, 16)) {
		unpark_all();
		return false;
	}
	for (int k = 0; k < 3; k++)
		assert_int_equal(sprobe_capture_and_resolve(r->c, r->s, r->u), 0);
	return true;
}

/*
 * 64 threads blocked in read(), turns of min(16, 64 / 8) = 8 captures:
 * after the first capture each one checks at most one slot in 8 (plus
 * what ran) and carries the rest, unchanged and walked; every thread has
 * a sample in every capture, and each slot is checked once a turn.
 */
static void test_blocked_threads_carried(void **state)
{
	struct rig r;
	uint32_t checked[NPARK] = { 0 };

	(void)state;
	park_all();
	if (!rig_new(&r, 16)) {
		unpark_all();
		skip();
	}
	for (int k = 0; k < 41; k++) {
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(r.s);
		uint32_t carried = 0;

		assert_int_equal(st->threads_dropped, 0);
		assert_int_equal(st->threads_captured, st->threads_total);
		for (int i = 0; i < NPARK; i++) {
			int at = find_tid(r.s, atomic_load(&g_park[i].tid));
			const struct sprobe_thread_sample *t;

			assert_true(at >= 0);
			t = sprobe_snapshot__thread(r.s, (uint32_t)at);
			assert_int_equal(t->method, SPROBE_METHOD_ZERO_PAUSE);
			assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
			assert_true(t->nframes >= 2);
			if (sprobe_snapshot__carried(r.s, (uint32_t)at) != SPROBE_CARRY_NONE)
				carried++;
			else if (k >= 1)
				checked[i]++;
		}
		assert_int_equal(st->zp_carried, carried);
		if (k >= 1) {
			/* Slots not in this turn, less a few for a list
			 * re-read (the capture before it carries everything
			 * but the turn, the one of it checks all). */
			if (k % 8 != 0)
				assert_true(carried + NPARK / 8 + 2 >= NPARK || carried == 0);
		}
	}
	/* 40 captures after the first: at least 4 turns (the capture before
	 * each re-read of the list, once a turn, takes none), each slot
	 * checked in each. */
	for (int i = 0; i < NPARK; i++)
		if (checked[i] < 4)
			print_message("thread %d: checked %u times\n", i, checked[i]);
	for (int i = 0; i < NPARK; i++)
		assert_true(checked[i] >= 4);
	uint32_t total_checked = 0;
	for (int i = 0; i < NPARK; i++)
		total_checked += checked[i];
	print_message("checks over 40 captures: %u (every thread every time: %u)\n", total_checked,
		      40 * NPARK);
	assert_true(total_checked <= 40 * NPARK / 4);
	rig_free(&r);
	unpark_all();
}

/* A carried thread that wakes and runs is caught running (the signal
 * path, in spin_in_carry_test) within one turn of 8 captures, plus the
 * capture that closes a turn before the list is read again. */
static void test_woken_thread_seen_within_a_turn(void **state)
{
	struct rig r;
	struct parked *p = &g_park[NPARK / 2];
	int seen = -1;

	(void)state;
	if (!rig_start(&r))
		skip();
	assert_true(sprobe_snapshot__stats(r.s)->zp_carried > 0);
	assert_int_equal(write(p->wfd, "s", 1), 1);
	while (!atomic_load(&p->spinning))
		sched_yield();
	for (int k = 0; k < 20 && seen < 0; k++) {
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		int at = find_tid(r.s, atomic_load(&p->tid));
		const struct sprobe_thread_sample *t;

		assert_true(at >= 0);
		t = sprobe_snapshot__thread(r.s, (uint32_t)at);
		if (t->method == SPROBE_METHOD_SIGNAL)
			seen = k + 1;
	}
	print_message("woken thread seen running at capture %d after it woke\n", seen);
	assert_true(seen >= 1 && seen <= 8 + 1);
	rig_free(&r);
	unpark_all();
}

/* One thread that comes and goes: started on even calls, ended on odd
 * ones, so the thread count moves at every capture. */
static void churn_step(struct parked *p, int k)
{
	if (k % 2 == 0) {
		int fds[2];

		assert_int_equal(pipe(fds), 0);
		*p = (struct parked){ .rfd = fds[0], .wfd = fds[1] };
		assert_int_equal(pthread_create(&p->th, NULL, park_main, p), 0);
		while (!atomic_load(&p->tid))
			sched_yield();
	} else {
		char path[64];
		pid_t tid = atomic_load(&p->tid);

		assert_int_equal(write(p->wfd, "q", 1), 1);
		pthread_join(p->th, NULL);
		close(p->rfd);
		close(p->wfd);
		/* pthread_join returns at the thread's exit futex, which the
		 * kernel wakes before it takes the task out of the list: wait
		 * (polled) until the next listing cannot show it. */
		snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
		while (access(path, F_OK) == 0)
			sched_yield();
	}
}

/*
 * The bound holds under churn: with a thread born or gone before every
 * capture, every capture either closes the spells or re-reads the list,
 * and the turn alone would come round only every other capture. Each
 * parked thread must still be checked at least once in every R captures
 * (R = ceil(threads / 8)), and a woken one seen running within R + 1.
 * The capture before a check marks the slot LAST, so a check that drops
 * the thread (gone, all signals masked) loses one capture's weight, not
 * the R - 1 carried before it.
 */
static void test_bound_holds_under_churn(void **state)
{
	struct rig r;
	struct parked churn;
	struct parked *p = &g_park[NPARK / 3];
	int last[NPARK], was[NPARK], gap_max = 0, seen = -1;
	uint32_t rmax = 0;

	(void)state;
	park_all();
	if (!rig_new(&r, 16)) {
		unpark_all();
		skip();
	}
	for (int i = 0; i < NPARK; i++)
		last[i] = was[i] = 0;
	for (int k = 0; k < 60; k++) {
		churn_step(&churn, k);
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		uint32_t total = sprobe_snapshot__stats(r.s)->threads_total;

		if ((total + 7) / 8 > rmax)
			rmax = (total + 7) / 8;
		for (int i = 0; i < NPARK; i++) {
			int at = find_tid(r.s, atomic_load(&g_park[i].tid));

			assert_true(at >= 0);
			int cv = sprobe_snapshot__carried(r.s, (uint32_t)at);

			/* A check follows a LAST: the weight carried so far
			 * was written before the check could drop it. */
			if (cv == SPROBE_CARRY_NONE && was[i] == SPROBE_CARRY_MORE)
				print_message("thread %d (slot %d) checked after MORE at capture %d\n", i, at, k);
			assert_false(cv == SPROBE_CARRY_NONE && was[i] == SPROBE_CARRY_MORE);
			was[i] = cv;
			if (cv != SPROBE_CARRY_NONE)
				continue;
			if (k - last[i] > gap_max)
				gap_max = k - last[i];
			last[i] = k;
		}
	}
	print_message("longest run between checks under churn: %d captures (R = %u)\n", gap_max,
		      rmax);
	assert_true(gap_max >= 1 && (uint32_t)gap_max <= rmax);

	assert_int_equal(write(p->wfd, "s", 1), 1);
	while (!atomic_load(&p->spinning))
		sched_yield();
	for (int k = 60; k < 100 && seen < 0; k++) {
		churn_step(&churn, k);
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		int at = find_tid(r.s, atomic_load(&p->tid));

		assert_true(at >= 0);
		if (sprobe_snapshot__thread(r.s, (uint32_t)at)->method == SPROBE_METHOD_SIGNAL)
			seen = k - 59;
	}
	if (seen > 0 && (60 + seen) % 2 == 1)
		churn_step(&churn, 1); /* the churn thread is alive: end it */
	print_message("woken thread seen running at capture %d under churn\n", seen);
	assert_true(seen >= 1 && (uint32_t)seen <= rmax + 1);
	rig_free(&r);
	unpark_all();
}

/*
 * A capture that re-read the list and then failed (no descriptor left to
 * read the maps) leaves the slots as the last good capture filled them,
 * for a list they no longer follow: the next capture must not carry the
 * thread gone since as alive (it closes its slot, and the one after frees
 * it), and must see every live thread.
 */
static void test_no_carry_after_failed_relist(void **state)
{
	struct rig r;
	struct parked gone, born[2];
	pid_t gone_tid;
	struct rlimit rl, low;
	int err;

	(void)state;
	if (!rig_start(&r))
		skip();
	gone = g_park[NPARK / 2];
	gone_tid = atomic_load(&gone.tid);
	assert_int_equal(write(gone.wfd, "q", 1), 1);
	pthread_join(gone.th, NULL);
	churn_step(&born[0], 0);
	churn_step(&born[1], 0);
	/* The count moved: the next capture re-reads the list (slots kept
	 * per thread: at once) and the maps, for the newcomers' stacks. */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	low = rl;
	low.rlim_cur = 3;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	err = sprobe_capture_and_resolve(r.c, r.s, r.u);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	print_message("capture with no descriptor left: %d\n", err);
	assert_true(err < 0);
	assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
	/* Gone: absent, or its slot closed by this capture (EXITED, or the
	 * LAST of the spell it was carried in), never carried on. */
	int at = find_tid(r.s, gone_tid);

	if (at >= 0) {
		int cv = sprobe_snapshot__carried(r.s, (uint32_t)at);

		assert_true(cv == SPROBE_CARRY_LAST ||
			    (cv == SPROBE_CARRY_NONE &&
			     sprobe_snapshot__thread(r.s, (uint32_t)at)->drop_reason == SPROBE_DROP_EXITED));
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		assert_true(find_tid(r.s, gone_tid) < 0);
	}
	for (int i = 0; i < NPARK; i++)
		if (i != NPARK / 2)
			assert_true(find_tid(r.s, atomic_load(&g_park[i].tid)) >= 0);
	assert_true(find_tid(r.s, atomic_load(&born[0].tid)) >= 0);
	assert_true(find_tid(r.s, atomic_load(&born[1].tid)) >= 0);
	churn_step(&born[0], 1);
	churn_step(&born[1], 1);
	rig_free(&r);
	/* unpark_all() ends every parked thread: stand in for the gone one. */
	assert_int_equal(pthread_create(&g_park[NPARK / 2].th, NULL, park_main, &g_park[NPARK / 2]),
			 0);
	unpark_all();
}

/*
 * Threads keep their slots while others come and go. Threads older than
 * the parked ones (lower tids) leave one by one, and two new ones come
 * each time and go at the next capture, so the count moves at every
 * capture and, in a list sorted by tid, every parked thread would move to
 * another slot each time. Each parked thread must stay in the slot it had,
 * so only its turn checks it (not a re-read and re-walk of every thread).
 * The slot of a thread that left is closed by the capture that finds it
 * gone (its last sample, LAST or EXITED, with its tid), is not handed to
 * a newcomer in that capture, and is free at the next. Slots not in
 * sprobe_snapshot__touched() are carried on unchanged.
 */
#define NOLD 40
static void check_parked(struct rig *r, const int *at, uint32_t *checks)
{
	const uint32_t *idx;
	uint32_t nv = sprobe_snapshot__touched(r->s, &idx), m = 0;

	assert_non_null(idx);
	for (uint32_t v = 1; v < nv; v++)
		assert_true(idx[v - 1] < idx[v]);
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(r->s); i++) {
		bool listed = m < nv && idx[m] == i;

		m += listed;
		if (!listed && sprobe_snapshot__thread(r->s, i)->tid)
			assert_int_equal(sprobe_snapshot__carried(r->s, i), SPROBE_CARRY_MORE);
	}
	for (int i = 0; i < NPARK; i++) {
		assert_int_equal(find_tid(r->s, atomic_load(&g_park[i].tid)), at[i]);
		*checks += sprobe_snapshot__carried(r->s, (uint32_t)at[i]) == SPROBE_CARRY_NONE;
	}
}

static void test_slots_stay_under_churn(void **state)
{
	struct rig r;
	static struct parked old[NOLD], nw[2];
	int at[NPARK];
	uint32_t checks = 0, closed = 0;

	(void)state;
	for (int j = 0; j < NOLD; j++)
		churn_step(&old[j], 0);
	park_all();
	if (!rig_new(&r, 16)) {
		for (int j = 0; j < NOLD; j++)
			churn_step(&old[j], 1);
		unpark_all();
		skip();
	}
	for (int k = 0; k < 3; k++)
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
	for (int i = 0; i < NPARK; i++) {
		at[i] = find_tid(r.s, atomic_load(&g_park[i].tid));
		assert_true(at[i] >= 0);
	}
	for (int k = 0; k < NOLD; k++) {
		pid_t gone_tid = atomic_load(&old[k].tid);
		int gone_at = find_tid(r.s, gone_tid);

		assert_true(gone_at >= 0);
		churn_step(&old[k], 1);
		churn_step(&nw[0], 0);
		churn_step(&nw[1], 0);
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		/* Closed by this capture, with its tid; no newcomer's. */
		const struct sprobe_thread_sample *g = sprobe_snapshot__thread(r.s, (uint32_t)gone_at);
		int cv = sprobe_snapshot__carried(r.s, (uint32_t)gone_at);

		assert_int_equal(g->tid, gone_tid);
		assert_true(cv == SPROBE_CARRY_LAST ||
			    (cv == SPROBE_CARRY_NONE && g->drop_reason == SPROBE_DROP_EXITED));
		closed += cv == SPROBE_CARRY_LAST;
		assert_true(find_tid(r.s, atomic_load(&nw[0].tid)) != gone_at);
		assert_true(find_tid(r.s, atomic_load(&nw[1].tid)) != gone_at);
		check_parked(&r, at, &checks);
		churn_step(&nw[0], 1);
		churn_step(&nw[1], 1);
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		/* Freed: no thread there, or a newcomer. */
		assert_true(sprobe_snapshot__thread(r.s, (uint32_t)gone_at)->tid != gone_tid);
		check_parked(&r, at, &checks);
	}
	/* R = ceil(~110 / 8) = 14 at first: about 64 / R checks a capture. */
	print_message("parked threads checked over %d captures with churn: %u (all: %u); "
		      "%u left while carried\n", 2 * NOLD, checks, 2 * NOLD * NPARK, closed);
	assert_true(checks <= 2 * NOLD * NPARK / 4);
	rig_free(&r);
	unpark_all();
}

/*
 * More threads than slots while carrying: the threads without a slot are
 * counted NO_SLOT in every capture (the one that lists them and every
 * capture after it on the same list, carried turns and the capture that
 * closes spells when R moves included), so each capture's totals add up
 * and none fails.
 */
static void test_more_threads_than_slots(void **state)
{
	struct rig r;

	(void)state;
	park_all();
	if (!rig_new(&r, 16)) {
		unpark_all();
		skip();
	}
	sprobe_snapshot__free(r.s);
	r.s = sprobe_snapshot__new(32, 0);
	assert_non_null(r.s);
	for (int k = 0; k < 30; k++) {
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(r.s);

		assert_true(st->threads_total > 32);
		assert_int_equal(st->dropped[SPROBE_DROP_NO_SLOT], st->threads_total - 32);
		assert_int_equal(st->threads_captured + st->threads_dropped, st->threads_total);
	}
	rig_free(&r);
	unpark_all();
}

/*
 * The thread count falls to where one capture checks every thread (R = 1:
 * no carrying, slots in list order) and rises again. The slots kept per
 * thread while carrying no longer say where each thread's sample is: the
 * captures after the rise must start them over, see every thread and add
 * up, not carry the list of before the fall.
 */
#define NFEW 4
#define NMANY 60
static void wait_in_syscall(struct parked *p, int n)
{
	for (int i = 0; i < n; i++)
		while (!atomic_load(&p[i].tid) || !in_syscall(atomic_load(&p[i].tid)))
			sched_yield();
}

static int g_was[NFEW];

static void check_all_seen(struct rig *r, struct parked *few, struct parked *many, bool with_many)
{
	const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(r->s);

	assert_int_equal(st->threads_total, NFEW + (with_many ? NMANY : 0));
	assert_int_equal(st->threads_dropped, 0);
	for (int i = 0; i < NFEW; i++) {
		int at = find_tid(r->s, atomic_load(&few[i].tid));

		assert_true(at >= 0);
		/* A check (or a move to another slot) follows a LAST: the
		 * weight carried so far was written before. */
		int cv = sprobe_snapshot__carried(r->s, (uint32_t)at);

		if (cv == SPROBE_CARRY_NONE && g_was[i] == SPROBE_CARRY_MORE)
			print_message("thread %d (slot %d) checked after MORE\n", i, at);
		assert_false(cv == SPROBE_CARRY_NONE && g_was[i] == SPROBE_CARRY_MORE);
		g_was[i] = cv;
	}
	for (int i = 0; with_many && i < NMANY; i++) {
		int at = find_tid(r->s, atomic_load(&many[i].tid));

		assert_true(at >= 0);
		assert_int_equal(sprobe_snapshot__thread(r->s, (uint32_t)at)->stage,
				 SPROBE_STAGE_UNWOUND);
	}
}

static void test_rounds_fall_to_one_and_rise(void **state)
{
	struct rig r;
	static struct parked few[NFEW], many[NMANY];
	int err;

	(void)state;
	for (int i = 0; i < NFEW; i++)
		churn_step(&few[i], 0);
	for (int i = 0; i < NMANY; i++)
		churn_step(&many[i], 0);
	wait_in_syscall(few, NFEW);
	wait_in_syscall(many, NMANY);
	if (!rig_new(&r, 16)) {
		for (int i = 0; i < NFEW; i++)
			churn_step(&few[i], 1);
		for (int i = 0; i < NMANY; i++)
			churn_step(&many[i], 1);
		skip();
	}
	/* 64 threads: R = 8, slots kept per thread. */
	for (int k = 0; k < 4; k++) {
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		check_all_seen(&r, few, many, true);
	}
	assert_true(sprobe_snapshot__stats(r.s)->zp_carried > 0);
	/* 4 threads: R = 1, every thread checked, slots in list order. */
	for (int i = 0; i < NMANY; i++)
		churn_step(&many[i], 1);
	assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
	for (int k = 0; k < 3; k++) {
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		check_all_seen(&r, few, many, false);
	}
	/* 64 again: the first capture lists them (R still 1), the next ones
	 * carry again. */
	for (int i = 0; i < NMANY; i++)
		churn_step(&many[i], 0);
	wait_in_syscall(many, NMANY);
	for (int k = 0; k < 20; k++) {
		err = sprobe_capture_and_resolve(r.c, r.s, r.u);
		if (err)
			print_message("capture %d after the rise: %d\n", k, err);
		assert_int_equal(err, 0);
		check_all_seen(&r, few, many, true);
	}
	rig_free(&r);
	for (int i = 0; i < NFEW; i++)
		churn_step(&few[i], 1);
	for (int i = 0; i < NMANY; i++)
		churn_step(&many[i], 1);
}

/*
 * Slots kept per thread can lie past the list's length: threads that left
 * keep their slots through the capture that closes them, so newcomers of
 * that same list take new ones. A newcomer there whose zero-pause walk
 * comes up short (the register gap: a frame whose CFA is its frame
 * pointer) is re-captured with a signal; that must work at any slot, not
 * fail the round (every round, while the thread lives).
 */
static _Atomic int g_fp_stop;

/* Blocked in futex(), in a frame whose CFA is its frame pointer (a VLA
 * forces one): its zero-pause walk stops there, so it is re-captured. */
__attribute__((noinline)) static void *park_fp_main(void *arg)
{
	struct parked *p = arg;
	volatile int len = 16;
	char vla[len];

	memset(vla, 0, sizeof(vla));
	atomic_store(&p->tid, (pid_t)syscall(SYS_gettid));
	while (!atomic_load(&g_fp_stop))
		syscall(SYS_futex, &g_fp_stop, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
	return (void *)(uintptr_t)vla[len - 1];
}

static void test_recapture_past_list_length(void **state)
{
	struct rig r;
	static struct parked fp[4];
	pid_t gone_tid[4];
	int err;

	(void)state;
	if (!rig_start(&r))
		skip();
	/* As many leave as come: the count does not move, the list is read
	 * at the turn; the newcomers get slots past the 64 listed. */
	atomic_store(&g_fp_stop, 0);
	for (int i = 0; i < 4; i++) {
		gone_tid[i] = atomic_load(&g_park[i].tid);
		assert_int_equal(write(g_park[i].wfd, "q", 1), 1);
		pthread_join(g_park[i].th, NULL);
		fp[i] = (struct parked){ .rfd = -1, .wfd = -1 };
		assert_int_equal(pthread_create(&fp[i].th, NULL, park_fp_main, &fp[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		while (!atomic_load(&fp[i].tid) || !in_syscall(atomic_load(&fp[i].tid)))
			sched_yield();
	uint32_t recaptured = 0, past = 0;

	for (int k = 0; k < 30; k++) {
		err = sprobe_capture_and_resolve(r.c, r.s, r.u);
		if (err)
			print_message("capture %d after the swap: %d\n", k, err);
		assert_int_equal(err, 0);
		recaptured += sprobe_snapshot__stats(r.s)->zp_recaptured;
		for (int i = 0; i < 4; i++)
			past += find_tid(r.s, atomic_load(&fp[i].tid)) >= NPARK;
	}
	print_message("re-captured %u, newcomers seen past slot %d: %u\n", recaptured, NPARK - 1,
		      past);
	for (int i = 0; i < 4; i++) {
		int at = find_tid(r.s, atomic_load(&fp[i].tid));

		assert_true(at >= 0);
		assert_true(find_tid(r.s, gone_tid[i]) < 0);
	}
	atomic_store(&g_fp_stop, 1);
	syscall(SYS_futex, &g_fp_stop, FUTEX_WAKE_PRIVATE, 4, NULL, NULL, 0);
	for (int i = 0; i < 4; i++)
		pthread_join(fp[i].th, NULL);
	rig_free(&r);
	/* unpark_all() ends every parked thread: stand in for those gone. */
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&g_park[i].th, NULL, park_main, &g_park[i]), 0);
	unpark_all();
}

/*
 * A thread that ends while another starts keeps the thread count, so the
 * list is not re-read for that; the leaver is found at its check. It must
 * then be counted exited once or twice (that check, and the capture that
 * lists again), not at every capture until the turn's own re-read.
 */
static void test_exit_and_birth_counted_once(void **state)
{
	struct rig r;
	struct parked born;
	pid_t gone_tid;
	int exited = 0;

	(void)state;
	if (!rig_start(&r))
		skip();
	gone_tid = atomic_load(&g_park[NPARK / 2].tid);
	/* It ends (its pipe stays for the stand-in below), and it is out of
	 * the list (polled) before the newcomer starts. */
	{
		char path[64];

		assert_int_equal(write(g_park[NPARK / 2].wfd, "q", 1), 1);
		pthread_join(g_park[NPARK / 2].th, NULL);
		snprintf(path, sizeof(path), "/proc/self/task/%d", (int)gone_tid);
		while (access(path, F_OK) == 0)
			sched_yield();
	}
	churn_step(&born, 0);
	for (int k = 0; k < 20; k++) {
		assert_int_equal(sprobe_capture_and_resolve(r.c, r.s, r.u), 0);
		int at = find_tid(r.s, gone_tid);

		if (at >= 0 && sprobe_snapshot__thread(r.s, (uint32_t)at)->drop_reason ==
				       SPROBE_DROP_EXITED)
			exited++;
	}
	print_message("leaver counted exited in %d of 20 captures\n", exited);
	assert_true(exited >= 1 && exited <= 2);
	assert_true(find_tid(r.s, atomic_load(&born.tid)) >= 0);
	churn_step(&born, 1);
	rig_free(&r);
	/* unpark_all() ends every parked thread: stand in for the gone one. */
	assert_int_equal(pthread_create(&g_park[NPARK / 2].th, NULL, park_main, &g_park[NPARK / 2]),
			 0);
	unpark_all();
}

/* Bad arguments. */
static void test_carry_bad_arguments(void **state)
{
	(void)state;
	assert_int_equal(sprobe_capturer__zp_carry(NULL, 8, 16), -EINVAL);
	assert_int_equal(sprobe_snapshot__carried(NULL, 0), SPROBE_CARRY_NONE);
}

/*
 * The whole path, under `stackprobe record`: 300 threads blocked in a
 * condition variable plus 2 busy ones, wall mode at 200 Hz. Every idle
 * thread's weight is every capture it lived through, within 5 % (it is
 * created before the first full capture and leaves after the last one
 * but a few), while the file holds far fewer records than that weight:
 * carried captures are written once a turn, with their weight.
 */
#define REC_IDLE 300
static void record_blocked_share(const char *how)
{
	char *out, cmd[512];
	const char *path = "build/test-out/carry.data";

	snprintf(cmd, sizeof(cmd),
		 "mkdir -p build/test-out && build/stackprobe record -q --mode wall -F 200 "
		 "-o build/test-out/carry.data -- build/idlethreads 300 2 2 %s 2>&1", how);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	free(out);

	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;
	uint64_t captures = 0, full = 0, records = 0, weight = 0;
	struct { uint32_t tid; uint64_t w; } *per = calloc(4096, sizeof(*per));
	uint32_t nper = 0;

	assert_non_null(rd);
	assert_non_null(per);
	while (sprobe_datafile_reader__next(rd, &rec) > 0) {
		if (rec.type == SPROBE_DF_CAPTURE) {
			captures++;
			/* idle + busy + main, the agent's own left out */
			full += rec.capture.threads_total >= REC_IDLE + 3;
		} else if (rec.type == SPROBE_DF_SAMPLE) {
			uint32_t w = rec.sample.weight ? rec.sample.weight : 1, k;

			records++;
			weight += w;
			for (k = 0; k < nper && per[k].tid != rec.sample.tid; k++)
				;
			if (k == nper && nper < 4096)
				per[nper++].tid = rec.sample.tid;
			if (k < nper)
				per[k].w += w;
		}
	}
	sprobe_datafile_reader__free(rd);
	print_message("%lu captures (%lu with every thread), %lu records, weight %lu, %u threads\n",
		      (unsigned long)captures, (unsigned long)full, (unsigned long)records,
		      (unsigned long)weight, nper);
	assert_true(full >= 100);
	assert_true(nper >= REC_IDLE);
	uint32_t in_band = 0;
	for (uint32_t k = 0; k < nper; k++) {
		if (per[k].w >= 0.95 * (double)full && per[k].w <= 1.05 * (double)captures)
			in_band++;
		else
			print_message("tid %u: weight %lu\n", per[k].tid, (unsigned long)per[k].w);
	}
	/* Every idle thread (and the busy ones and main). */
	assert_true(in_band >= REC_IDLE + 2);
	/* Carried captures are not a record each. */
	assert_true(records * 4 < weight);
	free(per);
}

static void test_record_blocked_share(void **state)
{
	(void)state;
	record_blocked_share("");
}

/* The same with every idle thread blocking every signal (the raw system
 * call): only zero-pause reads them, and their carried weight must reach
 * the file as the others' does. */
static void test_record_masked_share(void **state)
{
	(void)state;
	record_blocked_share("masked");
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_blocked_threads_carried),
	cmocka_unit_test(test_woken_thread_seen_within_a_turn),
	cmocka_unit_test(test_bound_holds_under_churn),
	cmocka_unit_test(test_no_carry_after_failed_relist),
	cmocka_unit_test(test_slots_stay_under_churn),
	cmocka_unit_test(test_more_threads_than_slots),
	cmocka_unit_test(test_exit_and_birth_counted_once),
	cmocka_unit_test(test_rounds_fall_to_one_and_rise),
	cmocka_unit_test(test_recapture_past_list_length),
	cmocka_unit_test(test_carry_bad_arguments),
	cmocka_unit_test(test_record_blocked_share),
	cmocka_unit_test(test_record_masked_share),
};

SPROBE_TEST_MAIN(tests)
