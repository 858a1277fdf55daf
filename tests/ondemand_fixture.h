/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the on-demand tests (test_ondemand.c, test_ondemand_continuous.c,
 * test_ondemand_agent.c): build/odservice started and stopped, the checks
 * that its agent is idle, `stackprobe record -p` in the background, what a
 * recording holds, `stackprobe dump`.
 */
#ifndef SPROBE_ONDEMAND_FIXTURE_H
#define SPROBE_ONDEMAND_FIXTURE_H

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

static inline void svc_start(struct svc *s, const char *agent_env, const char *control_env)
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
static inline void svc_stop(struct svc *s)
{
	int st = 0;

	close(s->in);
	assert_int_equal(waitpid(s->pid, &st, 0), s->pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static inline bool read_small(const char *path, char *buf, size_t cap)
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
static inline pid_t thread_named(pid_t pid, const char *comm)
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

static inline void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* Wait (bounded: 20 s) until the sampler's probe thread is there
 * (want) or gone (!want). A condition polled, not a delay. */
static inline void wait_probe(pid_t pid, bool want)
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
static inline unsigned long ctl_switches_when_idle(pid_t pid)
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
static inline void assert_idle(pid_t pid)
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
static inline char *folded(const char *data)
{
	char cmd[256], *out = NULL;
	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format folded", data);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	return out;
}

static inline bool has_line_starting(const char *text, const char *prefix)
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
static inline void assert_named_in_file(const char *data)
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
static inline void assert_service_profile(const char *data)
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
static inline pid_t record_bg(pid_t pid, const char *args, const char *errfile)
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
static inline void wait_part_sampled(const char *output)
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

static inline int wait_status(pid_t c)
{
	int st = 0;
	assert_int_equal(waitpid(c, &st, 0), c);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline int setup_dir(void **state)
{
	(void)state;
	mkdir("build", 0755);
	mkdir(OUT, 0755);
	return 0;
}
/* STACKPROBE_AGENT=1 STACKPROBE_CONTROL=1: the table sampler runs
 * between recordings, so `stackprobe dump` works before and after one. */
static inline bool dump_shows(pid_t pid, const char *what)
{
	char cmd[128], *out = NULL;
	snprintf(cmd, sizeof(cmd), CLI " dump %d 2>&1", (int)pid);
	int rc = sprobe_test_run(cmd, &out);
	bool ok = rc == 0 && strstr(out, what);
	free(out);
	return ok;
}

static inline void wait_dump_shows(pid_t pid, const char *what)
{
	for (int i = 0; i < 400; i++) {
		if (dump_shows(pid, what))
			return;
		pause_ms(50);
	}
	fail_msg("stackprobe dump %d never showed %s", (int)pid, what);
}
static inline void svc_start_env(struct svc *s, const char *const *env)
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

#endif
