/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The capture signal shared with the program (backends/linux/chain.c,
 * userspace/agent/signal_share.c): a program that takes the very signal
 * the agent captures with (STACKPROBE_SIGNAL), after the agent started,
 * receives exactly its own deliveries of it (50 kill() and 50 sigqueue()),
 * none of the captures, with its flags and mask; reads back its own
 * handler; and sampling goes on after the install (samples of
 * after_install() in the data file). The workload is build/sigshare
 * (tests/workloads/sigshare.c).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "run_helper.h"
#include "sprobe_test.h"

#define AGENT "build/libstackprobe.so"
#define CLI "build/stackprobe"
#define SIGSHARE "build/sigshare"
#define OUT "build/test-out/sigshare"

static int setup(void **state)
{
	(void)state;
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

/* "name N" in out, or -1. */
static long long field(const char *out, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "%s ", name);
	for (const char *p = out; (p = strstr(p, key)); p++)
		if (p == out || p[-1] == '\n')
			return strtoll(p + strlen(key), NULL, 10);
	return -1;
}

/* Samples in path, and how many of them are later than after_ns. */
static void count_samples(const char *path, uint64_t after_ns, long *all, long *later)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;

	*all = *later = 0;
	assert_non_null(rd);
	while (sprobe_datafile_reader__next(rd, &rec) == 1) {
		if (rec.type != SPROBE_DF_SAMPLE)
			continue;
		(*all)++;
		*later += rec.sample.time_ns > after_ns;
	}
	assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(rd);
}

/* Run sigshare VIA on the capture signal under the agent. */
static int run_via(const char *via, int sig, const char *mode, char **out, char *data,
		   size_t datalen)
{
	char cmd[512];

	snprintf(data, datalen, OUT "/%s-%s.data", via, mode);
	unlink(data);
	snprintf(cmd, sizeof(cmd),
		 "LD_PRELOAD=" AGENT " STACKPROBE_OUTPUT=%s STACKPROBE_SIGNAL=%d "
		 "STACKPROBE_FREQ=499 STACKPROBE_MODE=%s " SIGSHARE " %s %d 50 2>&1",
		 data, sig, mode, via, sig);
	return sprobe_test_run(cmd, out);
}

static void check_shared(const char *via, const char *mode)
{
	int sig = SIGRTMAX - 3;
	char data[256], cmd[512], *out = NULL, *folded = NULL;
	bool info = !strcmp(via, "sigaction") || !strcmp(via, "raw");

	int st = run_via(via, sig, mode, &out, data, sizeof(data));
	print_message("%s (%s mode):\n%s", via, mode, out);
	assert_int_equal(st, 0);
	assert_null(strstr(out, "stackprobe agent:")); /* no yield, no complaint */
	assert_non_null(strstr(out, "readback ok\n"));
	if (info) {
		assert_int_equal(field(out, "user"), 50);
		assert_int_equal(field(out, "queue"), 50);
	} else {
		assert_int_equal(field(out, "plain"), 100);
	}
	assert_int_equal(field(out, "foreign"), 0);
	assert_int_equal(field(out, "maskbad"), 0);
	/* Captures that reached the program: none through the wrappers; after
	 * a raw install, those sent before the probe's next look (one round,
	 * or the CPU timer's expirations until the next collect: at 499 Hz a
	 * few at most; docs/AGENT.md). */
	long long strays = field(out, "strays");
	if (!strcmp(via, "raw"))
		assert_true(strays >= 0 && strays <= 4);
	else
		assert_int_equal(strays, 0);

	long all, later;
	long long installed = field(out, "installed_ns");
	assert_true(installed > 0);
	count_samples(data, (uint64_t)installed, &all, &later);
	print_message("  %ld samples, %ld after the install\n", all, later);
	assert_true(later > 0);
	/* ... and they are of the computation after the install. */
	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format folded 2>/dev/null | grep -c after_install",
		 data);
	assert_int_equal(sprobe_test_run(cmd, &folded), 0);
	assert_true(atoi(folded) > 0);
	free(folded);
	free(out);
}

static void test_sigaction_shared(void **state)
{
	(void)state;
	check_shared("sigaction", "wall");
	check_shared("sigaction", "cpu");
}

/* The raw system call: no wrapper sees it; the backend finds it before
 * its next round and puts its handler back in front. */
static void test_raw_rt_sigaction_shared(void **state)
{
	(void)state;
	check_shared("raw", "wall");
	check_shared("raw", "cpu");
}

/* One-argument handlers: BSD signal(), and sysv_signal's SA_RESETHAND |
 * SA_NODEFER (the handler re-installs itself after each reset). */
static void test_signal_flavours_shared(void **state)
{
	(void)state;
	check_shared("signal", "wall");
	check_shared("sysv", "wall");
}

/* SIG_IGN: nothing reaches the program, it runs on. SIG_DFL: the first
 * signal ends the process by its default action, as without the agent. */
static void test_ign_and_default(void **state)
{
	int sig = SIGRTMAX - 3;
	char data[256], *out = NULL;

	(void)state;
	int st = run_via("ign", sig, "wall", &out, data, sizeof(data));
	print_message("ign: exit %d\n", st);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "readback ok\n"));
	assert_int_equal(field(out, "foreign"), 0);
	free(out);

	st = run_via("dfl", sig, "wall", &out, data, sizeof(data));
	print_message("dfl: exit %d (128 + %d expected)\n", st, sig);
	assert_int_equal(st, 128 + sig);
	assert_null(strstr(out, "user "));
	free(out);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_sigaction_shared, setup),
	cmocka_unit_test_setup(test_raw_rt_sigaction_shared, setup),
	cmocka_unit_test_setup(test_signal_flavours_shared, setup),
	cmocka_unit_test_setup(test_ign_and_default, setup),
};

SPROBE_TEST_MAIN(tests)
