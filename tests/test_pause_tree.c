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
 *
 * One process without follow_children, and splicing one process's windows,
 * are in test_pause_tree_single.c; the fixtures in pause_tree_fixture.h.
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
#include "pause_tree_fixture.h"

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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_tree_windows_and_exits),
	cmocka_unit_test(test_tree_exits_without_group_dead_arg),
	cmocka_unit_test(test_tree_map_full_counted),
	cmocka_unit_test(test_tree_timer_mode_group_signals),
};

PAUSE_TREE_MAIN(tests)
