/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Failure modes of signal-based samplers, each run against build/service
 * (tests/workloads/service.c) at high frequency:
 *  - threads that block every signal are dropped as "blocked", in every
 *    capture while they live, and never sampled;
 *  - signal ownership: the program owns the signal stackprobe would pick,
 *    or the one STACKPROBE_SIGNAL names; every entry point of it;
 *  - deadlock-prone work while sampled: malloc/free, dlopen/dlclose and
 *    dl_iterate_phdr in loops, fork without exec, vfork + exec, a
 *    thread-creation storm, a handler on a small sigaltstack.
 *
 * SPROBE_FAILMODE_FREQ sets the sampling rate (default 999 Hz).
 */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "sprobe_test.h"
#include "failure_modes_fixture.h"

/* Threads that block the signal are dropped as "blocked", in every capture
 * between the first and the last one that saw them; these wait in read()
 * and use no CPU, so the perf-event fallback (which samples CPU only:
 * tests/test_blocked_perf.c) never has a sample of them either. */
struct other_tid {
	uint32_t tid, n;
};

/* Count one more blocked drop of tid (linear: a few hundred tids at most). */
static void other_note(struct other_tid *o, size_t *n, uint32_t tid)
{
	for (size_t i = 0; i < *n; i++)
		if (o[i].tid == tid) {
			o[i].n++;
			return;
		}
	if (*n < 4096)
		o[(*n)++] = (struct other_tid){ tid, 1 };
}

static void test_blocked_threads_dropped_and_counted(void **state)
{
	const char *argv[] = { SERVICE, "--blocked", "3", "--events", "150", NULL };
	char fenv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	/* The signal path's drops are under test: with zero-pause (the
	 * default) a thread that blocks every signal but sleeps in read()
	 * is read without a signal and not dropped (tests/test_zero_pause.c
	 * checks that side). */
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/blocked.data", fenv,
			      "STACKPROBE_ZERO_PAUSE=0", NULL };
	struct run r;
	run_cmd(&r, env, argv, 0, false, NULL, 0);
	assert_int_equal(r.status, 0);

	long blocked[3];
	int nb = 0;
	for (const char *p = r.err; (p = strstr(p, "tid blocked ")) && nb < 3; p++)
		blocked[nb++] = atol(p + 12);
	assert_int_equal(nb, 3);

	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(OUT "/blocked.data");
	assert_non_null(rd);
	struct sprobe_df_record rec;
	/* Per blocked tid: capture index of first and last "blocked" drop,
	 * and how many captures in between listed it. */
	long first[3] = { -1, -1, -1 }, last[3] = { -1, -1, -1 }, seen[3] = { 0 };
	long ncap = 0, blocked_total = 0, blocked_other = 0, samples_of_blocked = 0;
	long samples_before_block = 0;
	struct other_tid others[4096];
	size_t nothers = 0;
	long *cap_has = calloc(1 << 20, sizeof(long));
	assert_non_null(cap_has);
	int rc;
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		if (rec.type == SPROBE_DF_SAMPLE) {
			/* A blocked thread blocks itself first thing, but it
			 * runs unblocked from its start until that call: a
			 * capture may land there, before any capture that
			 * finds it blocked. After that, never. */
			for (int b = 0; b < nb; b++)
				if ((long)rec.sample.tid == blocked[b]) {
					if (first[b] < 0)
						samples_before_block++;
					else
						samples_of_blocked++;
				}
			continue;
		}
		if (rec.type != SPROBE_DF_CAPTURE)
			continue;
		const struct sprobe_df_capture *c = &rec.capture;
		uint32_t sum = 0;
		for (int k = 0; k < SPROBE_DROP__COUNT; k++)
			sum += c->dropped[k];
		/* Every drop has a reason, and the counts add up. */
		assert_int_equal(sum, c->threads_dropped);
		assert_int_equal(c->threads_captured + c->threads_dropped, c->threads_total);
		assert_int_equal(c->dropped[SPROBE_DROP_NONE], 0);
		blocked_total += c->dropped[SPROBE_DROP_BLOCKED];
		long mask = 0;
		for (uint32_t k = 0; k < c->ndropped_tids; k++) {
			if (c->dropped_tids[k].reason != SPROBE_DROP_BLOCKED)
				continue;
			int hit = 0;
			for (int b = 0; b < nb; b++) {
				if ((long)c->dropped_tids[k].tid == blocked[b]) {
					if (first[b] < 0)
						first[b] = ncap;
					last[b] = ncap;
					seen[b]++;
					mask |= 1L << b;
					hit = 1;
				}
			}
			/* Another thread seen blocking everything: a new
			 * thread before pthread_create unblocks its mask. */
			if (!hit) {
				blocked_other++;
				other_note(others, &nothers, c->dropped_tids[k].tid);
			}
		}
		if (ncap < (1 << 20))
			cap_has[ncap] = mask;
		ncap++;
	}
	assert_int_equal(rc, 0);
	sprobe_datafile_reader__free(rd);
	print_message("%ld captures; blocked drops %ld (%ld of other threads, transient); "
		      "samples of the blocked threads before they blocked %ld, after %ld\n",
		      ncap, blocked_total, blocked_other, samples_before_block, samples_of_blocked);
	assert_int_equal(samples_of_blocked, 0);
	for (int b = 0; b < nb; b++) {
		print_message("  tid %ld: blocked in captures %ld..%ld (%ld times)\n", blocked[b],
			      first[b], last[b], seen[b]);
		assert_true(first[b] >= 0);
		/* In every capture of its lifetime, never captured. */
		assert_int_equal(seen[b], last[b] - first[b] + 1);
	}
	/* Other threads are dropped as blocked only while they start (the
	 * storm's threads, inside pthread_create with every signal blocked):
	 * each in a few captures, never for a lifetime like the three above.
	 * Counted per tid rather than as a share of all drops, which depends
	 * on how many storm threads the scheduler lets start per capture. */
	uint32_t worst = 0;
	for (size_t i = 0; i < nothers; i++)
		if (others[i].n > worst)
			worst = others[i].n;
	print_message("  %zu other tids dropped as blocked, at most %u captures each\n", nothers,
		      worst);
	for (int b = 0; b < nb; b++)
		assert_true(worst * 4 < (uint32_t)seen[b]);
	free(cap_has);
	run_free(&r);
}

/*
 * Signal ownership. (a) The program installs, in main(), a handler for
 * SIGRTMIN (what a capturer picking the first free signal would take) or
 * for the one STACKPROBE_SIGNAL named: the program's own signal count must
 * stay exact and no foreign signal may reach its handler. (b) The signal is already
 * taken when the agent starts (inherited SIG_IGN): the agent picks another
 * one, or with STACKPROBE_SIGNAL set refuses with a message; the program
 * runs unchanged either way.
 */
static void test_signal_ownership(void **state)
{
	char fenv[64], own[16];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	snprintf(own, sizeof(own), "%d", SIGRTMIN);
	struct run plain, r;

	/* (b) inherited SIG_IGN on SIGRTMIN: agent picks another signal. */
	const char *argv[] = { SERVICE, "--events", "100", NULL };
	run_cmd(&plain, NULL, argv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	const char *env1[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/ign.data", fenv,
			       NULL };
	run_cmd(&r, env1, argv, SIGRTMIN, false, NULL, 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(OUT "/ign.data");
	struct sprobe_df_record rec;
	long samples = 0;
	assert_non_null(rd);
	while (sprobe_datafile_reader__next(rd, &rec) == 1)
		samples += rec.type == SPROBE_DF_SAMPLE;
	sprobe_datafile_reader__free(rd);
	print_message("SIGRTMIN ignored by the parent: %ld samples on another signal\n", samples);
	assert_true(samples > 0);
	run_free(&r);

	/* (b) STACKPROBE_SIGNAL names the taken one: a clear refusal. */
	char senv[64];
	snprintf(senv, sizeof(senv), "STACKPROBE_SIGNAL=%d", SIGRTMIN);
	const char *env2[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/ign2.data", fenv,
			       senv, NULL };
	run_cmd(&r, env2, argv, SIGRTMIN, false, NULL, 0);
	print_message("STACKPROBE_SIGNAL=%d taken: %.*s\n", SIGRTMIN,
		      (int)strcspn(r.err, "\n"), r.err);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	assert_non_null(strstr(r.err, "stackprobe agent: not sampling"));
	run_free(&r);
	run_free(&plain);

	/* (a) the program takes SIGRTMIN after the agent started: the agent
	 * chose the highest free signal, so no conflict, full sampling. */
	const char *oargv[] = { SERVICE, "--events", "100", "--own-signal", own, NULL };
	run_cmd(&plain, NULL, oargv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	assert_non_null(strstr(plain.out, "own_signal.seen 100\nown_signal.foreign 0\n"));
	const char *env3[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/own.data", fenv,
			       NULL };
	run_cmd(&r, env3, oargv, 0, false, NULL, 0);
	print_message("program owns SIGRTMIN after start: exit %d in %.2f s (unsampled %.2f s)\n",
		      r.status, r.seconds, plain.seconds);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	assert_true(count_samples(OUT "/own.data") > 0);
	run_free(&r);
	run_free(&plain);

	/* (a) the program takes the very signal STACKPROBE_SIGNAL named:
	 * the signal is shared (backends/linux/chain.c): the program gets
	 * its own deliveries and no capture, sampling goes on, no message,
	 * the data file is finished, the program's results are unchanged. */
	char own2[16], senv2[64];
	snprintf(own2, sizeof(own2), "%d", SIGRTMIN + 4);
	snprintf(senv2, sizeof(senv2), "STACKPROBE_SIGNAL=%d", SIGRTMIN + 4);
	const char *oargv2[] = { SERVICE, "--events", "100", "--own-signal", own2, NULL };
	run_cmd(&plain, NULL, oargv2, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	const char *env4[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/own2.data", fenv,
			       senv2, NULL };
	run_cmd(&r, env4, oargv2, 0, false, NULL, 0);
	print_message("program owns STACKPROBE_SIGNAL=%s: exit %d in %.2f s: %.*s\n", own2,
		      r.status, r.seconds, (int)strcspn(r.err, "\n"), r.err);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	assert_non_null(strstr(r.out, "own_signal.seen 100\nown_signal.foreign 0\n"));
	assert_null(strstr(r.err, "stackprobe agent:"));
	assert_true(count_samples(OUT "/own2.data") > 0);
	struct sprobe_datafile_reader *rd2 = sprobe_datafile_reader__open(OUT "/own2.data");
	assert_non_null(rd2);
	while (sprobe_datafile_reader__next(rd2, &rec) == 1)
		;
	assert_int_equal(sprobe_datafile_reader__status(rd2), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(rd2);
	run_free(&r);
	run_free(&plain);
}

/*
 * Every libc entry point that takes a signal, used by a program on the very
 * signal STACKPROBE_SIGNAL named (build/sigown, tests/workloads/sigown.c):
 * the program's own signals all reach it and no capture signal does, its
 * results are unchanged, its disposition is what it set, and the data file
 * is complete. An install (any entry point, or a raw rt_sigaction system
 * call, which the capture backend finds before its next round) shares the
 * signal: no message, sampling goes on. Blocking it (to sigwait for it)
 * makes the agent give it up, with a message on stderr, keeping the
 * samples taken until then. At the end the program's disposition is in the
 * kernel (SIG_IGN across exec).
 */
static void test_signal_entry_points(void **state)
{
	static const struct {
		const char *via;
		int seen;		/* of EVENTS */
		const char *disp;	/* at the end */
		bool shared;		/* else yielded */
	} cases[] = {
		{ "sigaction", 1, "handler", true },	 { "__sigaction", 1, "handler", true },
		{ "signal", 1, "handler", true },	 { "bsd_signal", 1, "handler", true },
		{ "ssignal", 1, "handler", true },	 { "sysv_signal", 1, "handler", true },
		{ "__sysv_signal", 1, "handler", true }, { "sigset", 1, "handler", true },
		{ "sigset_hold", 1, "default", false },	 { "sighold", 1, "default", false },
		{ "sigignore", 0, "ignore", true },	 { "sigprocmask", 1, "default", false },
		{ "pthread_sigmask", 1, "default", false }, { "raw", 1, "handler", true },
		{ "raw_ign", 0, "ignore", true },
	};
	char fenv[64], senv[64], signo[16];
	int sig = SIGRTMIN + 5;
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	snprintf(senv, sizeof(senv), "STACKPROBE_SIGNAL=%d", sig);
	snprintf(signo, sizeof(signo), "%d", sig);

	struct run plain;
	const char *pargv[] = { "build/sigown", "sigaction", signo, "50", NULL };
	run_cmd(&plain, NULL, pargv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	const char *work = strstr(plain.out, "work ");
	assert_non_null(work);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char oenv[160], data[128], want[64];
		struct run r;
		bool raw = !strncmp(cases[i].via, "raw", 3);
		snprintf(data, sizeof(data), OUT "/entry-%s.data", cases[i].via);
		snprintf(oenv, sizeof(oenv), "STACKPROBE_OUTPUT=%s", data);
		const char *env[] = { "LD_PRELOAD=" AGENT, oenv, fenv, senv, NULL };
		const char *argv[] = { "build/sigown", cases[i].via, signo, "50", NULL };
		unlink(data);
		run_cmd(&r, env, argv, 0, false, NULL, 0);
		long samples = count_samples(data);
		print_message("%-16s exit %d, %ld samples: %.*s\n", cases[i].via, r.status, samples,
			      (int)strcspn(r.err, "\n"), r.err);
		assert_int_equal(r.status, 0);
		snprintf(want, sizeof(want), "seen %d\n", cases[i].seen ? 50 : 0);
		assert_non_null(strstr(r.out, want));
		/* Captures reach the program only after a raw install, until the
		 * probe's next round looks (a few at most, docs/AGENT.md). */
		const char *fo = strstr(r.out, "foreign ");
		assert_non_null(fo);
		if (raw)
			assert_true(atoi(fo + 8) <= 4);
		else
			assert_int_equal(atoi(fo + 8), 0);
		assert_non_null(strstr(r.out, work)); /* same result as unsampled */
		snprintf(want, sizeof(want), "disposition %s\n", cases[i].disp);
		assert_non_null(strstr(r.err, want));
		/* (raw_ign's exec'd image finds the signal ignored and says it
		 * does not sample: that one is not shared, see (b) above.) */
		if (cases[i].shared)
			assert_null(strstr(r.err, "sampling stopped"));
		else
			assert_non_null(strstr(r.err, "the capture signal: sampling stopped"));
		if (!strcmp(cases[i].via, "raw_ign"))
			assert_non_null(strstr(r.out, "inherited ignore\n"));
		/* The file is complete; it holds what was sampled before the
		 * program took the signal. */
		struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(data);
		struct sprobe_df_record rec;
		assert_non_null(rd);
		while (sprobe_datafile_reader__next(rd, &rec) == 1)
			;
		assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
		sprobe_datafile_reader__free(rd);
		assert_true(samples > 0);
		run_free(&r);
	}
	run_free(&plain);
}

/* malloc/free, dlopen/dlclose and dl_iterate_phdr hammered while sampled:
 * must finish (no deadlock, no fault: the unwinder pins what it reads, see
 * test_unwind_races_dlclose) with the same results. */
static void test_no_deadlock_malloc_dlopen(void **state)
{
	const char *argv[] = { SERVICE, "--events", "50", "--dl", "1000", "--malloc", "150000",
			       "--storm", "1000", "--forks", "20", "--vforks", "20", NULL };
	char fenv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/dl.data", fenv, NULL };
	struct run plain, r;
	run_cmd(&plain, NULL, argv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	run_cmd(&r, env, argv, 0, false, NULL, 0);
	print_message("hammer: unsampled %.2f s, sampled %.2f s, exit %d\n", plain.seconds,
		      r.seconds, r.status);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	/* No data file for the forked or vforked children. */
	assert_int_equal(access(OUT "/dl.data.1", F_OK), -1);
	run_free(&plain);
	run_free(&r);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_blocked_threads_dropped_and_counted, setup),
	cmocka_unit_test_setup(test_signal_ownership, setup),
	cmocka_unit_test_setup(test_signal_entry_points, setup),
	cmocka_unit_test_setup(test_no_deadlock_malloc_dlopen, setup),
};

SPROBE_TEST_MAIN(tests)
