/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The failure modes users of signal-based samplers hit, each run against
 * build/service (tests/workloads/service.c, a program that behaves like a
 * real service) with and without stackprobe at high frequency:
 *
 *  - the program's own results (its stdout) and exit status are unchanged,
 *    it neither hangs (every run has a deadline) nor crashes;
 *  - the EINTR each blocking call saw is counted by the service and checked
 *    against docs/LIMITATIONS.md: a call the document says SA_RESTART
 *    protects must see none;
 *  - threads that block every signal are dropped as "blocked", in every
 *    capture while they live, and never sampled;
 *  - signal ownership: the program owns the signal stackprobe would pick,
 *    or the one STACKPROBE_SIGNAL names;
 *  - deadlock-prone work while sampled: malloc/free, dlopen/dlclose and
 *    dl_iterate_phdr in loops, fork without exec, vfork + exec, a
 *    thread-creation storm, a handler on a small sigaltstack;
 *  - test_soak: SPROBE_SOAK_SECONDS (default 8 here; `make soak` sets an
 *    hour) of repeated rounds under the agent with the eBPF companion
 *    attached when it can load: every round's results equal, nothing lost
 *    in the stream or the ring buffer, RSS does not grow, every drop has a
 *    reason.
 *
 * SPROBE_FAILMODE_FREQ sets the sampling rate (default 999 Hz).
 *
 * Blocked threads, signal ownership and deadlock-prone work are in
 * test_failure_modes_signals.c, dlclose() racing the unwinder in
 * test_failure_modes_dlclose.c; the fixtures in failure_modes_fixture.h.
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

/* The service's own results and exit status, unsampled and sampled (by
 * the agent directly, and through `stackprobe record`). */
static void test_results_unchanged_and_eintr_documented(void **state)
{
	const char *argv[] = { SERVICE, "--altstack", "8192", NULL };
	char fenv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/agent.data",
			      "STACKPROBE_QUIET=0", fenv, NULL };
	struct run plain, probed, rec;

	run_cmd(&plain, NULL, argv, 0, false, NULL, 0);
	print_message("unsampled: exit %d in %.2f s\n", plain.status, plain.seconds);
	assert_int_equal(plain.status, 0);
	assert_non_null(strstr(plain.out, "poll.events 200\n"));

	run_cmd(&probed, env, argv, 0, false, NULL, 0);
	print_message("agent at %s Hz: exit %d in %.2f s\n%s", freq(), probed.status,
		      probed.seconds, probed.status ? probed.err : "");
	assert_int_equal(probed.status, plain.status);
	assert_string_equal(probed.out, plain.out);
	check_eintr(&probed, &plain);

	/* The same through the CLI: exit status and stdout pass through. */
	const char *rargv[] = { CLI, "record", "-q", "-F", freq(), "-o", OUT "/record.data", "--",
				SERVICE, "--altstack", "8192", NULL };
	run_cmd(&rec, NULL, rargv, 0, false, NULL, 0);
	print_message("stackprobe record: exit %d in %.2f s\n", rec.status, rec.seconds);
	assert_int_equal(rec.status, plain.status);
	assert_string_equal(rec.out, plain.out);

	/* Both data files complete, with samples. */
	const char *files[] = { OUT "/agent.data", OUT "/record.data" };
	for (int f = 0; f < 2; f++) {
		struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(files[f]);
		struct sprobe_df_record r;
		uint64_t samples = 0;
		int rc;
		assert_non_null(rd);
		while ((rc = sprobe_datafile_reader__next(rd, &r)) == 1)
			samples += r.type == SPROBE_DF_SAMPLE;
		assert_int_equal(rc, 0);
		assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
		assert_true(samples > 0);
		sprobe_datafile_reader__free(rd);
	}
	run_free(&plain);
	run_free(&probed);
	run_free(&rec);
}

/* Rounds of the whole service under the agent, with the eBPF companion
 * attached when it loads here; RSS sampled. */
static void test_soak(void **state)
{
	const char *secs = getenv("SPROBE_SOAK_SECONDS");
	if (!secs || !*secs)
		secs = "8";
	const char *f = getenv("SPROBE_SOAK_FREQ");
	char fenv[64], senv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", f && *f ? f : freq());
	int sig = SIGRTMAX - 2;
	snprintf(senv, sizeof(senv), "STACKPROBE_SIGNAL=%d", sig);
	/* Each round also loads and unloads a library 100 times (and walks
	 * dl_iterate_phdr 400 times) while sampled: the unwinder's pins. */
	const char *dl = getenv("SPROBE_SOAK_DL");
	if (!dl || !*dl)
		dl = "100";
	const char *one[] = { SERVICE, "--altstack", "8192", "--events", "100", "--dl", dl, NULL };
	const char *argv[] = { SERVICE, "--altstack", "8192", "--events", "100", "--dl", dl,
			       "--seconds", secs, NULL };
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/soak.data", fenv,
			      senv, NULL };
	struct run plain, r;
	struct sprobe_pause *comp = NULL;

	run_cmd(&plain, NULL, one, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	run_cmd(&r, env, argv, 0, true, &comp, sig);
	const char *rounds = strstr(r.err, "info rounds ");
	print_message("soak %s s at %s: exit %d, %.1f s, %s", secs, fenv, r.status, r.seconds,
		      rounds ? rounds : "(no rounds line)\n");
	assert_int_equal(r.status, 0);
	/* Every round's results equal the unsampled round's (the service
	 * compares the rounds itself and prints the first). */
	assert_string_equal(r.out, plain.out);

	/* RSS: the last quarter of the run is not above its second quarter
	 * by more than 8 MiB (no growth with time; the first quarter is
	 * warm-up: symbol tables, stream buffers). */
	print_message("RSS: %ld samples; first %ld KiB, last %ld KiB, max %ld KiB\n", r.rss_ticks,
		      r.first_rss_kb, r.last_rss_kb, r.max_rss_kb);
	if (r.nrss >= 8) {
		long q2 = 0, q4 = 0;
		int n = r.nrss / 4;
		for (int i = 0; i < n; i++) {
			q2 = r.rss_kb[n + i] > q2 ? r.rss_kb[n + i] : q2;
			q4 = r.rss_kb[r.nrss - n + i] > q4 ? r.rss_kb[r.nrss - n + i] : q4;
		}
		print_message("RSS: second quarter max %ld KiB, last quarter max %ld KiB\n", q2, q4);
		assert_true(q4 <= q2 + 8192);
	}

	/* Nothing lost in the stream; every drop has a reason. */
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(OUT "/soak.data");
	struct sprobe_df_record rec;
	uint64_t samples = 0, caps = 0, drops[SPROBE_DROP__COUNT] = { 0 }, lost = 0;
	int rc;
	assert_non_null(rd);
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		if (rec.type == SPROBE_DF_SAMPLE)
			samples++;
		if (rec.type == SPROBE_DF_CAPTURE) {
			caps++;
			uint32_t sum = 0;
			for (int k = 0; k < SPROBE_DROP__COUNT; k++) {
				drops[k] += rec.capture.dropped[k];
				sum += rec.capture.dropped[k];
			}
			assert_int_equal(sum, rec.capture.threads_dropped);
			assert_int_equal(rec.capture.dropped[SPROBE_DROP_NONE], 0);
		}
		if (rec.type == SPROBE_DF_TRAILER)
			for (int k = 0; k < SPROBE_DF__TYPE_COUNT; k++)
				lost += rec.trailer.lost[k];
	}
	assert_int_equal(rc, 0);
	assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(rd);
	print_message("%llu samples in %llu captures, stream lost %llu; drops:",
		      (unsigned long long)samples, (unsigned long long)caps,
		      (unsigned long long)lost);
	for (int k = 1; k < SPROBE_DROP__COUNT; k++)
		print_message(" %s %llu", sprobe_drop_reason__str((uint32_t)k),
			      (unsigned long long)drops[k]);
	print_message("\n");
	assert_true(samples > 0);
	assert_int_equal(lost, 0);
	/* The service has 2 threads blocking every signal: they are read
	 * without a signal while they sleep in the kernel (zero-pause) and
	 * dropped as "blocked" only in the captures that find them running,
	 * which scheduling decides (test_blocked_threads_dropped_and_counted
	 * checks the blocked path itself); "error" and "no slot" never. */
	assert_int_equal(drops[SPROBE_DROP_ERROR], 0);
	assert_int_equal(drops[SPROBE_DROP_NO_SLOT], 0);

	/* `make soak` insists on the companion (SOAK_REQUIRE_BPF=0 to run
	 * without); the short run in `make test` takes it when it loads. */
	const char *need = getenv("SPROBE_SOAK_REQUIRE_BPF");
	if (need && atoi(need) && !comp)
		fail_msg("the eBPF companion did not attach (SOAK_REQUIRE_BPF=0 to soak without it)");
	if (comp) {
		struct sprobe_pause_stats ps;
		sprobe_pause__poll(comp, 0);
		assert_int_equal(sprobe_pause__stats(comp, &ps), 0);
		print_message("eBPF companion: generated %llu delivered %llu windows %llu lost %llu "
			      "no_state %llu\n",
			      (unsigned long long)ps.generated, (unsigned long long)ps.delivered,
			      (unsigned long long)ps.received, (unsigned long long)ps.lost,
			      (unsigned long long)ps.no_state);
		assert_true(ps.generated > 0);
		/* A capture signal the kernel generated but never delivered
		 * went to a thread that exited first (or was still pending at
		 * the capture deadline): each is an "exited" or "timeout"
		 * drop in the data file. */
		print_message("undelivered capture signals %llu, exited + timeout drops %llu\n",
			      (unsigned long long)(ps.generated - ps.delivered),
			      (unsigned long long)(drops[SPROBE_DROP_EXITED] +
						   drops[SPROBE_DROP_TIMEOUT]));
		assert_true(ps.generated >= ps.delivered);
		assert_true(ps.generated - ps.delivered <=
			    drops[SPROBE_DROP_EXITED] + drops[SPROBE_DROP_TIMEOUT]);
		assert_int_equal(ps.lost, 0);
		assert_int_equal(ps.no_state, 0);
		sprobe_pause__free(comp);
	}
	run_free(&plain);
	run_free(&r);
}

/* exit() from a plugin's constructor, i.e. inside dlopen with the loader's
 * lock held, while the agent samples at 999 Hz: the program ends with the
 * plugin's status. A probe in a dlopen of its own (the unwinder's pin of
 * the plugin it had just sampled, or a first-use load) waits for that
 * lock, so the agent's exit handler joins it with a bound
 * (SPROBE_SAMPLER_STOP_TIMEOUT_S): an unbounded join hangs the program. */
static void test_exit_in_constructor_ends(void **state)
{
	const char *argv[] = { "build/dlexit", "build/dlexit_plugin.so", NULL };
	char table[96], tenv[128];
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/dlexit.data",
			      "STACKPROBE_FREQ=999", "STACKPROBE_QUIET=0", tenv, NULL };
	(void)state;

	for (int i = 0; i < 3; i++) {
		struct run r;

		snprintf(table, sizeof(table), "/dev/shm/sprobe-dlexit-%d-%d.table", (int)getpid(), i);
		snprintf(tenv, sizeof(tenv), "STACKPROBE_TABLE=%s", table);
		unlink(table);
		run_cmd(&r, env, argv, 0, false, NULL, 0);
		print_message("run %d: status %d in %.2f s%s%s\n", i, r.status, r.seconds,
			      r.err[0] ? ": " : "", r.err);
		assert_int_equal(r.status, 3);
		assert_non_null(strstr(r.err, "plugin constructor: exit(3)"));
		/* Given up or finished, the node table's name is gone. */
		assert_int_not_equal(access(table, F_OK), 0);
		run_free(&r);
	}
}

/* A library the agent opens on first use that cannot be opened (here: a
 * file by its name that is not an ELF object, first on LD_LIBRARY_PATH):
 * the program runs as without the agent, and the agent says once, in one
 * line each, what it turned off (userspace/sampler/sampler.c
 * libs_notice()); before, nothing was said and a report blamed the
 * program's symbol table. */
static void test_missing_libraries_said(void **state)
{
	const char *argv[] = { "build/demo", "2", NULL };
	char dir[] = "/tmp/sprobe-nolib-XXXXXX", path[128], lenv[160];
	static const char *const names[] = { "libunwind-x86_64.so.8", "libunwind-aarch64.so.8",
					     "libelf.so.1" };
	struct run r;
	(void)state;

	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs("not an ELF object\n", f);
		fclose(f);
	}
	snprintf(lenv, sizeof(lenv), "LD_LIBRARY_PATH=%s", dir);
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/nolib.data",
			      "STACKPROBE_QUIET=0", lenv, NULL };

	run_cmd(&r, env, argv, 0, false, NULL, 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "requests"));
	assert_non_null(strstr(r.err, "stackprobe: libunwind could not be loaded"));
	assert_non_null(strstr(r.err, "stackprobe: libelf could not be loaded"));
	/* once each */
	const char *first = strstr(r.err, "libunwind could not be loaded");

	assert_null(strstr(first + 1, "libunwind could not be loaded"));
	run_free(&r);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_results_unchanged_and_eintr_documented, setup),
	cmocka_unit_test_setup(test_soak, setup),
	cmocka_unit_test_setup(test_missing_libraries_said, setup),
	cmocka_unit_test_setup(test_exit_in_constructor_ends, setup),
};

SPROBE_TEST_MAIN(tests)
