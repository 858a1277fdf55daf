/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent never writes into a descriptor it does not own and never
 * takes the program's descriptors (userspace/common/fds.h, userspace/agent/
 * fd_wrappers.c, docs/AGENT.md "Descriptors"): real programs
 * (tests/workloads/fdguest.c) that close every descriptor at start,
 * close_range, closefrom, dup2 over the agent's numbers, raw-close the
 * agent's data file and reuse its number, or lower RLIMIT_NOFILE, under
 * `stackprobe record -F 999` and under the agent alone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackprobe/report.h>

#include "userspace/common/fds.h"
#include "run_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/fds"
#define GUEST "build/fdguest"

static int setup_dir(void **state)
{
	(void)state;
	return system("mkdir -p " OUT) == 0 ? 0 : -1;
}

/* Samples under guest_work in a data file (folded report). */
static unsigned long guest_samples(const char *data)
{
	char cmd[512], *out;
	unsigned long total = 0;

	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format folded", data);
	if (sprobe_test_run(cmd, &out) != 0) {
		free(out);
		return 0;
	}
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');

		if (sp && strstr(line, "guest_work"))
			total += strtoul(sp + 1, NULL, 10);
	}
	free(out);
	return total;
}

/* One daemon-style run under record at 999 Hz: the program's 20 logs hold
 * exactly what it wrote (fdguest checks, exit 0), and the recording holds
 * samples of the work it did after closing everything. */
static void daemon_run(const char *how, int runs)
{
	for (int i = 0; i < runs; i++) {
		char cmd[512], data[128], *out;
		unsigned long n = 0;

		/* A run whose captures all timed out (both CPUs taken by other
		 * work for its 300 ms) shows nothing about sampling: it is
		 * repeated, at most twice. Its logs and data file are checked
		 * every time. */
		for (int attempt = 0; attempt < 3 && n == 0; attempt++) {
			snprintf(data, sizeof(data), OUT "/%s-%d.data", how, i);
			snprintf(cmd, sizeof(cmd),
				 "mkdir -p " OUT "/%s-%d && " CLI " record -q -F 999 -o %s -- " GUEST
				 " %s " OUT "/%s-%d 300 2>&1",
				 how, i, data, how, how, i);
			int rc = sprobe_test_run(cmd, &out);
			if (rc != 0 || strstr(out, "stackprobe agent:"))
				print_message("%s run %d: rc %d\n%s", how, i, rc, out);
			assert_int_equal(rc, 0);
			/* The agent had nothing to complain about. */
			assert_null(strstr(out, "stackprobe agent:"));
			free(out);

			struct sprobe_report_opts ro = { .sz = sizeof(ro) };
			struct sprobe_report *r = sprobe_report__new(&ro);
			assert_non_null(r);
			assert_int_equal(sprobe_report__load_file(r, data), 0);
			assert_int_equal(sprobe_report__status(r), SPROBE_DF_COMPLETE);
			sprobe_report__free(r);
			/* All its work comes after the close, so any sample of it
			 * shows the recording went on (an agent whose data
			 * descriptor was closed has none). Quiet machine: ~280 of
			 * ~290 captures. */
			n = guest_samples(data);
			if (n < 20)
				print_message("%s run %d: %lu samples in guest_work\n", how, i, n);
		}
		assert_true(n >= 1);
	}
}

static void test_close_loop(void **state)
{
	daemon_run("loop", 20);
}

static void test_close_range(void **state)
{
	daemon_run("range", 5);
}

static void test_closefrom(void **state)
{
	daemon_run("from", 5);
}

static void test_dup2_low_numbers(void **state)
{
	daemon_run("dup2", 5);
}

/* dup2 over exactly the numbers the agent holds: they are re-homed. */
static void test_dup2_onto_agent_fds(void **state)
{
	daemon_run("target", 5);
}

/* A raw close(2) the wrappers cannot see, then a file of the program's at
 * the same number: the writer notices (device/inode) and stops; the
 * program's file holds only its own lines; the agent says why. */
static void test_raw_close_then_reuse(void **state)
{
	char *out;
	int rc = sprobe_test_run("mkdir -p " OUT "/raw && STACKPROBE_OUTPUT=" OUT "/raw.data "
		     "STACKPROBE_FREQ=999 LD_PRELOAD=build/libstackprobe.so " GUEST " raw " OUT
		     "/raw 600 2>&1",
		     &out);
	print_message("%s", out);
	assert_int_equal(rc, 0); /* own00 and the 20 logs hold exactly their lines */
	assert_non_null(strstr(out, "reused "));
	assert_non_null(strstr(out, "closed or replaced the data file's descriptor behind"));
	free(out);
	/* What was written before the close is a readable recording. */
	struct sprobe_report_opts ro = { .sz = sizeof(ro) };
	struct sprobe_report *r = sprobe_report__new(&ro);
	assert_non_null(r);
	assert_int_equal(sprobe_report__load_file(r, OUT "/raw.data"), 0);
	sprobe_report__free(r);
}

static int opened(const char *out)
{
	const char *p = strstr(out, "opened ");

	return p ? atoi(p + 7) : -1;
}

/* RLIMIT_NOFILE lowered to 40 by the program, 8 threads: it opens as many
 * files with the agent (wall mode, zero-pause: two /proc files per thread
 * before this change) as without. The agent's per-use /proc reads hold
 * at most two descriptors at once (a zero-pause read keeps a thread's
 * schedstat open across its syscall-file read and the copy), for
 * microseconds, or longer when the probe is preempted there on a loaded
 * machine (seen: 34 of 36 in a CI run with another build on both CPUs), so
 * an open racing them may see two fewer: allowed. Before the registry the
 * program got 10. */
static void test_tight_rlimit(void **state)
{
	char *plain, *probed;
	int rc = sprobe_test_run(GUEST " rlimit 64", &plain);
	assert_int_equal(rc, 0);
	int n0 = opened(plain);
	int worst = 1000, runs = 5;

	for (int i = 0; i < runs; i++) {
		rc = sprobe_test_run(CLI " record -q -F 999 -o " OUT "/rlimit.data -- " GUEST " rlimit 64 2>&1",
			 &probed);
		assert_int_equal(rc, 0);
		int n = opened(probed);
		if (n < worst)
			worst = n;
		free(probed);
	}
	print_message("without the agent: %d files; with it, fewest of %d runs: %d\n", n0, runs,
		      worst);
	assert_true(n0 >= 30);
	assert_true(worst >= 20); /* the program: 20 files */
	assert_true(worst >= n0 - 2);
	free(plain);
}

/* The registry itself, in this process. */
static void test_registry_places_high_and_refuses_foreign(void **state)
{
	int h = sprobe_fd__open("/proc/self/status", O_RDONLY, 0, SPROBE_FD_KEEP);
	assert_true(h >= 0);
	int fd = sprobe_fd__get(h);
	assert_true(fd >= 0);
	/* Top region, close-on-exec. */
	assert_true(fd >= SPROBE_FD_TOP - SPROBE_FD_MAX_KEEP - (int)sprobe_fd__budget() ||
		    fd >= (int)sysconf(_SC_OPEN_MAX) - 64);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_true(sprobe_fd__owned(fd));
	sprobe_fd__put(h);
	assert_int_equal(sprobe_fd__verify(h), 0);

	/* Re-homing: another number, still the same file, old one free. */
	assert_int_equal(sprobe_fd__rehome(fd), 0);
	int fd2 = sprobe_fd__get(h);
	assert_true(fd2 >= 0 && fd2 != fd);
	sprobe_fd__put(h);
	assert_false(sprobe_fd__owned(fd));
	assert_true(sprobe_fd__owned(fd2));
	assert_int_equal(sprobe_fd__verify(h), 0);
	close(fd); /* the stale reference (the dup2 wrapper's call replaces it) */

	/* A raw close and a reuse of the number: verify says stale, close
	 * leaves the foreign file open. */
	close(fd2);
	int mine = open("/dev/null", O_RDONLY);
	int moved = fcntl(mine, F_DUPFD, fd2);
	assert_int_equal(moved, fd2);
	close(mine);
	assert_int_equal(sprobe_fd__verify(h), -ESTALE);
	assert_int_equal(sprobe_fd__get(h), -EBADF);
	sprobe_fd__close(h);
	assert_int_equal(fcntl(fd2, F_GETFD) >= 0, 1); /* still open: not ours to close */
	close(fd2);

	/* A CACHE descriptor is refused while the limit is tight, and held
	 * within the budget otherwise. */
	struct rlimit rl, tight;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	tight = rl;
	tight.rlim_cur = 100;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &tight), 0);
	assert_int_equal(sprobe_fd__budget(), 0);
	assert_int_equal(sprobe_fd__open("/proc/self/stat", O_RDONLY, 0, SPROBE_FD_CACHE), -EDQUOT);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur >= SPROBE_FD_MIN_LIMIT_FOR_CACHE) {
		h = sprobe_fd__open("/proc/self/stat", O_RDONLY, 0, SPROBE_FD_CACHE);
		assert_true(h >= 0);
		sprobe_fd__close(h);
	}
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_registry_places_high_and_refuses_foreign),
	cmocka_unit_test_setup(test_close_loop, setup_dir),
	cmocka_unit_test_setup(test_close_range, setup_dir),
	cmocka_unit_test_setup(test_closefrom, setup_dir),
	cmocka_unit_test_setup(test_dup2_low_numbers, setup_dir),
	cmocka_unit_test_setup(test_dup2_onto_agent_fds, setup_dir),
	cmocka_unit_test_setup(test_raw_close_then_reuse, setup_dir),
	cmocka_unit_test_setup(test_tight_rlimit, setup_dir),
};

SPROBE_TEST_MAIN(tests)
