/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU mode's coverage (sprobe_capturer__cpu_usage()): each tracked
 * thread's CPU time, and the check for threads that block the capture
 * signal. What a call reads is bounded by the threads that ran, plus a
 * rotation over the others (cputime.c, "Cost").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/linux/linux.h"
#include "userspace/common/fds.h"

/* Every thread's clock is read once per sweep at least; up to
 * CPU_USAGE_ALL_SLOTS slots a usage call reads them all. */
#define CPU_USAGE_SWEEP_NS 1000000000ull
#define CPU_USAGE_ALL_SLOTS 64

/* The CPU clock of thread tid of this process, ns; false if it is gone. */
bool sprobe_lx_thread_cpu_ns(pid_t tid, uint64_t *ns)
{
	clockid_t clk = (clockid_t)((~(unsigned)tid) << 3) | 6;
	struct timespec ts;

	if (clock_gettime(clk, &ts) < 0)
		return false;
	*ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return true;
}

uint32_t sprobe_lx_cpu_src_flags(const struct sprobe_capturer *c, uint32_t i)
{
	if (c->cpu_nosrc[i])
		return SPROBE_CPU_USAGE_NOSOURCE;
	/* Engine PERF, and slot i got a timer instead (cputime.c source_new()). */
	return c->cpu_engine == SPROBE_CPU_ENGINE_PERF && c->perf_h[i] < 0 ? SPROBE_CPU_USAGE_TIMER : 0;
}

/* A live thread's CPU for the coverage: its clock, or its perf event's
 * count where that is ahead (it runs from each switch-in to the
 * switch-out, a little past the scheduler's runtime): the samples are
 * periods of that count, so the CPU reported must hold them all, else a
 * thread that switches often (a shell) shows more than 100 %. */
uint64_t sprobe_lx_cpu_live(struct sprobe_capturer *c, uint32_t i, uint64_t clock)
{
	uint64_t count;
	int fd = c->perf_h[i] >= 0 ? sprobe_fd__get(c->perf_h[i]) : -1;

	if (fd >= 0) {
		if (read(fd, &count, sizeof(count)) == (ssize_t)sizeof(count) &&
		    c->cpu_open[i] + count > clock)
			clock = c->cpu_open[i] + count;
		sprobe_fd__put(c->perf_h[i]);
	}
	return clock;
}

/* Slot i's thread is gone: its last CPU time for the coverage. Its perf
 * event still counts after the thread died, so the count (user time only
 * under exclude_kernel, hence sprobe_lx_cpu_live()'s max) gives the final
 * value, where the clock last read lags. */
uint64_t sprobe_lx_cpu_final(struct sprobe_capturer *c, uint32_t i)
{
	return sprobe_lx_cpu_live(c, i, c->cpu_ns[i]);
}

/*
 * Blocked check of slot i (see sprobe_capturer__cpu_usage()): used ns of
 * CPU since the previous call. A thread that used three periods more than
 * it delivered may block the signal (SigBlk says); one flagged before is
 * asked again, and its event restarted once it takes the signal.
 */
static void cpu_check_blocked(struct sprobe_capturer *c, uint32_t i, uint64_t used)
{
	pid_t tid = c->cpu_tid[i];

	if (!(c->cpu_blocked[i] & 1)) {
		/* Three periods more than it delivered: a thread that took
		 * a signal before blocking it is found at this call too. */
		if (used < (3 + (uint64_t)c->cpu_hits[i]) * c->cpu_interval_ns)
			return;
		if (sprobe_lx_thread_sigcheck(c, tid, false) != SPROBE_DROP_BLOCKED)
			return;
		c->cpu_blocked[i] |= 1;
		/* Stop the queue growing (a full one turns into SIGIO). */
		if (c->perf_h[i] >= 0)
			sprobe_lx_perf_enable(c, i, false, 0);
	} else if (sprobe_lx_thread_sigcheck(c, tid, false) == 0) {
		c->cpu_blocked[i] &= (uint8_t)~1;
		if (c->perf_h[i] >= 0)
			sprobe_lx_perf_enable(c, i, true, c->cpu_gen[i]);
		return;
	}
	if (used && !c->cpu_blk_drop[i]) {
		c->cpu_blk_drop[i] = 1;
		c->cpu_blk_list[c->cpu_nblk_list++] = i; /* each slot once a collect */
	}
}

/* One thread's clock for sprobe_capturer__cpu_usage(): slot i, into
 * out[*n] when it must be reported. */
static void usage_one(struct sprobe_capturer *c, uint32_t i, struct sprobe_cpu_usage *out,
		      uint32_t *n, uint32_t max)
{
	pid_t tid = c->cpu_tid[i];
	uint64_t now, used, prev;
	uint32_t flags;

	c->cpu_work.clock_reads++;
	if (sprobe_lx_thread_cpu_ns(tid, &now)) {
		now = sprobe_lx_cpu_live(c, i, now);
	} else {
		/* Exited: the next follow frees its slot (a thread born
		 * meanwhile may have kept the count: ask for one); its final
		 * value now, in case recording stops first. */
		c->cpu_set_moved = true;
		now = sprobe_lx_cpu_final(c, i);
		if (*n < max && now && now != c->cpu_reported[i]) {
			out[(*n)++] = (struct sprobe_cpu_usage){
				.tid = tid,
				.flags = SPROBE_CPU_USAGE_EXITED |
					 (c->cpu_blocked[i] & 1 ? SPROBE_CPU_USAGE_BLOCKED : 0) |
					 sprobe_lx_cpu_src_flags(c, i),
				.cpu_ns = now - c->cpu_base[i],
			};
			c->cpu_ns[i] = c->cpu_reported[i] = now;
		}
		return;
	}
	/* Never below a value read before (the count of an event, then the
	 * clock alone): the report's CPU does not go back. */
	if (now < c->cpu_ns[i])
		now = c->cpu_ns[i];
	/* The first check counts from the source's creation: a thread that
	 * blocks the signal as it starts is found at the first call, not
	 * the second (its perf-event fallback starts ~100 ms sooner:
	 * userspace/sampler/blocked_perf.h). */
	prev = c->cpu_ns[i] ? c->cpu_ns[i] : c->cpu_open[i];
	used = prev && now > prev ? now - prev : 0;
	if (prev && !c->cpu_nosrc[i]) /* no source: nothing to block */
		cpu_check_blocked(c, i, used);
	bool hit = c->cpu_hits[i] > 0;

	c->cpu_ns[i] = now;
	c->cpu_hits[i] = 0;
	flags = (c->cpu_blocked[i] & 1 ? SPROBE_CPU_USAGE_BLOCKED : 0) |
		sprobe_lx_cpu_src_flags(c, i);
	/* A flagged thread is read at every call (its flag may clear). */
	if (c->cpu_blocked[i] & 1)
		c->cpu_want[i >> 6] |= 1ull << (i & 63);
	/* Reported once it used a period since the last report, or whenever
	 * it changed and had samples since: those stand for periods the
	 * report must hold (the last call, at the end of a process of a few
	 * ms, is all its CPU). Bit 1 of cpu_blocked: BLOCKED as last
	 * reported. */
	if (now - c->cpu_reported[i] >= c->cpu_interval_ns || (hit && now != c->cpu_reported[i]) ||
	    !!(c->cpu_blocked[i] & 2) != !!(flags & SPROBE_CPU_USAGE_BLOCKED)) {
		if (*n >= max) {
			/* Reported at the next call: read it then. */
			c->cpu_want[i >> 6] |= 1ull << (i & 63);
			c->cpu_hits[i] = hit;
			return;
		}
		out[(*n)++] = (struct sprobe_cpu_usage){ .tid = tid, .flags = flags,
							 .cpu_ns = now - c->cpu_base[i] };
		c->cpu_reported[i] = now;
		c->cpu_blocked[i] = (uint8_t)((c->cpu_blocked[i] & 1) |
					      (flags & SPROBE_CPU_USAGE_BLOCKED ? 2 : 0));
	}
}

static int cpu_usage(struct sprobe_capturer *c, struct sprobe_cpu_usage *out, uint32_t max, bool all)
{
	uint32_t n = 0, batch;
	uint64_t now;

	if (!c || (max && !out))
		return -EINVAL;
	if (getpid() != c->pid)
		return -ECHILD;
	pthread_mutex_lock(&c->lock);
	if (!c->cpu_on || !c->cpu_tid) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	c->cpu_work.usage_calls++;
	while (c->ncpu_gone && n < max)
		out[n++] = c->cpu_gone[--c->ncpu_gone];
	/* The rotation's share: the slots it walks so that each is read once
	 * per CPU_USAGE_SWEEP_NS at the rate of the calls so far. */
	now = sprobe_now_ns();
	batch = c->cpu_hi;
	if (!all && c->cpu_usage_ns && c->cpu_hi > CPU_USAGE_ALL_SLOTS) {
		uint64_t dt = now - c->cpu_usage_ns, b;

		b = dt >= CPU_USAGE_SWEEP_NS ? c->cpu_hi
					      : ((uint64_t)c->cpu_hi * dt + CPU_USAGE_SWEEP_NS - 1) /
							CPU_USAGE_SWEEP_NS;
		batch = b < CPU_USAGE_ALL_SLOTS ? CPU_USAGE_ALL_SLOTS : (uint32_t)b;
	}
	c->cpu_usage_ns = now;
	/* This call's wanted slots; usage_one() marks those the next call
	 * must read in the other (all zero) bitmap. */
	uint64_t *want = c->cpu_want;

	c->cpu_want = c->cpu_want_next;
	c->cpu_want_next = want;
	for (uint32_t k = 0; k < batch; k++) {
		uint32_t i = c->cpu_usage_next < c->cpu_hi ? c->cpu_usage_next : 0;

		c->cpu_usage_next = i + 1;
		if (!c->cpu_tid[i])
			continue;
		want[i >> 6] &= ~(1ull << (i & 63)); /* read here, not below */
		usage_one(c, i, out, &n, max);
	}
	/* Then the threads that delivered samples or are flagged. */
	for (uint32_t w = 0; w < (c->cpu_hi + 63) / 64; w++) {
		uint64_t bits = want[w];

		want[w] = 0;
		while (bits) {
			uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(bits);

			bits &= bits - 1;
			if (i < c->cpu_hi && c->cpu_tid[i])
				usage_one(c, i, out, &n, max);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return (int)n;
}

int sprobe_capturer__cpu_usage(struct sprobe_capturer *c, struct sprobe_cpu_usage *out,
			       uint32_t max)
{
	return cpu_usage(c, out, max, false);
}

int sprobe_capturer__cpu_usage_all(struct sprobe_capturer *c, struct sprobe_cpu_usage *out,
				   uint32_t max)
{
	return cpu_usage(c, out, max, true);
}
