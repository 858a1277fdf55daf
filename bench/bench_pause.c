/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the eBPF companion costs.
 *  1. Per program: average ns per invocation, from the kernel's BPF run-time
 *     statistics (bpf_enable_stats(BPF_STATS_RUN_TIME) held open; run_time_ns
 *     / run_cnt of each program). sys_enter and sched_switch run for every
 *     syscall and every context switch of the machine, matching or not.
 *  2. Per window: the window the target feels, with and without the
 *     companion attached (stats off for this part: stats add two clock
 *     reads per program run): the handler's self-reported pause
 *     (entry -> exit) and the probe's round trip (send -> handler done).
 *
 * Windows are driven like the capture backend does: a driver thread sends a
 * real-time signal to a worker spinning on the other CPU; the handler
 * copies 16 KiB of its stack (the size the platform notes measured) and
 * reports entry/exit with CLOCK_MONOTONIC.
 *
 *   build/bench/bench_pause [WINDOWS]     (default 2000 per phase)
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <stackprobe/pause.h>

#define SIGNO (SIGRTMIN + 6)
#define COPY_BYTES (16 * 1024)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Written by the handler, read by the driver after the acquire of done. */
static uint64_t h_entry, h_exit;
static _Atomic uint32_t done;
static _Atomic pid_t worker_tid;
static _Atomic int stop;
static unsigned char sink[COPY_BYTES];

/* ASYNC-SIGNAL-SAFE: clock_gettime, memcpy, stores. */
static void handler(int sig, siginfo_t *si, void *uc)
{
	uint64_t entry = mono_ns();
	/* Copy 16 KiB of this thread's stack (below the handler's frame: always
	 * mapped on an 8 MiB thread stack): what a capture does in its window. */
	const unsigned char *sp = __builtin_frame_address(0);

	memcpy(sink, sp - COPY_BYTES, COPY_BYTES);
	__asm__ volatile("" ::"r"(sink) : "memory");
	h_entry = entry;
	h_exit = mono_ns();
	/* Release: pairs with the acquire load in run_phase(). */
	atomic_fetch_add_explicit(&done, 1, memory_order_release);
}

static void pin(int cpu)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	CPU_ZERO(&set);
	CPU_SET(n > 1 ? cpu % n : 0, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *worker(void *arg)
{
	volatile uint64_t x = 0;

	pin(1);
	atomic_store_explicit(&worker_tid, (pid_t)syscall(SYS_gettid), memory_order_release);
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		x++;
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct phase {
	uint64_t self_med, self_p90, rt_med, rt_p90;
};

static uint64_t pct(uint64_t *v, size_t n, unsigned q)
{
	size_t r = (n * q + 99) / 100;
	return v[r ? r - 1 : 0];
}

static int run_phase(size_t n, struct phase *out, struct sprobe_pause_swindow *sw)
{
	uint64_t *self = calloc(n, sizeof(*self)), *rt = calloc(n, sizeof(*rt));
	pid_t tid = atomic_load_explicit(&worker_tid, memory_order_acquire);

	if (!self || !rt)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t before = atomic_load_explicit(&done, memory_order_relaxed);
		uint64_t sent = mono_ns();
		if (syscall(SYS_tgkill, getpid(), tid, SIGNO) != 0)
			return -errno;
		uint64_t deadline = sent + 2000000000ull;
		while (atomic_load_explicit(&done, memory_order_acquire) == before) {
			if (mono_ns() > deadline)
				return -ETIMEDOUT;
		}
		rt[i] = mono_ns() - sent;
		self[i] = h_exit - h_entry;
		if (sw)
			sw[i] = (struct sprobe_pause_swindow){
				.tid = tid, .signal_ns = sent, .entry_ns = h_entry, .exit_ns = h_exit,
			};
	}
	qsort(self, n, sizeof(*self), cmp_u64);
	qsort(rt, n, sizeof(*rt), cmp_u64);
	out->self_med = pct(self, n, 50);
	out->self_p90 = pct(self, n, 90);
	out->rt_med = pct(rt, n, 50);
	out->rt_p90 = pct(rt, n, 90);
	free(self);
	free(rt);
	return 0;
}

static struct sprobe_pause *attach(void)
{
	struct sprobe_pause_opts o = {
		.sz = sizeof(o), .tgid = getpid(), .signo = SIGNO,
		.ringbuf_bytes = 4u << 20,
	};
	return sprobe_pause__new(&o);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
	struct sigaction sa = { 0 };
	pthread_t th;
	struct phase without[2], with[2];
	int err;

	if (n < 10) {
		fprintf(stderr, "usage: bench_pause [WINDOWS >= 10]\n");
		return 2;
	}
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGNO, &sa, NULL);
	pin(0);
	pthread_create(&th, NULL, worker, NULL);
	while (!atomic_load_explicit(&worker_tid, memory_order_acquire))
		sched_yield();

	char why[512];
	err = sprobe_pause__probe(why, sizeof(why));
	if (err) {
		printf("bench_pause: companion unavailable, nothing to measure: %s\n", why);
		atomic_store(&stop, 1);
		pthread_join(th, NULL);
		return 0;
	}

	/* Alternate without / with twice so drift of the VM shows. */
	run_phase(n / 5, &without[0], NULL);	/* warm-up */
	for (int r = 0; r < 2; r++) {
		if ((err = run_phase(n, &without[r], NULL)))
			goto fail;
		struct sprobe_pause *p = attach();
		if (!p) {
			err = -errno;
			goto fail;
		}
		err = run_phase(n, &with[r], NULL);
		sprobe_pause__poll(p, 100);
		sprobe_pause__free(p);
		if (err)
			goto fail;
	}

	/* Per-program cost, stats on. */
	int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		err = -errno;
		goto fail;
	}
	struct sprobe_pause *p = attach();
	if (!p) {
		err = -errno;
		goto fail;
	}
	uint64_t t0 = mono_ns();
	struct phase stat_phase;
	struct sprobe_pause_swindow *sw = calloc(n, sizeof(*sw));
	if (!sw) {
		err = -ENOMEM;
		goto fail;
	}
	err = run_phase(n, &stat_phase, sw);
	uint64_t wall = mono_ns() - t0;
	size_t nk = 0;
	uint64_t deadline = mono_ns() + 2000000000ull;
	while (nk < n && mono_ns() < deadline) {
		sprobe_pause__poll(p, 50);
		sprobe_pause__windows(p, &nk);
	}
	struct sprobe_pause_prog_stats ps[SPROBE_PAUSE_NPROGS];
	int np = sprobe_pause__prog_stats(p, ps, SPROBE_PAUSE_NPROGS);
	struct sprobe_pause_stats st;
	sprobe_pause__stats(p, &st);
	const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(p, &nk);
	struct sprobe_pause_merge_opts mo = {
		.sz = sizeof(mo), .kernel_lost = st.lost + st.no_state + st.missed,
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, sw, n, &mo);
	/* Where the kernel-minus-self difference goes: before the handler's
	 * first clock read and after its last one. */
	uint64_t pre_med = 0, post_med = 0, pre_p90 = 0, post_p90 = 0;
	if (m) {
		size_t npairs;
		const struct sprobe_pause_pair *pp = sprobe_pause_merge__pairs(m, &npairs);
		uint64_t *pre = calloc(npairs + 1, sizeof(*pre)), *post = calloc(npairs + 1, sizeof(*post));
		if (pre && post && npairs) {
			for (size_t i = 0; i < npairs; i++) {
				pre[i] = sw[pp[i].self_idx].entry_ns - kw[pp[i].kernel_idx].deliver_ns;
				post[i] = kw[pp[i].kernel_idx].sigreturn_ns - sw[pp[i].self_idx].exit_ns;
			}
			qsort(pre, npairs, sizeof(*pre), cmp_u64);
			qsort(post, npairs, sizeof(*post), cmp_u64);
			pre_med = pct(pre, npairs, 50);
			pre_p90 = pct(pre, npairs, 90);
			post_med = pct(post, npairs, 50);
			post_p90 = pct(post, npairs, 90);
		}
		free(pre);
		free(post);
	}
	sprobe_pause__free(p);
	free(sw);
	close(stats_fd);
	if (err || np < 0)
		goto fail;

	printf("eBPF companion cost, %zu windows per phase, handler copies %d KiB\n", n,
	       COPY_BYTES / 1024);
	printf("\nper program (BPF run-time stats, all invocations machine-wide, %.2f s):\n",
	       wall / 1e9);
	printf("  %-20s %12s %12s %10s\n", "program", "runs", "runs/window", "ns/run");
	uint64_t total_ns = 0;
	for (int i = 0; i < np; i++) {
		total_ns += ps[i].run_time_ns;
		printf("  %-20s %12llu %12.2f %10.1f\n", ps[i].name,
		       (unsigned long long)ps[i].run_cnt, (double)ps[i].run_cnt / (double)n,
		       ps[i].run_cnt ? (double)ps[i].run_time_ns / (double)ps[i].run_cnt : 0.0);
	}
	printf("  all programs: %.1f ns of BPF per window (incl. unrelated syscalls and "
	       "switches in that time); windows seen %zu, lost %llu\n",
	       (double)total_ns / (double)n, nk, (unsigned long long)st.lost);
	printf("\nwindow as the target feels it (ns; median / p90):\n");
	printf("  %-22s %22s %22s\n", "", "handler entry->exit", "send->handler done");
	for (int r = 0; r < 2; r++) {
		printf("  %-22s %10llu / %-9llu %10llu / %-9llu\n", "without companion",
		       (unsigned long long)without[r].self_med, (unsigned long long)without[r].self_p90,
		       (unsigned long long)without[r].rt_med, (unsigned long long)without[r].rt_p90);
		printf("  %-22s %10llu / %-9llu %10llu / %-9llu\n", "with companion",
		       (unsigned long long)with[r].self_med, (unsigned long long)with[r].self_p90,
		       (unsigned long long)with[r].rt_med, (unsigned long long)with[r].rt_p90);
	}
	if (m) {
		printf("\nkernel - self = deliver->handler entry (median %llu, p90 %llu ns) + handler "
		       "exit->rt_sigreturn (median %llu, p90 %llu ns)\n",
		       (unsigned long long)pre_med, (unsigned long long)pre_p90,
		       (unsigned long long)post_med, (unsigned long long)post_p90);
		printf("\nthe same windows from both sides (last phase, stats on):\n");
		sprobe_pause_merge__print(m, stdout);
		sprobe_pause_merge__free(m);
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	return 0;

fail:
	fprintf(stderr, "bench_pause: %s\n", strerror(-err));
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	return 1;
}
