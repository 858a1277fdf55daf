/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU mode (sprobe_capturer__cpu_collect()): a per-thread source of
 * signals on the thread's own CPU time -- a perf event (perfclock.c) or a
 * POSIX CPU-clock timer (here) -- signals the threads that consume CPU,
 * the probe collects at its own rate. Also the CPU coverage of the
 * threads (sprobe_capturer__cpu_usage()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/linux/linux.h"
#include "userspace/common/fds.h"
#include "userspace/common/zalloc.h"

/*
 * Protocol (probe P, thread T owning slot i):
 *   P, when it first sees T: gen = ++c->gen; a perf event (engine PERF:
 *   perfclock.c, its number mapped to gen mod 2^32 << 16 | i in
 *   sprobe_lx_g.perf_map) or a POSIX timer on T's CPU clock
 *   (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)) that sends the capture
 *   signal to T itself (SIGEV_THREAD_ID) with sigev_value
 *   sprobe_lx_value(gen, i) (the capture key, gen mod 2^32, i), every
 *   interval of T's CPU time. P arms slot i with that
 *   gen (the same store as a wall capture). T only runs the handler when
 *   T consumed CPU: a blocked thread's CPU clock does not advance.
 *   The handler takes si_code SI_TIMER (and POLL_IN) like SI_QUEUE and does the same
 *   CAS ARMED -> BUSY -> DONE with the gen from si_value; a second expiry
 *   that finds DONE (same gen) only bumps slot.extra.
 *   P collects at its own rate: it cancels every ARMED slot (CAS ->
 *   IDLE), waits for BUSY ones, copies DONE samples out, then (no handler
 *   can touch a slot now) deletes the timers of threads gone, creates
 *   timers for new ones, re-reads the maps if needed, and re-arms every
 *   slot with its thread's gen. A slot reused by a new thread gets a new
 *   gen, so a late signal of the old timer fails the CAS: it can never
 *   write into the new thread's sample.
 *
 * Cost: what a collect or a usage call does grows with the threads that
 * ran, not with those that exist (10 000 blocked threads cost the probe
 * 43 % of a core at 99 Hz when each collect listed /proc/self/task and
 * walked every slot: docs/PERFORMANCE.md "Many threads").
 *   - Fast collect: the handler sets its slot's bit in cpu_ready after
 *     DONE; P exchanges the words with 0 and takes and re-arms only the
 *     DONE slots found there. Every other slot stays ARMED: nothing the
 *     handler reads changes between two follows.
 *   - Follow (the full walk above: cancel all, take, list the threads,
 *     re-arm all): when the thread count moved (the task directory's
 *     link count, one fstat), the interval changed or the maps are
 *     stale, at most once per cpu_enum_gap (the listing's duration x
 *     CPU_ENUM_COST: a bounded share of a core, up to 250 ms). An exit
 *     and a birth keep the count: the usage rotation reads every
 *     tracked thread's clock once a second and asks for a follow when
 *     one is gone; CPU_ENUM_BACKSTOP_NS is the net under that (listing
 *     10 000 threads takes the kernel ~15 ms: once a second was half
 *     of what the probe still cost them).
 *   - Usage (sprobe_capturer__cpu_usage()): reads the clocks of the
 *     threads that delivered samples since the last call and of those
 *     flagged BLOCKED, plus a rotating share of the rest so that each is
 *     read once per CPU_USAGE_SWEEP_NS (all of them while there are few).
 *     A thread that had no sample since its last read used less than a
 *     period since its last overflow, or blocks the signal: the rotation
 *     finds that one within the sweep.
 */

static int cpu_engine_locked(struct sprobe_capturer *c, uint32_t want, char *why, size_t len);

/* How often a collect may follow the thread set (step 3 of
 * sprobe_capturer__cpu_collect()) at most: the scheduler tick here
 * (HZ=250); and more rarely where a follow costs more than 1/CPU_ENUM_COST
 * of that time (many threads). */
#define CPU_ENUM_NS 4000000ull
#define CPU_ENUM_COST 50
/* ... but a new thread waits no longer than this for its source. */
#define CPU_ENUM_GAP_MAX_NS 250000000ull
/* A follow at least this often even if nothing said the set moved. */
#define CPU_ENUM_BACKSTOP_NS 10000000000ull
/* Threads without a source tried again per follow, at most; and a follow
 * at least this often while there are some. */
#define CPU_SOURCE_RETRIES 64
#define CPU_SOURCE_RETRY_NS 1000000000ull

/* Cancel every ARMED CPU slot and wait for running handlers. After this no
 * handler touches any CPU slot until it is armed again. */
static void cpu_quiesce(struct sprobe_capturer *c)
{
	for (uint32_t i = 0; i < c->cpu_hi; i++) {
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
	c->cpu_hits[i] += t->weight;
	c->cpu_want[i >> 6] |= 1ull << (i & 63); /* the next usage call reads it */
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

/* Per-slot arrays of the engine and the coverage (capturer lifetime). */
static int cpu_alloc_more(struct sprobe_capturer *c)
{
	uint32_t n = c->max_threads;

	if (c->perf_h)
		return 0;
	c->perf_h = malloc(n * sizeof(*c->perf_h));
	c->perf_fd = malloc(n * sizeof(*c->perf_fd));
	c->cpu_ns = sprobe__zcalloc(n, sizeof(*c->cpu_ns));
	c->cpu_reported = sprobe__zcalloc(n, sizeof(*c->cpu_reported));
	c->cpu_open = sprobe__zcalloc(n, sizeof(*c->cpu_open));
	c->cpu_base = sprobe__zcalloc(n, sizeof(*c->cpu_base));
	c->cpu_hits = sprobe__zcalloc(n, sizeof(*c->cpu_hits));
	c->cpu_blocked = sprobe__zcalloc(n, 1);
	c->cpu_blk_drop = sprobe__zcalloc(n, 1);
	c->cpu_gone = sprobe__zcalloc(n, sizeof(*c->cpu_gone));
	c->cpu_ready = sprobe__zcalloc((n + 63) / 64, sizeof(*c->cpu_ready));
	c->cpu_want = sprobe__zcalloc((n + 63) / 64, sizeof(*c->cpu_want));
	c->cpu_want_next = sprobe__zcalloc((n + 63) / 64, sizeof(*c->cpu_want_next));
	c->cpu_blk_list = sprobe__zcalloc(n, sizeof(*c->cpu_blk_list));
	c->cpu_nosrc = sprobe__zcalloc(n, 1);
	if (!c->perf_h || !c->perf_fd || !c->cpu_ns || !c->cpu_reported || !c->cpu_open || !c->cpu_base || !c->cpu_hits ||
	    !c->cpu_blocked || !c->cpu_blk_drop || !c->cpu_gone || !c->cpu_ready || !c->cpu_want || !c->cpu_want_next ||
	    !c->cpu_blk_list || !c->cpu_nosrc) {
		sprobe_lx_cpu_free(c);
		return -ENOMEM;
	}
	/* Published to the handler by the release store that arms a slot. */
	sprobe_lx_g.cpu_ready = c->cpu_ready;
	for (uint32_t i = 0; i < n; i++)
		c->perf_h[i] = c->perf_fd[i] = -1;
	return 0;
}

void sprobe_lx_cpu_free(struct sprobe_capturer *c)
{
	free(c->perf_h);
	free(c->perf_fd);
	sprobe__zfree(c->cpu_ns);
	sprobe__zfree(c->cpu_reported);
	sprobe__zfree(c->cpu_open);
	sprobe__zfree(c->cpu_base);
	sprobe__zfree(c->cpu_hits);
	sprobe__zfree(c->cpu_blocked);
	sprobe__zfree(c->cpu_blk_drop);
	sprobe__zfree(c->cpu_gone);
	/* No handler runs (capturer free, or nothing armed yet). */
	if (sprobe_lx_g.cpu_ready == c->cpu_ready)
		sprobe_lx_g.cpu_ready = NULL;
	sprobe__zfree((void *)c->cpu_ready);
	sprobe__zfree(c->cpu_want);
	sprobe__zfree(c->cpu_want_next);
	sprobe__zfree(c->cpu_blk_list);
	sprobe__zfree(c->cpu_nosrc);
	c->cpu_nosrc = NULL;
	c->cpu_ready = NULL;
	c->cpu_want = c->cpu_want_next = NULL;
	c->cpu_blk_list = NULL;
	c->perf_h = c->perf_fd = NULL;
	c->cpu_ns = c->cpu_reported = c->cpu_open = c->cpu_base = NULL;
	c->cpu_hits = NULL;
	c->cpu_blocked = c->cpu_blk_drop = NULL;
	c->cpu_gone = NULL;
}

static int cpu_alloc(struct sprobe_capturer *c, const struct sprobe_snapshot *s)
{
	uint32_t n = c->max_threads;
	int err = cpu_alloc_more(c);

	if (err)
		return err;
	if (c->cpu_tid)
		return 0;
	c->cpu_snap = sprobe_snapshot__new(n, s->max_stack_bytes);
	c->cpu_tid = sprobe__zcalloc(n, sizeof(*c->cpu_tid));
	c->cpu_timer = sprobe__zcalloc(n, sizeof(*c->cpu_timer));
	c->cpu_gen = sprobe__zcalloc(n, sizeof(*c->cpu_gen));
	c->cpu_sorted = sprobe__zcalloc(n, sizeof(*c->cpu_sorted));
	if (!c->cpu_snap || !c->cpu_tid || !c->cpu_timer || !c->cpu_gen || !c->cpu_sorted) {
		sprobe_snapshot__free(c->cpu_snap);
		sprobe__zfree(c->cpu_tid);
		sprobe__zfree(c->cpu_timer);
		sprobe__zfree(c->cpu_gen);
		sprobe__zfree(c->cpu_sorted);
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

/*
 * Room for more CPU timers this follow (cpu_timer_room; -1: not read
 * yet). Each timer holds one entry of the user's queued-signal limit
 * (RLIMIT_SIGPENDING, shared by all the user's processes) for its life.
 * The timers take at most half of it, counting what is queued already
 * (SigQ in /proc/self/status): the rest stays for the program's own
 * signals and for the perf events' deliveries, which the kernel turns
 * into SIGIO when none can be queued (SIGIO's default action ends the
 * program).
 */
static bool timer_room(struct sprobe_capturer *c)
{
	if (c->cpu_timer_room < 0) {
		char *buf, *q;
		size_t len;
		unsigned long used, limit;

		c->cpu_timer_room = 0;
		if (sprobe_fd__read_file("/proc/self/status", &buf, &len) != 0)
			return false;
		q = strstr(buf, "\nSigQ:");
		if (q && sscanf(q + 6, "%lu/%lu", &used, &limit) == 2 && used < limit / 2)
			c->cpu_timer_room = (int64_t)(limit / 2 - used);
		free(buf);
	}
	return c->cpu_timer_room > 0;
}

/* Give slot i (thread tid, generation gen) its signal source: its perf
 * event, else (engine TIMER, or no descriptor fits: counted) a timer.
 * retry: the slot is tracked already without one (cpu_nosrc): its
 * coverage keeps counting from where it did. -ESRCH: exited. */
static int source_new(struct sprobe_capturer *c, pid_t tid, uint32_t i, uint64_t gen, bool retry)
{
	int err;

	/* Coverage counts the CPU from here on (what could be sampled), and
	 * an event's count starts here too. */
	if (!sprobe_lx_thread_cpu_ns(tid, &c->cpu_open[i]))
		return -ESRCH;
	if (!retry)
		c->cpu_base[i] = c->cpu_primed ? 0 : c->cpu_open[i];
	if (c->cpu_engine == SPROBE_CPU_ENGINE_PERF) {
		err = sprobe_lx_perf_open(c, tid, i, gen);
		if (err == 0 || err == -ESRCH)
			return err;
	}
	if (!timer_room(c))
		return -EAGAIN; /* as timer_create() at the limit */
	err = cpu_timer_new(c, tid, sprobe_lx_value(gen, i), &c->cpu_timer[i]);
	if (err)
		return err;
	c->cpu_timer_room--;
	if (c->cpu_engine == SPROBE_CPU_ENGINE_PERF)
		atomic_fetch_add_explicit(&c->cpu_on_timer, 1, memory_order_relaxed);
	return 0;
}

static void source_delete(struct sprobe_capturer *c, uint32_t i)
{
	if (c->cpu_nosrc[i])
		c->cpu_nosrc[i] = 0;
	else if (c->perf_h[i] >= 0)
		sprobe_lx_perf_close(c, i);
	else
		timer_delete(c->cpu_timer[i]);
}

static void slot_gone(struct sprobe_capturer *c, uint32_t i)
{
	uint64_t cpu = sprobe_lx_cpu_final(c, i);

	if (cpu == c->cpu_reported[i] && c->cpu_reported[i]) {
		/* Reported as gone by cpu_usage() already. */
		c->cpu_ns[i] = c->cpu_reported[i] = 0;
		c->cpu_hits[i] = 0;
		c->cpu_blocked[i] = c->cpu_blk_drop[i] = 0;
		return;
	}
	if (cpu && c->ncpu_gone < c->max_threads)
		c->cpu_gone[c->ncpu_gone++] = (struct sprobe_cpu_usage){
			.tid = c->cpu_tid[i],
			.flags = SPROBE_CPU_USAGE_EXITED |
				 (c->cpu_blocked[i] & 1 ? SPROBE_CPU_USAGE_BLOCKED : 0) |
				 sprobe_lx_cpu_src_flags(c, i),
			.cpu_ns = cpu - c->cpu_base[i],
		};
	c->cpu_ns[i] = c->cpu_reported[i] = 0;
	c->cpu_hits[i] = 0;
	c->cpu_blocked[i] = c->cpu_blk_drop[i] = 0;
}

/* A drop entry (BLOCKED) for a thread cpu_usage() found using CPU behind
 * a blocked capture signal: the capture says it missed that thread. */
static void cpu_drop_blocked(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i)
{
	struct sprobe_thread_sample *t = NULL;

	c->cpu_blk_drop[i] = 0;
	if (s->nthreads < s->max_threads)
		t = sprobe_snapshot__sample_init(s, s->nthreads, c->cpu_tid[i]);
	sprobe_snapshot__drop(s, t, t ? SPROBE_DROP_BLOCKED : SPROBE_DROP_NO_SLOT);
	s->stats.threads_total++;
}

/* The drop entries cpu_usage() asked for (cpu_blk_list). */
static void blocked_drops(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	for (uint32_t k = 0; k < c->cpu_nblk_list; k++) {
		uint32_t i = c->cpu_blk_list[k];

		if (c->cpu_tid[i] && c->cpu_blk_drop[i])
			cpu_drop_blocked(c, s, i);
	}
	c->cpu_nblk_list = 0;
}

/* Fast collect: take and re-arm the slots whose ready bit is set. A bit
 * whose slot is not DONE (set before a full walk took and re-armed it,
 * or left by a thread gone since) is skipped. */
static void take_ready(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	for (uint32_t w = 0; w < (c->cpu_hi + 63) / 64; w++) {
		uint64_t bits;

		if (!atomic_load_explicit(&c->cpu_ready[w], memory_order_relaxed))
			continue;
		/* Acquire; pairs with the handler's release fetch_or. */
		bits = atomic_exchange_explicit(&c->cpu_ready[w], 0, memory_order_acquire);
		while (bits) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);

			bits &= bits - 1;
			c->cpu_work.fast_slots++;
			if (i >= c->cpu_hi || !c->cpu_tid[i] ||
			    sprobe_lx_slot_phase(&c->slots[i]) != SLOT_DONE)
				continue;
			cpu_take(c, s, i);
			/* Same thread, gen and handler parameters as armed by
			 * the last full walk. */
			sprobe_lx_arm_slot(c, c->cpu_snap, i, c->cpu_gen[i]);
		}
	}
}

/* Must this collect follow the thread set (the full walk)? */
static bool follow_due(struct sprobe_capturer *c, uint64_t interval_ns, uint64_t now)
{
	if (!c->cpu_primed || interval_ns != c->cpu_interval_ns || c->maps_stale)
		return true;
	if (now - c->cpu_enum_ns < c->cpu_enum_gap)
		return false;
	/* One fstat: procfs gives the thread count in O(1). */
	if (sprobe_lx_thread_count_changed(c))
		c->cpu_set_moved = true;
	/* Threads without a source: a follow a second tries some again. */
	if (atomic_load_explicit(&c->cpu_unsourced, memory_order_relaxed) &&
	    now - c->cpu_enum_ns >= CPU_SOURCE_RETRY_NS)
		return true;
	return c->cpu_set_moved || now - c->cpu_enum_ns >= CPU_ENUM_BACKSTOP_NS;
}

int sprobe_capturer__cpu_collect(struct sprobe_capturer *c, struct sprobe_snapshot *s,
				 uint64_t interval_ns)
{
	uint32_t ntracked = 0, unsourced = 0, retries = 0;
	uint64_t list_ns;
	pid_t self;
	int serr;
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
	if (!c->cpu_engine) {
		char why[320];
		int e = cpu_engine_locked(c, SPROBE_CPU_ENGINE_AUTO, why, sizeof(why));

		if (e < 0) {
			err = e;
			goto out;
		}
	}
	if (!c->cpu_on) {
		c->cpu_on = true;
		c->cpu_interval_ns = interval_ns;
		/* The handlers' DONE count wakes nobody in this mode. */
		atomic_store(&sprobe_lx_g.target, UINT32_MAX);
	}

	if (!follow_due(c, interval_ns, t0)) {
		/* Fast collect (see "Cost" above): the slots that are ready. */
		c->cpu_work.fast++;
		take_ready(c, s);
		blocked_drops(c, s);
		s->stats.capture_ns = sprobe_now_ns() - t0;
		goto out;
	}
	c->cpu_work.full++;
	/* 1. Nobody writes a CPU slot from here until it is re-armed. */
	cpu_quiesce(c);
	/* 2. Take what the timers produced since the last collect (a ready
	 * bit left set is skipped later: its slot is ARMED again). */
	for (uint32_t i = 0; i < c->cpu_hi; i++) {
		if (c->cpu_tid[i] && sprobe_lx_slot_phase(&c->slots[i]) == SLOT_DONE)
			cpu_take(c, s, i);
	}
	blocked_drops(c, s);
	s->stats.capture_ns = sprobe_now_ns() - t0;

	/* 3. Follow the thread set: delete timers of threads gone, create
	 * timers for new threads (when follow_due() says). A new thread
	 * waits up to cpu_enum_gap for its event (its CPU until then counts
	 * as unsampled in the coverage), an exited one keeps its slot that
	 * long. */
	uint64_t now = sprobe_now_ns();

	c->cpu_enum_ns = now;
	c->cpu_set_moved = false;
	(void)sprobe_lx_thread_count_changed(c); /* the count this list starts from */
	self = sprobe_lx_gettid();
	err = sprobe_lx_enumerate_threads(c, self);
	if (err)
		goto rearm;
	fresh = sprobe_lx_new_threads(c); /* prev_tids: the current set, sorted */
	c->cpu_timer_room = -1;
	for (uint32_t i = 0; i < c->cpu_hi; i++) {
		pid_t tid = c->cpu_tid[i];

		if (!tid)
			continue;
		if (!bsearch(&tid, c->prev_tids, c->nprev, sizeof(pid_t), sprobe_lx_cmp_tid)) {
			slot_gone(c, i); /* reads its perf event: before the close */
			source_delete(c, i);
			c->cpu_tid[i] = 0;
			if (i < c->cpu_free)
				c->cpu_free = i;
			continue;
		}
		c->cpu_sorted[ntracked++] = tid;
		/* No source yet: try again, a few a follow (each try may cost
		 * an event opened and closed). */
		if (c->cpu_nosrc[i] && retries < CPU_SOURCE_RETRIES) {
			retries++;
			if (source_new(c, tid, i, c->cpu_gen[i], true) == 0)
				c->cpu_nosrc[i] = 0;
		}
		unsourced += c->cpu_nosrc[i];
	}
	while (c->cpu_hi && !c->cpu_tid[c->cpu_hi - 1])
		c->cpu_hi--;
	sprobe_lx_sort_tids(c->cpu_sorted, ntracked);
	/* The next follow no sooner than CPU_ENUM_COST times what listing
	 * and matching the threads took (what every follow costs): following
	 * costs at most ~1/CPU_ENUM_COST of a core. Not the sources made
	 * below: one per new thread, once (9 000 timers at start would
	 * otherwise put the next follow seconds away, and the threads born
	 * meanwhile without a source). */
	list_ns = sprobe_now_ns() - c->cpu_enum_ns;
	list_ns *= CPU_ENUM_COST;
	if (list_ns < CPU_ENUM_NS)
		list_ns = CPU_ENUM_NS;
	c->cpu_enum_gap = list_ns < CPU_ENUM_GAP_MAX_NS ? list_ns : CPU_ENUM_GAP_MAX_NS;
	if (interval_ns != c->cpu_interval_ns) {
		c->cpu_interval_ns = interval_ns;
		for (uint32_t i = 0; i < c->cpu_hi; i++)
			if (c->cpu_tid[i] && c->perf_h[i] >= 0)
				sprobe_lx_perf_period(c, i, interval_ns);
			else if (c->cpu_tid[i] && !c->cpu_nosrc[i])
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
		if (tries == c->max_threads) {
			/* Every slot taken: the rest waits for exits. */
			unsourced += c->ntids - k;
			break;
		}
		gen = ++c->gen;
		/* The old gen's state says IDLE: stale signals fail. */
		atomic_store(&c->slots[i].state, gen << 2 | SLOT_IDLE);
		serr = source_new(c, tid, i, gen, false);
		if (serr == -ESRCH)
			continue; /* exited since enumeration */
		/* Refused (no timer fits, RLIMIT_SIGPENDING): tracked all the
		 * same, so its CPU is reported (NOSOURCE) and the next follows
		 * try again. */
		c->cpu_nosrc[i] = serr != 0;
		if (serr) {
			atomic_store_explicit(&c->cpu_nosrc_err, -serr, memory_order_relaxed);
			unsourced++;
		}
		c->cpu_tid[i] = tid;
		c->cpu_gen[i] = gen;
		c->cpu_free = i + 1;
		if (i + 1 > c->cpu_hi)
			c->cpu_hi = i + 1;
		atomic_store_explicit(&c->slots[i].extra, 0, memory_order_relaxed);
	}
	c->cpu_primed = true; /* threads born from now on count from their start */
	atomic_store_explicit(&c->cpu_unsourced, unsourced, memory_order_relaxed);
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
	for (uint32_t i = 0; i < c->cpu_hi; i++) {
		if (!c->cpu_tid[i])
			continue;
		/* The handler initialises the sample when the timer fires
		 * (struct slot's tid): an idle thread's is never touched. */
		c->slots[i].tid = c->cpu_tid[i];
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
			if (c->cpu_tid[i]) {
				slot_gone(c, i);
				source_delete(c, i);
			}
		cpu_quiesce(c);
		for (uint32_t i = 0; i < c->max_threads; i++) {
			if (c->cpu_tid[i])
				atomic_store(&c->slots[i].state, c->cpu_gen[i] << 2 | SLOT_IDLE);
			c->cpu_tid[i] = 0;
		}
		c->cpu_free = c->cpu_hi = 0;
		c->ncpu_gone = 0;
		c->cpu_nblk_list = 0;
		atomic_store_explicit(&c->cpu_unsourced, 0, memory_order_relaxed);
		c->cpu_usage_next = 0;
		c->cpu_usage_ns = 0;
		/* The thread list was followed at cpu mode's pace: a wall
		 * capture lists the threads again. */
		c->list_stale = true;
		c->cpu_primed = false;
		c->cpu_on = false;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* sprobe_capturer__cpu_engine() under c->lock. */
static int cpu_engine_locked(struct sprobe_capturer *c, uint32_t want, char *why, size_t len)
{
	char tmp[320];
	int err;

	if (c->cpu_on)
		return -EBUSY;
	if (want > SPROBE_CPU_ENGINE_TIMER)
		return -EINVAL;
	if (!why || !len) {
		why = tmp;
		len = sizeof(tmp);
	}
	if (want == SPROBE_CPU_ENGINE_TIMER) {
		c->cpu_engine = SPROBE_CPU_ENGINE_TIMER;
		snprintf(why, len, "cpu engine: cpu-timer (asked for; fires at the scheduler tick only: "
				   "phases aligned with the tick alias)");
		return (int)c->cpu_engine;
	}
	if (c->method != SPROBE_METHOD_SIGNAL) {
		err = -EINVAL;
		snprintf(tmp, sizeof(tmp), "method VM_READV");
	} else if (sprobe_fd__budget() == 0) {
		/* Every event is a descriptor: a tight limit is the program's. */
		err = -EMFILE;
		snprintf(tmp, sizeof(tmp),
			 "no descriptor budget (RLIMIT_NOFILE soft limit below %d: the numbers are the "
			 "program's)", SPROBE_FD_MIN_LIMIT_FOR_CACHE);
	} else {
		err = sprobe_lx_perf_probe(c, tmp, sizeof(tmp));
	}
	if (!err && !atomic_load(&sprobe_lx_g.perf_map)) {
		/* One entry per number the registry can give a CACHE
		 * descriptor (all below SPROBE_FD_TOP). Freed with the
		 * capturer, once no handler runs. */
		_Atomic pid_t *tids = sprobe__zcalloc(SPROBE_FD_TOP, sizeof(*tids));
		_Atomic uint64_t *map = sprobe__zcalloc(SPROBE_FD_TOP, sizeof(*map));

		if (!map || !tids) {
			sprobe__zfree((void *)tids);
			sprobe__zfree((void *)map);
			return -ENOMEM;
		}
		sprobe_lx_g.perf_tid = tids;
		sprobe_lx_g.perf_nmap = SPROBE_FD_TOP;
		/* Release; pairs with the handler's acquire load. */
		atomic_store_explicit(&sprobe_lx_g.perf_map, map, memory_order_release);
	}
	if (!err) {
		c->cpu_engine = SPROBE_CPU_ENGINE_PERF;
		snprintf(why, len, "cpu engine: perf-event (task-clock, %s; up to %u threads on events)",
			 c->perf_user_only ? "user time only: perf_event_paranoid forbids the kernel side"
					   : "user and kernel time",
			 sprobe_fd__budget());
		return (int)c->cpu_engine;
	}
	if (want == SPROBE_CPU_ENGINE_PERF) {
		snprintf(why, len, "cpu engine perf-event unavailable: %s", tmp);
		return err;
	}
	c->cpu_engine = SPROBE_CPU_ENGINE_TIMER;
	snprintf(why, len, "cpu engine: cpu-timer (fallback: %s; fires at the scheduler tick only: "
			   "phases aligned with the tick alias)", tmp);
	return (int)c->cpu_engine;
}

int sprobe_capturer__cpu_engine(struct sprobe_capturer *c, uint32_t want, char *why, size_t len)
{
	int r;

	if (!c)
		return -EINVAL;
	if (getpid() != c->pid)
		return -ECHILD;
	pthread_mutex_lock(&c->lock);
	r = cpu_engine_locked(c, want, why, len);
	pthread_mutex_unlock(&c->lock);
	return r;
}

uint32_t sprobe_capturer__cpu_unsourced(const struct sprobe_capturer *c, int *why)
{
	struct sprobe_capturer *m = (struct sprobe_capturer *)c;

	if (!c)
		return 0;
	if (why)
		*why = atomic_load_explicit(&m->cpu_nosrc_err, memory_order_relaxed);
	return atomic_load_explicit(&m->cpu_unsourced, memory_order_relaxed);
}

uint32_t sprobe_capturer__cpu_on_timer(const struct sprobe_capturer *c)
{
	return c ? atomic_load_explicit(&((struct sprobe_capturer *)c)->cpu_on_timer,
					memory_order_relaxed)
		 : 0;
}
