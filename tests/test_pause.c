/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The eBPF companion against this kernel, and the matcher on synthetic
 * windows. The BPF tests load real programs; they skip only where the
 * companion cannot exist (no capability, no BTF / raw tracepoints), print
 * why, and fail if this process has CAP_BPF + CAP_PERFMON and loading still
 * fails.
 *
 * Windows are driven by the test's own real-time signal handler, which
 * records entry/exit with CLOCK_MONOTONIC exactly as the capture backend's
 * handler does (struct sprobe_thread_sample entry_ns/exit_ns).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include <bpf/bpf.h>

#include <stackprobe/pause.h>
#include <stackprobe/trace.h>

#include "sprobe_test.h"
#include "userspace/pause/pause_internal.h"

#define TEST_SIGNO (SIGRTMIN + 5)
#define NTHREADS 4
#define NROUNDS 100
/* Generous: the shared test machine has run at a load average of 60 on 2
 * CPUs, and a pinned thread may wait seconds for its CPU. */
#define DEADLINE_NS (60ull * 1000 * 1000 * 1000)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int setgroups_(size_t n)
{
	return (int)syscall(SYS_setgroups, n, NULL);
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ------------------------------------------------------------------ */
/* A worker with a self-reporting handler                              */

enum handler_kind { H_QUICK, H_SPIN_UNTIL_OFFCPU, H_BLOCK_ON_PIPE };

struct worker {
	pthread_t th;
	_Atomic pid_t tid;
	int kind;		/* enum handler_kind */
	int block_pipe[2];	/* worker body blocks reading [0] if >= 0 */
	int handler_pipe[2];	/* H_BLOCK_ON_PIPE: handler reads [0] */
	int pin_cpu;		/* -1: not pinned */
	_Atomic int stop;
	/* Self-reported windows; written by the handler, read by the test
	 * after the release store of `done` it waits on. */
	struct sprobe_pause_swindow w[NROUNDS];
	uint64_t handler_cpu[NROUNDS];	/* thread CPU time used in the handler */
	uint64_t handler_nivcsw[NROUNDS]; /* involuntary switches in the handler */
	uint64_t handler_nvcsw[NROUNDS];  /* voluntary switches in the handler */
	_Atomic uint32_t done;		/* windows completed */
	uint64_t sent_ns[NROUNDS];	/* written by the driver before sending */
};

static __thread struct worker *self_worker;

/* ASYNC-SIGNAL-SAFE: clock_gettime, read and stores only. */
static void handler(int sig, siginfo_t *si, void *uc)
{
	struct worker *w = self_worker;
	uint64_t entry = mono_ns();

	if (!w)
		return;
	uint32_t n = atomic_load_explicit(&w->done, memory_order_relaxed);
	uint64_t cpu0 = 0, cpu = 0;
	struct rusage ru0 = { 0 }, ru1 = { 0 };

	switch (w->kind) {
	case H_SPIN_UNTIL_OFFCPU:
		/* Spin until the scheduler has preempted this thread at
		 * least once inside the handler (its involuntary switch
		 * count grew; getrusage is a plain syscall, fine in this
		 * test handler). Wall - CPU time alone would not do: on a VM
		 * it also grows when the host stalls the vCPU. */
		getrusage(RUSAGE_THREAD, &ru0);
		cpu0 = thread_cpu_ns();
		for (;;) {
			getrusage(RUSAGE_THREAD, &ru1);
			uint64_t wall = mono_ns() - entry;
			if (ru1.ru_nivcsw > ru0.ru_nivcsw || wall > 2000000000ull)
				break;
		}
		cpu = thread_cpu_ns() - cpu0;
		break;
	case H_BLOCK_ON_PIPE: {
		char c;
		/* Blocks until the test writes: a voluntary switch. */
		getrusage(RUSAGE_THREAD, &ru0);
		while (read(w->handler_pipe[0], &c, 1) < 0 && errno == EINTR)
			;
		getrusage(RUSAGE_THREAD, &ru1);
		break;
	}
	default:
		break;
	}
	uint64_t exit_ = mono_ns();
	if (n < NROUNDS) {
		w->w[n].tid = gettid_();
		w->w[n].signal_ns = w->sent_ns[n];
		w->w[n].entry_ns = entry;
		w->w[n].exit_ns = exit_;
		w->handler_cpu[n] = cpu;
		w->handler_nivcsw[n] = (uint64_t)(ru1.ru_nivcsw - ru0.ru_nivcsw);
		w->handler_nvcsw[n] = (uint64_t)(ru1.ru_nvcsw - ru0.ru_nvcsw);
	}
	/* Release: pairs with the acquire load in wait_done(). */
	atomic_store_explicit(&w->done, n + 1, memory_order_release);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	volatile uint64_t x = 0;

	self_worker = w;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, TEST_SIGNO);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	if (w->pin_cpu >= 0) {
		cpu_set_t cpus;
		CPU_ZERO(&cpus);
		CPU_SET(w->pin_cpu, &cpus);
		pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
	}
	/* Release: pairs with the acquire load in start_workers(). */
	atomic_store_explicit(&w->tid, gettid_(), memory_order_release);
	if (w->block_pipe[0] >= 0) {
		char c;
		/* SA_RESTART: the handler interrupts read, read resumes. */
		while (read(w->block_pipe[0], &c, 1) < 0 && errno == EINTR)
			;
	} else {
		while (!atomic_load_explicit(&w->stop, memory_order_relaxed))
			x++;
	}
	return NULL;
}

static void install_handler(void)
{
	struct sigaction sa = { 0 };

	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(TEST_SIGNO, &sa, NULL), 0);
}

static void worker_init(struct worker *w, int kind, bool blocked, int cpu)
{
	memset(w, 0, sizeof(*w));
	w->kind = kind;
	w->pin_cpu = cpu;
	w->block_pipe[0] = w->block_pipe[1] = -1;
	w->handler_pipe[0] = w->handler_pipe[1] = -1;
	if (blocked)
		assert_int_equal(pipe2(w->block_pipe, O_CLOEXEC), 0);
	if (kind == H_BLOCK_ON_PIPE)
		assert_int_equal(pipe2(w->handler_pipe, O_CLOEXEC), 0);
}

static void start_worker(struct worker *w)
{
	assert_int_equal(pthread_create(&w->th, NULL, worker_main, w), 0);
	uint64_t deadline = mono_ns() + DEADLINE_NS;
	while (!atomic_load_explicit(&w->tid, memory_order_acquire)) {
		assert_true(mono_ns() < deadline);
		sched_yield();
	}
}

static void stop_worker(struct worker *w)
{
	atomic_store_explicit(&w->stop, 1, memory_order_relaxed);
	if (w->block_pipe[1] >= 0)
		close(w->block_pipe[1]);	/* read returns 0 */
	pthread_join(w->th, NULL);
	for (int i = 0; i < 2; i++) {
		if (w->block_pipe[i] >= 0 && i == 0)
			close(w->block_pipe[0]);
		if (w->handler_pipe[i] >= 0)
			close(w->handler_pipe[i]);
	}
}

/* Send window number n to w: tgkill for even n, rt_tgsigqueueinfo (si_code
 * SI_QUEUE) for odd n, so the test can check which generation the kernel
 * paired with which delivery. */
static void send_window(struct worker *w, uint32_t n)
{
	w->sent_ns[n] = mono_ns();
	if (n % 2 == 0) {
		assert_int_equal(syscall(SYS_tgkill, getpid(), w->tid, TEST_SIGNO), 0);
	} else {
		siginfo_t si = { 0 };
		si.si_signo = TEST_SIGNO;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		assert_int_equal(syscall(SYS_rt_tgsigqueueinfo, getpid(), w->tid,
					 TEST_SIGNO, &si), 0);
	}
}

static void wait_done(struct worker *w, uint32_t n)
{
	uint64_t deadline = mono_ns() + DEADLINE_NS;
	/* Acquire: pairs with the release store at the end of handler(). */
	while (atomic_load_explicit(&w->done, memory_order_acquire) < n) {
		assert_true(mono_ns() < deadline);
		sched_yield();
	}
}

/* ------------------------------------------------------------------ */
/* Loading, or skipping where the companion cannot exist               */

static bool have_bpf_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (syscall(SYS_capget, &hdr, d) != 0)
		return false;
	bool sys_admin = d[0].effective & (1u << CAP_SYS_ADMIN);
	bool bpf = d[1].effective & (1u << (39 - 32));
	bool perfmon = d[1].effective & (1u << (38 - 32));
	return sys_admin || (bpf && perfmon);
}

/* One companion per mode for the whole run, shared by the tests: loading
 * and, above all, detaching (an RCU-tasks grace period for the faultable
 * sys_enter tracepoint) take seconds to minutes on a heavily loaded VM, so
 * we do it once. Each test starts with the collected windows drained and
 * cleared (release()). Freed at exit by the kernel. */
static struct sprobe_pause *shared_companion[2];

static struct sprobe_pause *open_new_or_skip(uint32_t mode);

static struct sprobe_pause *open_or_skip(uint32_t mode)
{
	if (!shared_companion[mode])
		shared_companion[mode] = open_new_or_skip(mode);
	struct sprobe_pause *p = shared_companion[mode];
	sprobe_pause__poll(p, 0);
	sprobe_pause__clear(p);
	return p;
}

/* End of a test: forget its windows (the companion stays attached). */
static void release(struct sprobe_pause *p)
{
	sprobe_pause__poll(p, 0);
	sprobe_pause__clear(p);
}

static struct sprobe_pause *open_new_or_skip(uint32_t mode)
{
	struct sprobe_pause_opts o = {
		.sz = sizeof(o), .tgid = getpid(), .signo = TEST_SIGNO, .mode = mode,
		.quiet = true, .verbose = getenv("SPROBE_BPF_VERBOSE") != NULL,
	};
	struct sprobe_pause *p = sprobe_pause__new(&o);
	char why[512];

	if (p)
		return p;
	int err = errno;
	sprobe_pause__strerror(-err, why, sizeof(why));
	if ((err == EPERM || err == EACCES) && !have_bpf_caps())
		SPROBE_SKIP("%s", why);
	if (err == ENOTSUP || err == ENOSYS) {
		sprobe_pause__probe(why, sizeof(why));
		SPROBE_SKIP("%s", why);
	}
	fail_msg("loading the companion failed with privilege: %s (%s)", strerror(err), why);
	return NULL;
}

/* Poll until the companion has delivered `want` windows (the last
 * rt_sigreturn happens after the handler's done flag). */
static const struct sprobe_pause_kwindow *collect(struct sprobe_pause *p, size_t want,
						  size_t *n)
{
	uint64_t deadline = mono_ns() + DEADLINE_NS;

	for (;;) {
		assert_true(sprobe_pause__poll(p, 50) >= 0);
		const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(p, n);
		if (*n >= want || mono_ns() > deadline)
			return kw;
	}
}

static void check_trace(const char *path, int tracks, int kernel, int self, int samples);

/* ------------------------------------------------------------------ */
/* BPF tests                                                           */

static void test_probe_reports_available(void **state)
{
	char msg[512];
	int err = sprobe_pause__probe(msg, sizeof(msg));

	if ((err == -EPERM || err == -EACCES) && !have_bpf_caps())
		SPROBE_SKIP("%s", msg);
	if (err == -ENOTSUP)
		SPROBE_SKIP("%s", msg);
	assert_int_equal(err, 0);
}

/* Mappings of this program's file with exactly these permissions. */
static int own_mappings(const char *perms)
{
	char exe[4096], line[8192], p[8];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *f = fopen("/proc/self/maps", "r");
	int count = 0;

	assert_true(n > 0);
	exe[n] = '\0';
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/');

		if (!path || sscanf(line, "%*s %7s", p) != 1)
			continue;
		path[strcspn(path, "\n")] = '\0';
		if (strcmp(path, exe) == 0 && strcmp(p, perms) == 0)
			count++;
	}
	fclose(f);
	return count;
}

/* The agent parks the embedded BPF object (pause_internal.h): its pages
 * become a PROT_NONE mapping of the file, and a companion opened after
 * that still loads (the object is made readable again first). */
static void test_parked_object_loads(void **state)
{
	int before = own_mappings("---p");

	assert_int_equal(sprobe_pause__object_park(), 0);
	assert_int_equal(own_mappings("---p"), before + 1);
	assert_int_equal(sprobe_pause__object_park(), 0); /* once */
	assert_int_equal(own_mappings("---p"), before + 1);
	struct sprobe_pause *p = open_new_or_skip(SPROBE_PAUSE_MODE_PROBE);
	assert_int_equal(own_mappings("---p"), before);
	sprobe_pause__free(p);
}

static void test_bad_options(void **state)
{
	struct sprobe_pause_opts o = { .sz = sizeof(o), .tgid = getpid(), .signo = TEST_SIGNO };

	errno = 0;
	assert_null(sprobe_pause__new(NULL));
	assert_int_equal(errno, EINVAL);
	o.tgid = 0;
	assert_null(sprobe_pause__new(&o));
	assert_int_equal(errno, EINVAL);
	o.tgid = getpid();
	o.signo = 0;
	assert_null(sprobe_pause__new(&o));
	assert_int_equal(errno, EINVAL);
	o.signo = SIGRTMAX + 1;
	assert_null(sprobe_pause__new(&o));
	assert_int_equal(errno, EINVAL);
	o.signo = TEST_SIGNO;
	o.ringbuf_bytes = 5000;	/* not a power of two */
	assert_null(sprobe_pause__new(&o));
	assert_int_equal(errno, EINVAL);
	o.ringbuf_bytes = 0;
	o.mode = 7;
	assert_null(sprobe_pause__new(&o));
	assert_int_equal(errno, EINVAL);
	o.mode = 0;
	o.sz = 4;
	assert_null(sprobe_pause__new(&o));
	assert_int_equal(errno, EINVAL);

	sprobe_pause__free(NULL);
	assert_int_equal(sprobe_pause__poll(NULL, 0), -EINVAL);
	struct sprobe_pause_stats st;
	assert_int_equal(sprobe_pause__stats(NULL, &st), -EINVAL);
	size_t n = 1;
	assert_non_null(sprobe_pause__windows(NULL, &n));
	assert_int_equal(n, 0);
}

/* Every window of every thread sent the capture signal is seen by the
 * kernel, and each self-reported window lies inside its kernel window. */
static void test_every_window_seen(void **state)
{
	struct worker *w = calloc(NTHREADS, sizeof(*w));
	struct sprobe_pause *p = open_or_skip(SPROBE_PAUSE_MODE_PROBE);

	assert_non_null(w);
	install_handler();
	for (int t = 0; t < NTHREADS; t++) {
		worker_init(&w[t], H_QUICK, t % 2 == 1, -1);	/* odd: blocked */
		start_worker(&w[t]);
	}
	for (uint32_t r = 0; r < NROUNDS; r++) {
		for (int t = 0; t < NTHREADS; t++)
			send_window(&w[t], r);
		for (int t = 0; t < NTHREADS; t++)
			wait_done(&w[t], r + 1);
	}
	for (int t = 0; t < NTHREADS; t++)
		stop_worker(&w[t]);

	size_t nk;
	const struct sprobe_pause_kwindow *kw = collect(p, NTHREADS * NROUNDS, &nk);
	struct sprobe_pause_stats st;
	assert_int_equal(sprobe_pause__stats(p, &st), 0);
	print_message("companion: generated %lu delivered %lu emitted %lu lost %lu received %lu\n",
		      (unsigned long)st.generated, (unsigned long)st.delivered,
		      (unsigned long)st.emitted, (unsigned long)st.lost,
		      (unsigned long)st.received);
	assert_int_equal(st.lost, 0);
	assert_int_equal(st.no_state, 0);
	assert_int_equal(nk, NTHREADS * NROUNDS);

	struct sprobe_pause_swindow sw[NTHREADS * NROUNDS];
	for (int t = 0; t < NTHREADS; t++)
		memcpy(&sw[t * NROUNDS], w[t].w, sizeof(w[t].w));
	struct sprobe_pause_merge_opts mo = {
		.sz = sizeof(mo), .kernel_lost = st.lost + st.no_state + st.missed,
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, sw, NTHREADS * NROUNDS, &mo);
	assert_non_null(m);
	size_t np, nu, nt;
	const struct sprobe_pause_pair *pairs = sprobe_pause_merge__pairs(m, &np);
	const struct sprobe_pause_unmatched *un = sprobe_pause_merge__unmatched(m, &nu);
	sprobe_pause_merge__threads(m, &nt);
	for (size_t i = 0; i < nu; i++)
		print_message("unmatched: side %u tid %d reason %s\n", un[i].side, un[i].tid,
			      sprobe_pause_reason__str(un[i].reason));
	assert_int_equal(nu, 0);
	assert_int_equal(np, NTHREADS * NROUNDS);
	assert_int_equal(nt, NTHREADS);

	for (size_t i = 0; i < np; i++) {
		const struct sprobe_pause_kwindow *k = &kw[pairs[i].kernel_idx];
		const struct sprobe_pause_swindow *s = &sw[pairs[i].self_idx];
		uint32_t round = pairs[i].self_idx % NROUNDS;

		assert_int_equal(k->tid, s->tid);
		assert_int_equal(k->tgid, getpid());
		assert_int_equal(k->flags & (SPROBE_PAUSE_KW_NO_GENERATE |
					     SPROBE_PAUSE_KW_INCOMPLETE), 0);
		/* The full order, on one clock. */
		assert_true(s->signal_ns <= k->generate_ns);
		assert_true(k->generate_ns <= k->deliver_ns);
		assert_true(k->deliver_ns <= s->entry_ns);
		assert_true(s->exit_ns <= k->sigreturn_ns);
		/* The generation paired with this delivery is the one this
		 * round sent (tgkill vs sigqueue alternate). */
		assert_int_equal(k->si_code, round % 2 ? SI_QUEUE : SI_TKILL);
	}
	/* Both sides' overall numbers: same window count, and the kernel's
	 * pause bounds the self-reported one from above, per window and in
	 * total; the difference is the kernel's share (docs/PAUSE.md). */
	const struct sprobe_pause_summary *o = sprobe_pause_merge__overall(m);
	assert_int_equal(o->kernel_pause.count, o->self_pause.count);
	assert_true(o->self_pause.total <= o->kernel_pause.total);
	assert_true(o->self_pause.max <= o->kernel_pause.max);
	assert_true(o->self_pause.median <= o->kernel_pause.median);
	assert_int_equal(o->kernel_pause.total - o->self_pause.total, o->difference.total);
	sprobe_pause_merge__print(m, stdout);

	/* The same real windows as a timeline: one track per thread. */
	char path[] = "/tmp/sprobe-trace-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);
	struct sprobe_trace_opts to = { .sz = sizeof(to), .pid = getpid(), .process_name = "test_pause" };
	struct sprobe_trace *tr = sprobe_trace__new(f, &to);
	assert_non_null(tr);
	for (size_t i = 0; i < nk; i++)
		assert_int_equal(sprobe_trace__kernel_window(tr, &kw[i]), 0);
	for (size_t i = 0; i < NTHREADS * NROUNDS; i++)
		assert_int_equal(sprobe_trace__self_window(tr, &sw[i]), 0);
	assert_int_equal(sprobe_trace__finish(tr), 0);
	sprobe_trace__free(tr);
	fclose(f);
	check_trace(path, NTHREADS, (int)nk, NTHREADS * NROUNDS, 0);
	unlink(path);

	sprobe_pause_merge__free(m);
	release(p);
	free(w);
}

/* The real capture backend: every window of every captured thread is seen
 * by the kernel and contains the handler's self-reported window. */
static void test_real_capturer_windows_seen(void **state)
{
	struct sprobe_capture_opts co = { .sz = sizeof(co) };
	struct sprobe_capturer *c = sprobe_capturer__new(&co);
	struct worker *w = calloc(NTHREADS, sizeof(*w));
	const int captures = 50;

	assert_non_null(c);
	assert_non_null(w);
	struct sprobe_pause_opts o = {
		.sz = sizeof(o), .tgid = getpid(), .signo = sprobe_capturer__signo(c),
		.quiet = true,
	};
	struct sprobe_pause *p = sprobe_pause__new(&o);
	if (!p) {
		int err = errno;
		sprobe_capturer__free(c);
		free(w);
		if ((err == EPERM || err == EACCES) && !have_bpf_caps())
			SPROBE_SKIP("no privilege for the companion");
		if (err == ENOTSUP)
			SPROBE_SKIP("companion not supported here");
		fail_msg("companion: %s", strerror(err));
	}
	for (int t = 0; t < NTHREADS; t++) {
		worker_init(&w[t], H_QUICK, t % 2 == 1, -1);
		start_worker(&w[t]);
	}
	struct sprobe_snapshot *snap = sprobe_snapshot__new(0, 0);
	assert_non_null(snap);
	size_t cap = (size_t)captures * 64, ns = 0;
	struct sprobe_pause_swindow *sw = calloc(cap, sizeof(*sw));
	assert_non_null(sw);
	for (int i = 0; i < captures; i++) {
		assert_int_equal(sprobe_capturer__capture(c, snap), 0);
		for (uint32_t t = 0; t < sprobe_snapshot__nthreads(snap) && ns < cap; t++) {
			const struct sprobe_thread_sample *smp = sprobe_snapshot__thread(snap, t);
			if (smp->drop_reason == SPROBE_DROP_NONE &&
			    sprobe_pause_swindow__from_sample(&sw[ns], smp) == 0)
				ns++;
		}
	}
	for (int t = 0; t < NTHREADS; t++)
		stop_worker(&w[t]);
	assert_true(ns >= (size_t)captures * NTHREADS);

	size_t nk;
	const struct sprobe_pause_kwindow *kw = collect(p, ns, &nk);
	struct sprobe_pause_stats st;
	assert_int_equal(sprobe_pause__stats(p, &st), 0);
	struct sprobe_pause_merge_opts mo = {
		.sz = sizeof(mo), .kernel_lost = st.lost + st.no_state + st.missed,
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, sw, ns, &mo);
	assert_non_null(m);
	size_t np, nu;
	const struct sprobe_pause_pair *pairs = sprobe_pause_merge__pairs(m, &np);
	const struct sprobe_pause_unmatched *un = sprobe_pause_merge__unmatched(m, &nu);
	for (size_t i = 0; i < nu; i++)
		print_message("unmatched: side %u tid %d reason %s\n", un[i].side, un[i].tid,
			      sprobe_pause_reason__str(un[i].reason));
	print_message("real capturer: %zu self windows, %zu kernel windows, %zu pairs\n", ns, nk, np);
	assert_int_equal(np, ns);	/* every self-reported window matched */
	for (size_t i = 0; i < np; i++) {
		const struct sprobe_pause_kwindow *k = &kw[pairs[i].kernel_idx];
		const struct sprobe_pause_swindow *s = &sw[pairs[i].self_idx];
		assert_true(k->deliver_ns <= s->entry_ns);
		assert_true(s->exit_ns <= k->sigreturn_ns);
		if (s->signal_ns && k->generate_ns)
			assert_true(s->signal_ns <= k->generate_ns);
	}
	sprobe_pause_merge__print(m, stdout);
	sprobe_pause_merge__free(m);
	sprobe_pause__free(p);
	sprobe_snapshot__free(snap);
	sprobe_capturer__free(c);
	free(sw);
	free(w);
}

/* Windows no one asked for. Another signal number opens no window. The
 * capture signal sent from outside the process has no generation of ours
 * (probe mode filters the sender) but still stops the thread: the kernel
 * reports that window flagged NO_GENERATE rather than hiding it. */
static void test_filters_other_signals(void **state)
{
	struct sprobe_pause *p = open_or_skip(SPROBE_PAUSE_MODE_PROBE);
	struct worker *w = calloc(1, sizeof(*w));
	struct sigaction sa = { 0 }, old;
	struct sprobe_pause_stats st0;

	assert_int_equal(sprobe_pause__stats(p, &st0), 0);
	assert_non_null(w);
	install_handler();
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	assert_int_equal(sigaction(TEST_SIGNO + 1, &sa, &old), 0);
	worker_init(w, H_QUICK, false, -1);
	start_worker(w);

	/* 0: a different signal number, handled by the same handler. */
	assert_int_equal(syscall(SYS_tgkill, getpid(), w->tid, TEST_SIGNO + 1), 0);
	wait_done(w, 1);
	/* 1: the capture signal, from a child process (outside the target). */
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(syscall(SYS_tgkill, getppid(), w->tid, TEST_SIGNO) == 0 ? 0 : 1);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	wait_done(w, 2);
	/* 2: the capture signal from inside. */
	send_window(w, 2);
	wait_done(w, 3);
	stop_worker(w);
	sigaction(TEST_SIGNO + 1, &old, NULL);

	size_t nk;
	const struct sprobe_pause_kwindow *kw = collect(p, 2, &nk);
	assert_int_equal(nk, 2);
	/* No kernel window around the other signal's handler. */
	for (size_t i = 0; i < nk; i++)
		assert_false(kw[i].deliver_ns <= w->w[0].entry_ns &&
			     w->w[0].exit_ns <= kw[i].sigreturn_ns);
	assert_true(kw[0].flags & SPROBE_PAUSE_KW_NO_GENERATE);
	assert_int_equal(kw[0].generate_ns, 0);
	assert_true(kw[0].deliver_ns <= w->w[1].entry_ns);
	assert_true(w->w[1].exit_ns <= kw[0].sigreturn_ns);
	assert_int_equal(kw[1].flags & SPROBE_PAUSE_KW_NO_GENERATE, 0);
	assert_true(w->sent_ns[2] <= kw[1].generate_ns);
	assert_true(kw[1].deliver_ns <= w->w[2].entry_ns);
	assert_true(w->w[2].exit_ns <= kw[1].sigreturn_ns);

	struct sprobe_pause_stats st;
	assert_int_equal(sprobe_pause__stats(p, &st), 0);
	assert_int_equal(st.generated - st0.generated, 1);
	release(p);
	free(w);
}

/* A thread pinned to one CPU with a busy thread, whose handler spins until
 * the scheduler has preempted it: the kernel window shows off-CPU time, and
 * at least as many involuntary switches as the thread's own rusage counted
 * inside the handler (the same kernel counter rule: preempted, or switched
 * out still runnable), as many runs (sched_info.pcount), and time waiting
 * for the CPU (sched_info.run_delay). Off-CPU time can be at most the window
 * minus the CPU time the handler used (give or take where each clock is
 * sampled). */
static void test_offcpu_preempted(void **state)
{
	struct sprobe_pause *p = open_or_skip(SPROBE_PAUSE_MODE_PROBE);
	struct worker *target = calloc(1, sizeof(*target));
	struct worker *busy = calloc(1, sizeof(*busy));
	const int rounds = 3;

	assert_non_null(target);
	assert_non_null(busy);
	install_handler();
	worker_init(busy, H_QUICK, false, 0);
	worker_init(target, H_SPIN_UNTIL_OFFCPU, false, 0);
	start_worker(busy);
	start_worker(target);
	for (int r = 0; r < rounds; r++) {
		send_window(target, (uint32_t)r);
		wait_done(target, (uint32_t)r + 1);
	}
	stop_worker(target);
	stop_worker(busy);

	size_t nk;
	const struct sprobe_pause_kwindow *kw = collect(p, rounds, &nk);
	assert_int_equal(nk, rounds);
	for (int r = 0; r < rounds; r++) {
		const struct sprobe_pause_kwindow *k = &kw[r];
		uint64_t kpause = k->sigreturn_ns - k->deliver_ns;
		print_message("window %d: kernel pause %.3f ms, off-CPU %.3f ms in %u switches "
			      "(%u involuntary), %u runs, waited %.3f ms for a CPU%s; handler: "
			      "%.3f ms CPU, %llu involuntary switches\n",
			      r, kpause / 1e6, k->offcpu_ns / 1e6, k->nswitches, k->npreempt,
			      k->nruns, k->runq_ns / 1e6,
			      k->flags & SPROBE_PAUSE_KW_SWITCH_IN_UNSEEN ? " (switch-in unseen)" : "",
			      target->handler_cpu[r] / 1e6,
			      (unsigned long long)target->handler_nivcsw[r]);
		assert_true(target->handler_nivcsw[r] >= 1);	/* the setup worked */
		assert_true(k->deliver_ns <= target->w[r].entry_ns);
		assert_true(target->w[r].exit_ns <= k->sigreturn_ns);
		/* Switch-outs (sched_switch) and switch-ins (the kernel's own
		 * sched_info.pcount) both cover the handler's preemptions. */
		assert_true(k->npreempt >= target->handler_nivcsw[r]);
		assert_true(k->nswitches >= k->npreempt);
		assert_true(k->nruns >= target->handler_nivcsw[r]);
		/* Preempted and still runnable: it waited for the CPU. */
		assert_true(k->runq_ns > 0);
		assert_true(k->offcpu_ns > 0);
		/* The scheduler charges CPU time from its rq clock, read at the
		 * start of __schedule(), and sched_switch fires later in it:
		 * allow 100 us per switch for the two sampling points. */
		uint64_t slack = 100000ull * (k->nswitches + 1);
		assert_true(k->runq_ns + target->handler_cpu[r] <= kpause + slack);
		if (!(k->flags & SPROBE_PAUSE_KW_SWITCH_IN_UNSEEN))
			assert_true(k->offcpu_ns + target->handler_cpu[r] <= kpause + slack);
	}
	release(p);
	free(target);
	free(busy);
}

/* A handler that blocks (voluntary switch) shows off-CPU time too. */
static void test_offcpu_blocked(void **state)
{
	struct sprobe_pause *p = open_or_skip(SPROBE_PAUSE_MODE_PROBE);
	struct worker *w = calloc(1, sizeof(*w));
	char path[64], buf[512];

	assert_non_null(w);
	install_handler();
	worker_init(w, H_BLOCK_ON_PIPE, false, -1);
	start_worker(w);
	send_window(w, 0);
	/* Wait until the thread sleeps (state S in /proc), i.e. inside the
	 * handler's read, then let it go. */
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)w->tid);
	uint64_t deadline = mono_ns() + DEADLINE_NS;
	for (;;) {
		FILE *f = fopen(path, "re");
		assert_non_null(f);
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		const char *rp = strrchr(buf, ')');
		assert_non_null(rp);
		if (rp[2] == 'S')
			break;
		assert_true(mono_ns() < deadline);
		sched_yield();
	}
	assert_int_equal(write(w->handler_pipe[1], "x", 1), 1);
	wait_done(w, 1);
	stop_worker(w);

	size_t nk;
	const struct sprobe_pause_kwindow *kw = collect(p, 1, &nk);
	assert_int_equal(nk, 1);
	assert_true(w->handler_nvcsw[0] >= 1);
	assert_true(kw[0].nswitches - kw[0].npreempt >= w->handler_nvcsw[0]);
	assert_true(kw[0].nruns >= w->handler_nvcsw[0]);
	assert_true(kw[0].offcpu_ns > 0);
	assert_true(kw[0].offcpu_ns <= kw[0].sigreturn_ns - kw[0].deliver_ns);
	release(p);
	free(w);
}

/* CPU mode: a process-directed timer signal (POSIX timer, SIGEV_SIGNAL)
 * starts each window; the thread that takes it is known only at delivery. */
static void test_timer_mode_group_signal(void **state)
{
	struct sprobe_pause *p = open_or_skip(SPROBE_PAUSE_MODE_TIMER);
	struct worker *w = calloc(1, sizeof(*w));
	sigset_t set, oldset;
	timer_t timer;
	const uint32_t want = 20;

	assert_non_null(w);
	install_handler();
	/* Only the worker may take the signal. */
	sigemptyset(&set);
	sigaddset(&set, TEST_SIGNO);
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &set, &oldset), 0);
	worker_init(w, H_QUICK, false, -1);
	start_worker(w);	/* worker_main unblocks the signal for itself */
	struct sigevent sev = { 0 };
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = TEST_SIGNO;
	assert_int_equal(timer_create(CLOCK_MONOTONIC, &sev, &timer), 0);
	struct itimerspec its = { .it_interval = { 0, 1000000 }, .it_value = { 0, 1000000 } };
	assert_int_equal(timer_settime(timer, 0, &its, NULL), 0);
	wait_done(w, want);
	timer_delete(timer);
	stop_worker(w);
	/* A last generation may still be pending on the process; drop it. */
	struct timespec zero = { 0, 0 };
	while (sigtimedwait(&set, NULL, &zero) == TEST_SIGNO)
		;
	pthread_sigmask(SIG_SETMASK, &oldset, NULL);

	uint32_t done = atomic_load_explicit(&w->done, memory_order_acquire);
	size_t nk;
	const struct sprobe_pause_kwindow *kw = collect(p, done, &nk);

	assert_int_equal(nk, done);
	uint32_t nself = done < NROUNDS ? done : NROUNDS;
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, nk, w->w, nself, NULL);
	assert_non_null(m);
	size_t np;
	const struct sprobe_pause_pair *pairs = sprobe_pause_merge__pairs(m, &np);
	assert_int_equal(np, nself);
	size_t nogen = 0;
	for (size_t i = 0; i < np; i++) {
		const struct sprobe_pause_kwindow *k = &kw[pairs[i].kernel_idx];
		if (k->flags & SPROBE_PAUSE_KW_NO_GENERATE) {
			/* Seen on 6.18 about once in 70 runs, after the VM
			 * stalled the timer for ~20 ms: the timer signal was
			 * queued with no signal_generate event at all (no
			 * recursion miss either; see docs/PAUSE.md). The
			 * window itself is still measured and matched. */
			nogen++;
			continue;
		}
		assert_true(k->flags & SPROBE_PAUSE_KW_GROUP);
		assert_int_equal(k->si_code, SI_TIMER);
		assert_true(k->generate_ns > 0 && k->generate_ns <= k->deliver_ns);
	}
	if (nogen)
		print_message("%zu of %zu window(s) without a traced generation\n", nogen, np);
	/* The timer's generation starts (nearly) every window. */
	assert_true(nogen * 2 < np);
	sprobe_pause_merge__free(m);
	release(p);
	free(w);
}

/* Without CAP_BPF / CAP_PERFMON / CAP_SYS_ADMIN (capabilities dropped, or
 * root turned into nobody), loading gives one clear message naming what is
 * missing and an error; the process carries on and can still produce the
 * pause section from its own windows. Runs in forked children. */
static void run_unprivileged(bool as_nobody)
{
	int errpipe[2];

	assert_int_equal(pipe2(errpipe, O_CLOEXEC), 0);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		dup2(errpipe[1], 2);
		if (as_nobody) {
			if (setgroups_(0) || setresgid(65534, 65534, 65534) ||
			    setresuid(65534, 65534, 65534))
				_exit(10);
		} else {
			struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
			struct __user_cap_data_struct d[2] = { 0 };
			if (syscall(SYS_capset, &hdr, d) != 0)
				_exit(11);
		}
		/* The kernel itself refuses now (not just our pre-check). */
		if (bpf_map_create(BPF_MAP_TYPE_RINGBUF, NULL, 0, 0, 4096, NULL) >= 0)
			_exit(12);
		struct sprobe_pause_opts o = {
			.sz = sizeof(o), .tgid = getpid(), .signo = TEST_SIGNO,
		};
		errno = 0;
		struct sprobe_pause *p = sprobe_pause__new(&o);
		if (p)
			_exit(13);
		if (errno != EPERM && errno != EACCES)
			_exit(14);
		/* Carry on: a self-only pause section from a real window. */
		struct worker *w = calloc(1, sizeof(*w));
		if (!w)
			_exit(15);
		install_handler();
		self_worker = w;
		if (syscall(SYS_tgkill, getpid(), gettid_(), TEST_SIGNO) != 0 ||
		    atomic_load(&w->done) != 1)
			_exit(16);
		struct sprobe_pause_merge *m = sprobe_pause_merge__new(NULL, 0, w->w, 1, NULL);
		if (!m)
			_exit(17);
		size_t nu;
		const struct sprobe_pause_unmatched *un = sprobe_pause_merge__unmatched(m, &nu);
		if (nu != 1 || un[0].reason != SPROBE_PAUSE_R_NO_KERNEL ||
		    sprobe_pause_merge__overall(m)->self_pause.count != 1)
			_exit(18);
		sprobe_pause_merge__free(m);
		_exit(0);
	}
	close(errpipe[1]);
	char msg[2048];
	size_t len = 0;
	ssize_t r;
	while ((r = read(errpipe[0], msg + len, sizeof(msg) - 1 - len)) > 0)
		len += (size_t)r;
	msg[len] = '\0';
	close(errpipe[0]);
	int status;
	assert_int_equal(waitpid(child, &status, 0), child);
	print_message("%s: child said: %s", as_nobody ? "nobody" : "no caps", msg);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* One line, naming the capabilities and the next step. */
	assert_non_null(strstr(msg, "CAP_BPF"));
	assert_non_null(strstr(msg, "CAP_PERFMON"));
	assert_non_null(strstr(msg, "setcap"));
	assert_non_null(strchr(msg, '\n'));
	assert_ptr_equal(strchr(msg, '\n'), msg + len - 1);
}

static void test_unprivileged_caps_dropped(void **state)
{
	if (!have_bpf_caps())
		SPROBE_SKIP("already without CAP_BPF/CAP_SYS_ADMIN: nothing to drop");
	run_unprivileged(false);
}

static void test_unprivileged_nobody(void **state)
{
	if (geteuid() != 0)
		SPROBE_SKIP("not root: cannot switch to nobody");
	run_unprivileged(true);
}

/* ------------------------------------------------------------------ */
/* Matcher on synthetic windows                                        */

static struct sprobe_pause_kwindow kwin(pid_t tid, uint64_t gen, uint64_t del, uint64_t ret,
					uint64_t off)
{
	return (struct sprobe_pause_kwindow){
		.tid = tid, .signo = TEST_SIGNO, .generate_ns = gen, .deliver_ns = del,
		.sigreturn_ns = ret, .offcpu_ns = off,
		.flags = (gen ? 0 : SPROBE_PAUSE_KW_NO_GENERATE) |
			 (ret ? 0 : SPROBE_PAUSE_KW_INCOMPLETE),
	};
}

static struct sprobe_pause_swindow swin(pid_t tid, uint64_t sig, uint64_t entry, uint64_t exit_)
{
	return (struct sprobe_pause_swindow){
		.tid = tid, .signal_ns = sig, .entry_ns = entry, .exit_ns = exit_,
	};
}

static const struct sprobe_pause_unmatched *find_unmatched(const struct sprobe_pause_merge *m,
							    uint32_t side, uint32_t idx)
{
	size_t n;
	const struct sprobe_pause_unmatched *u = sprobe_pause_merge__unmatched(m, &n);

	for (size_t i = 0; i < n; i++)
		if (u[i].side == side && u[i].idx == idx)
			return &u[i];
	return NULL;
}

/* Two threads, inputs shuffled: every window pairs with its container and
 * the statistics follow the documented definitions. */
static void test_merge_pairs_and_stats(void **state)
{
	/* Thread 7: pauses 100, 200, 300, 400 ns (kernel), handler inside
	 * each, 40 ns shorter; thread 9: one window. Index order shuffled. */
	struct sprobe_pause_kwindow kw[] = {
		kwin(7, 2900, 3000, 3300, 0),	/* pause 300 */
		kwin(9, 1000, 1500, 2500, 50),	/* pause 1000 */
		kwin(7, 900, 1000, 1100, 0),	/* pause 100 */
		kwin(7, 4950, 5000, 5400, 30),	/* pause 400 */
		kwin(7, 1800, 2000, 2200, 10),	/* pause 200 */
	};
	struct sprobe_pause_swindow sw[] = {
		swin(7, 4900, 5020, 5380),	/* in kw[3] */
		swin(7, 850, 1020, 1080),	/* in kw[2] */
		swin(9, 990, 1600, 2400),	/* in kw[1] */
		swin(7, 1700, 2020, 2180),	/* in kw[4] */
		swin(7, 2800, 3020, 3280),	/* in kw[0] */
	};
	const uint32_t expect_k_for_s[] = { 3, 2, 1, 4, 0 };
	struct sprobe_pause_merge_opts o = { .sz = sizeof(o), .wall_ns = 10000 };
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 5, sw, 5, &o);
	size_t np, nu, nt;

	assert_non_null(m);
	const struct sprobe_pause_pair *pp = sprobe_pause_merge__pairs(m, &np);
	sprobe_pause_merge__unmatched(m, &nu);
	const struct sprobe_pause_summary *th = sprobe_pause_merge__threads(m, &nt);
	assert_int_equal(np, 5);
	assert_int_equal(nu, 0);
	for (size_t i = 0; i < np; i++)
		assert_int_equal(pp[i].kernel_idx, expect_k_for_s[pp[i].self_idx]);
	assert_int_equal(nt, 2);
	assert_int_equal(th[0].tid, 7);
	assert_int_equal(th[1].tid, 9);
	assert_int_equal(th[0].matched, 4);

	/* Thread 7 kernel pauses {100,200,300,400}: nearest-rank median is
	 * the 2nd value, p99 the 4th. */
	assert_int_equal(th[0].kernel_pause.count, 4);
	assert_int_equal(th[0].kernel_pause.median, 200);
	assert_int_equal(th[0].kernel_pause.p99, 400);
	assert_int_equal(th[0].kernel_pause.max, 400);
	assert_int_equal(th[0].kernel_pause.total, 1000);
	/* Self pauses {60,160,260,360}; difference {40,40,40,40}. */
	assert_int_equal(th[0].self_pause.total, 840);
	assert_int_equal(th[0].difference.median, 40);
	assert_int_equal(th[0].difference.total, 160);
	/* Delivery {100,200,100,50} -> sorted {50,100,100,200}. */
	assert_int_equal(th[0].delivery.median, 100);
	assert_int_equal(th[0].delivery.max, 200);
	assert_int_equal(th[0].offcpu.total, 40);
	assert_true(th[0].pause_share > 0.0999 && th[0].pause_share < 0.1001);

	const struct sprobe_pause_summary *all = sprobe_pause_merge__overall(m);
	assert_int_equal(all->tid, 0);
	assert_int_equal(all->matched, 5);
	assert_int_equal(all->kernel_pause.total, 2000);
	assert_int_equal(all->kernel_pause.max, 1000);
	/* {100,200,300,400,1000}: median 3rd = 300. */
	assert_int_equal(all->kernel_pause.median, 300);
	assert_int_equal(all->difference.total, 160 + 200);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(sprobe_pause_merge__print(m, f), 0);
	fclose(f);
	assert_non_null(strstr(buf, "thread 7: 4 matched"));
	assert_non_null(strstr(buf, "all threads: 5 matched"));
	free(buf);
	sprobe_pause_merge__free(m);
}

/* Percentiles by nearest rank on 1..100 and on a single value. */
static void test_merge_percentiles(void **state)
{
	struct sprobe_pause_kwindow kw[100];
	for (int i = 0; i < 100; i++)	/* pauses 100..1 ns, reversed on purpose */
		kw[i] = kwin(1, 0, 1000 * (uint64_t)(i + 1), 1000 * (uint64_t)(i + 1) + 100 - i, 0);
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 100, NULL, 0, NULL);
	assert_non_null(m);
	const struct sprobe_pause_summary *all = sprobe_pause_merge__overall(m);
	assert_int_equal(all->kernel_pause.count, 100);
	assert_int_equal(all->kernel_pause.median, 50);
	assert_int_equal(all->kernel_pause.p99, 99);
	assert_int_equal(all->kernel_pause.max, 100);
	assert_int_equal(all->kernel_pause.total, 5050);
	assert_int_equal(all->delivery.count, 0);	/* no generations */
	assert_int_equal(all->kernel_only, 100);
	assert_int_equal(all->unmatched_by_reason[SPROBE_PAUSE_R_NO_SELF], 100);
	sprobe_pause_merge__free(m);

	kw[0] = kwin(1, 10, 20, 37, 0);
	m = sprobe_pause_merge__new(kw, 1, NULL, 0, NULL);
	assert_non_null(m);
	all = sprobe_pause_merge__overall(m);
	assert_int_equal(all->kernel_pause.median, 17);
	assert_int_equal(all->kernel_pause.p99, 17);
	assert_int_equal(all->delivery.median, 10);
	sprobe_pause_merge__free(m);
}

/* Every reason, each from the situation that causes it. */
static void test_merge_unmatched_reasons(void **state)
{
	struct sprobe_pause_kwindow kw[] = {
		kwin(5, 100, 200, 300, 0),	/* 0: before any self window */
		kwin(5, 900, 1000, 1100, 0),	/* 1: matched with sw[1] */
		kwin(5, 1900, 2000, 2100, 0),	/* 2: no self window: dropped */
		kwin(5, 2900, 3000, 0, 0),	/* 3: incomplete */
		kwin(5, 3900, 4000, 4100, 0),	/* 4: overlaps sw[3] */
		kwin(5, 5900, 6000, 6100, 0),	/* 5: matched with sw[5] */
		kwin(5, 9900, 9950, 9990, 0),	/* 6: after every self window */
	};
	struct sprobe_pause_swindow sw[] = {
		swin(5, 0, 50, 60),		/* 0: before the companion */
		swin(5, 0, 1010, 1090),		/* 1: matched */
		swin(5, 0, 1500, 1400),		/* 2: exit < entry */
		swin(5, 0, 4050, 4200),		/* 3: ends after kw[4]: clocks? */
		swin(5, 0, 5000, 5100),		/* 4: inside the range, no kernel */
		swin(5, 0, 6010, 6090),		/* 5: matched */
		swin(6, 0, 7000, 7100),		/* 6: other thread, no kernel */
		swin(5, 0, 9000, 9100),		/* 7: last self window */
		swin(5, 1950, 0, 0),		/* 8: capturer gave up on it */
	};
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 7, sw, 9, NULL);
	size_t np, nu;

	assert_non_null(m);
	sprobe_pause_merge__pairs(m, &np);
	sprobe_pause_merge__unmatched(m, &nu);
	assert_int_equal(np, 2);
	assert_int_equal(nu, 7 + 9 - 2 * 2);
	struct { uint32_t side, idx, reason; } want[] = {
		{ SPROBE_PAUSE_KERNEL, 0, SPROBE_PAUSE_R_NO_SELF },
		{ SPROBE_PAUSE_KERNEL, 2, SPROBE_PAUSE_R_NO_SELF },
		{ SPROBE_PAUSE_KERNEL, 3, SPROBE_PAUSE_R_INCOMPLETE },
		{ SPROBE_PAUSE_KERNEL, 4, SPROBE_PAUSE_R_NO_SELF },
		{ SPROBE_PAUSE_KERNEL, 6, SPROBE_PAUSE_R_OUTSIDE_SELF },
		{ SPROBE_PAUSE_SELF, 0, SPROBE_PAUSE_R_OUTSIDE_KERNEL },
		{ SPROBE_PAUSE_SELF, 2, SPROBE_PAUSE_R_BAD },
		{ SPROBE_PAUSE_SELF, 3, SPROBE_PAUSE_R_NOT_CONTAINED },
		{ SPROBE_PAUSE_SELF, 4, SPROBE_PAUSE_R_NO_KERNEL },
		{ SPROBE_PAUSE_SELF, 6, SPROBE_PAUSE_R_NO_KERNEL },
		{ SPROBE_PAUSE_SELF, 7, SPROBE_PAUSE_R_NO_KERNEL },
		{ SPROBE_PAUSE_SELF, 8, SPROBE_PAUSE_R_SELF_DROPPED },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct sprobe_pause_unmatched *u = find_unmatched(m, want[i].side, want[i].idx);
		assert_non_null(u);
		if (u->reason != want[i].reason)
			fail_msg("side %u idx %u: reason %s, want %s", want[i].side, want[i].idx,
				 sprobe_pause_reason__str(u->reason),
				 sprobe_pause_reason__str(want[i].reason));
	}
	sprobe_pause_merge__free(m);

	/* With events lost by the companion, "no kernel window" says so. */
	struct sprobe_pause_merge_opts o = { .sz = sizeof(o), .kernel_lost = 3 };
	m = sprobe_pause_merge__new(kw, 7, sw, 9, &o);
	assert_non_null(m);
	assert_int_equal(find_unmatched(m, SPROBE_PAUSE_SELF, 4)->reason,
			 SPROBE_PAUSE_R_KERNEL_LOST);
	sprobe_pause_merge__free(m);
}

/* Slack: a self window 5 ns outside its kernel window matches with 10 ns of
 * slack, not with 0 (then it is "not contained": the clocks disagree). */
static void test_merge_slack(void **state)
{
	struct sprobe_pause_kwindow kw[] = { kwin(3, 100, 200, 300, 0) };
	struct sprobe_pause_swindow sw[] = { swin(3, 50, 195, 305) };
	struct sprobe_pause_merge_opts o = { .sz = sizeof(o) };
	size_t np;

	struct sprobe_pause_merge *m = sprobe_pause_merge__new(kw, 1, sw, 1, &o);
	assert_non_null(m);
	sprobe_pause_merge__pairs(m, &np);
	assert_int_equal(np, 0);
	assert_int_equal(find_unmatched(m, SPROBE_PAUSE_SELF, 0)->reason,
			 SPROBE_PAUSE_R_NOT_CONTAINED);
	sprobe_pause_merge__free(m);

	o.slack_ns = 10;
	m = sprobe_pause_merge__new(kw, 1, sw, 1, &o);
	assert_non_null(m);
	sprobe_pause_merge__pairs(m, &np);
	assert_int_equal(np, 1);
	/* self 110 > kernel 100: the difference is clamped at 0. */
	assert_int_equal(sprobe_pause_merge__overall(m)->difference.max, 0);
	sprobe_pause_merge__free(m);
}

/* From the capture backend's sample to a self window. */
static void test_swindow_from_sample(void **state)
{
	struct sprobe_thread_sample *smp = calloc(1, sizeof(*smp));
	struct sprobe_pause_swindow w;

	assert_non_null(smp);
	smp->tid = 77;
	assert_int_equal(sprobe_pause_swindow__from_sample(&w, smp), -ENOENT);
	smp->signal_ns = 10;
	smp->entry_ns = 20;
	smp->exit_ns = 30;
	assert_int_equal(sprobe_pause_swindow__from_sample(&w, smp), 0);
	assert_int_equal(w.tid, 77);
	assert_int_equal(w.signal_ns, 10);
	assert_int_equal(w.entry_ns, 20);
	assert_int_equal(w.exit_ns, 30);
	/* Dropped after the signal was sent: kept, so the reason shows. */
	smp->entry_ns = 0;
	smp->drop_reason = SPROBE_DROP_TIMEOUT;
	assert_int_equal(sprobe_pause_swindow__from_sample(&w, smp), 0);
	assert_int_equal(w.entry_ns, 0);
	assert_int_equal(w.exit_ns, 0);
	assert_int_equal(sprobe_pause_swindow__from_sample(NULL, smp), -EINVAL);
	free(smp);
}

static void test_merge_bad_input(void **state)
{
	struct sprobe_pause_swindow sw = swin(1, 0, 1, 2);

	errno = 0;
	assert_null(sprobe_pause_merge__new(NULL, 1, NULL, 0, NULL));
	assert_int_equal(errno, EINVAL);
	assert_null(sprobe_pause_merge__new(NULL, 0, NULL, 2, NULL));
	assert_int_equal(errno, EINVAL);
	struct sprobe_pause_merge_opts o = { .sz = 1 };
	assert_null(sprobe_pause_merge__new(NULL, 0, &sw, 1, &o));
	assert_int_equal(errno, EINVAL);

	/* Empty is valid: no threads, zero statistics. */
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(NULL, 0, NULL, 0, NULL);
	size_t n = 1;
	assert_non_null(m);
	sprobe_pause_merge__threads(m, &n);
	assert_int_equal(n, 0);
	assert_int_equal(sprobe_pause_merge__overall(m)->kernel_pause.count, 0);
	sprobe_pause_merge__free(m);
	sprobe_pause_merge__free(NULL);
	assert_int_equal(sprobe_pause_merge__print(NULL, stdout), -EINVAL);
	assert_string_equal(sprobe_pause_reason__str(999), "unknown");
}

/* ------------------------------------------------------------------ */
/* Trace                                                               */

/* Parse path as JSON with python3 and count: tracks (distinct tids of
 * non-metadata events), thread_name records, kernel slices, handler
 * slices, samples. Fails the test if it does not parse, if two names
 * exist for one tid, or if an event's track has no name. */
static void check_trace(const char *path, int tracks, int kernel, int self, int samples)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd),
		 "python3 -c '\n"
		 "import json, sys, collections\n"
		 "d = json.load(open(sys.argv[1], encoding=\"utf-8\"))\n"
		 "ev = d[\"traceEvents\"]\n"
		 "names = collections.Counter(e[\"tid\"] for e in ev if e[\"ph\"] == \"M\" and e[\"name\"] == \"thread_name\")\n"
		 "assert all(c == 1 for c in names.values()), names\n"
		 "tids = set(e[\"tid\"] for e in ev if e[\"ph\"] != \"M\")\n"
		 "assert tids <= set(names), (tids, names)\n"
		 "for e in ev:\n"
		 "    assert e[\"ph\"] != \"X\" or (e[\"dur\"] >= 0 and e[\"ts\"] > 0), e\n"
		 "k = sum(1 for e in ev if e.get(\"cat\") == \"kernel\" and e[\"name\"] == \"kernel pause\")\n"
		 "s = sum(1 for e in ev if e.get(\"cat\") == \"self\")\n"
		 "n = sum(e[\"args\"].get(\"weight\", 1) for e in ev if e.get(\"cat\") == \"sample\")\n"
		 "print(len(tids), len(names), k, s, n)\n"
		 "' %s && python3 -m json.tool %s >/dev/null", path, path);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	int t = -1, nn = -1, k = -1, s = -1, n = -1;
	int got = fscanf(p, "%d %d %d %d %d", &t, &nn, &k, &s, &n);
	int st = pclose(p);
	assert_int_equal(got, 5);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	assert_int_equal(t, tracks);
	assert_int_equal(nn, tracks);	/* one named track per thread */
	assert_int_equal(k, kernel);
	assert_int_equal(s, self);
	assert_int_equal(n, samples);
}

static void test_trace_json_synthetic(void **state)
{
	char path[] = "/tmp/sprobe-trace-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	assert_non_null(f);

	struct sprobe_trace_opts o = { .sz = sizeof(o), .pid = 42, .process_name = "demo \"q\"" };
	struct sprobe_trace *t = sprobe_trace__new(f, &o);
	assert_non_null(t);
	/* Awkward names: quotes, backslash, control, invalid UTF-8, UTF-8. */
	assert_int_equal(sprobe_trace__thread_name(t, 43, "wor\"ker\\1\n\x01"), 0);
	assert_int_equal(sprobe_trace__thread_name(t, 43, "second name ignored"), 0);
	assert_int_equal(sprobe_trace__thread_name(t, 44, "bad \xff\xfe utf8 \xc3\xa9"), 0);
	struct sprobe_pause_kwindow k1 = kwin(43, 1000, 2000, 5000, 100);
	struct sprobe_pause_kwindow k2 = kwin(44, 0, 7000, 0, 0);	/* incomplete */
	struct sprobe_pause_kwindow k3 = kwin(44, 8000, 9000, 9500, 0);
	struct sprobe_pause_swindow s1 = swin(43, 900, 2500, 4500);
	struct sprobe_pause_swindow s3 = swin(44, 0, 9100, 9400);
	assert_int_equal(sprobe_trace__kernel_window(t, &k1), 0);
	assert_int_equal(sprobe_trace__kernel_window(t, &k2), 0);
	assert_int_equal(sprobe_trace__kernel_window(t, &k3), 0);
	assert_int_equal(sprobe_trace__self_window(t, &s1), 0);
	assert_int_equal(sprobe_trace__self_window(t, &s3), 0);
	const char *frames[] = { "leaf", NULL, "main" };
	assert_int_equal(sprobe_trace__sample(t, 43, 2600, frames, 3, 3), 0);	/* weight 3 */
	assert_int_equal(sprobe_trace__sample(t, 45, 3000, frames, 0, 0), 0);	/* unnamed, 1 */
	/* Bad input is refused, not written. */
	struct sprobe_pause_swindow bad = swin(43, 0, 10, 5);
	assert_int_equal(sprobe_trace__self_window(t, &bad), -EINVAL);
	assert_int_equal(sprobe_trace__sample(t, 0, 1, NULL, 0, 1), -EINVAL);
	assert_int_equal(sprobe_trace__sample(t, 43, 1, NULL, 2, 1), -EINVAL);
	assert_int_equal(sprobe_trace__finish(t), 0);
	assert_int_equal(sprobe_trace__finish(t), -EINVAL);
	assert_int_equal(sprobe_trace__sample(t, 43, 1, NULL, 0, 1), -EINVAL);
	sprobe_trace__free(t);
	fclose(f);

	check_trace(path, 3, 2, 2, 4);	/* samples counted by weight: 3 + 1 */
	unlink(path);

	errno = 0;
	assert_null(sprobe_trace__new(NULL, &o));
	assert_int_equal(errno, EINVAL);
	o.pid = 0;
	assert_null(sprobe_trace__new(stdout, &o));
	sprobe_trace__free(NULL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_probe_reports_available),
	cmocka_unit_test(test_bad_options),
	cmocka_unit_test(test_parked_object_loads),
	cmocka_unit_test(test_every_window_seen),
	cmocka_unit_test(test_filters_other_signals),
	cmocka_unit_test(test_real_capturer_windows_seen),
	cmocka_unit_test(test_offcpu_preempted),
	cmocka_unit_test(test_offcpu_blocked),
	cmocka_unit_test(test_timer_mode_group_signal),
	cmocka_unit_test(test_unprivileged_caps_dropped),
	cmocka_unit_test(test_unprivileged_nobody),
	cmocka_unit_test(test_merge_pairs_and_stats),
	cmocka_unit_test(test_merge_percentiles),
	cmocka_unit_test(test_merge_unmatched_reasons),
	cmocka_unit_test(test_merge_slack),
	cmocka_unit_test(test_merge_bad_input),
	cmocka_unit_test(test_swindow_from_sample),
	cmocka_unit_test(test_trace_json_synthetic),
};

SPROBE_TEST_MAIN(tests)
