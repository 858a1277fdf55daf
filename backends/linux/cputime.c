/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU-timer mode (sprobe_capturer__cpu_collect()): per-thread CPU-clock
 * timers signal the threads that consume CPU, the probe collects at its
 * own rate.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/linux/linux.h"

/*
 * Protocol (probe P, thread T owning slot i):
 *   P, when it first sees T: gen = ++c->gen; a POSIX timer on T's CPU
 *   clock (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)) that sends the
 *   capture signal to T itself (SIGEV_THREAD_ID) with sigev_value
 *   sprobe_lx_value(gen, i) (the capture key, gen mod 2^32, i), every interval of T's CPU time. P arms slot i with that
 *   gen (the same store as a wall capture). T only runs the handler when
 *   T consumed CPU: a blocked thread's CPU clock does not advance.
 *   The handler takes si_code SI_TIMER like SI_QUEUE and does the same
 *   CAS ARMED -> BUSY -> DONE with the gen from si_value; a second expiry
 *   that finds DONE (same gen) only bumps slot.extra.
 *   P collects at its own rate: it cancels every ARMED slot (CAS ->
 *   IDLE), waits for BUSY ones, copies DONE samples out, then (no handler
 *   can touch a slot now) deletes the timers of threads gone, creates
 *   timers for new ones, re-reads the maps if needed, and re-arms every
 *   slot with its thread's gen. A slot reused by a new thread gets a new
 *   gen, so a late signal of the old timer fails the CAS: it can never
 *   write into the new thread's sample.
 */

/* Cancel every ARMED CPU slot and wait for running handlers. After this no
 * handler touches any CPU slot until it is armed again. */
static void cpu_quiesce(struct sprobe_capturer *c)
{
	for (uint32_t i = 0; i < c->max_threads; i++) {
		struct slot *sl = &c->slots[i];
		uint64_t st = atomic_load(&sl->state);

		if (!c->cpu_tid[i])
			continue;
		if ((st & 3) == SLOT_ARMED)
			sprobe_lx_cancel_slot(sl, st >> 2); /* may lose to a handler: fine */
		/* BUSY: the handler does bounded work (a memcpy). */
		while (sprobe_lx_slot_phase(sl) == SLOT_BUSY) {
			uint32_t seen = atomic_load(&sprobe_lx_g.completed);

			if (sprobe_lx_slot_phase(sl) == SLOT_BUSY)
				futex_wait(&sprobe_lx_g.completed, seen, 1000000);
		}
	}
}

/* Copy the finished sample of slot i into s (next free index). */
static void cpu_take(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i)
{
	const struct sprobe_thread_sample *src = &c->cpu_snap->samples[i];
	struct sprobe_thread_sample *t;
	uint32_t j = s->nthreads;
	uint8_t *buf;

	uint32_t extra = atomic_exchange_explicit(&c->slots[i].extra, 0, memory_order_relaxed);

	if (j >= s->max_threads) {
		sprobe_snapshot__drop(s, NULL, SPROBE_DROP_NO_SLOT);
		s->stats.threads_total++;
		return;
	}
	t = sprobe_snapshot__sample_init(s, j, src->tid);
	buf = (uint8_t *)t->stack;
	memcpy(t, src, offsetof(struct sprobe_thread_sample, frames));
	t->stack = buf;
	t->nframes = 0;
	t->method = SPROBE_METHOD_SIGNAL;
	t->weight = 1 + extra;
	if (t->stage == SPROBE_STAGE_RAW) {
		/* s may hold less than the CPU snapshot: keep the bottom (SP
		 * side) of the copy, as the handler's cap would. */
		if (t->stack_len > s->slot_bytes) {
			t->stack_len = s->slot_bytes;
			t->truncated = true;
		}
		memcpy(buf, src->stack, t->stack_len);
	} else {
		if (t->drop_reason == SPROBE_DROP_NONE)
			t->drop_reason = SPROBE_DROP_ERROR;
		if (t->drop_reason == SPROBE_DROP_NO_STACK)
			c->maps_stale = true;
		sprobe_snapshot__drop(s, t, t->drop_reason);
	}
	s->stats.threads_total++;
}

static int cpu_alloc(struct sprobe_capturer *c, const struct sprobe_snapshot *s)
{
	uint32_t n = c->max_threads;

	if (c->cpu_tid)
		return 0;
	c->cpu_snap = sprobe_snapshot__new(n, s->max_stack_bytes);
	c->cpu_tid = calloc(n, sizeof(*c->cpu_tid));
	c->cpu_timer = calloc(n, sizeof(*c->cpu_timer));
	c->cpu_gen = calloc(n, sizeof(*c->cpu_gen));
	c->cpu_sorted = calloc(n, sizeof(*c->cpu_sorted));
	if (!c->cpu_snap || !c->cpu_tid || !c->cpu_timer || !c->cpu_gen || !c->cpu_sorted) {
		sprobe_snapshot__free(c->cpu_snap);
		free(c->cpu_tid);
		free(c->cpu_timer);
		free(c->cpu_gen);
		free(c->cpu_sorted);
		c->cpu_snap = NULL;
		c->cpu_tid = NULL;
		c->cpu_timer = NULL;
		c->cpu_gen = NULL;
		c->cpu_sorted = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int cpu_settime(timer_t tm, uint64_t interval_ns)
{
	struct itimerspec its;

	its.it_interval.tv_sec = (time_t)(interval_ns / 1000000000ull);
	its.it_interval.tv_nsec = (long)(interval_ns % 1000000000ull);
	its.it_value = its.it_interval;
	return timer_settime(tm, 0, &its, NULL) < 0 ? -errno : 0;
}

/* A CPU-clock timer for thread tid that signals tid with value. */
static int cpu_timer_new(struct sprobe_capturer *c, pid_t tid, uint64_t value, timer_t *out)
{
	/* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): the clock of another
	 * thread of this process (pthread_getcpuclockid needs a pthread_t). */
	clockid_t clk = (clockid_t)((~(unsigned)tid) << 3) | 6;
	struct sigevent sev;
	int err;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = c->signo;
	sev.sigev_value.sival_ptr = (void *)(uintptr_t)value;
	sev._sigev_un._tid = tid;
	if (timer_create(clk, &sev, out) < 0)
		return -errno;
	err = cpu_settime(*out, c->cpu_interval_ns);
	if (err)
		timer_delete(*out);
	return err;
}

int sprobe_capturer__cpu_collect(struct sprobe_capturer *c, struct sprobe_snapshot *s,
				 uint64_t interval_ns)
{
	uint32_t ntracked = 0;
	pid_t self;
	bool fresh;
	int err;

	if (!c || !s || interval_ns < 10000 || interval_ns > 3600ull * 1000000000ull)
		return -EINVAL;
	/* VM_READV handlers wait for the probe, which is not there in this
	 * mode: a timer signal would park the thread until the deadline. */
	if (c->method != SPROBE_METHOD_SIGNAL)
		return -EINVAL;
	if (getpid() != c->pid)
		return -ECHILD;
	if (atomic_load(&s->inflight))
		return -EBUSY; /* a started wall capture owns it */
	sprobe_snapshot__reset(s);
	s->zp_epoch = 0; /* its slots get CPU samples: no zero-pause reuse */
	uint64_t t0 = sprobe_now_ns();
	pthread_mutex_lock(&c->lock);
	if (c->inflight || !sprobe_lx_chain_front(c)) {
		err = -EBUSY;
		goto out;
	}
	err = cpu_alloc(c, s);
	if (err)
		goto out;
	if (!c->cpu_on) {
		c->cpu_on = true;
		c->cpu_interval_ns = interval_ns;
		/* The handlers' DONE count wakes nobody in this mode. */
		atomic_store(&sprobe_lx_g.target, UINT32_MAX);
	}

	/* 1. Nobody writes a CPU slot from here until it is re-armed. */
	cpu_quiesce(c);
	/* 2. Take what the timers produced since the last collect. */
	for (uint32_t i = 0; i < c->max_threads; i++) {
		if (!c->cpu_tid[i])
			continue;
		if (sprobe_lx_slot_phase(&c->slots[i]) == SLOT_DONE)
			cpu_take(c, s, i);
	}
	s->stats.capture_ns = sprobe_now_ns() - t0;

	/* 3. Follow the thread set: delete timers of threads gone, create
	 * timers for new threads. */
	self = sprobe_lx_gettid();
	err = sprobe_lx_enumerate_threads(c, self);
	if (err)
		goto rearm;
	fresh = sprobe_lx_new_threads(c); /* prev_tids: the current set, sorted */
	for (uint32_t i = 0; i < c->max_threads; i++) {
		pid_t tid = c->cpu_tid[i];

		if (!tid)
			continue;
		if (!bsearch(&tid, c->prev_tids, c->nprev, sizeof(pid_t), sprobe_lx_cmp_tid)) {
			timer_delete(c->cpu_timer[i]);
			c->cpu_tid[i] = 0;
			continue;
		}
		c->cpu_sorted[ntracked++] = tid;
	}
	sprobe_lx_sort_tids(c->cpu_sorted, ntracked);
	if (interval_ns != c->cpu_interval_ns) {
		c->cpu_interval_ns = interval_ns;
		for (uint32_t i = 0; i < c->max_threads; i++)
			if (c->cpu_tid[i])
				cpu_settime(c->cpu_timer[i], interval_ns);
	}
	for (uint32_t k = 0; k < c->ntids; k++) {
		pid_t tid = c->tids[k];
		uint32_t i, tries;
		uint64_t gen;

		if (bsearch(&tid, c->cpu_sorted, ntracked, sizeof(pid_t), sprobe_lx_cmp_tid))
			continue;
		for (tries = 0, i = c->cpu_free; tries < c->max_threads; tries++) {
			if (i >= c->max_threads)
				i = 0;
			if (!c->cpu_tid[i])
				break;
			i++;
		}
		if (tries == c->max_threads)
			break; /* every slot taken: the rest waits for exits */
		gen = ++c->gen;
		if (cpu_timer_new(c, tid, sprobe_lx_value(gen, i), &c->cpu_timer[i]) < 0)
			continue; /* exited since enumeration, or out of timers */
		c->cpu_tid[i] = tid;
		c->cpu_gen[i] = gen;
		c->cpu_free = i + 1;
		/* The old gen's state says IDLE: stale signals fail. */
		atomic_store(&c->slots[i].state, gen << 2 | SLOT_IDLE);
		atomic_store_explicit(&c->slots[i].extra, 0, memory_order_relaxed);
	}
	if (fresh || c->maps_stale) {
		err = sprobe_lx_refresh_ranges(c);
		if (err)
			c->nprev = 0;
	}

rearm:
	/* 4. Re-arm every tracked slot (handler parameters first). */
	sprobe_lx_g.ranges = c->ranges;
	sprobe_lx_g.nranges = c->nranges;
	sprobe_lx_g.cap = c->max_stack_bytes < c->cpu_snap->max_stack_bytes ? c->max_stack_bytes
								   : c->cpu_snap->max_stack_bytes;
	for (uint32_t i = 0; i < c->max_threads; i++) {
		if (!c->cpu_tid[i])
			continue;
		sprobe_snapshot__sample_init(c->cpu_snap, i, c->cpu_tid[i]);
		sprobe_lx_arm_slot(c, c->cpu_snap, i, c->cpu_gen[i]);
	}
out:
	pthread_mutex_unlock(&c->lock);
	if (err)
		return err;
	return sprobe_snapshot__finish(s);
}

int sprobe_capturer__cpu_stop(struct sprobe_capturer *c)
{
	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (c->cpu_on) {
		/* Delete first: no new expiry; then no handler is left. */
		for (uint32_t i = 0; i < c->max_threads; i++)
			if (c->cpu_tid[i])
				timer_delete(c->cpu_timer[i]);
		cpu_quiesce(c);
		for (uint32_t i = 0; i < c->max_threads; i++) {
			if (c->cpu_tid[i])
				atomic_store(&c->slots[i].state, c->cpu_gen[i] << 2 | SLOT_IDLE);
			c->cpu_tid[i] = 0;
		}
		c->cpu_on = false;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}
