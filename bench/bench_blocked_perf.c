/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What a sample of a thread that blocks the capture signal costs through
 * the perf-event fallback (userspace/sampler/blocked_perf.h), against a
 * sample of the same thread through the signal path (cpu engine PERF: a
 * task-clock event whose overflow signals the thread, whose handler
 * copies its stack: backends/linux/perfclock.c), at the same rate.
 *
 * One target thread spins in a 24-frame call chain (mutual recursion,
 * -O2) for a fixed wall time per phase; the main thread is the probe:
 * every 1 ms it drains (fallback) or collects (signal path) and unwinds
 * each sample with the same unwinder. Phases alternate (none, fallback,
 * signal, ...) ROUNDS times; medians are printed:
 *   - probe CPU per sample (samples are CPU periods: the signal path folds
 *     the periods that expire before a collect into one stack's weight,
 *     the fallback keeps a stack per period): drain/collect, and the
 *     unwind (CPU clock of the probe around each);
 *   - target cost per sample: the target's loop runs fewer iterations per
 *     second of its own CPU time when sampled; the difference, times the
 *     iterations, divided by the samples (the kernel's copy in the
 *     overflow for the fallback; signal delivery, handler and sigreturn
 *     for the signal path). Noisy on a shared machine: read the medians.
 *
 *   build/bench/bench_blocked_perf [HZ [ROUNDS [PHASE_MS]]]  (999 7 400)
 * Needs perf events (root, or perf_event_paranoid <= 2).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/unwind.h>

#include "userspace/sampler/blocked_perf.h"

#define DEPTH 24
#define MAXR 64

static uint64_t clk(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static _Atomic int phase;	   /* 0 idle, 1 spin, 2 quit */
static _Atomic int want_block = -1; /* -1 nothing, 0 unblock all, 1 block all */
static _Atomic uint64_t iters;
static _Atomic pid_t target_tid;
static clockid_t target_clk;
static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t chain_b(int d, uint64_t x);
__attribute__((noinline)) static uint64_t chain_a(int d, uint64_t x)
{
	if (d == 0) {
		for (int i = 0; i < 2000; i++)
			x = x * 6364136223846793005ull + 1;
		return x;
	}
	return chain_b(d - 1, x) + 1;
}

__attribute__((noinline)) static uint64_t chain_b(int d, uint64_t x)
{
	if (d == 0)
		return chain_a(0, x);
	return chain_a(d - 1, x ^ (uint64_t)d) + 3;
}

static void *target(void *arg)
{
	(void)arg;
	pthread_getcpuclockid(pthread_self(), &target_clk);
	atomic_store(&target_tid, (pid_t)syscall(SYS_gettid));
	for (;;) {
		int p = atomic_load(&phase), w = atomic_exchange(&want_block, -1);

		if (w >= 0) {
			sigset_t all;

			sigfillset(&all);
			/* raw: what no wrapper sees, as the real case */
			syscall(SYS_rt_sigprocmask, w ? SIG_BLOCK : SIG_UNBLOCK, &all, NULL, 8);
		}
		if (p == 2)
			return NULL;
		if (p == 1) {
			sink = chain_a(DEPTH, sink);
			atomic_fetch_add_explicit(&iters, 1, memory_order_relaxed);
		} else {
			usleep(200);
		}
	}
}

struct res {
	double ns_per_iter;   /* target CPU per iteration */
	uint64_t samples, stacks, iters; /* samples: weighted (CPU periods) */
	uint64_t probe_ns, unwind_ns;
};

static struct sprobe_unwinder *uw;
static uint64_t unwind_ns_acc;

static void unwind_cb(void *ctx, struct sprobe_thread_sample *ts, uint64_t t)
{
	uint64_t a = clk(CLOCK_THREAD_CPUTIME_ID);

	(void)t;
	sprobe_unwinder__unwind(uw, ts, NULL);
	unwind_ns_acc += clk(CLOCK_THREAD_CPUTIME_ID) - a;
	((uint64_t *)ctx)[0] += ts->weight ? ts->weight : 1;
	((uint64_t *)ctx)[1]++;
}

static void set_block(int on)
{
	atomic_store(&want_block, on);
	while (atomic_load(&want_block) != -1)
		usleep(100);
}

/* mode 0: nothing, 1: fallback, 2: signal path. */
static struct res run_phase(int mode, double hz, unsigned ms, struct sprobe_capturer *c,
			    struct sprobe_snapshot *snap)
{
	struct res r = { 0 };
	struct sprobe_blocked_perf *bp = NULL;
	uint64_t period = (uint64_t)(1e9 / hz), t_end, c0, i0, probe = 0;

	if (mode == 1) {
		struct sprobe_blocked_perf_opts o = { .sz = sizeof(o), .period_ns = period };

		set_block(1);
		bp = sprobe_blocked_perf__new(&o);
		if (!bp || sprobe_blocked_perf__watch(bp, atomic_load(&target_tid)) < 0) {
			fprintf(stderr, "fallback: cannot open the event (%s)\n", strerror(errno));
			exit(1);
		}
	} else if (mode == 2) {
		set_block(0);
		sprobe_capturer__cpu_collect(c, snap, period); /* creates the source */
	}
	unwind_ns_acc = 0;
	c0 = clk(target_clk);
	i0 = atomic_load(&iters);
	atomic_store(&phase, 1);
	t_end = clk(CLOCK_MONOTONIC) + (uint64_t)ms * 1000000ull;
	while (clk(CLOCK_MONOTONIC) < t_end) {
		uint64_t a;

		usleep(1000);
		a = clk(CLOCK_THREAD_CPUTIME_ID);
		if (mode == 1) {
			uint64_t before = unwind_ns_acc;

			uint64_t cnt[2] = { 0, 0 };

			sprobe_blocked_perf__drain(bp, clk(CLOCK_MONOTONIC), unwind_cb, cnt);
			r.samples += cnt[0];
			r.stacks += cnt[1];
			probe += clk(CLOCK_THREAD_CPUTIME_ID) - a - (unwind_ns_acc - before);
		} else if (mode == 2) {
			sprobe_capturer__cpu_collect(c, snap, period);
			probe += clk(CLOCK_THREAD_CPUTIME_ID) - a;
			for (uint32_t i = 0; i < sprobe_snapshot__nthreads(snap); i++) {
				struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, i);

				if (t->stage == SPROBE_STAGE_EMPTY)
					continue;
				uint64_t b = clk(CLOCK_THREAD_CPUTIME_ID);
				sprobe_unwinder__unwind(uw, t, NULL);
				unwind_ns_acc += clk(CLOCK_THREAD_CPUTIME_ID) - b;
				r.samples += t->weight ? t->weight : 1;
				r.stacks++;
			}
		}
	}
	atomic_store(&phase, 0);
	r.iters = atomic_load(&iters) - i0;
	r.ns_per_iter = r.iters ? (double)(clk(target_clk) - c0) / (double)r.iters : 0;
	r.probe_ns = probe;
	r.unwind_ns = unwind_ns_acc;
	if (mode == 1) {
		sprobe_blocked_perf__drain(bp, clk(CLOCK_MONOTONIC), NULL, NULL);
		sprobe_blocked_perf__free(bp);
	} else if (mode == 2) {
		sprobe_capturer__cpu_stop(c);
	}
	return r;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n ? v[n / 2] : 0;
}

int main(int argc, char **argv)
{
	double hz = argc > 1 ? atof(argv[1]) : 999;
	int rounds = argc > 2 ? atoi(argv[2]) : 7;
	unsigned ms = argc > 3 ? (unsigned)atoi(argv[3]) : 400;
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_capture_opts co = { .sz = sizeof(co) };
	double tcost[2][MAXR], pcost[2][MAXR], ucost[2][MAXR], nsamp[2][MAXR], nstk[2][MAXR];
	pthread_t th;
	char why[512];

	if (hz <= 0 || rounds < 1 || rounds > MAXR || ms < 50) {
		fprintf(stderr, "usage: bench_blocked_perf [HZ [ROUNDS [PHASE_MS]]]\n");
		return 2;
	}
	uw = sprobe_unwinder__new(&uo);
	struct sprobe_capturer *c = sprobe_capturer__new(&co);
	struct sprobe_snapshot *snap = sprobe_snapshot__new(4, 0);

	if (!uw || !c || !snap) {
		fprintf(stderr, "setup: %s\n", strerror(errno));
		return 1;
	}
	if (sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_PERF, why, sizeof(why)) < 0) {
		fprintf(stderr, "no perf events: %s\n", why);
		return 1;
	}
	pthread_create(&th, NULL, target, NULL);
	while (!atomic_load(&target_tid))
		usleep(100);
	sprobe_modules__refresh(sprobe_unwinder__modules(uw));
	run_phase(0, hz, 100, c, snap); /* warm-up */
	for (int k = 0; k < rounds; k++) {
		struct res base = run_phase(0, hz, ms, c, snap);

		for (int m = 1; m <= 2; m++) {
			struct res r = run_phase(m, hz, ms, c, snap);
			double n = r.samples ? (double)r.samples : 1;

			tcost[m - 1][k] = (r.ns_per_iter - base.ns_per_iter) * (double)r.iters / n / 1e3;
			pcost[m - 1][k] = (double)r.probe_ns / n / 1e3;
			ucost[m - 1][k] = (double)r.unwind_ns / n / 1e3;
			nsamp[m - 1][k] = (double)r.samples;
			nstk[m - 1][k] = (double)r.stacks;
			printf("round %d %-9s: %5lu samples (%lu stacks), target +%.2f us/sample, probe %.2f us, "
			       "unwind %.2f us\n",
			       k + 1, m == 1 ? "fallback" : "signal", (unsigned long)r.samples,
			       (unsigned long)r.stacks,
			       tcost[m - 1][k], pcost[m - 1][k], ucost[m - 1][k]);
		}
	}
	printf("\n%.0f Hz, %d rounds of %u ms, a %d-deep call chain (medians, us per sample)\n", hz, rounds,
	       ms, DEPTH + 1);
	printf("| path | samples per phase | stacks unwound | target thread | probe: drain / collect "
	       "| probe: unwind |\n");
	printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
	for (int m = 0; m < 2; m++)
		printf("| %s | %.0f | %.0f | %.2f | %.2f | %.2f |\n",
		       m == 0 ? "perf-event fallback (thread blocks the signal)"
			      : "signal path (perf-event engine, handler copies)",
		       median(nsamp[m], rounds), median(nstk[m], rounds), median(tcost[m], rounds),
		       median(pcost[m], rounds),
		       median(ucost[m], rounds));
	atomic_store(&phase, 2);
	pthread_join(th, NULL);
	sprobe_snapshot__free(snap);
	sprobe_capturer__free(c);
	sprobe_unwinder__free(uw);
	return 0;
}
