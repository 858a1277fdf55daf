/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * On demand: `stackprobe record -p PID` against a running service whose
 * agent is idle (STACKPROBE_AGENT=idle; userspace/agent/control.c,
 * userspace/cli/cmd_record_pid.c), on build/odservice
 * (tests/workloads/odservice.c).
 *
 * "Idle" is checked on the process itself between recordings: no thread
 * of the sampler (the probe "stackprobe", the writer "sprobe-writer"), no
 * handler for any real-time signal (so no capture signal can be taken:
 * one arriving without a handler would kill the service, which must stay
 * up), and the control thread has not woken once (its voluntary context
 * switches are unchanged from the end of one recording to the start of
 * the next; it sleeps in poll() without a timeout).
 *
 * Continuous profiling is in test_ondemand_continuous.c; agents without a
 * control channel, killed services' tables and prefork masters in
 * test_ondemand_agent.c; the fixtures in ondemand_fixture.h.
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

static void test_three_recordings_idle_between(void **state)
{
	struct svc s;
	char cmd[256], data[128], *out = NULL;
	unsigned long sw = 0;

	(void)state;
	svc_start(&s, "idle", NULL);
	assert_true(thread_named(s.pid, "sprobe-ctl") > 0);
	for (int i = 0; i < 3; i++) {
		assert_idle(s.pid);
		if (i > 0) /* not one wake-up since the last recording ended */
			assert_int_equal(ctl_switches_when_idle(s.pid), sw);
		snprintf(data, sizeof(data), OUT "/od-%d.data", i);
		snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.5 -F 199 -o %s 2>&1", (int)s.pid,
			 data);
		assert_int_equal(sprobe_test_run(cmd, &out), 0);
		/* The report printed at the end names the service's function. */
		assert_non_null(strstr(out, "od_compute"));
		free(out);
		sw = ctl_switches_when_idle(s.pid);
		assert_idle(s.pid);
		assert_service_profile(data);
	}
	assert_idle(s.pid);
	assert_int_equal(ctl_switches_when_idle(s.pid), sw);
	svc_stop(&s);
}

/* A service in another mount namespace whose libc is another build (its
 * own file mounted over the path, as in a container): record -p names its
 * libc frames from the service's file, through /proc/PID/root (from the
 * host's libc, whose build-id differs, nothing would be named). Root only
 * (a mount namespace of one's own). */
static void test_service_in_another_mount_namespace(void **state)
{
	char cmd[3 * PATH_MAX], lib[PATH_MAX], *out = NULL;
	int in[2], rdy[2];

	(void)state;
	if (geteuid() != 0)
		SPROBE_SKIP("a mount namespace of its own needs root");
	assert_int_equal(sprobe_test_run("ldd build/odservice | awk '/libc.so.6/ {print $3}'", &out), 0);
	out[strcspn(out, "\n")] = '\0';
	assert_true(out[0] == '/');
	char libc[PATH_MAX];

	snprintf(libc, sizeof(libc), "%s", out);
	free(out);
	/* the copy: one byte of its build-id changed */
	snprintf(cmd, sizeof(cmd),
		 "cp %s " OUT "/ns-libc.so.6 && python3 -c \"import re,subprocess; "
		 "b=re.search(r'Build ID: ([0-9a-f]+)', subprocess.run(['readelf','-n','%s'],capture_output=True,text=True).stdout).group(1); "
		 "d=bytearray(open('" OUT "/ns-libc.so.6','rb').read()); i=d.find(bytes.fromhex(b)); d[i]^=0xff; "
		 "open('" OUT "/ns-libc.so.6','wb').write(d)\"",
		 libc, libc);
	assert_int_equal(sprobe_test_run(cmd, NULL), 0);
	assert_non_null(realpath("build/libstackprobe.so", lib));
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(rdy, O_CLOEXEC), 0);
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		char copy[PATH_MAX];

		if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
		    !realpath(OUT "/ns-libc.so.6", copy) || mount(copy, libc, NULL, MS_BIND, NULL) != 0)
			_exit(126);
		dup2(in[0], 0);
		dup2(rdy[1], 1);
		setenv("LD_PRELOAD", lib, 1);
		setenv("STACKPROBE_AGENT", "idle", 1);
		setpgid(0, 0);
		execl("build/odservice", "odservice", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(rdy[1]);
	char buf[16] = { 0 };
	ssize_t n = read(rdy[0], buf, sizeof(buf) - 1);

	close(rdy[0]);
	if (n <= 0) {
		int st = 0;

		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 126)
			SPROBE_SKIP("this kernel refused a mount namespace of our own");
		fail_msg("the service did not start (status %d)", st);
	}
	assert_string_equal(buf, "ready\n");
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.5 -F 199 -o " OUT "/od-ns.data 2>&1", (int)pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	free(out);
	assert_named_in_file(OUT "/od-ns.data");
	close(in[1]);
	int st = 0;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	unlink(OUT "/ns-libc.so.6");
}

static void test_cpu_mode_on_demand(void **state)
{
	struct svc s;
	char cmd[256], *out = NULL;

	(void)state;
	svc_start(&s, "idle", NULL);
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.5 --mode cpu -o " OUT "/od-cpu.data "
		 "--no-report 2>&1", (int)s.pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	free(out);
	char *f = folded(OUT "/od-cpu.data");
	assert_non_null(strstr(f, "od_compute"));
	/* cpu mode: the thread blocked in poll() uses no CPU, has no sample */
	assert_null(strstr(f, "od_wait_request"));
	free(f);
	ctl_switches_when_idle(s.pid);
	assert_idle(s.pid);
	svc_stop(&s);
}

static void test_second_client_busy_and_ctrl_c(void **state)
{
	struct svc s;
	char cmd[256], *out = NULL;

	(void)state;
	sprobe_test_run("rm -rf " OUT "/od-first.data.parts.*", NULL);
	svc_start(&s, "idle", NULL);
	pid_t first = record_bg(s.pid, "-d 120 -o " OUT "/od-first.data --no-report",
				OUT "/od-first.err");
	wait_probe(s.pid, true);
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 1 -o " OUT "/od-second.data 2>&1",
		 (int)s.pid);
	/* The agent is busy: the kernel records it instead, and says why. */
	unlink(OUT "/od-second.data");
	int rc = sprobe_test_run(cmd, &out);
	char busy[128];
	snprintf(busy, sizeof(busy), "process %d is busy: another `stackprobe record -p %d` is "
		 "recording it through its agent; sampling it through the kernel", (int)s.pid,
		 (int)s.pid);
	assert_non_null(strstr(out, busy));
	if (rc != 0 && strstr(out, "cannot sample process"))
		print_message("  perf events refused here; the refusal said why:\n%s", out);
	else
		assert_int_equal(rc, 0);
	free(out);
	assert_int_equal(access(OUT "/od-second.data", F_OK), rc == 0 ? 0 : -1);
	/* Ctrl-C ends the first early; what it took is kept. */
	wait_part_sampled(OUT "/od-first.data");
	kill(first, SIGINT);
	assert_int_equal(wait_status(first), 0);
	assert_service_profile(OUT "/od-first.data");
	ctl_switches_when_idle(s.pid);
	assert_idle(s.pid);
	svc_stop(&s);
}

static void test_client_killed_agent_goes_idle(void **state)
{
	struct svc s;
	char cmd[256], *out = NULL;

	(void)state;
	/* The directory this test's killed client leaves must be the only one. */
	sprobe_test_run("rm -rf " OUT "/od-killed.data.parts.*", NULL);
	svc_start(&s, "idle", NULL);
	pid_t c = record_bg(s.pid, "-d 120 -o " OUT "/od-killed.data --no-report", "/dev/null");
	wait_probe(s.pid, true);
	wait_part_sampled(OUT "/od-killed.data");
	kill(c, SIGKILL);
	assert_int_equal(wait_status(c), 128 + SIGKILL);
	/* The agent saw the socket close: it stops and is idle again. */
	wait_probe(s.pid, false);
	ctl_switches_when_idle(s.pid);
	assert_idle(s.pid);
	/* The part it finished is readable (report -i DIR), and the next
	 * recording works. */
	assert_int_equal(sprobe_test_run("f=$(ls -d " OUT "/od-killed.data.parts.*) && " CLI
					 " report -i $f --format folded | grep -q od_compute && "
					 "rm -rf $f", NULL), 0);
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.3 -o " OUT "/od-after.data --no-report "
		 "2>&1", (int)s.pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	free(out);
	assert_service_profile(OUT "/od-after.data");
	svc_stop(&s);
}

/* The service exits while it is recorded: its exit handler finishes the
 * part, record sees the connection close and keeps what was taken. */
static void test_service_exits_mid_recording(void **state)
{
	struct svc s;
	char *out = NULL;

	(void)state;
	sprobe_test_run("rm -rf " OUT "/od-exit.data.parts.*", NULL);
	svc_start(&s, "idle", NULL);
	pid_t c = record_bg(s.pid, "-d 120 -o " OUT "/od-exit.data --no-report", OUT "/od-exit.err");
	wait_part_sampled(OUT "/od-exit.data");
	svc_stop(&s);
	assert_int_equal(wait_status(c), 0);
	assert_int_equal(sprobe_test_run("cat " OUT "/od-exit.err", &out), 0);
	assert_non_null(strstr(out, "keeping what was taken"));
	free(out);
	assert_service_profile(OUT "/od-exit.data");
	/* the part was finished by the exit handler: trailer present */
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/od-exit.data --format json 2>&1 | "
					 "grep -q '\"data\": \"complete\"'", NULL), 0);
}

/* Another user's client is refused by the agent, which stays idle. That
 * user runs a copy of the CLI (record -p loads no library of ours) where
 * it can reach it: the checkout may be in a directory it cannot enter. */
static void test_other_uid_refused(void **state)
{
	static const char *const files[] = { CLI, NULL };
	struct svc s;
	char cli[PATH_MAX], cmd[PATH_MAX + 128], *out = NULL;

	if (geteuid() != 0)
		SPROBE_SKIP("needs root to run a client as another uid (nobody)");
	char *dir = sprobe_test_uid_dir(65534, 65534, files, 0);
	*state = dir;
	snprintf(cli, sizeof(cli), "%s/stackprobe", dir);
	svc_start(&s, "idle", NULL);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		char pid[16], outp[PATH_MAX], errp[PATH_MAX];
		snprintf(pid, sizeof(pid), "%d", (int)s.pid);
		snprintf(outp, sizeof(outp), "%s/out/n.data", dir);
		snprintf(errp, sizeof(errp), "%s/out/n.err", dir);
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(99);
		int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (e < 0)
			_exit(98);
		dup2(e, 2);
		execl(cli, "stackprobe", "record", "-p", pid, "-d", "1", "-o", outp, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(wait_status(c), 1);
	snprintf(cmd, sizeof(cmd), "cat %s/out/n.err", dir);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	assert_non_null(strstr(out, "refused uid 65534"));
	free(out);
	assert_idle(s.pid);
	/* Unharmed: its own user (root here) still records it. */
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.3 -o " OUT "/od-root.data --no-report "
		 "2>&1", (int)s.pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	free(out);
	svc_stop(&s);
}

static void test_dead_pid_and_no_agent(void **state)
{
	char cmd[256], *out = NULL;
	int p[2];

	(void)state;
	pid_t dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(wait_status(dead), 0);
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 1 -o " OUT "/od-dead.data 2>&1", (int)dead);
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	assert_non_null(strstr(out, "no process"));
	free(out);
	assert_int_equal(access(OUT "/od-dead.data", F_OK), -1);

	/* A live process without the agent. */
	assert_int_equal(pipe(p), 0);
	pid_t plain = fork();
	assert_true(plain >= 0);
	if (plain == 0) {
		char b;
		close(p[1]);
		_exit(read(p[0], &b, 1) < 0 ? 1 : 0);
	}
	close(p[0]);
	/* Without an agent the kernel tier records it (tests/test_external_attach.c),
	 * in cpu mode only: wall mode asked for is refused, saying why. */
	unlink(OUT "/od-plain.data");
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 1 --mode wall -o " OUT "/od-plain.data 2>&1",
		 (int)plain);
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	assert_non_null(strstr(out, "no stackprobe agent is loaded in it"));
	assert_non_null(strstr(out, "--mode wall needs the agent"));
	assert_int_equal(access(OUT "/od-plain.data", F_OK), -1);
	free(out);
	close(p[1]);
	assert_int_equal(wait_status(plain), 0);
	/* Usage errors. */
	assert_int_equal(sprobe_test_run(CLI " record -p 1 -- true 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " record -d 3 -- true 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " record -p x 2>/dev/null", NULL), 2);
	assert_int_equal(sprobe_test_run(CLI " record -p 1 -d 0 2>/dev/null", NULL), 2);
}

/* Talk to the control channel by hand: one request line, the reply. */
static void raw_request(pid_t pid, const char *req, char *reply, size_t cap)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "stackprobe-ctl-%d", (int)pid);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a,
				 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n)),
			 0);
	if (req)
		assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	size_t got = 0;
	ssize_t r;
	while (req && got < cap - 1 && (r = recv(fd, reply + got, cap - 1 - got, 0)) > 0) {
		got += (size_t)r;
		if (memchr(reply, '\n', got))
			break;
	}
	if (req)
		reply[got] = '\0';
	close(fd);
}

static void test_bad_requests(void **state)
{
	struct svc s;
	char reply[256], cmd[256], *out = NULL;

	(void)state;
	svc_start(&s, "idle", NULL);
	/* Malformed, a relative directory, an unknown version, a rate out
	 * of range: refused, nothing started. */
	static const char *const bad[] = {
		"hello\n", "start 1 99 wall 1 relative/dir\n", "start 2 99 wall 1 /tmp\n",
		"start 1 0 wall 1 /tmp\n", "start 1 99 sideways 1 /tmp\n", "start 1 99 wall -1 /tmp\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		raw_request(s.pid, bad[i], reply, sizeof(reply));
		assert_true(strncmp(reply, "error ", 6) == 0);
		assert_idle(s.pid);
	}
	/* A directory the part cannot be created in: the sampler's error. */
	raw_request(s.pid, "start 1 99 wall 1 /nonexistent/dir\n", reply, sizeof(reply));
	assert_true(strncmp(reply, "error ", 6) == 0);
	/* A client that connects and goes away at once. */
	raw_request(s.pid, NULL, reply, sizeof(reply));
	ctl_switches_when_idle(s.pid);
	assert_idle(s.pid);
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.3 -o " OUT "/od-bad.data --no-report "
		 "2>&1", (int)s.pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	free(out);
	assert_service_profile(OUT "/od-bad.data");
	svc_stop(&s);
}

static void test_table_agent_keeps_dump(void **state)
{
	struct svc s;
	char cmd[256], *out = NULL;

	(void)state;
	svc_start(&s, "1", "1");
	wait_dump_shows(s.pid, "od_compute");
	for (int i = 0; i < 2; i++) {
		snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 0.5 -o " OUT "/od-table.data "
			 "--no-report 2>&1", (int)s.pid);
		assert_int_equal(sprobe_test_run(cmd, &out), 0);
		free(out);
		assert_service_profile(OUT "/od-table.data");
		/* the table sampler is back */
		wait_probe(s.pid, true);
		wait_dump_shows(s.pid, "od_compute");
	}
	svc_stop(&s);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_three_recordings_idle_between, setup_dir),
	cmocka_unit_test_setup(test_cpu_mode_on_demand, setup_dir),
	cmocka_unit_test_setup(test_service_in_another_mount_namespace, setup_dir),
	cmocka_unit_test_setup(test_second_client_busy_and_ctrl_c, setup_dir),
	cmocka_unit_test_setup(test_client_killed_agent_goes_idle, setup_dir),
	cmocka_unit_test_setup(test_service_exits_mid_recording, setup_dir),
	cmocka_unit_test_setup_teardown(test_other_uid_refused, setup_dir, sprobe_test_uid_dir_teardown),
	cmocka_unit_test_setup(test_dead_pid_and_no_agent, setup_dir),
	cmocka_unit_test_setup(test_bad_requests, setup_dir),
	cmocka_unit_test_setup(test_table_agent_keeps_dump, setup_dir),
};

SPROBE_TEST_MAIN(tests)
