/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The suspend window, measured: per-thread window (handler entry -> exit,
 * median / p99 / max) and whole-capture time, for 1, 4, 16, 64 threads,
 * blocked or spinning, with shallow, 64 KiB and 256 KiB stacks, for three
 * ways of doing it in the same run:
 *
 *   floor    a bare signal handler: two timestamps, memcpy of the same
 *            bytes (SP - red zone .. stack top, capped like the capture),
 *            a completion counter and a futex wake. No protocol at all.
 *   signal   stackprobe's default (SPROBE_METHOD_SIGNAL, parallel).
 *   vmreadv  the seed's strategy (SPROBE_METHOD_VM_READV): the handler
 *            publishes registers and waits while the probe copies the stack
 *            with process_vm_readv.
 *
 * Usage: bench_capture [--quick] [--runtime-ms N]
 * Each (config, method) runs for about --runtime-ms (default 600 ms, at
 * least 5 captures). Timing claims live here and in docs/PERFORMANCE.md.
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <stackprobe/capture.h>

#define MAXT 64
#define MAX_SAMPLES 400000

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- */
/* Workers                                                          */
/* ---------------------------------------------------------------- */

struct bw {
	pthread_t th;
	int spin;
	size_t depth;
	int pipe[2];
	_Atomic int ready, stop;
	_Atomic pid_t tid;
	uint64_t top; /* where the floor copy ends (thread pointer) */
	uint8_t *floor_buf;
	/* floor handler output */
	uint64_t f_entry, f_exit, f_len;
};

static __thread struct bw *t_self;

static _Atomic uint32_t floor_done, floor_target;

/* The floor: as little as a handler that copies the stack can do. */
static void floor_handler(int sig, siginfo_t *si, void *ucv)
{
	uint64_t entry = now_ns();
	int saved = errno;
	ucontext_t *uc = ucv;
	struct bw *w = t_self;
	(void)sig;
	(void)si;

	if (w) {
#if defined(__x86_64__)
		uint64_t sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP] - 128;
#else
		uint64_t sp = (uint64_t)uc->uc_mcontext.sp;
#endif
		uint64_t len = w->top - sp;

		if (len > SPROBE_MAX_STACK_BYTES + 128)
			len = SPROBE_MAX_STACK_BYTES + 128;
		memcpy(w->floor_buf, (void *)(uintptr_t)sp, len);
		w->f_len = len;
		w->f_entry = entry;
		w->f_exit = now_ns();
		if (atomic_fetch_add(&floor_done, 1) + 1 >= atomic_load(&floor_target))
			syscall(SYS_futex, &floor_done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	errno = saved;
}

__attribute__((noinline)) static void park(struct bw *w, volatile uint8_t *deep)
{
	char c;

	atomic_store(&w->ready, 1);
	if (w->spin) {
		while (!atomic_load_explicit(&w->stop, memory_order_relaxed))
			deep[0]++;
	} else {
		while (read(w->pipe[0], &c, 1) < 0 && errno == EINTR)
			;
	}
}

static void *bw_main(void *arg)
{
	struct bw *w = arg;
	volatile uint8_t *deep;
	uint64_t tp;

	t_self = w;
#if defined(__x86_64__)
	__asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
#else
	__asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
#endif
	w->top = tp;
	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	deep = __builtin_alloca(w->depth + 16);
	memset((void *)deep, 1, w->depth + 16);
	park(w, deep);
	return NULL;
}

static void start_workers(struct bw *w, int n, int spin, size_t depth)
{
	for (int i = 0; i < n; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].spin = spin;
		w[i].depth = depth;
		w[i].floor_buf = malloc(SPROBE_MAX_STACK_BYTES + 256);
		memset(w[i].floor_buf, 0, SPROBE_MAX_STACK_BYTES + 256);
		if (pipe(w[i].pipe) || pthread_create(&w[i].th, NULL, bw_main, &w[i])) {
			perror("worker");
			exit(1);
		}
	}
	for (int i = 0; i < n; i++)
		while (!atomic_load(&w[i].ready))
			sched_yield();
}

static void stop_workers(struct bw *w, int n)
{
	for (int i = 0; i < n; i++) {
		atomic_store(&w[i].stop, 1);
		if (write(w[i].pipe[1], "x", 1) < 0)
			perror("write");
	}
	for (int i = 0; i < n; i++) {
		pthread_join(w[i].th, NULL);
		close(w[i].pipe[0]);
		close(w[i].pipe[1]);
		free(w[i].floor_buf);
	}
}

/* ---------------------------------------------------------------- */
/* Statistics                                                       */
/* ---------------------------------------------------------------- */

struct dist {
	uint64_t *v;
	size_t n;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void dist_add(struct dist *d, uint64_t x)
{
	if (d->n < MAX_SAMPLES)
		d->v[d->n++] = x;
}

static uint64_t pct(struct dist *d, double p)
{
	size_t i;

	if (!d->n)
		return 0;
	i = (size_t)(p * (double)(d->n - 1) + 0.5);
	return d->v[i];
}

struct result {
	uint64_t w50, w99, wmax, c50, cmax, bytes50;
	size_t nwin, ncap, dropped;
};

static void summarize(struct dist *win, struct dist *cap, struct dist *bytes, struct result *r)
{
	qsort(win->v, win->n, sizeof(uint64_t), cmp_u64);
	qsort(cap->v, cap->n, sizeof(uint64_t), cmp_u64);
	qsort(bytes->v, bytes->n, sizeof(uint64_t), cmp_u64);
	r->w50 = pct(win, 0.5);
	r->w99 = pct(win, 0.99);
	r->wmax = win->n ? win->v[win->n - 1] : 0;
	r->c50 = pct(cap, 0.5);
	r->cmax = cap->n ? cap->v[cap->n - 1] : 0;
	r->bytes50 = pct(bytes, 0.5);
	r->nwin = win->n;
	r->ncap = cap->n;
}

/* ---------------------------------------------------------------- */
/* Runs                                                             */
/* ---------------------------------------------------------------- */

static int floor_signo;
static uint64_t runtime_ns = 600000000ull;

static void run_floor(struct bw *w, int n, struct result *r, struct dist *win, struct dist *cap,
		      struct dist *bytes)
{
	uint64_t end = now_ns() + runtime_ns;
	pid_t pid = getpid();

	for (int k = 0; k < 5 || now_ns() < end; k++) {
		uint64_t t0 = now_ns(), deadline = t0 + 5000000000ull;

		atomic_store(&floor_done, 0);
		atomic_store(&floor_target, UINT32_MAX);
		for (int i = 0; i < n; i++) {
			w[i].f_entry = 0;
			syscall(SYS_tgkill, pid, w[i].tid, floor_signo);
		}
		atomic_store(&floor_target, (uint32_t)n);
		for (;;) {
			uint32_t d = atomic_load(&floor_done);

			if (d >= (uint32_t)n || now_ns() > deadline)
				break;
			struct timespec ts = { 0, 10000000 };
			syscall(SYS_futex, &floor_done, FUTEX_WAIT_PRIVATE, d, &ts, NULL, 0);
		}
		dist_add(cap, now_ns() - t0);
		for (int i = 0; i < n; i++) {
			if (w[i].f_entry) {
				dist_add(win, w[i].f_exit - w[i].f_entry);
				dist_add(bytes, w[i].f_len);
			} else {
				r->dropped++;
			}
		}
	}
}

static int run_capture(uint32_t method, struct bw *w, int n, struct result *r, struct dist *win,
		       struct dist *cap, struct dist *bytes)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o), .method = method };
	struct sprobe_capturer *c = sprobe_capturer__new(&o);
	struct sprobe_snapshot *s = sprobe_snapshot__new(MAXT + 8, 0);
	uint64_t end;

	if (!c || !s) {
		fprintf(stderr, "capturer: %s\n", strerror(errno));
		return -1;
	}
	/* Warm the snapshot (first-touch page faults are not the window). */
	sprobe_capturer__capture(c, s);
	end = now_ns() + runtime_ns;
	for (int k = 0; k < 5 || now_ns() < end; k++) {
		int err = sprobe_capturer__capture(c, s);
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);

		if (err) {
			fprintf(stderr, "capture: %s\n", strerror(-err));
			return -1;
		}
		dist_add(cap, st->capture_ns);
		r->dropped += st->threads_dropped;
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(s); i++) {
			struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, i);

			if (t->stage == SPROBE_STAGE_EMPTY)
				continue;
			dist_add(win, t->exit_ns - t->entry_ns);
			dist_add(bytes, t->stack_len);
		}
	}
	sprobe_snapshot__free(s);
	sprobe_capturer__free(c);
	return 0;
}

static void print_row(const char *cfg, const char *method, const struct result *r)
{
	printf("%-22s %-8s %9.2f %9.2f %9.1f %11.1f %11.1f %9zu %6zu %5zu\n", cfg, method,
	       r->w50 / 1e3, r->w99 / 1e3, r->wmax / 1e3, r->c50 / 1e3, r->cmax / 1e3,
	       (size_t)r->bytes50, r->ncap, r->dropped);
}

int main(int argc, char **argv)
{
	static const int counts[] = { 1, 4, 16, 64 };
	static const size_t depths[] = { 0, 64 * 1024, 256 * 1024 };
	static const char *const dnames[] = { "shallow", "64K", "256K" };
	struct dist win = { 0 }, cap = { 0 }, bytes = { 0 };
	struct bw *w = calloc(MAXT, sizeof(*w));
	struct sigaction sa;
	bool quick = false, have_vm = true;
	double ratio_floor_sum = 0, ratio_seed_sum = 0;
	int nratio = 0, nseed = 0;
	char a[8] = "abcdefg", b[8];
	struct iovec l = { b, 8 }, rr = { a, 8 };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick")) {
			quick = true;
			runtime_ns = 150000000ull;
		} else if (!strcmp(argv[i], "--runtime-ms") && i + 1 < argc) {
			runtime_ns = strtoull(argv[++i], NULL, 10) * 1000000ull;
		} else {
			fprintf(stderr, "usage: %s [--quick] [--runtime-ms N]\n", argv[0]);
			return 2;
		}
	}
	win.v = malloc(MAX_SAMPLES * sizeof(uint64_t));
	cap.v = malloc(MAX_SAMPLES * sizeof(uint64_t));
	bytes.v = malloc(MAX_SAMPLES * sizeof(uint64_t));
	if (process_vm_readv(getpid(), &l, 1, &rr, 1, 0) < 0) {
		printf("# process_vm_readv unavailable (%s): no vmreadv rows\n", strerror(errno));
		have_vm = false;
	}
	/* The floor's own signal: the highest free real-time signal (the
	 * capturer takes the lowest). */
	for (floor_signo = SIGRTMAX; floor_signo > SIGRTMIN; floor_signo--) {
		struct sigaction old;

		sigaction(floor_signo, NULL, &old);
		if (old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
			break;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = floor_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	sigaction(floor_signo, &sa, NULL);

	printf("# window = handler entry..exit per thread (us); capture = whole capture (us)\n");
	printf("%-22s %-8s %9s %9s %9s %11s %11s %9s %6s %5s\n", "config", "method", "win_p50",
	       "win_p99", "win_max", "capture_p50", "capture_max", "bytes_p50", "caps", "drops");
	for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
		for (int spin = 0; spin < 2; spin++) {
			for (size_t di = 0; di < 3; di++) {
				char cfg[64];
				struct result rf = { 0 }, rs = { 0 }, rv = { 0 };
				int n = counts[ci];

				if (quick && di == 1)
					continue;
				snprintf(cfg, sizeof(cfg), "%2d %s %s", n, spin ? "spinning" : "blocked",
					 dnames[di]);
				start_workers(w, n, spin, depths[di]);

				win.n = cap.n = bytes.n = 0;
				run_floor(w, n, &rf, &win, &cap, &bytes);
				summarize(&win, &cap, &bytes, &rf);
				print_row(cfg, "floor", &rf);

				win.n = cap.n = bytes.n = 0;
				if (run_capture(SPROBE_METHOD_SIGNAL, w, n, &rs, &win, &cap, &bytes))
					return 1;
				summarize(&win, &cap, &bytes, &rs);
				print_row(cfg, "signal", &rs);

				if (have_vm) {
					win.n = cap.n = bytes.n = 0;
					if (run_capture(SPROBE_METHOD_VM_READV, w, n, &rv, &win, &cap,
							&bytes))
						return 1;
					summarize(&win, &cap, &bytes, &rv);
					print_row(cfg, "vmreadv", &rv);
				}
				if (rf.w50) {
					ratio_floor_sum += (double)rs.w50 / (double)rf.w50;
					nratio++;
				}
				if (have_vm && rv.w50) {
					ratio_seed_sum += (double)rs.w50 / (double)rv.w50;
					nseed++;
				}
				printf("%-22s signal/floor %.2fx", cfg,
				       rf.w50 ? (double)rs.w50 / (double)rf.w50 : 0.0);
				if (have_vm)
					printf("  signal/vmreadv %.2fx",
					       rv.w50 ? (double)rs.w50 / (double)rv.w50 : 0.0);
				printf("\n");
				fflush(stdout);
				stop_workers(w, n);
			}
		}
	}
	printf("# mean over configs of window-median ratios: signal/floor %.2fx (target <= 1.5x)",
	       nratio ? ratio_floor_sum / nratio : 0.0);
	if (nseed)
		printf(", signal/vmreadv %.2fx (target <= 0.5x)", ratio_seed_sum / nseed);
	printf("\n");
	free(win.v);
	free(cap.v);
	free(bytes.v);
	free(w);
	return 0;
}
