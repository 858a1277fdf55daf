/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The eBPF companion against this kernel: loading, the windows it sees
 * and which it does not, unprivileged refusal. The BPF tests load real programs; they skip only where the
 * companion cannot exist (no capability, no BTF / raw tracepoints), print
 * why, and fail if this process has CAP_BPF + CAP_PERFMON and loading still
 * fails.
 *
 * Windows are driven by the test's own real-time signal handler, which
 * records entry/exit with CLOCK_MONOTONIC exactly as the capture backend's
 * handler does (struct sprobe_thread_sample entry_ns/exit_ns).
 *
 * Off-CPU time and timer mode are in test_pause_offcpu.c, the matcher and
 * the trace in test_pause_merge.c; the fixtures in pause_fixture.h.
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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_probe_reports_available),
	cmocka_unit_test(test_bad_options),
	cmocka_unit_test(test_parked_object_loads),
	cmocka_unit_test(test_every_window_seen),
	cmocka_unit_test(test_filters_other_signals),
	cmocka_unit_test(test_real_capturer_windows_seen),
	cmocka_unit_test(test_unprivileged_caps_dropped),
	cmocka_unit_test(test_unprivileged_nobody),
};

SPROBE_TEST_MAIN(tests)
