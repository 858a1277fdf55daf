/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zero-pause vs the signal path, for 8, 64 and 512 threads blocked in
 * futex waits (tests/zeropause/chain.c, no frame pointers), in one run:
 *
 *  - target cost, kernel-measured: the eBPF companion (bpf/pause.bpf.c)
 *    records every capture signal generated for and delivered to the
 *    blocked threads; pause = deliver -> rt_sigreturn. A zero-pause sample
 *    has no kernel window at all: 0 ns. Also the blocked threads' own CPU
 *    time (their CPU clocks: user + kernel, incl. signal delivery and the
 *    restarted futex wait) per sample;
 *  - probe cost: the capturing thread's CPU time per blocked-thread sample
 *    (capture only; the deferred unwind is the same work either way);
 *  - share of blocked-thread samples taken with 0 ns pause.
 * Zero-pause is measured twice: threads that never run between captures
 * (their previous copy is kept after one schedstat read) and threads woken
 * once between captures (outside the timed part), so each copy is fresh.
 * zp-fresh is measured once more with the copies given back after each
 * capture (sprobe_snapshot__trim(), as the sampler does): the madvise and
 * the fresh pages the next copies fault in.
 * Then the register gap: capture + unwind (sprobe_capture_and_resolve) of
 * 64 threads parked in a chain built with and without frame pointers: how
 * many zero-pause walks fall short of the thread start (re-captured with a
 * signal) and what a sample costs the probe in total.
 *
 *   build/bench/bench_zero_pause [ROUNDS_SCALE]   (default 1)
 * Needs root (or CAP_BPF + CAP_PERFMON) for the kernel numbers; without it
 * they are reported as unavailable and the rest still runs.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/pause.h>
#include <stackprobe/unwind.h>

#include "chain.h"

#define MAXT 512

static uint64_t clk(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct pool {
	int n;
	bool fp;
	struct zp_park park[MAXT];
	pthread_t th[MAXT];
	clockid_t cpu[MAXT];
};

static void pool_start(struct pool *p, int n, bool fp)
{
	pthread_attr_t at;

	p->n = n;
	p->fp = fp;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	for (int i = 0; i < n; i++) {
		memset(&p->park[i], 0, sizeof(p->park[i]));
		p->park[i].kind = ZP_FUTEX;
		if (pthread_create(&p->th[i], &at, fp ? zp_park_main_fp : zp_park_main_nofp,
				   &p->park[i]) != 0) {
			perror("pthread_create");
			exit(1);
		}
		pthread_getcpuclockid(p->th[i], &p->cpu[i]);
	}
	pthread_attr_destroy(&at);
	/* Until every one sleeps in its futex (bounded). */
	uint64_t deadline = clk(CLOCK_MONOTONIC) + 10000000000ull;
	for (int i = 0; i < n; i++) {
		char path[64], buf[128];

		while (!atomic_load_explicit(&p->park[i].tid, memory_order_acquire))
			sched_yield();
		snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)p->park[i].tid);
		for (;;) {
			FILE *f = fopen(path, "r");
			bool ok = f && fgets(buf, sizeof(buf), f) && strtol(buf, NULL, 10) == SYS_futex;

			if (f)
				fclose(f);
			if (ok)
				break;
			if (clk(CLOCK_MONOTONIC) > deadline) {
				fprintf(stderr, "thread %d never blocked\n", i);
				exit(1);
			}
			sched_yield();
		}
	}
}

static void pool_stop(struct pool *p)
{
	for (int i = 0; i < p->n; i++) {
		atomic_store(&p->park[i].stop, 1);
		atomic_store(&p->park[i].word, 1);
		syscall(SYS_futex, &p->park[i].word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	for (int i = 0; i < p->n; i++)
		pthread_join(p->th[i], NULL);
}

static uint64_t pool_cpu(const struct pool *p)
{
	uint64_t sum = 0;

	for (int i = 0; i < p->n; i++)
		sum += clk(p->cpu[i]);
	return sum;
}

static bool in_pool(const struct pool *p, pid_t tid)
{
	for (int i = 0; i < p->n; i++)
		if (p->park[i].tid == tid)
			return true;
	return false;
}

struct result {
	double probe_ns, target_cpu_ns, kpause_ns, wall_ns;
	uint64_t samples, zp, kwin, fallback, kept;
};

static int signo_used;

/* Wake every parked thread once and wait until each has blocked again
 * (outside the timed captures): its next zero-pause capture must copy its
 * stack afresh instead of keeping the previous copy. */
static void pool_stir(struct pool *p)
{
	unsigned before[MAXT];

	for (int i = 0; i < p->n; i++) {
		before[i] = atomic_load(&p->park[i].wakes);
		syscall(SYS_futex, &p->park[i].word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	for (int i = 0; i < p->n; i++) {
		char path[64], buf[128];
		bool again = false;

		/* Re-wake: a thread still returning from a capture signal's
		 * handler was not in its futex wait when woken the first time. */
		while (atomic_load(&p->park[i].wakes) == before[i]) {
			syscall(SYS_futex, &p->park[i].word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
			sched_yield();
		}
		snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)p->park[i].tid);
		while (!again) {
			FILE *f = fopen(path, "r");

			again = f && fgets(buf, sizeof(buf), f) && strtol(buf, NULL, 10) == SYS_futex;
			if (f)
				fclose(f);
			if (!again)
				sched_yield();
		}
	}
}

/* stir: wake every thread between captures (zero-pause then copies each
 * stack afresh; the target CPU column is then the wake-ups': not shown). */
static void run(struct pool *p, bool zp, bool stir, bool trim, int rounds,
		struct sprobe_pause *kp, struct result *r)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = zp, .signo = signo_used };
	struct sprobe_capturer *c = sprobe_capturer__new(&o);
	struct sprobe_snapshot *s = sprobe_snapshot__new(1024, 64 * 1024);

	if (!c || !s) {
		perror("capturer");
		exit(1);
	}
	memset(r, 0, sizeof(*r));
	/* Warm: opens the proc files, faults the snapshot in. */
	for (int k = 0; k < 3; k++)
		sprobe_capturer__capture(c, s);
	if (kp) {
		while (sprobe_pause__poll(kp, 0) > 0)
			;
		sprobe_pause__clear(kp);
	}
	uint64_t cpu0 = pool_cpu(p), wall0 = clk(CLOCK_MONOTONIC), probe = 0, wall = 0;
	for (int k = 0; k < rounds; k++) {
		if (stir)
			pool_stir(p);
		uint64_t pc0 = clk(CLOCK_THREAD_CPUTIME_ID), w0 = clk(CLOCK_MONOTONIC);
		if (sprobe_capturer__capture(c, s) < 0) {
			fprintf(stderr, "capture failed\n");
			exit(1);
		}
		/* zp-fresh-trim: the copies given back after each capture, as
		 * the sampler does (sprobe_snapshot__trim()); the next copy
		 * then writes fresh zero pages. Timed with the capture. */
		if (trim)
			sprobe_snapshot__trim(s);
		probe += clk(CLOCK_THREAD_CPUTIME_ID) - pc0;
		wall += clk(CLOCK_MONOTONIC) - w0;
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
		r->fallback += st->zp_fallback;
		r->kept += st->zp_unchanged;
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
			const struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

			if (t->stage != SPROBE_STAGE_RAW || !in_pool(p, t->tid))
				continue;
			r->samples++;
			r->zp += t->method == SPROBE_METHOD_ZERO_PAUSE;
		}
	}
	uint64_t wall1 = clk(CLOCK_MONOTONIC);
	uint64_t cpu1 = pool_cpu(p);
	r->probe_ns = (double)probe / (double)r->samples;
	r->target_cpu_ns = stir ? -1 : (double)(cpu1 - cpu0) / (double)r->samples;
	r->wall_ns = (double)wall / (double)r->samples;
	if (kp) {
		size_t nk = 0;
		uint64_t sum = 0;

		while (sprobe_pause__poll(kp, 200) > 0)
			;
		const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(kp, &nk);
		for (size_t i = 0; i < nk; i++) {
			if (!in_pool(p, kw[i].tid) || kw[i].deliver_ns < wall0 || kw[i].deliver_ns > wall1)
				continue;
			r->kwin++;
			if (kw[i].sigreturn_ns > kw[i].deliver_ns)
				sum += kw[i].sigreturn_ns - kw[i].deliver_ns;
		}
		/* Per sample, zero-pause samples (no window) counting 0 ns. */
		r->kpause_ns = (double)sum / (double)r->samples;
		sprobe_pause__clear(kp);
	} else {
		r->kpause_ns = -1;
	}
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
}

static void gap(bool fp, int rounds)
{
	struct pool *p = calloc(1, sizeof(*p));
	struct sprobe_capture_opts o = { .sz = sizeof(o), .zero_pause = true, .signo = signo_used };
	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo) };
	struct sprobe_unwinder_stats st;
	uint64_t samples = 0, zp = 0;

	pool_start(p, 64, fp);
	struct sprobe_capturer *c = sprobe_capturer__new(&o);
	struct sprobe_snapshot *s = sprobe_snapshot__new(1024, 64 * 1024);
	struct sprobe_unwinder *u = sprobe_unwinder__new(&uo);
	if (!c || !s || !u) {
		perror("gap");
		exit(1);
	}
	sprobe_capture_and_resolve(c, s, u); /* warm: CFI rows, proc files */
	sprobe_unwinder__stats(u, &st);
	uint64_t walks0 = st.zp_walks, short0 = st.zp_short;
	uint64_t probe0 = clk(CLOCK_THREAD_CPUTIME_ID);
	for (int k = 0; k < rounds; k++) {
		sprobe_capture_and_resolve(c, s, u);
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
			const struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

			if (t->stage == SPROBE_STAGE_EMPTY || !in_pool(p, t->tid))
				continue;
			samples++;
			zp += t->method == SPROBE_METHOD_ZERO_PAUSE;
		}
	}
	uint64_t probe1 = clk(CLOCK_THREAD_CPUTIME_ID);
	sprobe_unwinder__stats(u, &st);
	printf("  %-26s %8llu %10llu %9.1f%% %12.1f%% %14.2f\n",
	       fp ? "-fno-omit-frame-pointer" : "-fomit-frame-pointer",
	       (unsigned long long)(st.zp_walks - walks0),
	       (unsigned long long)(st.zp_short - short0),
	       100.0 * (double)(st.zp_short - short0) / (double)(st.zp_walks - walks0 ? st.zp_walks - walks0 : 1),
	       100.0 * (double)zp / (double)samples, (double)(probe1 - probe0) / (double)samples / 1e3);
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
	pool_stop(p);
	free(p);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	static const int sizes[] = { 8, 64, 512 };
	int scale = argc > 1 ? atoi(argv[1]) : 1;
	struct rlimit rl;
	char why[512];

	if (scale < 1)
		scale = 1;
	/* 512 threads keep 1024 proc files open (zero-pause caches two per
	 * thread within a quarter of the soft limit): give the soft limit
	 * the hard one, as a service with many threads would. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signo_used = SIGRTMIN + 4;
	struct sprobe_pause_opts po = { .sz = sizeof(po), .tgid = getpid(), .signo = signo_used,
					.mode = SPROBE_PAUSE_MODE_PROBE, .quiet = true,
					.ringbuf_bytes = 4u << 20 };
	struct sprobe_pause *kp = sprobe_pause__new(&po);
	if (!kp) {
		sprobe_pause__strerror(-errno, why, sizeof(why));
		printf("kernel numbers unavailable: %s\n", why);
	}

	printf("zero-pause vs signal path, threads blocked in FUTEX_WAIT (no frame pointers)\n");
	printf("per blocked-thread sample: probe CPU, target CPU (thread CPU clocks),\n"
	       "kernel pause (eBPF: deliver -> rt_sigreturn; 0 for a zero-pause sample)\n"
	       "zp-idle: threads that never run (each previous copy is kept: one read);\n"
	       "zp-fresh: every thread woken between captures (each stack copied anew)\n"
	       "signal-stir: the signal path with the same wake-ups between captures\n"
	       "(the probe's caches are as cold as in zp-fresh; target CPU not separable)\n"
	       "zp-fr-trim: zp-fresh with the copies given back after each capture\n"
	       "(sprobe_snapshot__trim(), as the sampler does; timed with it)\n\n");
	printf("  %7s %-10s %8s %7s %8s %10s %10s %11s %10s %9s\n", "threads", "method", "samples",
	       "0ns%", "kwindows", "probe-us", "target-us", "kpause-us", "total-us", "wall-us");
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		int n = sizes[si];
		int rounds = scale * (n <= 8 ? 400 : n <= 64 ? 100 : 20);
		struct pool *p = calloc(1, sizeof(*p));
		struct result r[5];

		static const char *const names[5] = { "zp-idle", "zp-fresh", "signal",
						      "signal-stir", "zp-fr-trim" };

		pool_start(p, n, false);
		run(p, true, false, false, rounds, kp, &r[0]);
		run(p, true, true, false, rounds, kp, &r[1]);
		run(p, false, false, false, rounds, kp, &r[2]);
		run(p, false, true, false, rounds, kp, &r[3]);
		run(p, true, true, true, rounds, kp, &r[4]);
		for (int m = 0; m < 5; m++) {
			double zero = 100.0 * (double)(r[m].samples - (r[m].kwin < r[m].samples ? r[m].kwin : r[m].samples)) /
				      (double)r[m].samples;
			char tgt[32], tot[32];

			if (r[m].target_cpu_ns < 0) {
				snprintf(tgt, sizeof(tgt), "%s", "-");
				snprintf(tot, sizeof(tot), "%.2f", r[m].probe_ns / 1e3);
			} else {
				snprintf(tgt, sizeof(tgt), "%.2f", r[m].target_cpu_ns / 1e3);
				snprintf(tot, sizeof(tot), "%.2f", (r[m].probe_ns + r[m].target_cpu_ns) / 1e3);
			}
			printf("  %7d %-10s %8llu %6.1f%% %8llu %10.2f %10s %11.2f %10s %9.2f\n", n,
			       names[m], (unsigned long long)r[m].samples,
			       kp ? zero : 100.0 * (double)r[m].zp / (double)r[m].samples,
			       (unsigned long long)r[m].kwin, r[m].probe_ns / 1e3, tgt,
			       kp ? r[m].kpause_ns / 1e3 : -1.0, tot, r[m].wall_ns / 1e3);
		}
		for (int m = 0; m < 2; m++)
			printf("  %7s %s: zero-pause %llu of %llu samples, kept unchanged %llu, "
			       "copies refused %llu\n",
			       "", names[m], (unsigned long long)r[m].zp,
			       (unsigned long long)r[m].samples, (unsigned long long)r[m].kept,
			       (unsigned long long)r[m].fallback);
		pool_stop(p);
		free(p);
	}

	printf("\nregister gap: 64 threads in a chain a->b->c->futex, capture + unwind\n"
	       "(sprobe_capture_and_resolve), 50 rounds\n\n");
	printf("  %-26s %8s %10s %10s %13s %14s\n", "chain built with", "zp-walks", "short",
	       "short%", "zp-final%", "probe-us/thr");
	gap(false, 50 * scale);
	gap(true, 50 * scale);
	sprobe_pause__free(kp);
	return 0;
}
