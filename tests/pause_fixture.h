/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the eBPF companion's tests (test_pause.c, test_pause_offcpu.c,
 * test_pause_merge.c): workers whose own real-time signal handler records
 * entry/exit with CLOCK_MONOTONIC exactly as the capture backend's handler
 * does (struct sprobe_thread_sample entry_ns/exit_ns), loading the companion
 * or skipping where it cannot exist, and the trace checker.
 */
#ifndef SPROBE_PAUSE_FIXTURE_H
#define SPROBE_PAUSE_FIXTURE_H

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

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int setgroups_(size_t n)
{
	return (int)syscall(SYS_setgroups, n, NULL);
}

static inline pid_t gettid_(void)
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
static inline void handler(int sig, siginfo_t *si, void *uc)
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

static inline void *worker_main(void *arg)
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

static inline void install_handler(void)
{
	struct sigaction sa = { 0 };

	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(TEST_SIGNO, &sa, NULL), 0);
}

static inline void worker_init(struct worker *w, int kind, bool blocked, int cpu)
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

static inline void start_worker(struct worker *w)
{
	assert_int_equal(pthread_create(&w->th, NULL, worker_main, w), 0);
	uint64_t deadline = mono_ns() + DEADLINE_NS;
	while (!atomic_load_explicit(&w->tid, memory_order_acquire)) {
		assert_true(mono_ns() < deadline);
		sched_yield();
	}
}

static inline void stop_worker(struct worker *w)
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
static inline void send_window(struct worker *w, uint32_t n)
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

static inline void wait_done(struct worker *w, uint32_t n)
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

static inline bool have_bpf_caps(void)
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

static inline struct sprobe_pause *open_new_or_skip(uint32_t mode);

static inline struct sprobe_pause *open_or_skip(uint32_t mode)
{
	if (!shared_companion[mode])
		shared_companion[mode] = open_new_or_skip(mode);
	struct sprobe_pause *p = shared_companion[mode];
	sprobe_pause__poll(p, 0);
	sprobe_pause__clear(p);
	return p;
}

/* End of a test: forget its windows (the companion stays attached). */
static inline void release(struct sprobe_pause *p)
{
	sprobe_pause__poll(p, 0);
	sprobe_pause__clear(p);
}

static inline struct sprobe_pause *open_new_or_skip(uint32_t mode)
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
static inline const struct sprobe_pause_kwindow *collect(struct sprobe_pause *p, size_t want,
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

/* ------------------------------------------------------------------ */
/* Trace                                                               */

/* Parse path as JSON with python3 and count: tracks (distinct tids of
 * non-metadata events), thread_name records, kernel slices, handler
 * slices, samples. Fails the test if it does not parse, if two names
 * exist for one tid, or if an event's track has no name. */
static inline void check_trace(const char *path, int tracks, int kernel, int self, int samples)
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

#endif
