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

#define CLI "build/stackprobe"
#define OUT "build/test-out"

struct svc {
	pid_t pid;
	int in; /* the service's stdin: closing it ends the service */
};

static void svc_start(struct svc *s, const char *agent_env, const char *control_env)
{
	int in[2], out[2];
	char lib[PATH_MAX];

	assert_non_null(realpath("build/libstackprobe.so", lib));
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		int e = open(OUT "/odservice.err", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (e >= 0)
			dup2(e, 2);
		setenv("LD_PRELOAD", lib, 1);
		setenv("STACKPROBE_AGENT", agent_env, 1);
		if (control_env)
			setenv("STACKPROBE_CONTROL", control_env, 1);
		/* Its own process group: a terminal's Ctrl-C in the test
		 * must not reach it (as with a real service). */
		setpgid(0, 0);
		execl("build/odservice", "odservice", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	s->in = in[1];
	char buf[16] = { 0 };
	ssize_t n = read(out[0], buf, sizeof(buf) - 1);
	close(out[0]);
	assert_true(n > 0);
	assert_string_equal(buf, "ready\n");
}

/* End the service: it must exit 0 by itself (nothing harmed it). */
static void svc_stop(struct svc *s)
{
	int st = 0;

	close(s->in);
	assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static bool read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return true;
}

/* The tid of pid's thread named comm, 0 if none. */
static pid_t thread_named(pid_t pid, const char *comm)
{
	char path[320], name[64];
	struct dirent *de;
	pid_t found = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	assert_non_null(d);
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, de->d_name);
		if (read_small(path, name, sizeof(name))) {
			name[strcspn(name, "\n")] = '\0';
			if (strcmp(name, comm) == 0)
				found = (pid_t)atoi(de->d_name);
		}
	}
	closedir(d);
	return found;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Wait (bounded: 20 s) until the sampler's probe thread is there
 * (want) or gone (!want). A condition polled, not a delay. */
static void wait_probe(pid_t pid, bool want)
{
	for (int i = 0; i < 2000; i++) {
		if ((thread_named(pid, "stackprobe") != 0) == want)
			return;
		pause_ms(10);
	}
	fail_msg("the probe thread of %d did not %s", (int)pid, want ? "appear" : "go away");
}

/* The control thread's voluntary context switches, once it sleeps in
 * poll() again (bounded: 20 s): the counter moves on any wake-up. */
static unsigned long ctl_switches_when_idle(pid_t pid)
{
	pid_t ctl = thread_named(pid, "sprobe-ctl");
	char path[96], buf[4096];

	assert_true(ctl > 0);
	for (int i = 0; i < 2000; i++) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)ctl);
		if (read_small(path, buf, sizeof(buf)) &&
		    strtol(buf, NULL, 10) == SYS_poll) {
			snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)ctl);
			assert_true(read_small(path, buf, sizeof(buf)));
			char *v = strstr(buf, "voluntary_ctxt_switches:");
			assert_non_null(v);
			return strtoul(v + strlen("voluntary_ctxt_switches:"), NULL, 10);
		}
		pause_ms(10);
	}
	fail_msg("the control thread of %d never went back to poll()", (int)pid);
	return 0;
}

/* No sampler thread, no handler for a real-time signal. */
static void assert_idle(pid_t pid)
{
	char path[64], buf[4096];

	assert_int_equal(thread_named(pid, "stackprobe"), 0);
	assert_int_equal(thread_named(pid, "sprobe-writer"), 0);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	assert_true(read_small(path, buf, sizeof(buf)));
	char *c = strstr(buf, "SigCgt:");
	assert_non_null(c);
	unsigned long long caught = strtoull(c + 7, NULL, 16);
	for (int sg = SIGRTMIN; sg <= SIGRTMAX; sg++)
		assert_false(caught & (1ull << (sg - 1)));
}

/* The folded stacks of a data file. */
static char *folded(const char *data)
{
	char cmd[256], *out = NULL;
	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format folded", data);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	return out;
}

static bool has_line_starting(const char *text, const char *prefix)
{
	for (const char *l = text; l && *l;) {
		if (strncmp(l, prefix, strlen(prefix)) == 0)
			return true;
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return false;
}

/* record -p named what the service's agent left to the reader, in the
 * file itself (not only in `stackprobe report`'s copy): no part still
 * says its names and lines are left to the reader, and libc's poll has a
 * named symbol record. */
static void assert_named_in_file(const char *data)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(data);
	struct sprobe_df_record rec;
	unsigned headers = 0, left = 0, poll_named = 0;
	bool libc[256] = { false }; /* module index: libc's (one part here) */

	assert_non_null(rd);
	while (sprobe_datafile_reader__next(rd, &rec) == 1) {
		if (rec.type == SPROBE_DF_HEADER) {
			headers++;
			left += (rec.header.flags & (SPROBE_DF_HEADER_LINES_BY_READER |
						     SPROBE_DF_HEADER_NAMES_BY_READER)) != 0;
		} else if (rec.type == SPROBE_DF_MODULE && rec.module.index < 256) {
			libc[rec.module.index] = rec.module.path_len && strstr(rec.module.path, "/libc.so");
		} else if (rec.type == SPROBE_DF_SYMBOL && rec.symbol.name_len && rec.symbol.module < 256 &&
			   libc[rec.symbol.module] && strstr(rec.symbol.name, "poll")) {
			poll_named++;
		}
	}
	sprobe_datafile_reader__free(rd);
	assert_true(headers > 0);
	assert_int_equal(left, 0);
	assert_true(poll_named > 0);
}

/* A recording of the service has its functions, and not the agent's
 * control thread. */
static void assert_service_profile(const char *data)
{
	char *f = folded(data);
	assert_non_null(strstr(f, "od_compute"));
	assert_non_null(strstr(f, "od_wait_request"));
	/* libc's frame under it named: the service's agent leaves the names
	 * of the system's libraries to the reader, and record -p names them */
	const char *w = strstr(f, "od_wait_request;");

	assert_non_null(w);
	w += strlen("od_wait_request;");
	assert_true(strcspn(w, "; ") > 0);
	assert_non_null(strstr(w, "poll"));
	assert_true((size_t)(strstr(w, "poll") - w) < strcspn(w, "; "));
	assert_false(has_line_starting(f, "sprobe-ctl"));
	free(f);
	assert_named_in_file(data);
}

/* Run `stackprobe record -p pid ARGS` in the background, its stderr
 * into errfile. */
static pid_t record_bg(pid_t pid, const char *args, const char *errfile)
{
	char p[16], cmd[512];
	snprintf(p, sizeof(p), "%d", (int)pid);
	snprintf(cmd, sizeof(cmd), "exec " CLI " record -p %s %s 2>%s", p, args, errfile);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return c;
}

/* Wait (bounded: 20 s) until the part a running `record -p -o OUTPUT`
 * receives holds samples of both service threads: records reach it within
 * 20 ms (the on-demand sampler's flush interval). */
static void wait_part_sampled(const char *output)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "f=$(ls -d %s.parts.*) && " CLI " report -i $f --format folded "
		 "2>/dev/null | grep od_compute >/dev/null && " CLI " report -i $f --format folded "
		 "2>/dev/null | grep od_wait_request >/dev/null", output);
	for (int i = 0; i < 1000; i++) {
		if (sprobe_test_run(cmd, NULL) == 0)
			return;
		pause_ms(20);
	}
	fail_msg("the part of %s never held the service's samples", output);
}

static int wait_status(pid_t c)
{
	int st = 0;
	assert_int_equal(waitpid(c, &st, 0), c);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int setup_dir(void **state)
{
	(void)state;
	mkdir("build", 0755);
	mkdir(OUT, 0755);
	return 0;
}

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

/* STACKPROBE_AGENT=1 STACKPROBE_CONTROL=1: the table sampler runs
 * between recordings, so `stackprobe dump` works before and after one. */
static bool dump_shows(pid_t pid, const char *what)
{
	char cmd[128], *out = NULL;
	snprintf(cmd, sizeof(cmd), CLI " dump %d 2>&1", (int)pid);
	int rc = sprobe_test_run(cmd, &out);
	bool ok = rc == 0 && strstr(out, what);
	free(out);
	return ok;
}

static void wait_dump_shows(pid_t pid, const char *what)
{
	for (int i = 0; i < 400; i++) {
		if (dump_shows(pid, what))
			return;
		pause_ms(50);
	}
	fail_msg("stackprobe dump %d never showed %s", (int)pid, what);
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

/* ---- continuous profiling (userspace/agent/continuous.c) ---- */

/* The *.pb.gz names in dir, sorted (they sort by start time); returns
 * how many, up to max. */
static int list_profiles(const char *dir, char names[][128], int max)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (de->d_name[0] == '.' || len < 7 || len >= 128 ||
		    strcmp(de->d_name + len - 6, ".pb.gz") != 0)
			continue;
		if (n < max)
			memcpy(names[n], de->d_name, len + 1);
		n++;
	}
	closedir(d);
	if (n > max)
		n = max;
	qsort(names, (size_t)n, 128, (int (*)(const void *, const void *))strcmp);
	return n;
}

static void svc_start_env(struct svc *s, const char *const *env)
{
	int in[2], out[2];
	char lib[PATH_MAX];

	assert_non_null(realpath("build/libstackprobe.so", lib));
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		int e = open(OUT "/odservice.err", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (e >= 0)
			dup2(e, 2);
		setenv("LD_PRELOAD", lib, 1);
		for (const char *const *v = env; *v; v++)
			putenv((char *)*v);
		setpgid(0, 0);
		execl("build/odservice", "odservice", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	s->in = in[1];
	char buf[16] = { 0 };
	ssize_t n = read(out[0], buf, sizeof(buf) - 1);
	close(out[0]);
	assert_true(n > 0);
	assert_string_equal(buf, "ready\n");
}

struct prof {
	double start_s, duration_s; /* from the profile itself */
	unsigned long samples;
	bool compute, labels;
};

/* What `go tool pprof` reads in FILE: 0, or -1 if it cannot read it. */
static int read_profile(const char *file, pid_t pid, struct prof *p)
{
	char cmd[PATH_MAX + 200], *out = NULL;
	memset(p, 0, sizeof(*p));
	snprintf(cmd, sizeof(cmd), "go tool pprof -raw %s 2>&1", file);
	if (sprobe_test_run(cmd, &out) != 0) {
		print_message("go tool pprof -raw %s: %s\n", file, out ? out : "");
		free(out);
		return -1;
	}
	/* Time: 2026-12-01 12:50:52.968321769 +0000 UTC */
	char *t = strstr(out, "\nTime: ");
	assert_non_null(t);
	struct tm tm = { 0 };
	double sec = 0;
	assert_int_equal(sscanf(t + 7, "%d-%d-%d %d:%d:%lf", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
				&tm.tm_hour, &tm.tm_min, &sec), 6);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	p->start_s = (double)timegm(&tm) + sec;
	/* samples: "   COUNT  VALUE ...: ids" lines after "Samples:" */
	char *smp = strstr(out, "\nSamples:\n");
	assert_non_null(smp);
	char *line = strchr(smp + 1, '\n') + 1;
	line = strchr(line, '\n') + 1; /* the value-type header line */
	while (*line == ' ') {
		unsigned long c;
		char one[512];
		size_t len = strcspn(line, "\n");
		snprintf(one, sizeof(one), "%.*s", (int)(len < sizeof(one) ? len : sizeof(one) - 1),
			 line);
		/* a sample line: numbers, then ": location ids" (the label
		 * lines under it hold "key:[value]") */
		if (sscanf(one, " %lu ", &c) == 1 && strchr(one, ':') && !strchr(one, '['))
			p->samples += c;
		line = strchr(line, '\n');
		if (!line)
			break;
		line++;
	}
	p->compute = strstr(out, "od_compute") != NULL;
	char want[64];
	snprintf(want, sizeof(want), "pid:[%d]", (int)pid);
	p->labels = strstr(out, "service_name:[odtest]") && strstr(out, "hostname:[") &&
		    strstr(out, want);
	free(out);
	/* Duration: 998.71ms (or 1s, 1.2s) in the -top header */
	snprintf(cmd, sizeof(cmd), "go tool pprof -top %s 2>&1", file);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	char *d = strstr(out, "Duration: ");
	assert_non_null(d);
	char *end;
	p->duration_s = strtod(d + 10, &end);
	if (strncmp(end, "ms", 2) == 0)
		p->duration_s /= 1000;
	else if (strncmp(end, "us", 2) == 0)
		p->duration_s /= 1e6;
	else
		assert_true(*end == 's' || (end[0] == 'm' && end[1] == 'i'));
	free(out);
	return 0;
}

static bool have_go(void)
{
	return sprobe_test_run("go version >/dev/null 2>&1", NULL) == 0;
}

static void test_continuous_five_periods(void **state)
{
	struct svc s;
	char dir[] = OUT "/od-pprof-XXXXXX", env_dir[PATH_MAX], names[16][128], path[PATH_MAX + 160];
	struct prof p[5];
	int n = 0;

	(void)state;
	if (!have_go())
		SPROBE_SKIP("go is not installed (apt-get install golang-go): `go tool pprof` reads "
			    "the profiles");
	assert_non_null(mkdtemp(dir));
	snprintf(env_dir, sizeof(env_dir), "STACKPROBE_PPROF_DIR=%s", dir);
	const char *env[] = { env_dir, "STACKPROBE_PERIOD=1", "STACKPROBE_PPROF_KEEP=100",
			      "STACKPROBE_SERVICE=odtest", NULL };
	mode_t mask = umask(022); /* the usual umask, inherited by the service */

	svc_start_env(&s, env);
	umask(mask);
	for (int i = 0; i < 3000 && (n = list_profiles(dir, names, 16)) < 5; i++)
		pause_ms(10);
	assert_true(n >= 5);
	svc_stop(&s);
	for (int i = 0; i < 5; i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		/* the service user's to read, as perf.data (umask 022 here) */
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
		assert_int_equal(read_profile(path, s.pid, &p[i]), 0);
		assert_true(p[i].samples > 0);
		assert_true(p[i].compute);
		assert_true(p[i].labels);
		/* named with service, pid, start time, period */
		char pre[64];
		snprintf(pre, sizeof(pre), "odtest.%d.", (int)s.pid);
		assert_true(strncmp(names[i], pre, strlen(pre)) == 0);
		assert_non_null(strstr(names[i], ".1s.pb.gz"));
	}
	/* The periods are back to back: each starts where the previous one
	 * ended (the gap is one sampler stop and start), so their durations
	 * add up to the whole run from the first start to the last end. */
	double total = 0;
	for (int i = 0; i < 5; i++) {
		total += p[i].duration_s;
		if (i > 0) {
			/* time_nanos is CLOCK_REALTIME, the duration is measured on
			 * CLOCK_MONOTONIC, read one after the other: a thread
			 * preempted between the two reads (a loaded machine)
			 * shifts a start by that delay, so a small overlap is
			 * the clocks, not the periods. */
			double gap = p[i].start_s - (p[i - 1].start_s + p[i - 1].duration_s);
			assert_true(gap >= -0.05);
			assert_true(gap < 0.5);
		}
	}
	double span = p[4].start_s + p[4].duration_s - p[0].start_s;
	print_message("5 periods: %.4f s of profiles over a %.4f s span\n", total, span);
	assert_true(total <= span + 0.25);
	assert_true(total >= 0.9 * span);
	/* The period running at exit stays as a part; the next service
	 * started on the directory removes the dead process's. */
	char parts[PATH_MAX + 64];
	snprintf(parts, sizeof(parts), "%s/.stackprobe-%d.parts", dir, (int)s.pid);
	assert_int_equal(access(parts, F_OK), 0);
	struct svc s2;
	svc_start_env(&s2, env);
	assert_int_equal(access(parts, F_OK), -1);
	svc_stop(&s2);
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	sprobe_test_run(path, NULL);
}

/* STACKPROBE_PPROF_KEEP bounds the files kept: never more than KEEP
 * profiles, while new ones keep coming. */
static void test_continuous_keep_bound(void **state)
{
	struct svc s;
	char dir[] = OUT "/od-keep-XXXXXX", env_dir[PATH_MAX], names[16][128], seen[8][128];
	int nseen = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(env_dir, sizeof(env_dir), "STACKPROBE_PPROF_DIR=%s", dir);
	const char *env[] = { env_dir, "STACKPROBE_PERIOD=1", "STACKPROBE_PPROF_KEEP=2",
			      "STACKPROBE_SERVICE=odtest", NULL };
	svc_start_env(&s, env);
	for (int i = 0; i < 4000 && nseen < 4; i++) {
		int n = list_profiles(dir, names, 16);
		assert_true(n <= 2);
		for (int k = 0; k < n; k++) {
			bool known = false;
			for (int j = 0; j < nseen; j++)
				known |= strcmp(seen[j], names[k]) == 0;
			if (!known && nseen < 8)
				memcpy(seen[nseen++], names[k], 128);
		}
		pause_ms(10);
	}
	assert_true(nseen >= 4);
	svc_stop(&s);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sprobe_test_run(cmd, NULL);
}

static bool file_has(const char *path, const char *what)
{
	char buf[8192];
	return read_small(path, buf, sizeof(buf)) && strstr(buf, what);
}

/* A full disk while periods are written (a 256 KiB tmpfs filled up):
 * a line on stderr, no profile left half-written, the service unharmed,
 * and profiles again once there is room. */
static void test_continuous_disk_full(void **state)
{
	struct svc s;
	char dir[] = OUT "/od-full-XXXXXX", cmd[PATH_MAX + 128], env_dir[PATH_MAX],
	     names[64][128];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o size=256k tmpfs %s 2>/dev/null", dir);
	if (sprobe_test_run(cmd, NULL) != 0) {
		rmdir(dir);
		SPROBE_SKIP("cannot mount a small tmpfs here (needs root): no disk to fill");
	}
	unlink(OUT "/odservice.err");
	snprintf(env_dir, sizeof(env_dir), "STACKPROBE_PPROF_DIR=%s/p", dir);
	const char *env[] = { env_dir, "STACKPROBE_PERIOD=1", "STACKPROBE_PPROF_KEEP=100", NULL };
	svc_start_env(&s, env);
	snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of=%s/filler bs=4k 2>/dev/null; true", dir);
	assert_int_equal(sprobe_test_run(cmd, NULL), 0);
	for (int i = 0; i < 1500 && !file_has(OUT "/odservice.err", "could not be"); i++)
		pause_ms(20);
	assert_true(file_has(OUT "/odservice.err", "could not be"));
	snprintf(cmd, sizeof(cmd), "%s/p", dir);
	int before = list_profiles(cmd, names, 64);
	/* never a temporary left behind, whatever failed */
	snprintf(cmd, sizeof(cmd), "ls -a %s/p | grep -q '\\.tmp$'", dir);
	assert_int_not_equal(sprobe_test_run(cmd, NULL), 0);
	snprintf(cmd, sizeof(cmd), "%s/filler", dir);
	assert_int_equal(unlink(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/p", dir);
	int after = before;
	for (int i = 0; i < 1500 && (after = list_profiles(cmd, names, 64)) <= before + 1; i++)
		pause_ms(20);
	assert_true(after > before + 1);
	svc_stop(&s);
	/* The first profile written once there is room holds the samples of
	 * its period (its part was started while the disk was full). The
	 * names sort by start time: the new ones come after the old. */
	struct prof p;
	char first[PATH_MAX + 128];
	snprintf(first, sizeof(first), "%s/p/%s", dir, names[before]);
	assert_int_equal(read_profile(first, s.pid, &p), 0);
	print_message("first profile after the disk full: %s, %ld samples\n", names[before],
		      (long)p.samples);
	assert_true(p.samples > 0);
	snprintf(cmd, sizeof(cmd), "umount %s && rmdir %s", dir, dir);
	assert_int_equal(sprobe_test_run(cmd, NULL), 0);
}

/* A directory that cannot be made: a clear line on stderr, the service
 * runs unharmed. */
static void test_continuous_bad_dir(void **state)
{
	struct svc s;
	char *out = NULL;

	(void)state;
	unlink(OUT "/odservice.err");
	const char *env[] = { "STACKPROBE_PPROF_DIR=/proc/nonexistent/dir", NULL };
	svc_start_env(&s, env);
	svc_stop(&s);
	assert_int_equal(sprobe_test_run("cat " OUT "/odservice.err", &out), 0);
	assert_non_null(strstr(out, "STACKPROBE_PPROF_DIR=/proc/nonexistent/dir"));
	free(out);
	const char *env2[] = { "STACKPROBE_PPROF_DIR=" OUT, "STACKPROBE_PERIOD=0", NULL };
	unlink(OUT "/odservice.err");
	svc_start_env(&s, env2);
	svc_stop(&s);
	assert_int_equal(sprobe_test_run("cat " OUT "/odservice.err", &out), 0);
	assert_non_null(strstr(out, "STACKPROBE_PERIOD=0"));
	free(out);
}

/* A directory the service cannot write (a read-only mount): the agent
 * says which directory and why, once for the process and the processes
 * it starts (a shim that execs one program after another), not once per
 * process; the programs run unharmed. */
static void test_continuous_unwritable_dir_said_once(void **state)
{
	char dir[] = OUT "/od-ro-XXXXXX", cmd[3 * PATH_MAX], lib[PATH_MAX], *out = NULL;

	(void)state;
	assert_non_null(realpath("build/libstackprobe.so", lib));
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "mount -t tmpfs -o ro,size=64k tmpfs %s 2>/dev/null", dir);
	if (sprobe_test_run(cmd, NULL) != 0) {
		rmdir(dir);
		SPROBE_SKIP("cannot mount a read-only tmpfs here (needs root)");
	}
	snprintf(cmd, sizeof(cmd),
		 "LD_PRELOAD=%s STACKPROBE_PPROF_DIR=%s sh -c 'sh -c true; sh -c true; "
		 "sh -c \"sh -c true\"; echo ran' 2>" OUT "/od-ro.err",
		 lib, dir);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	assert_non_null(strstr(out, "ran"));
	free(out);
	out = NULL;
	assert_int_equal(sprobe_test_run("cat " OUT "/od-ro.err", &out), 0);
	print_message("stderr: %s", out);
	int lines = 0;
	for (char *p = out; (p = strstr(p, "cannot create")); p++)
		lines++;
	assert_int_equal(lines, 1);
	assert_non_null(strstr(out, dir));
	assert_non_null(strstr(out, "Read-only file system"));
	free(out);
	snprintf(cmd, sizeof(cmd), "umount %s && rmdir %s", dir, dir);
	assert_int_equal(sprobe_test_run(cmd, NULL), 0);
}

/* record -p says why the agent it finds is not used, before the kernel
 * tier's refusal of --mode wall (which keeps these tests off perf). */
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
	cmocka_unit_test_setup(test_continuous_five_periods, setup_dir),
	cmocka_unit_test_setup(test_continuous_keep_bound, setup_dir),
	cmocka_unit_test_setup(test_continuous_disk_full, setup_dir),
	cmocka_unit_test_setup(test_continuous_bad_dir, setup_dir),
	cmocka_unit_test_setup(test_continuous_unwritable_dir_said_once, setup_dir),
	cmocka_unit_test_setup(test_agent_busy_without_channel, setup_dir),
	cmocka_unit_test_setup(test_agent_without_channel, setup_dir),
	cmocka_unit_test_setup(test_killed_service_table_removed, setup_dir),
	cmocka_unit_test_setup(test_killed_service_table_removed_kernel, setup_dir),
	cmocka_unit_test_setup_teardown(test_master_workers_agent, setup_dir, kill_master),
	cmocka_unit_test_setup_teardown(test_master_workers_kernel, setup_dir, kill_master),
};

SPROBE_TEST_MAIN(tests)
