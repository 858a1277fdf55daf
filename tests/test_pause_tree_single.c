/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The eBPF companion on one process of a tree: without follow_children the
 * target alone is followed, as before; one process's windows spliced out
 * of a recording (no BPF needed). Skipped only where the companion cannot
 * exist, with the reason printed. The fixtures in pause_tree_fixture.h.
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
};

PAUSE_TREE_MAIN(tests)
