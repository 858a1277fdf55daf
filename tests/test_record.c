/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * End-to-end tests of the main job: `stackprobe record`, `report`, `dump`
 * and the LD_PRELOAD agent, on real processes (build/demo and
 * build/victim, see tests/workloads/).
 *
 * Shares are statistical: the demo's compute threads do 3 units of work in
 * parse_json for 1 in compress_reply, so 3/4 of their samples should be
 * under parse_json. The test accepts [0.58, 0.92] with >= 60 samples (a
 * loaded 2-CPU machine completes fewer captures than asked: each waits for
 * CPU slots): at p = 0.75 and n = 60 the binomial standard deviation is
 * 0.056, so the band is 3 sigma wide on each side (more with more
 * samples), and still excludes the 0.5 that an unwinder confusing the two
 * siblings would give.
 *
 * What the agent maps, names, walks and leaves behind, and the files it
 * writes, are in test_record_agent.c; the fixtures in record_fixture.h.
 */

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <stackprobe/datafile.h>
#include <stackprobe/report.h>
#include <stackprobe/symbolize.h>

#include "run_helper.h"
#include "sprobe_test.h"
#include "userspace/pause/libbpf_dl.h"
#include "userspace/symbols/libdw_dl.h"
#include "record_fixture.h"

static void test_record_wall_shares(void **state)
{
	char *out;
	int rc = sprobe_test_run(CLI " record -q -F 199 -o " OUT "/wall.data -- build/demo 4", &out);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "demo: "));
	free(out);

	rc = sprobe_test_run(CLI " report -i " OUT "/wall.data --format folded", &out);
	assert_int_equal(rc, 0);
	unsigned long parse = folded_count(out, "compute-", ";parse_json;", NULL);
	unsigned long compress = folded_count(out, "compute-", ";compress_reply;", NULL);
	unsigned long compute_all = folded_count(out, "compute-", NULL, NULL);
	unsigned long io_all = folded_count(out, "io-", NULL, NULL);
	unsigned long io_read = folded_count(out, "io-", ";io_loop;wait_for_input", NULL);
	print_message("compute: parse_json %lu, compress_reply %lu of %lu; io: %lu of %lu in wait_for_input\n",
		      parse, compress, compute_all, io_read, io_all);
	/* The chain only comes out through DWARF (demo has no frame pointers). */
	assert_true(folded_count(out, "compute-", "serve_requests;handle_request;", NULL) > 0);
	assert_true(parse + compress >= 60);
	double share = (double)parse / (double)(parse + compress);
	assert_true(share >= 0.58 && share <= 0.92);
	/* Nearly all compute samples are in one of the two (the rest: the
	 * loop between them). */
	assert_true(parse + compress >= compute_all * 9 / 10);
	/* The io thread is always blocked in wait_for_input -> read. */
	assert_true(io_all >= 30);
	assert_true(io_read >= io_all * 95 / 100);
	/* stackprobe's own stream writer thread is not profiled. */
	assert_null(strstr(out, "writer_main"));
	assert_int_equal(folded_count(out, "sprobe-writer", NULL, NULL), 0);
	free(out);
}

/* CPU mode: per-thread CPU-clock timers. The io thread is always blocked in
 * read(), so it consumes no CPU and must have no sample at all; the compute
 * threads keep the 3:1 split (same band as the wall test). */
static void test_record_cpu_mode(void **state)
{
	char *out;
	int rc = sprobe_test_run(CLI " record -q -F 199 --mode cpu -o " OUT "/cpu.data -- build/demo 4", &out);
	assert_int_equal(rc, 0);
	free(out);

	rc = sprobe_test_run(CLI " report -i " OUT "/cpu.data --format folded", &out);
	assert_int_equal(rc, 0);
	unsigned long parse = folded_count(out, "compute-", ";parse_json;", NULL);
	unsigned long compress = folded_count(out, "compute-", ";compress_reply;", NULL);
	unsigned long compute_all = folded_count(out, "compute-", NULL, NULL);
	unsigned long io_all = folded_count(out, "io-", NULL, NULL);
	print_message("cpu mode: parse_json %lu, compress_reply %lu of %lu compute; io %lu\n",
		      parse, compress, compute_all, io_all);
	assert_int_equal(io_all, 0);
	assert_true(parse + compress >= 60);
	double share = (double)parse / (double)(parse + compress);
	assert_true(share >= 0.58 && share <= 0.92);
	assert_true(parse + compress >= compute_all * 9 / 10);
	assert_null(strstr(out, "writer_main"));
	free(out);

	/* The same through the agent's environment variable. */
	rc = sprobe_test_run("STACKPROBE_MODE=cpu STACKPROBE_OUTPUT=" OUT "/cpu-env.data STACKPROBE_FREQ=199 "
		 "LD_PRELOAD=build/libstackprobe.so build/demo 2 >/dev/null", NULL);
	assert_int_equal(rc, 0);
	rc = sprobe_test_run(CLI " report -i " OUT "/cpu-env.data --format folded", &out);
	assert_int_equal(rc, 0);
	assert_int_equal(folded_count(out, "io-", NULL, NULL), 0);
	assert_true(folded_count(out, "compute-", NULL, NULL) > 0);
	free(out);
}

static void test_record_passes_exit_code_and_output(void **state)
{
	char *out;
	assert_int_equal(sprobe_test_run(CLI " record -q -o " OUT "/exit.data -- sh -c 'echo hello; exit 7'", &out), 7);
	assert_string_equal(out, "hello\n");
	free(out);
	assert_int_equal(sprobe_test_run(CLI " record -q -o " OUT "/kill.data -- "
				 "sh -c 'echo $$ > " OUT "/kill.pid; kill -TERM $$' 2>/dev/null",
			     NULL), 128 + SIGTERM);
	/* record removed the table the killed command could not. */
	assert_true(table_gone(OUT "/kill.pid"));
	assert_int_equal(sprobe_test_run(CLI " record -q -o " OUT "/none.data -- /nonexistent/program 2>/dev/null",
			     NULL), 127);
	/* Usage errors. */
	assert_int_equal(sprobe_test_run(CLI " record 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " record -F 0 -- true 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " record -F 12abc -- true 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " record --mode fast -- true 2>/dev/null", NULL), 2);
	/* An output that cannot be written fails before anything runs. */
	assert_int_equal(sprobe_test_run(CLI " record -o /nonexistent/dir/x.data -- sh -c 'echo ran' 2>/dev/null", &out),
			 1);
	assert_string_equal(out, "");
	free(out);
}

static void test_dump_live_process(void **state)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("STACKPROBE_AGENT", "1", 1);
		setenv("STACKPROBE_FREQ", "199", 1);
		setenv("LD_PRELOAD", "build/libstackprobe.so", 1);
		execl("build/demo", "demo", "60", (char *)NULL);
		_exit(127);
	}
	char cmd[256], *out = NULL;
	snprintf(cmd, sizeof(cmd), CLI " dump %d 2>&1", pid);
	/* Poll (bounded) until the agent has published the io thread. */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = -1;
	for (;;) {
		free(out);
		rc = sprobe_test_run(cmd, &out);
		if (rc == 0 && strstr(out, "wait_for_input"))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 30)
			break;
		struct timespec pause = { 0, 20 * 1000 * 1000 };
		nanosleep(&pause, NULL); /* poll interval, not synchronisation */
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	/* Killed: no exit handler removed its table. */
	snprintf(cmd, sizeof(cmd), "/dev/shm/stackprobe-%d.table", pid);
	unlink(cmd);
	print_message("%s", out);
	assert_int_equal(rc, 0);
	/* The io thread's chain, innermost first: the demo's own functions,
	 * then libc down to the thread start. */
	char *io = strstr(out, "(io)");
	assert_non_null(io);
	char *end = strstr(io, "\n\n");
	if (end)
		*end = '\0';	/* the io thread's section only */
	char *w = strstr(io, "wait_for_input");
	char *l = strstr(io, "io_loop");
	assert_non_null(w);
	assert_non_null(l);
	assert_true(w < l);
	/* Below io_loop: at least one frame, all in libc (start_thread,
	 * clone3). libc's .dynsym does not name start_thread; only its
	 * debug symbols (libc6-dbg, which `make deps` installs) do. So the
	 * frame under io_loop is start_thread when libc has a name for it,
	 * libc.so.6+0x... when it has none; never another name or module
	 * (a walk that went astray), and never missing (one that stopped). */
	char *nl = strchr(l, '\n');
	assert_non_null(nl);
	int below = 0;
	bool named_start = false;
	for (char *fr = nl + 1; *fr; below++) {
		char *e = strchr(fr, '\n');
		if (e)
			*e = '\0';
		print_message("  below io_loop: %s\n", fr);
		bool unnamed = strstr(fr, " libc.so.6+0x") != NULL;
		bool in_libc = unnamed || strstr(fr, " (libc.so.6)") != NULL;
		assert_true(in_libc);
		if (below == 0) {
			named_start = strstr(fr, " start_thread+0x") != NULL;
			assert_true(named_start || unnamed);
		}
		if (!e)
			break;
		fr = e + 1;
	}
	assert_true(below >= 1);
	/* Where libc6-dbg is installed, the name must be there: otherwise a
	 * regression in finding debug files would pass unseen. */
	char *dbg = NULL;
	if (access("/usr/lib/debug/.build-id", F_OK) == 0 &&
	    sprobe_test_run("dpkg-query -W -f='${Status}' libc6-dbg 2>/dev/null", &dbg) == 0 &&
	    strstr(dbg, "install ok installed"))
		assert_true(named_start);
	free(dbg);
	free(out);
}

static void test_dump_errors(void **state)
{
	char cmd[256], *out;
	/* A dead pid. */
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), CLI " dump %d 2>&1", pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	assert_non_null(strstr(out, "no process"));
	free(out);
	/* A live pid without a table (this test). */
	snprintf(cmd, sizeof(cmd), CLI " dump %d 2>&1", getpid());
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	assert_non_null(strstr(out, "no stackprobe table"));
	free(out);
	/* A corrupt table file. */
	FILE *f = fopen(OUT "/corrupt.table", "w");
	assert_non_null(f);
	for (int i = 0; i < 4096; i++)
		fputc(i * 7, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), CLI " dump %d --table " OUT "/corrupt.table 2>&1", getpid());
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	assert_true(strlen(out) > 0 && strlen(out) < 400);
	free(out);
	/* Usage errors. */
	assert_int_equal(sprobe_test_run(CLI " dump 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " dump 12x 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " dump -5 2>/dev/null", NULL), 2);
}

/* The agent must not change what the program does. */
static void test_agent_is_transparent(void **state)
{
	char *plain, *probed;
	unlink(OUT "/victim.data");
	unlink(OUT "/victim.data.1");
	int rc1 = sprobe_test_run("build/victim 2>&1", &plain);
	int rc2 = sprobe_test_run("VICTIM_PIDFILE=" OUT "/victim.pid "
		      "STACKPROBE_OUTPUT=" OUT "/victim.data STACKPROBE_FREQ=999 "
		      "LD_PRELOAD=build/libstackprobe.so build/victim 2>&1", &probed);
	print_message("%s", probed);
	assert_int_equal(rc1, 42);
	assert_int_equal(rc2, 42);
	assert_string_equal(plain, probed);
	free(plain);
	free(probed);

	/* Both images recorded (the exec'd one into .1), completely. */
	const char *files[] = { OUT "/victim.data", OUT "/victim.data.1" };
	for (int i = 0; i < 2; i++) {
		struct sprobe_report_opts ro = { .sz = sizeof(ro) };
		struct sprobe_report *r = sprobe_report__new(&ro);
		assert_non_null(r);
		assert_int_equal(sprobe_report__load_file(r, files[i]), 0);
		assert_int_equal(sprobe_report__status(r), SPROBE_DF_COMPLETE);
		assert_true(sprobe_report__samples(r) > 0);
		sprobe_report__free(r);
	}
	/* No file for the forked or exec'd children, no table left behind. */
	assert_int_equal(access(OUT "/victim.data.2", F_OK), -1);
	assert_true(table_gone(OUT "/victim.pid"));
}

/* Value of a top-level integer member of the JSON report, -1 if absent. */
static long json_int(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	const char *p = strstr(json, pat);
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* record loads the eBPF companion (root with CAP_BPF here: CI must not
 * skip) and writes a kernel window for nearly every self-reported one. */
static void test_record_kernel_windows(void **state)
{
	char *out;
	int rc = sprobe_test_run(CLI " record --bpf -q -F 99 -o " OUT "/bpf.data -- build/demo 1 2>&1", &out);
	if (rc == 1 && (strstr(out, "CAP_BPF") || strstr(out, "not supported"))) {
		print_message("%s", out);
		free(out);
		SPROBE_SKIP("the kernel refused the eBPF companion (see above)");
	}
	assert_int_equal(rc, 0);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/bpf.data --format json", &out), 0);
	long samples = json_int(out, "samples"), kw = json_int(out, "kernel_windows");
	/* The first "signal"/"zero-pause" members are the overall methods. */
	long sig = json_int(out, "signal"), zp = json_int(out, "zero-pause");
	print_message("samples %ld (signal %ld, zero-pause %ld), kernel windows %ld\n", samples, sig,
		      zp, kw);
	assert_true(samples > 0);
	assert_int_equal(sig + zp, samples);
	/* Every signalled thread's window is seen by the kernel; a few may be
	 * lost (ring buffer) or belong to captures the probe dropped. */
	assert_true(kw >= sig * 9 / 10);
	/* Zero-pause (default in wall mode): the demo's io thread sleeps in
	 * read() nearly all the time, so it is read without a signal; the
	 * kernel must have seen no capture signal for any such sample. */
	assert_true(zp > 0);
	const char *zc = strstr(out, "\"zero_pause\": ");
	assert_non_null(zc);
	assert_int_equal(json_int(zc, "samples"), zp);
	assert_int_equal(json_int(zc, "signalled"), 0);
	assert_true(json_int(zc, "confirmed") >= zp * 9 / 10);
	free(out);

	/* --no-zero-pause: every sample through the signal path, each seen
	 * by the kernel. */
	assert_int_equal(sprobe_test_run(CLI " record --bpf --no-zero-pause -q -F 99 -o " OUT "/bpfsig.data -- "
				 "build/demo 0.5", NULL), 0);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/bpfsig.data --format json", &out), 0);
	samples = json_int(out, "samples");
	kw = json_int(out, "kernel_windows");
	assert_true(samples > 0);
	assert_int_equal(json_int(out, "zero-pause"), 0);
	assert_int_equal(json_int(out, "signal"), samples);
	assert_true(kw >= samples * 9 / 10);
	free(out);

	/* --no-bpf: none. */
	assert_int_equal(sprobe_test_run(CLI " record --no-bpf -q -F 99 -o " OUT "/nobpf.data -- build/demo 0.5", NULL), 0);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/nobpf.data --format json", &out), 0);
	assert_int_equal(json_int(out, "kernel_windows"), 0);
	assert_true(json_int(out, "samples") > 0);
	free(out);
}

/* `stackprobe pause PID` finds the agent's signal and sees its windows. */
static void test_pause_command(void **state)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		setenv("STACKPROBE_AGENT", "1", 1);
		setenv("STACKPROBE_FREQ", "99", 1);
		setenv("LD_PRELOAD", "build/libstackprobe.so", 1);
		execl("build/demo", "demo", "60", (char *)NULL);
		_exit(127);
	}
	char cmd[256], *out;
	/* Wait (bounded poll) until the agent runs: its table appears after
	 * its capture handler is installed. */
	snprintf(cmd, sizeof(cmd), "/dev/shm/stackprobe-%d.table", pid);
	for (int i = 0; i < 3000 && access(cmd, F_OK) != 0; i++) {
		struct timespec pause = { 0, 10 * 1000 * 1000 };
		nanosleep(&pause, NULL); /* poll interval, not synchronisation */
	}
	assert_int_equal(access(cmd, F_OK), 0);
	snprintf(cmd, sizeof(cmd), CLI " pause %d -d 1 2>&1", pid);
	int rc = sprobe_test_run(cmd, &out);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), "/dev/shm/stackprobe-%d.table", pid);
	unlink(cmd);
	print_message("%.400s\n", out);
	assert_int_equal(rc, 0);
	char *p = strstr(out, "capture windows in");
	assert_non_null(p);
	/* "pid N: K capture windows in ...": walk back over K. */
	while (p > out && p[-1] == ' ')
		p--;
	while (p > out && p[-1] >= '0' && p[-1] <= '9')
		p--;
	assert_true(strtol(p, NULL, 10) > 0);
	free(out);
	/* Usage and runtime errors. */
	assert_int_equal(sprobe_test_run(CLI " pause 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " pause 1 -d x 2>/dev/null", NULL), 2);
	pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	snprintf(cmd, sizeof(cmd), CLI " pause %d 2>/dev/null", pid);
	assert_int_equal(sprobe_test_run(cmd, NULL), 1);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_record_kernel_windows, setup_dir),
	cmocka_unit_test_setup(test_pause_command, setup_dir),
	cmocka_unit_test_setup(test_record_wall_shares, setup_dir),
	cmocka_unit_test_setup(test_record_cpu_mode, setup_dir),
	cmocka_unit_test_setup(test_record_passes_exit_code_and_output, setup_dir),
	cmocka_unit_test_setup(test_dump_live_process, setup_dir),
	cmocka_unit_test_setup(test_dump_errors, setup_dir),
	cmocka_unit_test_setup(test_agent_is_transparent, setup_dir),
};

SPROBE_TEST_MAIN(tests)
