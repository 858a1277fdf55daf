/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `record -p PID` of a process with no agent: the kernel samples it (the
 * external tier). A running program started without
 * the agent (tests/workloads/attachwork.c): its threads, one started after
 * the attach, a child forked after it, its exit mid-recording; -d and
 * Ctrl-C; wall mode refused; refusals (a seccomp filter, another user, a
 * process that is not dumpable as a set-ID one is, a dead pid, a kernel
 * thread) as one line, exit 1 and no data file; CAP_PERFMON without root.
 * Every step is a handshake: the workload says "ready", record prints its
 * tier line once attached, then the workload is told to go.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "run_helper.h"
#include "uid_dir_helper.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out"
#define WORK "build/attachwork"
#define NOBODY 65534

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

/* The CLI start_record runs: CLI, or its copy that NOBODY can reach while
 * a test of another user runs (nobody_dir(), reset by its teardown). */
static const char *record_cli = CLI;

struct proc {
	pid_t pid;
	FILE *out;	/* its stdout (and stderr for record) */
	int in;		/* its stdin, or -1 */
};

/* Become uid (and gid) NOBODY keeping only the capabilities in caps
 * (ambient, so they survive the exec). In the child; exits on failure. */
static void drop_to_nobody(uint64_t caps)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { { 0 } };

	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) || setgroups(0, NULL) ||
	    setresgid(NOBODY, NOBODY, NOBODY) || setresuid(NOBODY, NOBODY, NOBODY))
		_exit(120);
	d[0].effective = d[0].permitted = d[0].inheritable = (uint32_t)caps;
	d[1].effective = d[1].permitted = d[1].inheritable = (uint32_t)(caps >> 32);
	if (syscall(SYS_capset, &h, d))
		_exit(121);
	for (int c = 0; c < 64; c++)
		if ((caps >> c & 1) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0))
			_exit(122);
}

/* Start argv with a pipe on its stdin (want_in) and its stdout (+ stderr
 * if both), as uid NOBODY with caps if as_nobody. */
static void spawn(char *const argv[], bool want_in, bool both, bool as_nobody, uint64_t caps,
		  struct proc *p)
{
	int in[2] = { -1, -1 }, out[2];

	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	if (want_in)
		assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		if (want_in)
			dup2(in[0], 0);
		dup2(out[1], 1);
		if (both)
			dup2(out[1], 2);
		if (as_nobody)
			drop_to_nobody(caps);
		execv(argv[0], argv);
		_exit(127);
	}
	close(out[1]);
	if (want_in)
		close(in[0]);
	p->in = in[1];
	p->out = fdopen(out[0], "r");
	assert_non_null(p->out);
}

static int finish(struct proc *p)
{
	int st;

	if (p->in >= 0)
		close(p->in);
	p->in = -1;
	fclose(p->out);
	assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The workload, its "ready PID" read. */
static void start_work_ms(const char *mode, const char *ms, bool as_nobody, struct proc *w)
{
	char *argv[] = { WORK, (char *)mode, (char *)ms, NULL }, line[64];
	int pid = 0;

	spawn(argv, true, false, as_nobody, 0, w);
	assert_non_null(fgets(line, sizeof(line), w->out));
	assert_int_equal(sscanf(line, "ready %d", &pid), 1);
	assert_int_equal(pid, w->pid);
}

static void start_work(const char *mode, bool as_nobody, struct proc *w)
{
	start_work_ms(mode, "300", as_nobody, w);
}

/* All that p still writes, malloc'd. */
static char *slurp(FILE *f, const char *first)
{
	size_t cap = 1 << 16, len = strlen(first);
	char *buf = malloc(cap);

	assert_non_null(buf);
	memcpy(buf, first, len);
	for (size_t n; (n = fread(buf + len, 1, cap - len - 1, f)) > 0;) {
		len += n;
		if (cap - len < 4096) {
			buf = realloc(buf, cap *= 2);
			assert_non_null(buf);
		}
	}
	buf[len] = '\0';
	return buf;
}

/* Start `record -p pid OPTS -o out` and read its output up to the tier
 * line (the attach is done), or to its end (a refusal: *rc is set). The
 * lines read so far go to *seen. */
static bool start_record(pid_t pid, const char *opts, const char *out, bool as_nobody,
			 uint64_t caps, struct proc *r, char **seen, int *rc)
{
	char pidbuf[16], line[2048], optbuf[256];
	char *argv[24];
	int n = 0;

	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	snprintf(optbuf, sizeof(optbuf), "%s", opts);
	argv[n++] = (char *)record_cli;
	argv[n++] = "record";
	argv[n++] = "-p";
	argv[n++] = pidbuf;
	for (char *t = strtok(optbuf, " "); t && n < 20; t = strtok(NULL, " "))
		argv[n++] = t;
	argv[n++] = "-o";
	argv[n++] = (char *)out;
	argv[n] = NULL;
	spawn(argv, false, true, as_nobody, caps, r);
	size_t len = 0;
	*seen = calloc(1, 1 << 16);
	assert_non_null(*seen);
	while (fgets(line, sizeof(line), r->out)) {
		size_t l = strlen(line);
		if (len + l < (1 << 16) - 1) {
			memcpy(*seen + len, line, l);
			len += l;
			(*seen)[len] = '\0';
		}
		if (strstr(line, "sampling it through the kernel"))
			return true;
	}
	*rc = finish(r);
	return false;
}

__attribute__((noinline)) static char *report(const char *data, const char *fmt)
{
	char cmd[512], *out = NULL;

	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format %s", data, fmt);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	return out;
}

/* Does a folded line have the frame "THREAD-TID" (first in a recording
 * of one process, after "process-PID;" in one of several)? */
static bool in_thread(const char *line, const char *thread)
{
	char want[64];

	snprintf(want, sizeof(want), "%s-", thread);
	if (strncmp(line, want, strlen(want)) == 0)
		return true;
	snprintf(want, sizeof(want), ";%s-", thread);
	return strstr(line, want) != NULL;
}

/* Samples of the folded report whose innermost frame is fn (in a thread
 * whose frame names start with thread, if given). */
static unsigned long top_samples(const char *folded, const char *thread, const char *fn)
{
	unsigned long n = 0;
	char *copy = strdup(folded);

	assert_non_null(copy);
	for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		char *last = strrchr(line, ';');
		if (thread && !in_thread(line, thread))
			continue;
		if (last && strcmp(last + 1, fn) == 0)
			n += strtoul(sp + 1, NULL, 10);
	}
	free(copy);
	return n;
}

static unsigned long thread_samples(const char *folded, const char *thread)
{
	unsigned long n = 0;
	char *copy = strdup(folded);

	assert_non_null(copy);
	for (char *line = strtok(copy, "\n"); line; line = strtok(NULL, "\n")) {
		char *sp = strrchr(line, ' ');
		if (sp && in_thread(line, thread))
			n += strtoul(sp + 1, NULL, 10);
	}
	free(copy);
	return n;
}

/* Nothing claims to be a recording: no data file, no parts directory. */
static void assert_nothing_written(const char *dir, const char *name)
{
	char path[512];
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t nl = strlen(name);

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_int_equal(access(path, F_OK), -1);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, name, nl) == 0 && strstr(de->d_name, ".parts."))
			fail_msg("left behind: %s/%s", dir, de->d_name);
	closedir(d);
}

/* perf events are not allowed at all here (a container): say so, skip. */
static void skip_if_no_perf(const char *seen)
{
	if (strstr(seen, "cannot sample process") &&
	    (strstr(seen, "perf_event_paranoid is") || strstr(seen, "seccomp") ||
	     strstr(seen, "no perf events")))
		SPROBE_SKIP("perf events refused here: %s", seen);
}

static void test_attach_running(void **state)
{
	struct proc w, r;
	char *seen, *folded, *json, *rest;
	int rc = -1;

	(void)state;
	mkdir(OUT, 0755);
	start_work("work", false, &w);
	if (!start_record(w.pid, "-F 499 -d 120 --no-report", OUT "/xa-run.data", false, 0, &r, &seen,
			  &rc)) {
		skip_if_no_perf(seen);
		fail_msg("record -p did not attach (exit %d):\n%s", rc, seen);
	}
	assert_non_null(strstr(seen, "no stackprobe agent is loaded in it"));
	assert_non_null(strstr(seen, "2 threads"));
	/* Attached: now the second thread and the child start. */
	assert_int_equal(write(w.in, "go\n", 3), 3);
	assert_int_equal(finish(&w), 5);
	/* The process's exit ends the recording, -d 120 notwithstanding. */
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	assert_non_null(strstr(rest, "exited with status 5"));
	folded = report(OUT "/xa-run.data", "folded");
	json = report(OUT "/xa-run.data", "json");
	unsigned long a = thread_samples(folded, "spin-a"), b = thread_samples(folded, "spin-b");
	unsigned long atop = top_samples(folded, "spin-a", "attach_spin_a");
	unsigned long btop = top_samples(folded, "spin-b", "attach_spin_b");
	unsigned long child = top_samples(folded, NULL, "attach_child_spin");
	print_message("  spin-a %lu (attach_spin_a on top %lu), spin-b %lu (%lu), child %lu\n", a,
		      atop, b, btop, child);
	/* spin-b and the child: 300 ms of CPU each at 499 Hz (~150 samples). */
	assert_true(b >= 30);
	assert_true(child >= 30);
	assert_true(a >= 30);
	/* The spinning function is the sampled one (self), nearly always. */
	assert_true(atop * 10 >= a * 9);
	assert_true(btop * 10 >= b * 9);
	/* Threads listed under the process, both named; its end is known. */
	assert_non_null(strstr(json, "\"name\": \"spin-a\""));
	assert_non_null(strstr(json, "\"name\": \"spin-b\""));
	char want[96];
	snprintf(want, sizeof(want), "{\"tid\": %d, \"pid\": %d, ", (int)w.pid, (int)w.pid);
	assert_non_null(strstr(json, want));
	snprintf(want, sizeof(want), "{\"pid\": %d, \"exec_index\": 0, \"ppid\": ", (int)w.pid);
	char *root = strstr(json, want);
	assert_non_null(root);
	assert_non_null(strstr(root, "\"end\": \"exited\", \"code\": 5"));
	/* The child: a process of its own, its parent the attached one. */
	snprintf(want, sizeof(want), "\"ppid\": %d, \"name\": \"attachwork\"", (int)w.pid);
	assert_non_null(strstr(json, want));
	assert_non_null(strstr(json, "\"status\": \"complete\""));
	free(seen);
	free(rest);
	free(folded);
	free(json);
}

/* Threads made one after another, also while record lists and attaches
 * them: each is sampled, and once (a thread an attached parent's event
 * was inherited by, given events of its own too, would count twice). */
static void test_threads_made_during_attach(void **state)
{
	struct proc w, r;
	char *seen, *rest, *folded;
	int rc = -1;
	unsigned long per[256];
	unsigned tids[256], n = 0;

	(void)state;
	start_work_ms("churn", "40", false, &w);
	if (!start_record(w.pid, "-F 499 -d 120 --no-report", OUT "/xa-churn.data", false, 0, &r,
			  &seen, &rc)) {
		skip_if_no_perf(seen);
		fail_msg("record -p did not attach (exit %d):\n%s", rc, seen);
	}
	assert_int_equal(write(w.in, "go\n", 3), 3);
	assert_int_equal(finish(&w), 0);
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	folded = report(OUT "/xa-churn.data", "folded");
	for (const char *l = folded; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *c = strncmp(l, "churn-", 6) == 0 ? l : strstr(l, ";churn-");
		const char *nl = strchr(l, '\n');
		if (!c || (nl && c > nl))
			continue;
		unsigned tid = (unsigned)strtoul(c + (*c == ';' ? 7 : 6), NULL, 10);
		const char *sp = nl ? nl : l + strlen(l);
		while (sp > l && sp[-1] != ' ')
			sp--;
		unsigned k = 0;
		while (k < n && tids[k] != tid)
			k++;
		if (k == n && n < 256) {
			tids[n] = tid;
			per[n++] = 0;
		}
		if (k < 256)
			per[k] += strtoul(sp, NULL, 10);
	}
	unsigned long max = 0, total = 0;
	for (unsigned k = 0; k < n; k++) {
		total += per[k];
		max = per[k] > max ? per[k] : max;
	}
	print_message("  %u churn threads sampled, %lu samples, at most %lu in one (40 ms of CPU "
		      "each at 499 Hz: ~20)\n", n, total, max);
	/* 32 made after "go" (4 makers x 8), each 40 ms of CPU. */
	assert_true(n >= 24);
	assert_true(max <= 30);
	free(seen);
	free(rest);
	free(folded);
}

/* -d ends it, the process still running; Ctrl-C (SIGINT) ends it too. */
static void test_duration_and_ctrl_c(void **state)
{
	struct proc w, r;
	char *seen, *rest, *folded;
	int rc = -1;

	(void)state;
	start_work("spin", false, &w);
	if (!start_record(w.pid, "-F 499 -d 0.3 --no-report", OUT "/xa-dur.data", false, 0, &r, &seen,
			  &rc)) {
		skip_if_no_perf(seen);
		fail_msg("record -p did not attach (exit %d):\n%s", rc, seen);
	}
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	assert_null(strstr(rest, "exited"));
	folded = report(OUT "/xa-dur.data", "folded");
	assert_true(top_samples(folded, "spin-a", "attach_spin_a") >= 1);
	free(seen);
	free(rest);
	free(folded);

	assert_true(start_record(w.pid, "-F 499 -d 600 --no-report", OUT "/xa-int.data", false, 0, &r,
				 &seen, &rc));
	assert_int_equal(kill(r.pid, SIGINT), 0);
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	assert_non_null(strstr(rest, "stopped early"));
	char *json = report(OUT "/xa-int.data", "json");
	assert_non_null(strstr(json, "\"status\": \"complete\""));
	/* The workload never noticed: it ends when told. */
	assert_int_equal(kill(w.pid, 0), 0);
	assert_int_equal(finish(&w), 0);
	free(seen);
	free(rest);
	free(json);
}

/* Wall mode cannot come from a CPU clock: refused, saying so. */
static void test_wall_refused(void **state)
{
	struct proc w, r;
	char *seen;
	int rc = -1;

	(void)state;
	start_work("spin", false, &w);
	unlink(OUT "/xa-wall.data");
	assert_false(start_record(w.pid, "--mode wall -d 5", OUT "/xa-wall.data", false, 0, &r, &seen,
				  &rc));
	assert_int_equal(rc, 1);
	assert_non_null(strstr(seen, "--mode wall needs the agent"));
	assert_nothing_written(OUT, "xa-wall.data");
	assert_int_equal(finish(&w), 0);
	free(seen);
}

/* A seccomp filter forbidding perf_event_open (a container's profile):
 * one line naming it, exit 1, nothing written. */
static void test_refused_seccomp(void **state)
{
	struct proc w;
	char cmd[512], *out;

	(void)state;
	start_work("spin", false, &w);
	unlink(OUT "/xa-sec.data");
	snprintf(cmd, sizeof(cmd), "build/noperf " CLI " record -p %d -d 5 -o " OUT "/xa-sec.data 2>&1",
		 (int)w.pid);
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	print_message("  %s", out);
	assert_non_null(strstr(out, "cannot sample process"));
	assert_non_null(strstr(out, "a seccomp filter on stackprobe refuses it"));
	/* One line. */
	int lines = 0;
	for (const char *c = out; *c; c++)
		lines += *c == '\n';
	assert_int_equal(lines, 1);
	assert_nothing_written(OUT, "xa-sec.data");
	assert_int_equal(finish(&w), 0);
	free(out);
}

static char nobody_cli[PATH_MAX], nobody_work[PATH_MAX], nobody_out[PATH_MAX];

/* Copies of the CLI and the workload in a directory NOBODY can reach (the
 * checkout may be in one it cannot enter): NOBODY runs them, and a record
 * as NOBODY with CAP_SYS_PTRACE reads the workload's file. Their out/ is
 * writable by anyone: refusals must come from the kernel, not from the
 * output's place. The directory goes to *state for nobody_dir_teardown. */
static void nobody_dir(void **state, unsigned flags)
{
	static const char *const files[] = { CLI, WORK, NULL };
	char *dir = sprobe_test_uid_dir(NOBODY, NOBODY, files, flags);

	*state = dir;
	snprintf(nobody_cli, sizeof(nobody_cli), "%s/stackprobe", dir);
	snprintf(nobody_work, sizeof(nobody_work), "%s/attachwork", dir);
	snprintf(nobody_out, sizeof(nobody_out), "%s/out", dir);
	record_cli = nobody_cli;
}

static int nobody_dir_teardown(void **state)
{
	record_cli = CLI;
	return sprobe_test_uid_dir_teardown(state);
}

/* The workload at prog (a copy), its "ready PID" read. */
static void start_copy(const char *prog, const char *mode, const char *ms, bool as_nobody,
		       struct proc *w)
{
	char *argv[] = { (char *)prog, (char *)mode, (char *)ms, NULL }, line[64];
	int pid = 0;

	spawn(argv, true, false, as_nobody, 0, w);
	assert_non_null(fgets(line, sizeof(line), w->out));
	assert_int_equal(sscanf(line, "ready %d", &pid), 1);
	assert_int_equal(pid, w->pid);
}

/* Another user's process, without privilege; then with CAP_PERFMON (and
 * CAP_SYS_PTRACE for its memory map) and no root. */
static void test_other_user(void **state)
{
	struct proc w, r;
	char *seen, *rest, out[PATH_MAX + 32];
	int rc = -1;

	if (geteuid() != 0)
		SPROBE_SKIP("needs root to run record as another user");
	nobody_dir(state, 0);
	const char *dir = nobody_out;
	snprintf(out, sizeof(out), "%s/nopriv.data", dir);
	start_copy(nobody_work, "spin", "300", false, &w);
	assert_false(start_record(w.pid, "-d 5", out, true, 0, &r, &seen, &rc));
	print_message("  %s", seen);
	assert_int_equal(rc, 1);
	if (strstr(seen, "perf_event_paranoid is"))
		SPROBE_SKIP("unprivileged perf events are off here: %s", seen);
	assert_non_null(strstr(seen, "runs as uid 0"));
	assert_non_null(strstr(seen, "CAP_PERFMON"));
	assert_nothing_written(dir, "nopriv.data");
	free(seen);

	/* CAP_PERFMON and CAP_SYS_PTRACE, uid nobody: sampled, named. */
	snprintf(out, sizeof(out), "%s/perfmon.data", dir);
	if (!start_record(w.pid, "-F 499 -d 0.3 --no-report", out, true,
			  1ull << CAP_PERFMON | 1ull << CAP_SYS_PTRACE, &r, &seen, &rc))
		fail_msg("CAP_PERFMON: exit %d:\n%s", rc, seen);
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	char *folded = report(out, "folded");
	assert_true(top_samples(folded, "spin-a", "attach_spin_a") >= 1);
	free(folded);
	free(rest);
	free(seen);
	/* CAP_PERFMON alone: sampled, and it says why names are missing. */
	snprintf(out, sizeof(out), "%s/perfmon-only.data", dir);
	if (!start_record(w.pid, "-F 499 -d 0.3 --no-report", out, true, 1ull << CAP_PERFMON, &r, &seen,
			  &rc))
		fail_msg("CAP_PERFMON alone: exit %d:\n%s", rc, seen);
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	assert_non_null(strstr(rest, "its samples will have no function names"));
	assert_non_null(strstr(rest, "samples,"));
	free(rest);
	free(seen);
	assert_int_equal(finish(&w), 0);
}

/* Like a set-ID program (the loader ignores LD_PRELOAD there, so no agent):
 * not dumpable. Its own user may not sample it; root does. */
static void test_not_dumpable(void **state)
{
	struct proc w, r;
	char *seen, *rest, out[PATH_MAX + 32];
	int rc = -1;

	if (geteuid() != 0)
		SPROBE_SKIP("needs root to run the workload and record as another user");
	nobody_dir(state, 0);
	const char *dir = nobody_out;
	snprintf(out, sizeof(out), "%s/nodump.data", dir);
	start_copy(nobody_work, "nodump", "300", true, &w);
	assert_false(start_record(w.pid, "-d 5", out, true, 0, &r, &seen, &rc));
	print_message("  %s", seen);
	assert_int_equal(rc, 1);
	if (strstr(seen, "perf_event_paranoid is"))
		SPROBE_SKIP("unprivileged perf events are off here: %s", seen);
	assert_non_null(strstr(seen, "is not dumpable"));
	assert_nothing_written(dir, "nodump.data");
	free(seen);
	/* Root samples it. */
	if (!start_record(w.pid, "-F 499 -d 0.3 --no-report", OUT "/xa-nodump.data", false, 0, &r,
			  &seen, &rc))
		fail_msg("root: exit %d:\n%s", rc, seen);
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	char *folded = report(OUT "/xa-nodump.data", "folded");
	assert_true(top_samples(folded, "spin-a", "attach_spin_a") >= 1);
	free(folded);
	free(rest);
	free(seen);
	assert_int_equal(finish(&w), 0);
}

/* A real set-user-ID program (the loader ignores LD_PRELOAD in it: the
 * agent cannot enter it), started by nobody: nobody may not sample it,
 * root does. */
static void test_setuid_program(void **state)
{
	struct proc w, r;
	char *seen, *rest, out[PATH_MAX + 32], cmd[1024];
	int rc = -1;

	if (geteuid() != 0)
		SPROBE_SKIP("needs root to make a set-user-ID program");
	nobody_dir(state, SPROBE_TEST_UID_DIR_SETID);
	const char *dir = nobody_out, *prog = nobody_work;
	assert_int_equal(chown(prog, 0, 0), 0);
	assert_int_equal(chmod(prog, 04755), 0);
	start_copy(prog, "spin", "0", true, &w);
	/* It runs as root, started by nobody: set-ID took effect. */
	snprintf(cmd, sizeof(cmd), "grep -q '^Uid:\t65534\t0\t0' /proc/%d/status", (int)w.pid);
	if (sprobe_test_run(cmd, NULL) != 0) {
		finish(&w);
		SPROBE_SKIP("set-user-ID does not take effect here (a nosuid mount)");
	}
	snprintf(out, sizeof(out), "%s/suid.data", dir);
	assert_false(start_record(w.pid, "-d 5", out, true, 0, &r, &seen, &rc));
	print_message("  %s", seen);
	assert_int_equal(rc, 1);
	if (strstr(seen, "perf_event_paranoid is"))
		SPROBE_SKIP("unprivileged perf events are off here: %s", seen);
	assert_non_null(strstr(seen, "is set-user-ID (started by uid 65534, runs as effective uid 0)"));
	assert_nothing_written(dir, "suid.data");
	free(seen);
	if (!start_record(w.pid, "-F 499 -d 0.3 --no-report", OUT "/xa-suid.data", false, 0, &r, &seen,
			  &rc))
		fail_msg("root: exit %d:\n%s", rc, seen);
	rest = slurp(r.out, seen);
	assert_int_equal(finish(&r), 0);
	char *folded = report(OUT "/xa-suid.data", "folded");
	assert_true(top_samples(folded, "spin-a", "attach_spin_a") >= 1);
	free(folded);
	free(rest);
	free(seen);
	assert_int_equal(finish(&w), 0);
}

static void test_dead_pid_and_kernel_thread(void **state)
{
	char cmd[256], *out, stat[512] = "";
	int st;

	(void)state;
	pid_t dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, &st, 0), dead);
	unlink(OUT "/xa-dead.data");
	snprintf(cmd, sizeof(cmd), CLI " record -p %d -d 1 --external -o " OUT "/xa-dead.data 2>&1",
		 (int)dead);
	assert_int_equal(sprobe_test_run(cmd, &out), 1);
	assert_non_null(strstr(out, "no process"));
	assert_nothing_written(OUT, "xa-dead.data");
	free(out);

	/* kthreadd (pid 2) is a kernel thread where there is a kernel. */
	FILE *f = fopen("/proc/2/stat", "r");
	unsigned long flags = 0;
	if (f) {
		if (!fgets(stat, sizeof(stat), f))
			stat[0] = '\0';
		fclose(f);
	}
	char *p = strrchr(stat, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1 || !(flags & 0x00200000))
		SPROBE_SKIP("pid 2 is not a kernel thread here (a pid namespace)");
	unlink(OUT "/xa-kthread.data");
	assert_int_equal(sprobe_test_run(CLI " record -p 2 -d 1 -o " OUT "/xa-kthread.data 2>&1",
					 &out), 1);
	assert_non_null(strstr(out, "is a kernel thread"));
	assert_nothing_written(OUT, "xa-kthread.data");
	free(out);
}

/* A program busy in the kernel (dd reading /dev/zero: the copy is the
 * kernel's): record -p samples its kernel time too where the kernel lets
 * it (root here), kernel frames on top of the user stack, and says so;
 * a user the kernel refuses kernel samples (perf_event_paranoid 2) gets
 * user time and one phrase saying why. */
static void test_kernel_time(void **state)
{
	char *argv[] = { "/bin/dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=100000000",
			 NULL };
	char dir[] = "/tmp/sprobe-xk-XXXXXX", data[64], par[16] = "";
	struct proc w, r;
	char *seen, *folded;
	int rc = -1;

	(void)state;
	mkdir(OUT, 0755);
	spawn(argv, false, false, false, 0, &w);
	if (!start_record(w.pid, "-F 499 -d 0.5 --no-report", OUT "/xa-kernel.data", false, 0, &r,
			  &seen, &rc)) {
		kill(w.pid, SIGKILL);
		finish(&w);
		skip_if_no_perf(seen);
		fail_msg("record -p did not attach (exit %d):\n%s", rc, seen);
	}
	char *rest = slurp(r.out, seen);
	free(seen);
	assert_int_equal(finish(&r), 0);
	kill(w.pid, SIGKILL);
	finish(&w);
	if (geteuid() == 0) {
		assert_non_null(strstr(rest, "user and kernel"));
		folded = report(OUT "/xa-kernel.data", "folded");
		unsigned long all = sprobe_test_folded_count(folded, "dd-", NULL);
		unsigned long kern = sprobe_test_folded_count(folded, ";[kernel", NULL);
		print_message("  dd: %lu samples, %lu with kernel frames\n", all, kern);
		/* Its CPU is mostly the kernel's copy of zeros. */
		assert_true(all >= 50);
		assert_true(kern * 2 >= all);
		free(folded);
	}
	free(rest);
	if (geteuid() != 0)
		return;
	/* As nobody: the kernel decides by perf_event_paranoid. */
	FILE *pf = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
	assert_non_null(pf);
	assert_non_null(fgets(par, sizeof(par), pf));
	fclose(pf);
	par[strcspn(par, "\n")] = '\0';
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0777), 0);
	snprintf(data, sizeof(data), "%s/k.data", dir);
	spawn(argv, false, false, true, 0, &w);
	if (!start_record(w.pid, "-F 499 -d 0.3 --no-report", data, true, 0, &r, &seen, &rc)) {
		kill(w.pid, SIGKILL);
		finish(&w);
		skip_if_no_perf(seen);
		fail_msg("record -p as nobody did not attach (exit %d):\n%s", rc, seen);
	}
	rest = slurp(r.out, seen);
	free(seen);
	assert_int_equal(finish(&r), 0);
	kill(w.pid, SIGKILL);
	finish(&w);
	if (atoi(par) >= 2) {
		char want[160];
		snprintf(want, sizeof(want), "user time only: the kernel refused kernel samples "
			 "(kernel.perf_event_paranoid is %s; kernel time needs 1 or less", par);
		if (!strstr(rest, want))
			fail_msg("expected \"%s\" in:\n%s", want, rest);
	} else {
		assert_non_null(strstr(rest, "user and kernel"));
	}
	free(rest);
	unlink(data);
	rmdir(dir);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_attach_running),
	cmocka_unit_test(test_threads_made_during_attach),
	cmocka_unit_test(test_duration_and_ctrl_c),
	cmocka_unit_test(test_wall_refused),
	cmocka_unit_test(test_refused_seccomp),
	cmocka_unit_test_teardown(test_other_user, nobody_dir_teardown),
	cmocka_unit_test_teardown(test_not_dumpable, nobody_dir_teardown),
	cmocka_unit_test_teardown(test_setuid_program, nobody_dir_teardown),
	cmocka_unit_test(test_dead_pid_and_kernel_thread),
	cmocka_unit_test(test_kernel_time),
};

SPROBE_TEST_MAIN(tests)
