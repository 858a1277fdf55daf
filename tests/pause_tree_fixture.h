/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the process-tree tests of the eBPF companion
 * (test_pause_tree.c, test_pause_tree_single.c): what each process of a
 * tree reports, the tree itself, loading the companion or skipping where
 * it cannot exist, the checks on windows and exits, and the programs' main().
 */
#ifndef SPROBE_PAUSE_TREE_FIXTURE_H
#define SPROBE_PAUSE_TREE_FIXTURE_H

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

/* The tests' main(): the exec'd child of test_tree_windows_and_exits
 * (this binary run again with --tree-exec-child), else the cmocka run with
 * the handler every process of a tree inherits installed. */
#define PAUSE_TREE_MAIN(tests)                                              \
	int main(int argc, char **argv)                                     \
	{                                                                   \
		/* The exec'd child of test_tree_windows_and_exits. */      \
		if (argc == 3 && strcmp(argv[1], "--tree-exec-child") == 0) \
			return exec_child_main(atoi(argv[2]));              \
		ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1); \
		if (n <= 0)                                                 \
			return 1;                                           \
		self_exe[n] = '\0';                                         \
		/* Every process of a tree inherits the handler. */         \
		install_handler();                                          \
		const char *filter = argc > 1 ? argv[1] : getenv("SPROBE_TEST_FILTER"); \
		if (filter && *filter)                                      \
			cmocka_set_test_filter(filter);                     \
		return cmocka_run_group_tests(tests, NULL, NULL);           \
	}

#define TEST_SIGNO (SIGRTMIN + 6)
#define NWIN 12			/* windows per process (and per extra thread) */
#define MAXW (2 * NWIN)		/* windows one record can carry */
#define DEADLINE_NS (120ull * 1000 * 1000 * 1000)

static inline uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline pid_t gettid_(void)
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
static inline void handler(int sig, siginfo_t *si, void *uc)
{
	uint64_t entry = mono_ns();

	if (!tw || tw_n >= tw_cap)
		return;
	tw[tw_n].tid = gettid_();
	tw[tw_n].entry_ns = entry;
	tw[tw_n].exit_ns = mono_ns();
	tw_n++;
}

static inline void install_handler(void)
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
static inline void do_windows_how(struct report *r, uint32_t n, bool process_directed)
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

static inline void do_windows(struct report *r, uint32_t n)
{
	do_windows_how(r, n, false);
}

static inline void send_report(int fd, const struct report *r)
{
	if (write(fd, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		_exit(122);
}

static inline void report_init(struct report *r, uint32_t role)
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
static inline int exec_child_main(int fd)
{
	struct report r;

	install_handler();
	report_init(&r, R_EXEC_POST);
	do_windows(&r, NWIN);
	send_report(fd, &r);
	_exit(3);
}

static inline void *block_forever(void *arg)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;)
		pause();
	return NULL;
}

static inline void *thread_windows(void *arg)
{
	do_windows(arg, NWIN);
	return NULL;
}

/* Grandchild G: waits until its parent B is dead (EOF on B's pipe), so it
 * lives on orphaned, then windows and exit(5). */
static inline void grandchild(int from_b, pid_t b)
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
static inline void fork_child(void)
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
static inline bool thread_exited(pid_t tid)
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

static inline void *outlive_leader(void *arg)
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
static inline void leader_exit_child(void)
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
static inline void exec_child(const char *self)
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
static inline void root_main(int gate, const char *self)
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
static inline void outside_main(void)
{
	struct report r;

	report_init(&r, R_OUTSIDE);
	do_windows(&r, NWIN);
	send_report(report_fd, &r);
	_exit(4);
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

/* Companions are never freed: detaching waits for an RCU-tasks grace period
 * (seconds on a loaded VM); the kernel frees them at exit. Kept reachable
 * here for LeakSanitizer. */
static struct sprobe_pause *kept[8];

/* NULL only after skip() (which does not return) or a failed assertion. */
static inline struct sprobe_pause *load_mode_or_skip(pid_t tgid, bool follow, uint32_t max_procs,
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

static inline struct sprobe_pause *load_or_skip(pid_t tgid, bool follow, uint32_t max_procs, size_t sz)
{
	return load_mode_or_skip(tgid, follow, max_procs, sz, SPROBE_PAUSE_MODE_PROBE);
}

/* Fork a process that waits on a gate pipe, then runs fn(gate, arg). */
static inline pid_t fork_gated(int *gate_w, void (*fn)(int, const char *), const char *arg)
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
static inline size_t read_reports(int fd, struct report *out, size_t cap)
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
static inline void collect_exits(struct sprobe_pause *p, size_t want)
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

static inline const struct report *find_role(const struct report *r, size_t n, uint32_t role)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].role == role)
			return &r[i];
	fail_msg("no report of role %u", role);
	return NULL;
}

static inline const struct sprobe_pause_exit *find_exit(const struct sprobe_pause_exit *x, size_t n,
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

static inline size_t count_tgid(const struct sprobe_pause_kwindow *kw, size_t nk, pid_t tgid)
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
static inline void check_windows_as(const struct sprobe_pause_kwindow *kw, size_t nk, pid_t tgid,
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

static inline void check_process_windows(const struct sprobe_pause_kwindow *kw, size_t nk, pid_t tgid,
				  const struct sprobe_pause_swindow *sw, size_t ns)
{
	check_windows_as(kw, nk, tgid, sw, ns, SI_TKILL, 0);
}

static char self_exe[PATH_MAX];

static inline void root_trampoline(int gate, const char *self)
{
	root_main(gate, self);
}


#endif
