/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Capture backend: CPU-timer capture (POSIX timers and perf events: blocked
 * threads, slots, overruns, descriptors, thread churn) and the split
 * capture (sprobe_capturer__capture_start() + __finish()).
 *
 * Built with -fno-omit-frame-pointer (mk/capture.mk). Runs natively and
 * under qemu-aarch64 (SPROBE_TEST_SLOW=1: generous deadlines; no timing is
 * asserted anywhere).
 */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/linux/chain.h"
#include "backends/linux/linux.h"
#include "capture_fixture.h"
#include "userspace/common/fds.h"
#include "sprobe_test.h"
#include "capture_case_fixture.h"

/* ------------------------------------------------------------------ */
/* CPU-timer capture                                                   */
/* ------------------------------------------------------------------ */

/* voluntary_ctxt_switches of a thread: a thread blocked in read(2) adds one
 * each time something (a signal) wakes it. -1 if unreadable. */
static long vol_switches(pid_t tid)
{
	char path[64], buf[4096];
	FILE *f;
	long v = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "voluntary_ctxt_switches: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Bounded wait until tid sleeps (State: S). True if it does. */
static bool wait_sleeping(pid_t tid)
{
	uint64_t end = fx_now_ns() + fx_timeout_ns();

	while (fx_now_ns() < end) {
		char path[64], buf[4096];
		bool sleeping = false;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
		f = fopen(path, "r");
		if (!f)
			return false;
		while (fgets(buf, sizeof(buf), f))
			if (strncmp(buf, "State:", 6) == 0) {
				sleeping = strchr(buf, 'S') != NULL;
				break;
			}
		fclose(f);
		if (sleeping)
			return true;
		sched_yield();
	}
	return false;
}

static void test_cpu_timer_blocked_not_signalled(void **state)
{
	struct worker spin, blocked;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	unsigned spin_samples = 0, spin_weight = 0, rounds = 0;
	pid_t spin_tid, blk_tid;
	long sw0, sw1;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	assert_int_equal(fx_worker_start(&blocked, PARK_PIPE, 0), 0);
	spin_tid = atomic_load(&spin.tid);
	blk_tid = atomic_load(&blocked.tid);
	/* Wait until the blocked worker sleeps in read (its count settles). */
	assert_true(wait_sleeping(blk_tid));
	sw0 = vol_switches(blk_tid);
	assert_true(sw0 >= 0);

	/* Starts the timers: nothing to collect yet. */
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
	assert_int_equal(sprobe_snapshot__nthreads(s), 0);
	/* A wall capture is refused while the timers own the slots. */
	assert_int_equal(sprobe_capturer__capture(c, s), -EBUSY);

	uint64_t end = fx_now_ns() + fx_timeout_ns();
	while (spin_samples < 10 && fx_now_ns() < end) {
		struct timespec ts = { 0, 5000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
		rounds++;
		assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
		assert_null(fx_find(s, blk_tid));
		struct sprobe_thread_sample *t = fx_find(s, spin_tid);
		if (t && t->stage == SPROBE_STAGE_RAW) {
			assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
			assert_true(t->weight >= 1);
			assert_true(t->entry_ns > 0 && t->entry_ns <= t->exit_ns);
			assert_true(t->stack_addr <= t->sp && t->sp < t->stack_addr + t->stack_len);
			spin_samples++;
			spin_weight += t->weight;
		}
	}
	print_message("cpu timers: %u rounds, spinner %u samples (weight %u)\n", rounds,
		      spin_samples, spin_weight);
	assert_true(spin_samples >= 10);
	sw1 = vol_switches(blk_tid);
	/* Never woken: no timer signal reached the blocked thread. */
	assert_int_equal(sw1, sw0);

	/* The measure can fail: after stopping, one wall capture signals the
	 * blocked thread and wakes it. */
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_non_null(fx_find(s, blk_tid));
	/* It counts the switch when it sleeps again, after the handler:
	 * bounded wait for that. */
	end = fx_now_ns() + fx_timeout_ns();
	while (vol_switches(blk_tid) <= sw1 && fx_now_ns() < end)
		sched_yield();
	assert_true(vol_switches(blk_tid) > sw1);

	/* Bad arguments. */
	assert_int_equal(sprobe_capturer__cpu_collect(NULL, s, 1000000), -EINVAL);
	assert_int_equal(sprobe_capturer__cpu_collect(c, NULL, 1000000), -EINVAL);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 0), -EINVAL);
	assert_int_equal(sprobe_capturer__cpu_stop(NULL), -EINVAL);

	fx_worker_stop(&spin);
	fx_worker_stop(&blocked);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* Collect (cpu mode, 2 ms) until every tid in want[0..n) had a sample;
 * false at the deadline. */
static bool cpu_sampled_all(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			    const pid_t *want, int n)
{
	bool seen[4] = { false };
	int left = n;
	uint64_t end = fx_now_ns() + fx_timeout_ns();

	while (left > 0 && fx_now_ns() < end) {
		struct timespec ts = { 0, 5000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
		for (int k = 0; k < n; k++) {
			struct sprobe_thread_sample *t = fx_find(s, want[k]);

			if (!seen[k] && t && t->stage == SPROBE_STAGE_RAW) {
				seen[k] = true;
				left--;
			}
		}
	}
	return left == 0;
}

/* cpu mode keeps tracked threads' slots packed low and walks them only up
 * to the highest in use (backends/linux/cputime.c, cpu_hi): threads that
 * start after others exited reuse the freed slots, and a thread left in
 * a low slot after the higher ones exited is still sampled. Each wave's
 * threads must get samples (timer engine: any kernel has it). */
static void test_cpu_slots_reused_after_exits(void **state)
{
	struct worker a, b, d;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	pid_t w[2];

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_TIMER, NULL, 0),
			 SPROBE_CPU_ENGINE_TIMER);
	assert_int_equal(fx_worker_start(&a, PARK_SPIN, 0), 0);
	assert_int_equal(fx_worker_start(&b, PARK_SPIN, 0), 0);
	w[0] = atomic_load(&a.tid);
	w[1] = atomic_load(&b.tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0); /* timers start */
	assert_true(cpu_sampled_all(c, s, w, 2));
	/* a exits (its slot is freed at the next collect), d starts: d takes
	 * the lowest free slot. */
	fx_worker_stop(&a);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
	assert_int_equal(fx_worker_start(&d, PARK_SPIN, 0), 0);
	w[0] = atomic_load(&d.tid);
	assert_true(cpu_sampled_all(c, s, w, 2));
	/* b exits: the highest slots empty out; d is still sampled. */
	fx_worker_stop(&b);
	assert_true(cpu_sampled_all(c, s, w, 1));
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	fx_worker_stop(&d);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* ns of CPU thread tid has used (first field of its schedstat). */
static uint64_t cpu_ns(pid_t tid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu", &ns), 1);
	fclose(f);
	return ns;
}

/* At a rate above the kernel's tick (HZ is 100-1000; this asks for 2000
 * Hz) one timer signal stands for several expirations, the rest come as
 * si_overrun: the weights must add up to the CPU time the thread used,
 * not to the signals. Without counting overruns the sum is the tick rate's
 * share (1/2 at HZ=1000, 1/8 at HZ=250). */
static void test_cpu_timer_overruns_weighted(void **state)
{
	struct worker spin;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	const uint64_t period = 500000; /* 2000 Hz of CPU time */
	uint64_t weight = 0, samples = 0, cpu0, cpu1;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	pid_t tid = atomic_load(&spin.tid);

	/* The timer engine's overruns: force it (the default is the perf
	 * engine where allowed, test_cpu_perf_weights_and_descriptors). */
	assert_int_equal(sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_TIMER, NULL, 0),
			 SPROBE_CPU_ENGINE_TIMER);
	cpu0 = cpu_ns(tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0); /* timers start */
	uint64_t end = fx_now_ns() + fx_timeout_ns();
	/* Until the spinner used 300 ms of CPU (or the deadline). */
	while (cpu_ns(tid) - cpu0 < 300000000ull && fx_now_ns() < end) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0);
		struct sprobe_thread_sample *t = fx_find(s, tid);
		if (t && t->stage == SPROBE_STAGE_RAW) {
			samples++;
			weight += t->weight;
		}
	}
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	cpu1 = cpu_ns(tid);
	fx_worker_stop(&spin);
	double periods = (double)(cpu1 - cpu0) / (double)period;
	print_message("cpu timers at 2000 Hz: %.0f periods of CPU, %llu samples, weight %llu\n",
		      periods, (unsigned long long)samples, (unsigned long long)weight);
	assert_true(periods >= 200);
	/* Expirations after the last collect are not counted: a little below
	 * 1; the CPU clock and the timer count the same thing, so not above. */
	assert_true(weight >= 0.8 * periods);
	assert_true(weight <= 1.02 * periods + 2);
	assert_true(samples <= weight);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* The perf-event engine (backends/linux/perfclock.c): one signal per
 * period of CPU, so at 2000 Hz the weights add up to the CPU time with no
 * overruns to count; each event is a registry descriptor in the top
 * region (never one of the program's low numbers), and closed at stop. */
static int count_perf_fds(int *lowest)
{
	char link[256], path[64];
	int n = 0;

	*lowest = -1;
	for (int fd = 0; fd < 65536; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t l = readlink(path, link, sizeof(link) - 1);

		if (l <= 0)
			continue;
		link[l] = '\0';
		if (strcmp(link, "anon_inode:[perf_event]"))
			continue;
		if (*lowest < 0)
			*lowest = fd;
		n++;
	}
	return n;
}

static void test_cpu_perf_weights_and_descriptors(void **state)
{
	struct worker spin;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	const uint64_t period = 500000;
	uint64_t weight = 0, cpu0, cpu1;
	char why[256];
	struct rlimit rl;
	int lowest, e;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	e = sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_PERF, why, sizeof(why));
	if (e == -EACCES || e == -EPERM || e == -ENOENT || e == -ENOSYS) {
		sprobe_snapshot__free(s);
		untrack(c);
		SPROBE_SKIP("%s\n", why);
	}
	assert_int_equal(e, SPROBE_CPU_ENGINE_PERF);
	assert_non_null(strstr(why, "cpu engine: perf-event"));
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	pid_t tid = atomic_load(&spin.tid);

	cpu0 = cpu_ns(tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0); /* events open */
	/* One event per thread, all above the program's numbers: the top
	 * region lies below min(soft limit, 4096) (userspace/common/fds.h). */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rlim_t top = rl.rlim_cur < 4096 ? rl.rlim_cur : 4096;
	assert_true(count_perf_fds(&lowest) >= 1);
	print_message("perf event fds from %d up (top %lu)\n", lowest, (unsigned long)top);
	assert_true((rlim_t)lowest >= top - 8 - top / 4);
	assert_true(sprobe_fd__owned(lowest));
	uint64_t end = fx_now_ns() + fx_timeout_ns();
	while (cpu_ns(tid) - cpu0 < 300000000ull && fx_now_ns() < end) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0);
		struct sprobe_thread_sample *t = fx_find(s, tid);
		if (t && t->stage == SPROBE_STAGE_RAW)
			weight += t->weight;
	}
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	cpu1 = cpu_ns(tid);
	assert_int_equal(count_perf_fds(&lowest), 0); /* closed at stop */
	fx_worker_stop(&spin);
	double periods = (double)(cpu1 - cpu0) / (double)period;
	print_message("perf events at 2000 Hz: %.0f periods of CPU, weight %llu\n", periods,
		      (unsigned long long)weight);
	assert_true(periods >= 200);
	assert_true(weight >= 0.8 * periods);
	assert_true(weight <= 1.02 * periods + 2);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* A child forked without exec holds the perf events' files, which keeps
 * the events alive after the parent closes them: once CPU capture stops,
 * no event may go on signalling the parent's threads (after the capturer
 * is freed the signal's action is the default: the process would end). */
static _Atomic int late_signals;

static void count_late(int sig)
{
	(void)sig;
	atomic_fetch_add(&late_signals, 1);
}

static void test_cpu_perf_stop_with_forked_child(void **state)
{
	struct worker spin;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	int e, signo, status;
	pid_t child;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	e = sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_PERF, NULL, 0);
	if (e == -EACCES || e == -EPERM || e == -ENOENT || e == -ENOSYS) {
		sprobe_snapshot__free(s);
		untrack(c);
		SPROBE_SKIP("perf events not allowed here\n");
	}
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	pid_t tid = atomic_load(&spin.tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 1000000), 0); /* events open */
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* Holds the inherited descriptors until killed, and never
		 * outlives the test (nor keeps its output pipe open). */
		struct timespec ts = { (time_t)(fx_timeout_ns() / 1000000000ull) + 1, 0 };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(1);
		close(2);
		nanosleep(&ts, NULL);
		_exit(0);
	}
	signo = sprobe_capturer__signo(c);
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	sprobe_snapshot__free(s);
	untrack(c);
	struct sigaction sa = { .sa_handler = count_late };
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(signo, &sa, NULL), 0);
	/* 100 periods of the spinner's CPU: an event left running signals it. */
	uint64_t cpu0 = cpu_ns(tid), end = fx_now_ns() + fx_timeout_ns();
	while (cpu_ns(tid) - cpu0 < 100000000ull && fx_now_ns() < end) {
		struct timespec ts = { 0, 5000000 };

		nanosleep(&ts, NULL); /* pacing the reads, not sync */
	}
	print_message("after stop: %d signals in %.0f ms of the spinner's CPU\n",
		      atomic_load(&late_signals), (double)(cpu_ns(tid) - cpu0) / 1e6);
	assert_true(cpu_ns(tid) - cpu0 >= 100000000ull);
	assert_int_equal(atomic_load(&late_signals), 0);
	fx_worker_stop(&spin);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, &status, 0), child);
	signal(signo, SIG_DFL);
}

/* Past the registry's descriptor budget (a quarter of the soft
 * RLIMIT_NOFILE, fds.h) a thread gets a CPU timer instead of a perf event:
 * counted, never an event below the top region, never a thread left out. */
static void test_cpu_perf_budget_spills_to_timers(void **state)
{
	enum { N = 72 }; /* budget 64 at a soft limit of 256 */
	static struct worker w[N];
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	struct rlimit old, rl;
	int lowest, e, nfd;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	c = new_capturer(0, 0);
	s = sprobe_snapshot__new(128, 4096);
	assert_non_null(c);
	assert_non_null(s);
	e = sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_PERF, NULL, 0);
	if (e == -EACCES || e == -EPERM || e == -ENOENT || e == -ENOSYS) {
		sprobe_snapshot__free(s);
		untrack(c);
		setrlimit(RLIMIT_NOFILE, &old);
		SPROBE_SKIP("perf events not allowed here\n");
	}
	assert_int_equal(e, SPROBE_CPU_ENGINE_PERF);
	for (int i = 0; i < N; i++)
		assert_int_equal(fx_worker_start(&w[i], PARK_PIPE, 0), 0);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 10000000), 0);
	nfd = count_perf_fds(&lowest);
	print_message("%d perf events (lowest fd %d), %u threads on timers, budget %u\n", nfd, lowest,
		      sprobe_capturer__cpu_on_timer(c), sprobe_fd__budget());
	assert_true(nfd >= 1 && (unsigned)nfd <= sprobe_fd__budget());
	assert_true(lowest >= 256 - 8 - 64);
	/* Every thread has a source: events, and timers for the rest. */
	assert_true((unsigned)nfd + sprobe_capturer__cpu_on_timer(c) >= N);
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	assert_int_equal(count_perf_fds(&lowest), 0);
	for (int i = 0; i < N; i++)
		fx_worker_stop(&w[i]);
	sprobe_snapshot__free(s);
	untrack(c);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

/* sprobe_capturer__capture_start() + __finish() give what __capture()
 * gives; between the two every other capture call is refused, and only
 * the started snapshot can be finished. */
static void test_capture_start_finish(void **state)
{
	struct worker spin, blocked;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_snapshot *s2 = sprobe_snapshot__new(64, 0);
	uint32_t idx = 0;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	assert_non_null(s2);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	assert_int_equal(fx_worker_start(&blocked, PARK_PIPE, 0), 0);
	pid_t ts = atomic_load(&spin.tid), tb = atomic_load(&blocked.tid);

	assert_int_equal(sprobe_capturer__capture_start(NULL, s), -EINVAL);
	assert_int_equal(sprobe_capturer__capture_start(c, NULL), -EINVAL);
	assert_int_equal(sprobe_capturer__capture_finish(c, s), -EINVAL); /* none started */
	for (int round = 0; round < 3; round++) {
		assert_int_equal(sprobe_capturer__capture_start(c, s), 0);
		/* In flight: everything else on c is refused. */
		assert_int_equal(sprobe_capturer__capture_start(c, s2), -EBUSY);
		assert_int_equal(sprobe_capturer__capture(c, s2), -EBUSY);
		assert_int_equal(sprobe_capturer__recapture(c, s2, &idx, 1), -EBUSY);
		assert_int_equal(sprobe_capturer__cpu_collect(c, s2, 1000000), -EBUSY);
		assert_int_equal(sprobe_capturer__capture_finish(c, s2), -EINVAL);
		assert_int_equal(sprobe_capturer__capture_finish(NULL, s), -EINVAL);
		assert_int_equal(sprobe_capturer__capture_finish(c, s), 0);
		assert_int_equal(sprobe_capturer__capture_finish(c, s), -EINVAL); /* once */

		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
		assert_true(fx_stats_consistent(st));
		assert_true(st->capture_ns > 0);
		for (int k = 0; k < 2; k++) {
			struct sprobe_thread_sample *t = fx_find(s, k ? tb : ts);

			assert_non_null(t);
			assert_int_equal(t->stage, SPROBE_STAGE_RAW);
			assert_int_equal(t->drop_reason, SPROBE_DROP_NONE);
			assert_true(t->entry_ns > 0 && t->entry_ns <= t->exit_ns);
			assert_true(t->stack_len > 0);
			assert_true(t->stack_addr <= t->sp && t->sp < t->stack_addr + t->stack_len);
		}
	}
	/* And the capturer works as before afterwards. */
	assert_int_equal(sprobe_capturer__capture(c, s2), 0);
	assert_non_null(fx_find(s2, ts));
	assert_non_null(fx_find(s2, tb));
	fx_worker_stop(&spin);
	fx_worker_stop(&blocked);
	sprobe_snapshot__free(s);
	sprobe_snapshot__free(s2);
	untrack(c);
}

/* A thread that holds the capture signal blocked, then lets it in on
 * command: its handler runs the moment it unblocks. */
struct late {
	int signo;
	_Atomic pid_t tid;
	_Atomic int go, unblocked, stop;
};

static void *late_main(void *arg)
{
	struct late *l = arg;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, l->signo);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	atomic_store(&l->tid, (pid_t)syscall(SYS_gettid));
	while (!atomic_load(&l->go))
		sched_yield();
	pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* the pending signal runs here */
	atomic_store(&l->unblocked, 1);
	while (!atomic_load(&l->stop))
		sched_yield();
	return NULL;
}

/* A started capture is finished long after its deadline: a thread that
 * answered after the deadline is dropped as TIMEOUT, as a capture that
 * waited would have (its stack is from when it answered, not from when it
 * was asked); one that answered in time is kept. */
static void test_capture_finish_late_answer_dropped(void **state)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o), .timeout_ns = 50000000 };
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct late l = { 0 };
	struct worker spin;
	pthread_t th;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	l.signo = sprobe_capturer__signo(c);
	assert_int_equal(pthread_create(&th, NULL, late_main, &l), 0);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	uint64_t end = fx_now_ns() + fx_timeout_ns();
	while (!atomic_load(&l.tid))
		assert_true(fx_now_ns() < end);

	assert_int_equal(sprobe_capturer__capture_start(c, s), 0);
	/* Past the deadline (the subject of the test, not a synchronisation):
	 * then let the signal in and wait until its handler ran. */
	uint64_t past = fx_now_ns() + 2 * o.timeout_ns;
	while (fx_now_ns() < past)
		sched_yield();
	atomic_store(&l.go, 1);
	while (!atomic_load(&l.unblocked))
		assert_true(fx_now_ns() < end + fx_timeout_ns());
	assert_int_equal(sprobe_capturer__capture_finish(c, s), 0);

	struct sprobe_thread_sample *t = fx_find(s, atomic_load(&l.tid));
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_EMPTY);
	assert_int_equal(t->drop_reason, SPROBE_DROP_TIMEOUT);
	t = fx_find(s, atomic_load(&spin.tid));
	assert_non_null(t);
	if (!under_qemu()) /* qemu can take 0.5 s to deliver (fx_timeout_ns) */
		assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	assert_true(sprobe_snapshot__stats(s)->dropped[SPROBE_DROP_TIMEOUT] >= 1);

	/* The started snapshot cannot be captured into or reset meanwhile. */
	assert_int_equal(sprobe_capturer__capture_start(c, s), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), -EBUSY);
	assert_int_equal(sprobe_capturer__capture_finish(c, s), 0);
	assert_true(sprobe_snapshot__nthreads(s) >= 2);

	atomic_store(&l.stop, 1);
	pthread_join(th, NULL);
	fx_worker_stop(&spin);
	sprobe_snapshot__free(s);
	untrack(c);
}

static uint64_t thread_cpu_ns(pthread_t th)
{
	clockid_t id;
	struct timespec ts;

	assert_int_equal(pthread_getcpuclockid(th, &id), 0);
	assert_int_equal(clock_gettime(id, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait (bounded) until each of the n spinners has run ns more of CPU time:
 * their CPU timers count CPU, not wall time, so on busy CPUs a fixed sleep
 * may give them none. */
static void wait_cpu(const struct worker *w, int n, uint64_t ns)
{
	uint64_t base[3], deadline = fx_now_ns() + 10000000000ull;

	assert_true(n <= 3);
	for (int i = 0; i < n; i++)
		base[i] = thread_cpu_ns(w[i].th);
	for (int i = 0; i < n; i++) {
		while (thread_cpu_ns(w[i].th) - base[i] < ns) {
			assert_true(fx_now_ns() < deadline);
			sched_yield();
		}
	}
}

/* Threads come and go under CPU timers: a new thread's slot may be one an
 * exited thread used; a sample never carries another thread's tid, and
 * stats stay consistent. */
static void test_cpu_timer_thread_churn(void **state)
{
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	unsigned seen = 0;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 1000000), 0);
	pid_t prev[3] = { 0, 0, 0 };

	for (int gen = 0; gen < 6; gen++) {
		struct worker w[3];
		pid_t tids[3];

		for (int i = 0; i < 3; i++) {
			assert_int_equal(fx_worker_start(&w[i], PARK_SPIN, 0), 0);
			tids[i] = atomic_load(&w[i].tid);
		}
		unsigned gen_seen = 0;

		/* Four collects, and more (bounded) until this generation has
		 * a sample: between collects each spinner runs 3 periods of
		 * CPU, so the timers the first collect armed must have fired. */
		for (int r = 0; r < 4 || (!gen_seen && r < 40); r++) {
			wait_cpu(w, 3, 3000000);
			assert_int_equal(sprobe_capturer__cpu_collect(c, s, 1000000), 0);
			assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
			for (uint32_t k = 0; k < sprobe_snapshot__nthreads(s); k++) {
				struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, k);
				bool mine = false;

				bool old = false;

				for (int i = 0; i < 3; i++) {
					mine |= t->tid == tids[i];
					old |= t->tid == prev[i];
				}
				/* This generation's threads, the test's other
				 * live threads, or (first collect of this
				 * generation only) a sample the previous one
				 * finished before it exited. Anything else
				 * would come from a stale slot. */
				assert_true(mine || (old && r == 0) ||
					    syscall(SYS_tgkill, getpid(), t->tid, 0) == 0);
				gen_seen += mine && t->stage == SPROBE_STAGE_RAW;
			}
		}
		seen += gen_seen;
		for (int i = 0; i < 3; i++) {
			fx_worker_stop(&w[i]);
			prev[i] = tids[i];
		}
	}
	print_message("cpu timers under churn: %u samples of short-lived threads\n", seen);
	assert_true(seen > 0);
	sprobe_snapshot__free(s);
	untrack(c); /* frees with timers running: must not crash */
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_cpu_timer_blocked_not_signalled, teardown),
	cmocka_unit_test_teardown(test_cpu_slots_reused_after_exits, teardown),
	cmocka_unit_test_teardown(test_cpu_timer_thread_churn, teardown),
	cmocka_unit_test_teardown(test_cpu_timer_overruns_weighted, teardown),
	cmocka_unit_test_teardown(test_cpu_perf_weights_and_descriptors, teardown),
	cmocka_unit_test_teardown(test_cpu_perf_budget_spills_to_timers, teardown),
	cmocka_unit_test_teardown(test_cpu_perf_stop_with_forked_child, teardown),
	cmocka_unit_test_teardown(test_capture_start_finish, teardown),
	cmocka_unit_test_teardown(test_capture_finish_late_answer_dropped, teardown),
};

SPROBE_TEST_MAIN(tests)
