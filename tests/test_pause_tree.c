/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The eBPF companion following a process tree (opts.follow_children): the
 * windows of every process forked by the target, recursively, are seen with
 * their own tgid; every process's exit is recorded once with the wait
 * status the kernel holds; a process outside the tree is never followed;
 * the process map's bound is counted, not silent. Real programs in this
 * kernel; skipped only where the companion cannot exist (no capability, no
 * BTF / raw tracepoints), with the reason printed.
 *
 * Every process of a tree opens its windows itself: it sends the capture
 * signal to its own thread (tgkill), which the kernel delivers before the
 * syscall returns, to a handler that records entry/exit with
 * CLOCK_MONOTONIC like the capture backend's. Each process then writes what
 * it did (one record, < PIPE_BUF, so the write is atomic) to a pipe the
 * test reads; the exec'd child is this binary run again with
 * --tree-exec-child. Processes of a tree leave with _exit (the same
 * exit_group as exit): under ASan, exit() would run LeakSanitizer, whose
 * tracer is a clone without CLONE_THREAD, i.e. one more process of the tree.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>

#include "userspace/pause/pause_internal.h"

#include "sprobe_test.h"

#define TEST_SIGNO (SIGRTMIN + 6)
#define NWIN 12			/* windows per process (and per extra thread) */
#define MAXW (2 * NWIN)		/* windows one record can carry */
#define DEADLINE_NS (120ull * 1000 * 1000 * 1000)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ------------------------------------------------------------------ */
/* What each process of a tree reports                                 */

enum role {
	R_ROOT = 1,	/* the companion's target */
	R_EXEC_PRE,	/* child A before its exec */
	R_EXEC_POST,	/* child A after exec'ing this binary again */
	R_FORK,		/* child B: no exec, a second thread, killed by SIGKILL */
	R_GRAND,	/* B's child, orphaned when B dies */
	R_OUTSIDE,	/* forked by the test, not by the tree */
	R_CHILD,	/* the map-full test's children */
	R_LEADER_EXIT,	/* child L: its main thread leaves first (SYS_exit) */
	R_ROOT_WAITS,	/* R's waitpid() statuses of A, B, L */
};

struct report {
	uint32_t role;
	pid_t pid;
	pid_t ppid;		/* getppid() when it started */
	uint32_t nwin;
	struct sprobe_pause_swindow w[MAXW];
	uint32_t nkids;		/* R_ROOT_WAITS */
	pid_t kid[3];
	int kid_status[3];
};
_Static_assert(sizeof(struct report) <= PIPE_BUF, "one atomic pipe write");

/* Windows of the thread running the handler: each thread has its own.
 * volatile: the handler changes them between the loads in do_windows(). */
static __thread struct sprobe_pause_swindow *volatile tw;
static __thread volatile uint32_t tw_n, tw_cap;

/* ASYNC-SIGNAL-SAFE: clock_gettime and stores. */
static void handler(int sig, siginfo_t *si, void *uc)
{
	uint64_t entry = mono_ns();

	if (!tw || tw_n >= tw_cap)
		return;
	tw[tw_n].tid = gettid_();
	tw[tw_n].entry_ns = entry;
	tw[tw_n].exit_ns = mono_ns();
	tw_n++;
}

static void install_handler(void)
{
	struct sigaction sa = { 0 };

	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(TEST_SIGNO, &sa, NULL) != 0)
		_exit(120);
}

/* Open n windows on the calling thread, appending them to r. A signal a
 * thread sends itself is delivered before tgkill returns, so the handler
 * has run when it does: no waiting. */
static void do_windows_how(struct report *r, uint32_t n, bool process_directed)
{
	tw = &r->w[r->nwin];
	tw_cap = MAXW - r->nwin;
	tw_n = 0;
	for (uint32_t i = 0; i < n && tw_n < tw_cap; i++) {
		uint32_t before = tw_n;
		uint64_t sent = mono_ns();
		/* Process-directed (timer mode's kind): a single-threaded
		 * process takes it itself, on the way out of sigqueue. */
		if (process_directed) {
			if (sigqueue(getpid(), TEST_SIGNO, (union sigval){ .sival_int = (int)i }) != 0)
				_exit(121);
		} else if (syscall(SYS_tgkill, getpid(), gettid_(), TEST_SIGNO) != 0) {
			_exit(121);
		}
		if (tw_n == before + 1)
			tw[before].signal_ns = sent;
	}
	r->nwin += tw_n;
	tw = NULL;
}

static void do_windows(struct report *r, uint32_t n)
{
	do_windows_how(r, n, false);
}

static void send_report(int fd, const struct report *r)
{
	if (write(fd, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		_exit(122);
}

static void report_init(struct report *r, uint32_t role)
{
	memset(r, 0, sizeof(*r));
	r->role = role;
	r->pid = getpid();
	r->ppid = getppid();
}

/* ------------------------------------------------------------------ */
/* The tree                                                            */

static int report_fd = -1;

/* Child A after its exec (main() sends it here): windows, exit(3). */
static int exec_child_main(int fd)
{
	struct report r;

	install_handler();
	report_init(&r, R_EXEC_POST);
	do_windows(&r, NWIN);
	send_report(fd, &r);
	_exit(3);
}

static void *block_forever(void *arg)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;)
		pause();
	return NULL;
}

static void *thread_windows(void *arg)
{
	do_windows(arg, NWIN);
	return NULL;
}

/* Grandchild G: waits until its parent B is dead (EOF on B's pipe), so it
 * lives on orphaned, then windows and exit(5). */
static void grandchild(int from_b, pid_t b)
{
	struct report r;
	char c;

	report_init(&r, R_GRAND);
	r.ppid = b;	/* getppid() may already name the subreaper */
	while (read(from_b, &c, 1) < 0 && errno == EINTR)
		;
	do_windows(&r, NWIN);
	send_report(report_fd, &r);
	_exit(5);
}

/* Child B: windows on two threads, a grandchild, then killed by SIGKILL
 * while a third thread is still alive (a group exit: the kernel's status
 * is the group's). */
static void fork_child(void)
{
	struct report r;
	pthread_t th;
	int gate[2];

	prctl(PR_SET_NAME, "tree-b");
	report_init(&r, R_FORK);
	do_windows(&r, NWIN);
	/* The second thread's windows follow the first's in r.w. */
	if (pthread_create(&th, NULL, thread_windows, &r) != 0 || pthread_join(th, NULL) != 0)
		_exit(123);
	if (pipe(gate) != 0)
		_exit(124);
	pid_t self = getpid();
	pid_t g = fork();
	if (g < 0)
		_exit(125);
	if (g == 0) {
		close(gate[1]);
		grandchild(gate[0], self);
	}
	close(gate[0]);
	if (pthread_create(&th, NULL, block_forever, NULL) != 0)
		_exit(126);
	send_report(report_fd, &r);
	raise(SIGKILL);
	_exit(127);
}

/* /proc/self/task/TID/stat says the thread is a zombie (or gone). */
static bool thread_exited(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');
	return !paren || paren[1] == '\0' || paren[2] == 'Z' || paren[2] == 'X';
}

static void *outlive_leader(void *arg)
{
	pid_t leader = (pid_t)(intptr_t)arg;

	while (!thread_exited(leader))
		sched_yield();
	syscall(SYS_exit, 12);
	return NULL;
}

/* Child L: the main thread leaves with SYS_exit(11) (this thread only),
 * the other thread after it with SYS_exit(12). No exit_group: which code
 * the parent gets depends on the kernel (the last thread's since 5.19,
 * which makes the last exit a group exit, the leader's before); the
 * companion must say the same as waitpid(). */
static void leader_exit_child(void)
{
	struct report r;
	pthread_t th;

	report_init(&r, R_LEADER_EXIT);
	do_windows(&r, NWIN);
	send_report(report_fd, &r);
	if (pthread_create(&th, NULL, outlive_leader, (void *)(intptr_t)getpid()) != 0)
		_exit(133);
	syscall(SYS_exit, 11);
	_exit(134);
}

/* Child A: windows, then exec this binary again (the same pid). */
static void exec_child(const char *self)
{
	struct report r;
	char fdarg[16];

	report_init(&r, R_EXEC_PRE);
	do_windows(&r, NWIN);
	send_report(report_fd, &r);
	snprintf(fdarg, sizeof(fdarg), "%d", report_fd);
	execl(self, self, "--tree-exec-child", fdarg, (char *)NULL);
	_exit(128);
}

/* The root R: released by the test once the companion is attached;
 * windows, forks A, B and L, reaps them (reporting their statuses), exits
 * 7 with a second thread alive (exit_group of a multi-threaded process). */
static void root_main(int gate, const char *self)
{
	struct report r;
	pthread_t th;
	char c;

	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	close(gate);
	report_init(&r, R_ROOT);
	do_windows(&r, NWIN);
	send_report(report_fd, &r);
	pid_t a = fork();
	if (a == 0)
		exec_child(self);
	pid_t b = fork();
	if (b == 0)
		fork_child();
	pid_t l = fork();
	if (l == 0)
		leader_exit_child();
	if (a < 0 || b < 0 || l < 0)
		_exit(129);
	report_init(&r, R_ROOT_WAITS);
	r.nkids = 3;
	r.kid[0] = a;
	r.kid[1] = b;
	r.kid[2] = l;
	for (int i = 0; i < 3; i++)
		if (waitpid(r.kid[i], &r.kid_status[i], 0) != r.kid[i])
			_exit(135);
	send_report(report_fd, &r);
	if (pthread_create(&th, NULL, block_forever, NULL) != 0)
		_exit(130);
	_exit(7);
}

/* The outside process O: the same windows, from a process the tree did
 * not fork. */
static void outside_main(void)
{
	struct report r;

	report_init(&r, R_OUTSIDE);
	do_windows(&r, NWIN);
	send_report(report_fd, &r);
	_exit(4);
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

/* Companions are never freed: detaching waits for an RCU-tasks grace period
 * (seconds on a loaded VM); the kernel frees them at exit. Kept reachable
 * here for LeakSanitizer. */
static struct sprobe_pause *kept[8];

/* NULL only after skip() (which does not return) or a failed assertion. */
static struct sprobe_pause *load_mode_or_skip(pid_t tgid, bool follow, uint32_t max_procs,
					      size_t sz, uint32_t mode)
{
	struct sprobe_pause_opts o = {
		.sz = sz, .tgid = tgid, .signo = TEST_SIGNO,
		.mode = mode, .quiet = true,
		.verbose = getenv("SPROBE_BPF_VERBOSE") != NULL,
		.follow_children = follow, .max_procs = max_procs,
	};
	struct sprobe_pause *p = sprobe_pause__new(&o);
	char why[512];

	if (p) {
		for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
			if (!kept[i]) {
				kept[i] = p;
				return p;
			}
		}
		sprobe_pause__free(p);
		fail_msg("more companions than kept[] holds");
	}
	int err = errno;
	kill(tgid, SIGKILL);
	waitpid(tgid, NULL, 0);
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

static struct sprobe_pause *load_or_skip(pid_t tgid, bool follow, uint32_t max_procs, size_t sz)
{
	return load_mode_or_skip(tgid, follow, max_procs, sz, SPROBE_PAUSE_MODE_PROBE);
}

/* Fork a process that waits on a gate pipe, then runs fn(gate, arg). */
static pid_t fork_gated(int *gate_w, void (*fn)(int, const char *), const char *arg)
{
	int gate[2];

	assert_int_equal(pipe2(gate, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(gate[1]);
		fn(gate[0], arg);
		_exit(0);
	}
	close(gate[0]);
	*gate_w = gate[1];
	return pid;
}

/* Read reports until every writer has closed the pipe. */
static size_t read_reports(int fd, struct report *out, size_t cap)
{
	size_t n = 0;

	for (;;) {
		struct report r;
		ssize_t got = read(fd, &r, sizeof(r));
		if (got < 0 && errno == EINTR)
			continue;
		if (got == 0)
			break;
		assert_int_equal(got, sizeof(r));
		assert_true(n < cap);
		out[n++] = r;
	}
	return n;
}

/* Poll until the companion holds `want` exits (they are written at each
 * last thread's exit, before its files are closed, but read here through
 * the ring buffer). */
static void collect_exits(struct sprobe_pause *p, size_t want)
{
	uint64_t deadline = mono_ns() + DEADLINE_NS;
	size_t n = 0;

	do {
		assert_true(sprobe_pause__poll(p, 50) >= 0);
		sprobe_pause__exits(p, &n);
	} while (n < want && mono_ns() < deadline);
	while (sprobe_pause__poll(p, 0) > 0)
		;
}

static const struct report *find_role(const struct report *r, size_t n, uint32_t role)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].role == role)
			return &r[i];
	fail_msg("no report of role %u", role);
	return NULL;
}

static const struct sprobe_pause_exit *find_exit(const struct sprobe_pause_exit *x, size_t n,
						 pid_t tgid)
{
	const struct sprobe_pause_exit *found = NULL;

	for (size_t i = 0; i < n; i++) {
		if (x[i].tgid != tgid)
			continue;
		assert_null(found);	/* one record per process */
		found = &x[i];
	}
	return found;
}

static size_t count_tgid(const struct sprobe_pause_kwindow *kw, size_t nk, pid_t tgid)
{
	size_t c = 0;

	for (size_t i = 0; i < nk; i++)
		c += kw[i].tgid == tgid;
	return c;
}

/*
 * The kernel windows of process tgid match its self-reported windows one
 * to one: same count, same tids, each self window inside its kernel one.
 */
static void check_windows_as(const struct sprobe_pause_kwindow *kw, size_t nk, pid_t tgid,
			     const struct sprobe_pause_swindow *sw, size_t ns, int si_code,
			     uint32_t need_flags)
{
	struct sprobe_pause_kwindow *mine = calloc(nk ? nk : 1, sizeof(*mine));
	size_t nm = 0;

	assert_non_null(mine);
	for (size_t i = 0; i < nk; i++)
		if (kw[i].tgid == tgid)
			mine[nm++] = kw[i];
	print_message("tgid %d: %zu kernel windows, %zu self-reported\n", (int)tgid, nm, ns);
	assert_int_equal(nm, ns);
	struct sprobe_pause_merge_opts mo = { .sz = sizeof(mo) };
	struct sprobe_pause_merge *m = sprobe_pause_merge__new(mine, nm, sw, ns, &mo);
	assert_non_null(m);
	size_t np, nu;
	const struct sprobe_pause_pair *pairs = sprobe_pause_merge__pairs(m, &np);
	const struct sprobe_pause_unmatched *un = sprobe_pause_merge__unmatched(m, &nu);
	for (size_t i = 0; i < nu; i++)
		print_message("  unmatched: side %u tid %d reason %s\n", un[i].side, un[i].tid,
			      sprobe_pause_reason__str(un[i].reason));
	assert_int_equal(nu, 0);
	assert_int_equal(np, ns);
	for (size_t i = 0; i < np; i++) {
		const struct sprobe_pause_kwindow *k = &mine[pairs[i].kernel_idx];
		assert_int_equal(k->tid, sw[pairs[i].self_idx].tid);
		assert_int_equal(k->flags & (SPROBE_PAUSE_KW_NO_GENERATE | SPROBE_PAUSE_KW_INCOMPLETE), 0);
		assert_int_equal(k->si_code, si_code);
		assert_int_equal(k->flags & need_flags, need_flags);
		assert_true(sw[pairs[i].self_idx].signal_ns <= k->generate_ns);
	}
	sprobe_pause_merge__free(m);
	free(mine);
}

static void check_process_windows(const struct sprobe_pause_kwindow *kw, size_t nk, pid_t tgid,
				  const struct sprobe_pause_swindow *sw, size_t ns)
{
	check_windows_as(kw, nk, tgid, sw, ns, SI_TKILL, 0);
}

static char self_exe[PATH_MAX];

static void root_trampoline(int gate, const char *self)
{
	root_main(gate, self);
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */

/*
 * R forks A (execs this binary, exit(3)) and B (no exec, two threads,
 * SIGKILL); B forks G (orphaned, exit(5)); R exits 7. O, forked by the
 * test, is outside. The companion loaded for R sees each process's windows
 * with its tgid, each exit once with the kernel's status, nothing of O.
 */
static void tree_windows_and_exits(void)
{
	int rep[2];

	assert_int_equal(pipe(rep), 0);	/* inherited through A's exec */
	report_fd = rep[1];
	int gate;
	pid_t root = fork_gated(&gate, root_trampoline, self_exe);
	struct sprobe_pause *p = load_or_skip(root, true, 0, sizeof(struct sprobe_pause_opts));
	assert_non_null(p);
	/* The grandchild is orphaned: let it be reparented to us, so we can
	 * reap it and compare its waitpid() status with the kernel's. */
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);

	assert_int_equal(write(gate, "g", 1), 1);
	close(gate);
	pid_t outside = fork();
	assert_true(outside >= 0);
	if (outside == 0)
		outside_main();
	close(rep[1]);
	report_fd = -1;

	struct report reps[10];
	size_t nr = read_reports(rep[0], reps, 10);
	close(rep[0]);
	assert_int_equal(nr, 8);	/* R, R's waits, A pre/post, B, G, L, O */
	const struct report *rr = find_role(reps, nr, R_ROOT);
	const struct report *ra = find_role(reps, nr, R_EXEC_PRE);
	const struct report *ra2 = find_role(reps, nr, R_EXEC_POST);
	const struct report *rb = find_role(reps, nr, R_FORK);
	const struct report *rg = find_role(reps, nr, R_GRAND);
	const struct report *ro = find_role(reps, nr, R_OUTSIDE);
	const struct report *rl = find_role(reps, nr, R_LEADER_EXIT);
	const struct report *rw = find_role(reps, nr, R_ROOT_WAITS);
	assert_int_equal(rr->pid, root);
	assert_int_equal(ro->pid, outside);
	assert_int_equal(ra->pid, ra2->pid);	/* exec keeps the pid */
	assert_int_equal(ra->ppid, root);
	assert_int_equal(rb->ppid, root);
	assert_int_equal(rg->ppid, rb->pid);
	assert_int_equal(rb->nwin, 2 * NWIN);
	assert_int_equal(rl->ppid, root);
	for (size_t i = 0; i < nr; i++)
		assert_true(reps[i].role == R_ROOT_WAITS || reps[i].nwin >= NWIN);

	/* Our own children's statuses, to compare with the kernel's. */
	int st_root, st_out, st_grand;
	assert_int_equal(waitpid(root, &st_root, 0), root);
	assert_int_equal(waitpid(outside, &st_out, 0), outside);
	assert_int_equal(waitpid(rg->pid, &st_grand, 0), rg->pid);
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0), 0);

	collect_exits(p, 5);
	size_t nk, nx;
	const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(p, &nk);
	const struct sprobe_pause_exit *x = sprobe_pause__exits(p, &nx);
	struct sprobe_pause_stats ps;
	assert_int_equal(sprobe_pause__stats(p, &ps), 0);
	print_message("companion: followed %lu procs_full %lu exits %lu exits_lost %lu "
		      "windows %zu lost %lu missed %lu\n",
		      (unsigned long)ps.followed, (unsigned long)ps.procs_full,
		      (unsigned long)ps.exits, (unsigned long)ps.exits_lost, nk,
		      (unsigned long)ps.lost, (unsigned long)ps.missed);
	assert_int_equal(ps.lost + ps.no_state + ps.exits_lost, 0);
	assert_int_equal(ps.procs_full, 0);
	assert_int_equal(ps.followed, 5);	/* R, A, B, G, L */

	/* Windows: each process's own, nothing else. */
	struct sprobe_pause_swindow sa[2 * MAXW];
	memcpy(sa, ra->w, ra->nwin * sizeof(sa[0]));
	memcpy(sa + ra->nwin, ra2->w, ra2->nwin * sizeof(sa[0]));
	check_process_windows(kw, nk, root, rr->w, rr->nwin);
	check_process_windows(kw, nk, ra->pid, sa, ra->nwin + ra2->nwin);
	check_process_windows(kw, nk, rb->pid, rb->w, rb->nwin);
	check_process_windows(kw, nk, rg->pid, rg->w, rg->nwin);
	check_process_windows(kw, nk, rl->pid, rl->w, rl->nwin);
	assert_int_equal(count_tgid(kw, nk, outside), 0);
	assert_int_equal(count_tgid(kw, nk, getpid()), 0);
	assert_int_equal(nk, rr->nwin + ra->nwin + ra2->nwin + rb->nwin + rg->nwin + rl->nwin);

	/* Exits: one per process of the tree, none of O. */
	assert_int_equal(nx, 5);
	assert_null(find_exit(x, nx, outside));
	const struct sprobe_pause_exit *xr = find_exit(x, nx, root);
	const struct sprobe_pause_exit *xa = find_exit(x, nx, ra->pid);
	const struct sprobe_pause_exit *xb = find_exit(x, nx, rb->pid);
	const struct sprobe_pause_exit *xg = find_exit(x, nx, rg->pid);
	const struct sprobe_pause_exit *xl = find_exit(x, nx, rl->pid);
	assert_non_null(xl);
	assert_non_null(xr);
	assert_non_null(xa);
	assert_non_null(xb);
	assert_non_null(xg);
	for (size_t i = 0; i < nx; i++)
		print_message("exit: tgid %d ppid %d tid %d comm %s status 0x%x\n", x[i].tgid,
			      x[i].ppid, x[i].tid, x[i].comm, (unsigned)x[i].exit_code);
	assert_int_equal(xr->exit_code, 7 << 8);
	assert_int_equal(xa->exit_code, 3 << 8);
	assert_int_equal(xb->exit_code, SIGKILL);
	assert_int_equal(xg->exit_code, 5 << 8);
	print_message("R waited: A 0x%x B 0x%x L 0x%x\n", (unsigned)rw->kid_status[0],
		      (unsigned)rw->kid_status[1], (unsigned)rw->kid_status[2]);
	assert_true(xl->exit_code == 11 << 8 || xl->exit_code == 12 << 8);
	assert_true(xl->tid != rl->pid);	/* the last thread was not the leader */
	/* The kernel's status is what wait(2) gives the parent: ours for R
	 * and the orphaned G, R's for A, B and L. */
	assert_int_equal(rw->kid[0], ra->pid);
	assert_int_equal(rw->kid[1], rb->pid);
	assert_int_equal(rw->kid[2], rl->pid);
	assert_int_equal(xa->exit_code, rw->kid_status[0]);
	assert_int_equal(xb->exit_code, rw->kid_status[1]);
	assert_int_equal(xl->exit_code, rw->kid_status[2]);
	assert_int_equal(xr->exit_code, st_root);
	assert_int_equal(xg->exit_code, st_grand);
	assert_true(WIFEXITED(st_out) && WEXITSTATUS(st_out) == 4);
	assert_int_equal(xr->ppid, 0);
	assert_int_equal(xa->ppid, root);
	assert_int_equal(xb->ppid, root);
	assert_int_equal(xg->ppid, rb->pid);
	assert_int_equal(xr->fork_ns, 0);
	assert_true(xa->fork_ns > 0 && xa->fork_ns < xa->exit_ns);
	assert_true(xg->fork_ns > xb->fork_ns);
	/* Ordered as they happened: G outlives B, R reaps A and B first. */
	assert_true(xb->exit_ns < xg->exit_ns);
	assert_true(xa->exit_ns < xr->exit_ns && xb->exit_ns < xr->exit_ns &&
		    xl->exit_ns < xr->exit_ns);
	assert_string_equal(xb->comm, "tree-b");
	const char *base = strrchr(self_exe, '/');
	base = base ? base + 1 : self_exe;
	assert_memory_equal(xa->comm, base, strnlen(base, sizeof(xa->comm) - 1));
	/* Every window of a process comes before its exit. */
	for (size_t i = 0; i < nk; i++) {
		const struct sprobe_pause_exit *e = find_exit(x, nx, kw[i].tgid);
		assert_non_null(e);
		assert_true(kw[i].sigreturn_ns <= e->exit_ns);
	}
}

static void test_tree_windows_and_exits(void **state)
{
	tree_windows_and_exits();
}

/* The same on the path for kernels whose sched_process_exit has no
 * group_dead argument: R and B end with two threads, whose exits may
 * both see signal->live at 0; still one exit record each. */
static void test_tree_exits_without_group_dead_arg(void **state)
{
	sprobe_pause__test_ignore_group_dead(true);
	tree_windows_and_exits();
	sprobe_pause__test_ignore_group_dead(false);
}

/* The map-full test's root: forks three children that all wait until the
 * last is forked (so none has left the map), then releases them. */
static void full_root(int gate, const char *unused)
{
	int hold[2];
	char c;

	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	if (pipe(hold) != 0)
		_exit(131);
	for (int i = 0; i < 3; i++) {
		pid_t k = fork();
		if (k < 0)
			_exit(132);
		if (k == 0) {
			struct report r;
			close(hold[1]);
			while (read(hold[0], &c, 1) < 0 && errno == EINTR)
				;
			report_init(&r, R_CHILD);
			do_windows(&r, NWIN);
			send_report(report_fd, &r);
			_exit(10 + i);
		}
	}
	close(hold[1]);	/* all three forked: let them go */
	while (wait(NULL) > 0)
		;
	_exit(0);
}

/* max_procs 2: R and its first child are followed, the other two forks
 * find the map full, are counted, and are not followed. */
static void test_tree_map_full_counted(void **state)
{
	int rep[2];

	assert_int_equal(pipe(rep), 0);
	report_fd = rep[1];
	int gate;
	pid_t root = fork_gated(&gate, full_root, NULL);
	struct sprobe_pause *p = load_or_skip(root, true, 2, sizeof(struct sprobe_pause_opts));
	assert_non_null(p);
	assert_int_equal(write(gate, "g", 1), 1);
	close(gate);
	close(rep[1]);
	report_fd = -1;
	struct report reps[4];
	size_t nr = read_reports(rep[0], reps, 4);
	close(rep[0]);
	assert_int_equal(nr, 3);
	int st;
	assert_int_equal(waitpid(root, &st, 0), root);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

	collect_exits(p, 2);
	size_t nk, nx;
	const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(p, &nk);
	const struct sprobe_pause_exit *x = sprobe_pause__exits(p, &nx);
	struct sprobe_pause_stats ps;
	assert_int_equal(sprobe_pause__stats(p, &ps), 0);
	print_message("companion: followed %lu procs_full %lu exits %lu windows %zu\n",
		      (unsigned long)ps.followed, (unsigned long)ps.procs_full,
		      (unsigned long)ps.exits, nk);
	assert_int_equal(ps.followed, 2);
	assert_int_equal(ps.procs_full, 2);
	assert_int_equal(nx, 2);
	assert_non_null(find_exit(x, nx, root));
	/* Exactly one child is followed: its windows and exit are there, the
	 * other two children have neither. */
	int followed_children = 0;
	for (size_t i = 0; i < nr; i++) {
		size_t c = count_tgid(kw, nk, reps[i].pid);
		const struct sprobe_pause_exit *e = find_exit(x, nx, reps[i].pid);
		if (c) {
			followed_children++;
			check_process_windows(kw, nk, reps[i].pid, reps[i].w, reps[i].nwin);
			assert_non_null(e);
			assert_true(WIFEXITED(e->exit_code) && WEXITSTATUS(e->exit_code) >= 10);
		} else {
			assert_null(e);
		}
	}
	assert_int_equal(followed_children, 1);
	assert_int_equal(nk, reps[0].nwin);
}

/* Without follow_children: the target alone, as before, now with its
 * windows' tgid and its exit. Its child is not followed. The options are
 * those of a caller built before follow_children existed (sz ends before
 * it), with the field's bytes set: the loader must not read them. */
static void single_root(int gate, const char *unused)
{
	struct report r;
	char c;

	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	install_handler();
	report_init(&r, R_ROOT);
	do_windows(&r, NWIN);
	send_report(report_fd, &r);
	pid_t k = fork();
	if (k == 0) {
		report_init(&r, R_CHILD);
		do_windows(&r, NWIN);
		send_report(report_fd, &r);
		_exit(2);
	}
	waitpid(k, NULL, 0);
	_exit(6);
}

static void test_single_tgid_unchanged(void **state)
{
	int rep[2];

	assert_int_equal(pipe(rep), 0);
	report_fd = rep[1];
	int gate;
	pid_t root = fork_gated(&gate, single_root, NULL);
	struct sprobe_pause *p = load_or_skip(root, true, 0,
					      offsetof(struct sprobe_pause_opts, follow_children));
	assert_non_null(p);
	assert_int_equal(write(gate, "g", 1), 1);
	close(gate);
	close(rep[1]);
	report_fd = -1;
	struct report reps[4];
	size_t nr = read_reports(rep[0], reps, 4);
	close(rep[0]);
	assert_int_equal(nr, 2);
	int st;
	assert_int_equal(waitpid(root, &st, 0), root);

	/* The exit record is written before the process becomes a zombie, so
	 * once waitpid() has returned, reading what the ring buffer holds,
	 * without waiting, finds it. */
	while (sprobe_pause__poll(p, 0) > 0)
		;
	size_t nk, nx;
	const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(p, &nk);
	const struct sprobe_pause_exit *x = sprobe_pause__exits(p, &nx);
	struct sprobe_pause_stats ps;
	assert_int_equal(sprobe_pause__stats(p, &ps), 0);
	const struct report *rr = find_role(reps, nr, R_ROOT);
	const struct report *rc = find_role(reps, nr, R_CHILD);
	check_process_windows(kw, nk, root, rr->w, rr->nwin);
	assert_int_equal(nk, rr->nwin);
	assert_int_equal(count_tgid(kw, nk, rc->pid), 0);
	assert_int_equal(ps.followed, 1);
	assert_int_equal(ps.procs_full, 0);
	assert_int_equal(nx, 1);
	assert_int_equal(x[0].tgid, root);
	assert_int_equal(x[0].exit_code, st);
	assert_int_equal(x[0].exit_code, 6 << 8);
}

/* Timer mode's process-directed generations wait in each process's own
 * FIFO. R queues two while the signal is blocked; its child C then opens
 * its windows (each taking a generation at once); only then does R unblock
 * and take its two. With one FIFO for all, C would take R's generations
 * (generate before C sent anything) and R C's. Every window must find its
 * own generation: si_code SI_QUEUE, flagged GROUP, generate after send. */
static void timer_root(int gate, const char *unused)
{
	struct report r;
	int go[2], back[2];
	char c;

	while (read(gate, &c, 1) < 0 && errno == EINTR)
		;
	if (pipe(go) != 0 || pipe(back) != 0)
		_exit(140);
	pid_t k = fork();
	if (k < 0)
		_exit(141);
	if (k == 0) {
		report_init(&r, R_CHILD);
		while (read(go[0], &c, 1) < 0 && errno == EINTR)
			;
		do_windows_how(&r, MAXW, true);
		if (write(back[1], "d", 1) != 1)
			_exit(142);
		send_report(report_fd, &r);
		_exit(8);
	}
	report_init(&r, R_ROOT);
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, TEST_SIGNO);
	sigprocmask(SIG_BLOCK, &set, &old);
	uint64_t sent[2];
	for (int i = 0; i < 2; i++) {
		sent[i] = mono_ns();
		if (sigqueue(getpid(), TEST_SIGNO, (union sigval){ .sival_int = i }) != 0)
			_exit(143);
	}
	if (write(go[1], "g", 1) != 1)
		_exit(144);
	while (read(back[0], &c, 1) < 0 && errno == EINTR)
		;
	tw = r.w;
	tw_cap = MAXW;
	tw_n = 0;
	sigprocmask(SIG_SETMASK, &old, NULL);	/* both run here */
	if (tw_n != 2)
		_exit(145);
	for (int i = 0; i < 2; i++)
		r.w[i].signal_ns = sent[i];
	r.nwin = 2;
	tw = NULL;
	do_windows_how(&r, MAXW - 2, true);
	send_report(report_fd, &r);
	waitpid(k, NULL, 0);
	_exit(9);
}

static void test_tree_timer_mode_group_signals(void **state)
{
	int rep[2];

	assert_int_equal(pipe(rep), 0);
	report_fd = rep[1];
	int gate;
	pid_t root = fork_gated(&gate, timer_root, NULL);
	struct sprobe_pause *p = load_mode_or_skip(root, true, 0, sizeof(struct sprobe_pause_opts),
						   SPROBE_PAUSE_MODE_TIMER);
	assert_non_null(p);
	assert_int_equal(write(gate, "g", 1), 1);
	close(gate);
	close(rep[1]);
	report_fd = -1;
	struct report reps[4];
	size_t nr = read_reports(rep[0], reps, 4);
	close(rep[0]);
	assert_int_equal(nr, 2);
	int st;
	assert_int_equal(waitpid(root, &st, 0), root);
	collect_exits(p, 2);
	size_t nk, nx;
	const struct sprobe_pause_kwindow *kw = sprobe_pause__windows(p, &nk);
	sprobe_pause__exits(p, &nx);
	const struct report *rr = find_role(reps, nr, R_ROOT);
	const struct report *rc = find_role(reps, nr, R_CHILD);
	assert_int_equal(rr->nwin, MAXW);
	assert_int_equal(rc->nwin, MAXW);
	check_windows_as(kw, nk, root, rr->w, rr->nwin, SI_QUEUE, SPROBE_PAUSE_KW_GROUP);
	check_windows_as(kw, nk, rc->pid, rc->w, rc->nwin, SI_QUEUE, SPROBE_PAUSE_KW_GROUP);
	assert_int_equal(nk, 2 * MAXW);
	assert_int_equal(nx, 2);
}

/* ------------------------------------------------------------------ */
/* Splicing one process's windows (no BPF needed)                      */

static size_t count_kwindows(const char *path, uint32_t tid)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;
	size_t n = 0;
	bool trailer_last = false;

	assert_non_null(rd);
	while (sprobe_datafile_reader__next(rd, &rec) > 0) {
		trailer_last = rec.type == SPROBE_DF_TRAILER;
		if (rec.type == SPROBE_DF_KWINDOW && (!tid || rec.kwindow.tid == tid))
			n++;
	}
	assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
	assert_true(trailer_last);
	sprobe_datafile_reader__free(rd);
	return n;
}

static void test_splice_windows_of_one_tgid(void **state)
{
	char dir[] = "/tmp/sprobe-tree-XXXXXX", path[64];

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/part.data", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	struct sprobe_datafile_writer *w = sprobe_datafile_writer__new(fd, NULL);
	assert_non_null(w);
	struct sprobe_df_record h = { .type = SPROBE_DF_HEADER, .header = { .pid = 100 } };
	assert_int_equal(sprobe_datafile_writer__write(w, &h), 0);
	struct sprobe_df_trailer tr = { .end_mono_ns = 1 };
	assert_int_equal(sprobe_datafile_writer__finish(w, &tr), 0);
	sprobe_datafile_writer__free(w);
	close(fd);

	/* Windows of processes 100 (tids 100, 101) and 200 (tid 200). */
	struct sprobe_pause_kwindow kw[5] = {
		{ .tid = 100, .tgid = 100, .deliver_ns = 10, .sigreturn_ns = 11 },
		{ .tid = 200, .tgid = 200, .deliver_ns = 12, .sigreturn_ns = 13 },
		{ .tid = 101, .tgid = 100, .deliver_ns = 14, .sigreturn_ns = 15 },
		{ .tid = 200, .tgid = 200, .deliver_ns = 16, .sigreturn_ns = 17 },
		{ .tid = 100, .tgid = 100, .deliver_ns = 18, .sigreturn_ns = 19 },
	};
	assert_int_equal(sprobe_pause__splice_windows_of(NULL, kw, 5, 100), -EINVAL);
	assert_int_equal(sprobe_pause__splice_windows_of(path, NULL, 5, 100), -EINVAL);
	assert_int_equal(sprobe_pause__splice_windows_of(path, kw, 5, -1), -EINVAL);
	/* No window of 300: the file is left alone. */
	assert_int_equal(sprobe_pause__splice_windows_of(path, kw, 5, 300), 0);
	assert_int_equal(count_kwindows(path, 0), 0);
	assert_int_equal(sprobe_pause__splice_windows_of(path, kw, 5, 100), 0);
	assert_int_equal(count_kwindows(path, 0), 3);
	assert_int_equal(count_kwindows(path, 200), 0);
	assert_int_equal(count_kwindows(path, 101), 1);
	/* The old call (and tgid 0) still takes every window. */
	assert_int_equal(sprobe_pause__splice_windows(path, kw, 5), 0);
	assert_int_equal(count_kwindows(path, 0), 8);
	assert_int_equal(count_kwindows(path, 200), 2);
	unlink(path);
	rmdir(dir);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_splice_windows_of_one_tgid),
	cmocka_unit_test(test_single_tgid_unchanged),
	cmocka_unit_test(test_tree_windows_and_exits),
	cmocka_unit_test(test_tree_exits_without_group_dead_arg),
	cmocka_unit_test(test_tree_map_full_counted),
	cmocka_unit_test(test_tree_timer_mode_group_signals),
};

int main(int argc, char **argv)
{
	/* The exec'd child of test_tree_windows_and_exits. */
	if (argc == 3 && strcmp(argv[1], "--tree-exec-child") == 0)
		return exec_child_main(atoi(argv[2]));
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	if (n <= 0)
		return 1;
	self_exe[n] = '\0';
	/* Every process of a tree inherits the handler. */
	install_handler();
	const char *filter = argc > 1 ? argv[1] : getenv("SPROBE_TEST_FILTER");
	if (filter && *filter)
		cmocka_set_test_filter(filter);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
