/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The eBPF companion against this kernel: off-CPU time inside a window
 * (a preempted handler, a blocking handler) and CPU mode's process-directed
 * timer signal. Skips as test_pause.c does where the companion cannot exist.
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
#include "pause_fixture.h"

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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_offcpu_preempted),
	cmocka_unit_test(test_offcpu_blocked),
	cmocka_unit_test(test_timer_mode_group_signal),
};

SPROBE_TEST_MAIN(tests)
