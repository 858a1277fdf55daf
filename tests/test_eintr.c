/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Captures cause no EINTR in the program (userspace/agent/wait_wrappers.c,
 * userspace/agent/handler_table.c):
 * a real program (tests/workloads/waiter.c) whose threads wait in every
 * wrapped call, run under `stackprobe record -q -F 999`, with and without
 * zero-pause.
 *
 *   - no call sees EINTR, and each thread's 20 waits of 20 ms take what
 *     they take unsampled: >= 400 ms (the kernel never times out early)
 *     and < 400 ms + a generous bound for a loaded machine (a resume that
 *     restarted the full timeout would take far longer, one that did not
 *     resume far shorter);
 *   - the program's own SIGUSR1 (no SA_RESTART) still interrupts each call,
 *     and sigaction/signal() read back the program's handler;
 *   - a usleep(3 s) lasts 3 s under --no-zero-pause.
 * The control runs the same program with STACKPROBE_RESUME_WAITS=0: the
 * captures do interrupt the calls there, so the zero counts above are not
 * the sampler missing them. Run the whole file with
 * STACKPROBE_RESUME_WAITS=0 in the environment to see the checks fail.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "run_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/eintr"
#define WAITER "build/waiter"

/* Waits per thread and their length (waiter time N MS). */
#define N_WAITS 20
#define WAIT_MS 20
/* A loaded machine (2 CPUs shared with other builds) delays wake-ups;
 * measured on a quiet one: < 30 ms over 400 ms. */
#define SLACK_MS 600

/* The calls waiter prints in time mode (pause and sigsuspend have no
 * timeout: own mode only). */
static const char *const time_calls[] = {
	"poll",		 "ppoll",	  "select",	   "pselect",
	"epoll_wait",	 "epoll_pwait",	  "epoll_pwait2",  "nanosleep",
	"clock_nanosleep", "clock_nanosleep_abs", "usleep", "sem_timedwait",
	"sem_clockwait", "sigtimedwait", "semtimedop", "sem_wait",
	"sigwaitinfo",	 "msgrcv",	  "semop",
};
#define N_TIME_CALLS (sizeof(time_calls) / sizeof(time_calls[0]))

static int setup_dir(void **state)
{
	(void)state;
	return system("mkdir -p " OUT) == 0 ? 0 : -1;
}

/* The value of key= on the line "NAME ..." of out; -1 when missing. */
static double field(const char *out, const char *name, const char *key)
{
	char pat[96], kpat[32];
	snprintf(pat, sizeof(pat), "%s ", name);
	snprintf(kpat, sizeof(kpat), " %s=", key);
	for (const char *p = out; (p = strstr(p, pat)); p++) {
		if (p != out && p[-1] != '\n')
			continue;
		const char *eol = strchr(p, '\n'), *k = strstr(p, kpat);
		if (k && (!eol || k < eol))
			return strtod(k + strlen(kpat), NULL);
		return -1;
	}
	return -1;
}

/* waiter ARGS under record at 999 Hz (env: prefix of variables). */
static char *record(const char *env, const char *zp, const char *args, const char *tag)
{
	char cmd[512], *out;
	snprintf(cmd, sizeof(cmd),
		 "%s " CLI " record -q -F 999 %s -o " OUT "/%s.data -- " WAITER " %s 2>&1", env, zp,
		 tag, args);
	int rc = sprobe_test_run(cmd, &out);
	if (rc != 0)
		print_message("%s: rc %d\n%s", cmd, rc, out);
	assert_int_equal(rc, 0);
	/* The agent had nothing to complain about. */
	assert_null(strstr(out, "stackprobe agent:"));
	return out;
}

static void check_times(const char *zp, const char *tag)
{
	char args[64];
	snprintf(args, sizeof(args), "time %d %d", N_WAITS, WAIT_MS);
	char *out = record("", zp, args, tag);
	int bad = 0;

	for (size_t i = 0; i < N_TIME_CALLS; i++) {
		double e = field(out, time_calls[i], "eintr"), ms = field(out, time_calls[i], "ms");
		bool ok = e == 0 && ms >= N_WAITS * WAIT_MS && ms < N_WAITS * WAIT_MS + SLACK_MS;
		if (!ok) {
			print_message("%s: %s eintr=%g ms=%g (want 0 and [%d, %d) ms)\n", tag,
				      time_calls[i], e, ms, N_WAITS * WAIT_MS,
				      N_WAITS * WAIT_MS + SLACK_MS);
			bad++;
		}
	}
	free(out);
	assert_int_equal(bad, 0);
}

static void test_no_eintr_zero_pause(void **state)
{
	(void)state;
	check_times("", "time-zp");
}

static void test_no_eintr_no_zero_pause(void **state)
{
	(void)state;
	check_times("--no-zero-pause", "time-nozp");
}

/* The program's SIGUSR1 interrupts every call (waiter own: 5 s timeouts,
 * so "own=1" with a short time is the signal, not a timeout). */
static void test_own_signal_still_interrupts(void **state)
{
	static const char *const own_only[] = { "pause", "sigsuspend" };
	(void)state;
	char *out = record("", "--no-zero-pause", "own", "own");
	int bad = 0;

	assert_non_null(strstr(out, "readback=ok\n"));
	for (size_t i = 0; i < N_TIME_CALLS + 2; i++) {
		const char *c = i < N_TIME_CALLS ? time_calls[i] : own_only[i - N_TIME_CALLS];
		double own = field(out, c, "own"), ms = field(out, c, "ms");
		if (own != 1 || ms < 0 || ms >= 4000) {
			print_message("%s own=%g ms=%g (want EINTR well before 5 s)\n", c, own, ms);
			bad++;
		}
	}
	free(out);
	assert_int_equal(bad, 0);
}

/* The case: a usleep(3 s) that does not check its result ended
 * after milliseconds under --no-zero-pause. */
static void test_usleep_lasts(void **state)
{
	(void)state;
	char *out = record("", "--no-zero-pause", "usleep 3000000", "usleep");
	double ms = field(out, "usleep", "ms");
	print_message("usleep(3 s) under --no-zero-pause at 999 Hz: %.1f ms\n", ms);
	assert_true(ms >= 3000);
	assert_true(ms < 3000 + SLACK_MS);
	free(out);
}

/* Control: with resuming off the captures interrupt the timed calls (each
 * of 5 waits of 20 ms is hit by ~20 capture signals), so the zero counts
 * of the tests above are the wrappers' doing. */
static void test_control_without_resume(void **state)
{
	(void)state;
	char *out = record("STACKPROBE_RESUME_WAITS=0", "--no-zero-pause", "time 5 20", "control");
	int interrupted = 0;

	for (size_t i = 0; i < N_TIME_CALLS; i++)
		if (field(out, time_calls[i], "eintr") > 0)
			interrupted++;
	print_message("resume off: %d of %zu calls saw EINTR\n", interrupted, N_TIME_CALLS);
	/* sem_wait is restarted by glibc's futex path (0 there); every
	 * other call must have seen some. */
	assert_true(interrupted >= (int)N_TIME_CALLS - 1);
	free(out);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_no_eintr_zero_pause, setup_dir),
	cmocka_unit_test_setup(test_no_eintr_no_zero_pause, setup_dir),
	cmocka_unit_test_setup(test_own_signal_still_interrupts, setup_dir),
	cmocka_unit_test_setup(test_usleep_lasts, setup_dir),
	cmocka_unit_test_setup(test_control_without_resume, setup_dir),
};

SPROBE_TEST_MAIN(tests)
