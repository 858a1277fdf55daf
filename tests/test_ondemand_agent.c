/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * On demand, agents `record -p` does not talk to: an agent recording for
 * `record` or publishing its table only (no control channel), a service
 * SIGKILLed while recorded (its table removed), a prefork master whose
 * workers are recorded through the kernel.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "run_helper.h"
#include "uid_dir_helper.h"
#include "sprobe_test.h"
#include "ondemand_fixture.h"

static void assert_tier_reason(pid_t pid, const char *reason)
{
	char cmd[256], *out = NULL;

	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 1 --mode wall -o " OUT "/od-why.data 2>&1",
		 (int)pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	if (!strstr(out, reason))
		fail_msg("expected \"%s\" in:\n%s", reason, out);
	assert_non_null(strstr(out, "--mode wall needs the agent"));
	free(out);
	assert_int_equal(access(OUT "/od-why.data", F_OK), -1);
}

/* An agent recording for `record` (STACKPROBE_OUTPUT) has no control
 * channel: busy, not "no agent". */
static void test_agent_busy_without_channel(void **state)
{
	static const char *const env[] = { "STACKPROBE_AGENT=1",
					   "STACKPROBE_OUTPUT=" OUT "/od-busy-own.data", NULL };
	struct svc s;
	char reason[160];

	(void)state;
	svc_start_env(&s, env);
	snprintf(reason, sizeof(reason), "process %d is busy: its stackprobe agent is recording it "
		 "for another `stackprobe record`", (int)s.pid);
	assert_tier_reason(s.pid, reason);
	svc_stop(&s);
}

/* The agent publishing its table only (STACKPROBE_AGENT=1): loaded, no
 * channel, and the line says how to have one. */
static void test_agent_without_channel(void **state)
{
	static const char *const env[] = { "STACKPROBE_AGENT=1", NULL };
	struct svc s;

	(void)state;
	svc_start_env(&s, env);
	assert_tier_reason(s.pid, "its stackprobe agent runs without the control channel "
				  "(STACKPROBE_AGENT=idle, or STACKPROBE_CONTROL=1, turns it on)");
	svc_stop(&s);
}

/* A service SIGKILLed while record -p records it runs no exit handler:
 * record removes the node table it left (its own user's, the pid dead),
 * and dump of that pid says it is gone. Through the agent (idle, its
 * recording publishes the table) and through the kernel (an agent with
 * a table and no channel). */
static void killed_service_table(struct svc *s, const char *name)
{
	char table[64], errf[128], data[128], args[256], cmd[512], *out = NULL;

	snprintf(table, sizeof(table), "/dev/shm/stackprobe-%d.table", (int)s->pid);
	snprintf(errf, sizeof(errf), OUT "/%s.err", name);
	snprintf(data, sizeof(data), OUT "/%s.data", name);
	snprintf(args, sizeof(args), "-d 120 --mode cpu --no-report -o %s", data);
	wait_dump_shows(s->pid, "od_compute");
	pid_t rec = record_bg(s->pid, args, errf);
	/* Recording: its part (agent) or its tier line (kernel) is there. */
	snprintf(cmd, sizeof(cmd), "ls -d %s.parts.* >/dev/null 2>&1 && grep -q 'Ctrl-C ends it' %s",
		 data, errf);
	for (int i = 0; sprobe_test_run(cmd, NULL) != 0; i++) {
		if (i == 1000)
			fail_msg("record -p never started (%s)", errf);
		pause_ms(20);
	}
	assert_int_equal(access(table, F_OK), 0);
	assert_int_equal(kill(s->pid, SIGKILL), 0);
	assert_int_equal(wait_status(s->pid), 128 + SIGKILL);
	close(s->in);
	assert_int_equal(wait_status(rec), 0);
	assert_int_equal(access(table, F_OK), -1);
	snprintf(cmd, sizeof(cmd), "cat %s", errf);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	if (!strstr(out, "left its node table") || !strstr(out, "removed it"))
		fail_msg("record -p said nothing of the table:\n%s", out);
	free(out);
	snprintf(cmd, sizeof(cmd), CLI " dump %d 2>&1", (int)s->pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	assert_non_null(strstr(out, "is gone"));
	free(out);
}

static void test_killed_service_table_removed(void **state)
{
	struct svc s;

	(void)state;
	svc_start(&s, "1", "1");
	killed_service_table(&s, "od-killed-agent");
}

static void test_killed_service_table_removed_kernel(void **state)
{
	static const char *const env[] = { "STACKPROBE_AGENT=1", NULL };
	struct svc s;

	(void)state;
	svc_start_env(&s, env);
	killed_service_table(&s, "od-killed-kernel");
}

/* A master that forks busy workers and sleeps in wait (a prefork
 * server): record -p of the master records the workers too (through the
 * kernel), says so, and --no-children says what it leaves out. With the
 * agent idle in the master (its workers have no channel) and without. */
/* The master's process group, killed by the teardown even when the test
 * failed half-way (its busy workers must not outlive it). */
static pid_t master_pgid;

static int kill_master(void **state)
{
	(void)state;
	if (master_pgid > 0) {
		kill(-master_pgid, SIGKILL);
		waitpid(master_pgid, NULL, 0);
	}
	master_pgid = 0;
	return 0;
}

static void master_and_workers(bool agent, const char *name)
{
	char lib[PATH_MAX], path[64], kids[128] = "", cmd[512], data[128], *out = NULL;
	int k1 = 0, k2 = 0;

	assert_non_null(realpath("build/libstackprobe.so", lib));
	pid_t m = fork();
	assert_true(m >= 0);
	if (m == 0) {
		setpgid(0, 0);
		if (agent) {
			setenv("LD_PRELOAD", lib, 1);
			setenv("STACKPROBE_AGENT", "idle", 1);
		}
		execl("/bin/sh", "sh", "-c", "for i in 1 2; do (while :; do :; done) & done; wait",
		      (char *)NULL);
		_exit(127);
	}
	setpgid(m, m);
	master_pgid = m;
	/* Both workers forked (bounded: 20 s). */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)m, (int)m);
	for (int i = 0; sscanf(kids, "%d %d", &k1, &k2) != 2; i++) {
		if (i == 1000)
			fail_msg("the workers of %d never came", (int)m);
		pause_ms(20);
		read_small(path, kids, sizeof(kids));
	}
	snprintf(data, sizeof(data), OUT "/%s.data", name);
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.5 -F 499 --mode cpu --no-report -o %s "
		 "2>&1", (int)m, data);
	int rc = sprobe_test_run(cmd, &out);
	if (rc != 0 && strstr(out, "cannot sample"))
		goto skip;
	assert_int_equal(rc, 0);
	if (!strstr(out, "and its 2 child processes"))
		fail_msg("no word on the workers:\n%s", out);
	free(out);
	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format folded", data);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	char w1[32], w2[32];
	snprintf(w1, sizeof(w1), "sh-%d;", k1);
	snprintf(w2, sizeof(w2), "sh-%d;", k2);
	unsigned long n1 = sprobe_test_folded_count(out, w1, NULL);
	unsigned long n2 = sprobe_test_folded_count(out, w2, NULL);
	print_message("  %s: worker %d %lu samples, worker %d %lu\n", name, k1, n1, k2, n2);
	/* 0.5 s of a busy loop at 499 Hz each: 250 samples if it had a CPU
	 * to itself, a few where it shares one. */
	assert_true(n1 >= 5 && n2 >= 5);
	free(out);
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.2 --mode cpu --no-children --no-report "
		 "-o %s 2>&1", (int)m, data);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	snprintf(cmd, sizeof(cmd), "process %d has 2 child processes (", (int)m);
	if (!strstr(out, cmd) || !strstr(out, "not recorded (--no-children)"))
		fail_msg("--no-children did not say what it left out:\n%s", out);
skip:
	if (rc != 0)
		print_message("  perf events refused here:\n%s", out);
	free(out);
	kill(-m, SIGKILL);
	master_pgid = 0;
	assert_int_equal(wait_status(m), 128 + SIGKILL);
}

static void test_master_workers_agent(void **state)
{
	(void)state;
	master_and_workers(true, "od-master-agent");
}

static void test_master_workers_kernel(void **state)
{
	(void)state;
	master_and_workers(false, "od-master-kernel");
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_agent_busy_without_channel, setup_dir),
	cmocka_unit_test_setup(test_agent_without_channel, setup_dir),
	cmocka_unit_test_setup(test_killed_service_table_removed, setup_dir),
	cmocka_unit_test_setup(test_killed_service_table_removed_kernel, setup_dir),
	cmocka_unit_test_setup_teardown(test_master_workers_agent, setup_dir, kill_master),
	cmocka_unit_test_setup_teardown(test_master_workers_kernel, setup_dir, kill_master),
};

SPROBE_TEST_MAIN(tests)
