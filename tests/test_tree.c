/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `record -- CMD` samples the whole process tree CMD starts:
 * fork without exec, exec chains, a shell that execs or runs a child,
 * make -j2, a child killed by SIGKILL, _exit, Ctrl-C from a terminal, a
 * static binary, --no-inherit; and a recording with one damaged part
 * still reports the others. The workload is tests/workloads/treework.c
 * (each mode burns CPU in a function of its own name); everything runs
 * for real under build/stackprobe and is read back through its reports.
 *
 * Static and set-ID programs, external requests and the agent's own traces
 * in the tree are in test_tree_programs.c; the fixtures in tree_fixture.h.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/datafile.h>
#include <stackprobe/report.h>

#include "userspace/datafile/merge.h"

#include "run_helper.h"
#include "sprobe_test.h"
#include "tree_fixture.h"

/* Children that fork while their own sampler starts: every grandchild
 * must start clean (the descriptor registry's sections, which a parent's
 * probe thread may hold at fork(), are reset in every forked child), and
 * the whole tree end. A hang is caught by the timeout. */
static void test_fork_storm(void **state)
{
	char *out = NULL;

	(void)state;
	assert_int_equal(sprobe_test_run("timeout -k 5 120 " CLI " record -q -F 999 --no-report -o " OUT
					 "/tree-forkstorm.data -- " TW " forkstorm 6 30 2>&1", &out), 0);
	assert_non_null(strstr(out, "forkstorm: done"));
	free(out);
}

static void test_fork_workers(void **state)
{
	char *out, *folded, *json;
	int procs;

	record("fork", "--no-report", TW " fork 2 300", 0, &out);
	folded = report(OUT "/tree-fork.data", "folded");
	json = report(OUT "/tree-fork.data", "json");
	unsigned long child = sprobe_test_folded_count(folded, "fork_child_spin", &procs);
	print_message("  fork_child_spin: %lu samples in %d processes; parent %lu\n", child, procs,
		      sprobe_test_folded_count(folded, "fork_parent_spin", NULL));
	/* 2 x 300 ms of CPU at 199 Hz: each child well sampled. */
	assert_int_equal(procs, 2);
	assert_true(child >= 40);
	assert_true(sprobe_test_folded_count(folded, "fork_parent_spin", NULL) >= 5);
	/* Each child's end is known (its own exit, its parent's wait). */
	assert_int_equal(procs_matching(json, "\"code\": 10", "\"end\": \"exited\""), 1);
	assert_int_equal(procs_matching(json, "\"code\": 11", "\"end\": \"exited\""), 1);
	assert_int_equal(procs_matching(json, "\"data\": \"complete\"", NULL), 3);
	assert_non_null(strstr(json, "\"status\": \"complete\""));
	/* The trace puts each process's threads under its own pid. */
	char *trace = report(OUT "/tree-fork.data", "trace");
	int pids = 0;

	for (const char *k = trace; (k = strstr(k, "\"name\":\"process_name\"")); k++)
		pids++;
	assert_int_equal(pids, 3);
	free(trace);
	/* The eBPF companion follows the tree: the kernel's windows of every
	 * process's threads are in the recording, next to their own. */
	if (strstr(out, "without kernel timestamps")) {
		print_message("  (no eBPF companion here: %s)\n", out);
	} else {
		int with_kernel = 0;

		for (const char *k = json; (k = strstr(k, "\"kernel\": {")); k++)
			with_kernel++;
		assert_true(with_kernel >= 3);
	}
	free(out);
	free(folded);
	free(json);
}

static void test_no_inherit(void **state)
{
	char *out, *folded, *json;

	record("noinherit", "--no-report --no-inherit", TW " fork 2 200", 0, &out);
	folded = report(OUT "/tree-noinherit.data", "folded");
	json = report(OUT "/tree-noinherit.data", "json");
	assert_int_equal(sprobe_test_folded_count(folded, "fork_child_spin", NULL), 0);
	assert_true(sprobe_test_folded_count(folded, "fork_parent_spin", NULL) + sprobe_test_folded_count(folded, "main", NULL) > 0);
	assert_int_equal(procs_matching(json, "\"pid\"", NULL), 1);
	free(out);
	free(folded);
	free(json);
}

static void test_exec_chain(void **state)
{
	char *out, *folded, *json;

	record("chain", "--no-report", TW " chain 3 300", 0, &out);
	folded = report(OUT "/tree-chain.data", "folded");
	json = report(OUT "/tree-chain.data", "json");
	assert_true(sprobe_test_folded_count(folded, "chain_end_spin", NULL) >= 20);
	/* One pid, four images: three exec'd, the last exited 0. */
	assert_int_equal(procs_matching(json, "\"end\": \"exec'd\"", NULL), 3);
	assert_int_equal(procs_matching(json, "\"exec_index\": 3", "\"end\": \"exited\""), 1);
	free(out);
	free(folded);
	free(json);
}

/* A shell that execs the program (a wrapper script, a pyenv shim), and
 * one that runs it as a child and leaves with its own status. */
static void test_shell_exec_and_child(void **state)
{
	char *out, *folded;
	int procs;

	record("shexec", "--no-report", "sh -c 'exec " TW " spin 300'", 0, &out);
	folded = report(OUT "/tree-shexec.data", "folded");
	assert_true(sprobe_test_folded_count(folded, "spin_leaf", NULL) >= 20);
	free(out);
	free(folded);

	record("shchild", "", "sh -c '" TW " spin 300; " TW " spin 100; exit 4'", 4, &out);
	/* The report of record itself names no part cut short. */
	assert_null(strstr(out, "CUT SHORT"));
	folded = report(OUT "/tree-shchild.data", "folded");
	assert_true(sprobe_test_folded_count(folded, "spin_leaf", &procs) >= 30);
	assert_int_equal(procs, 2);
	/* The agent's wrappers (wait, exec) are not the program's frames. */
	assert_null(strstr(folded, "exec_prepare"));
	assert_null(strstr(folded, "sprobe_"));
	free(out);
	free(folded);
}

/* bash exports its own getenv and setenv (they read and write its shell
 * variables): the agent in bash still takes record's settings. */
static void test_bash_takes_the_settings(void **state)
{
	char *out, *json;

	record("bashenv", "--no-report --mode cpu", "bash -c 'true'", 0, &out);
	json = report(OUT "/tree-bashenv.data", "json");
	assert_non_null(strstr(json, "\"mode\": \"cpu\""));
	assert_non_null(strstr(json, "\"freq_hz\": 199"));
	free(out);
	free(json);
}

/* Source lines and inlined frames in a process the command started: they
 * come once it has run a second (short ones skip them: each would pay
 * its libraries' DWARF), and then for every pc named before too. */
static void test_lines_in_descendant(void **state)
{
	char *out, *folded;

	record("lines", "--no-report", "sh -c 'build/inlined 2000000000; true'", 0, &out);
	folded = report(OUT "/tree-lines.data", "folded");
	unsigned long inl = sprobe_test_folded_count(folded, "inner_hot (inlined)", NULL);
	print_message("  inner_hot (inlined): %lu samples\n", inl);
	assert_true(inl >= 20);
	free(out);
	free(folded);
	/* The per-line view: inner_hot's lines with their samples and text,
	 * the self counts adding up to its self samples. */
	char *src = NULL;
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/tree-lines.data --source inner_hot", &src), 0);
	assert_non_null(strstr(src, "inlined.c"));
	assert_non_null(strstr(src, "s = s * 31"));
	unsigned long self = 0;
	for (char *l = strtok(src, "\n"); l; l = strtok(NULL, "\n")) {
		unsigned long a, b, ln;
		if (sscanf(l, " %lu %lu %lu", &a, &b, &ln) == 3)
			self += a;
	}
	free(src);
	folded = report(OUT "/tree-lines.data", "folded");
	unsigned long leaf = 0;
	for (char *l = strtok(folded, "\n"); l; l = strtok(NULL, "\n")) {
		char *sp = strrchr(l, ' ');
		if (sp && sp - l > 19 && strncmp(sp - 19, "inner_hot (inlined)", 19) == 0)
			leaf += strtoul(sp + 1, NULL, 10);
	}
	free(folded);
	print_message("  --source inner_hot: self %lu, folded leaf %lu\n", self, leaf);
	assert_int_equal(self, leaf);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/tree-lines.data --source no_such_fn 2>&1", &src), 1);
	assert_non_null(strstr(src, "no sample has no_such_fn on its stack"));
	free(src);
}

static void test_make_j2(void **state)
{
	char *out, *folded, mk[256], cmd[512];
	int procs;
	FILE *f;

	snprintf(mk, sizeof(mk), OUT "/tree.mk");
	f = fopen(mk, "w");
	assert_non_null(f);
	fprintf(f, "all: a b\na:\n\t@" TW " spin 300\nb:\n\t@sh -c '" TW " spin 300'\n");
	fclose(f);
	snprintf(cmd, sizeof(cmd), "make -s -j2 -f %s", mk);
	record("make", "--no-report", cmd, 0, &out);
	folded = report(OUT "/tree-make.data", "folded");
	unsigned long n = sprobe_test_folded_count(folded, "spin_leaf", &procs);
	print_message("  make -j2: spin_leaf %lu samples in %d processes\n", n, procs);
	assert_int_equal(procs, 2);
	assert_true(n >= 40);
	free(out);
	free(folded);
}

static void test_killed_child(void **state)
{
	char *out, *json, *folded, *text;

	record("killed", "--no-report", TW " killed 200", 0, &out);
	json = report(OUT "/tree-killed.data", "json");
	folded = report(OUT "/tree-killed.data", "folded");
	text = report(OUT "/tree-killed.data", "text");
	assert_true(sprobe_test_folded_count(folded, "victim_spin", NULL) >= 10);
	assert_int_equal(procs_matching(json, "\"end\": \"killed\"", "\"code\": 9"), 1);
	/* The recording is whole; the victim's part ends at its last write,
	 * which the report says as what it is, not as damage. */
	assert_non_null(strstr(json, "\"status\": \"complete\""));
	assert_non_null(strstr(text, "killed by SIGKILL"));
	assert_null(strstr(text, "CUT SHORT"));
	free(out);
	free(json);
	free(folded);
	free(text);
}

static void test__exit(void **state)
{
	char *out, *json;

	record("uexit", "--no-report", TW " _exit 7 150", 7, &out);
	json = report(OUT "/tree-uexit.data", "json");
	/* _exit finishes the part (the agent wraps it). */
	assert_int_equal(procs_matching(json, "\"end\": \"exited\"", "\"code\": 7"), 1);
	assert_int_equal(procs_matching(json, "\"data\": \"complete\"", NULL), 1);
	free(out);
	free(json);
}

/* A command that cannot be run: its status (127), one line, no
 * recording of nothing. */
static void test_command_not_found(void **state)
{
	char *out;
	struct stat st;

	unlink(OUT "/tree-nocmd.data");
	record("nocmd", "", "./no-such-command-here", 127, &out);
	assert_non_null(strstr(out, "cannot run ./no-such-command-here"));
	assert_null(strstr(out, "CUT SHORT"));
	assert_int_equal(stat(OUT "/tree-nocmd.data", &st), -1);
	free(out);
}

/* Ctrl-C as a terminal sends it: SIGINT from the line discipline to the
 * foreground process group (record and the command). The command ends
 * with SIGINT once, record reports it and keeps what was written. */
static void test_ctrl_c(void **state)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY);
	char buf[8192];
	size_t len = 0;
	int st;

	assert_true(m >= 0);
	assert_int_equal(grantpt(m), 0);
	assert_int_equal(unlockpt(m), 0);
	const char *slave = ptsname(m);
	assert_non_null(slave);
	pid_t p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		setsid();
		int s = open(slave, O_RDWR);
		if (s < 0)
			_exit(120);
		dup2(s, 0);
		dup2(s, 1);
		dup2(s, 2);
		if (s > 2)
			close(s);
		execl(CLI, CLI, "record", "-q", "-F", "199", "-o", OUT "/tree-ctrlc.data", "--",
		      TW, "ready", "200", (char *)NULL);
		_exit(127);
	}
	/* Wait for "ready" (200 ms of its CPU sampled), bounded. */
	for (int tries = 0; tries < 600 && !strstr(buf, "ready"); tries++) {
		struct pollfd pf = { .fd = m, .events = POLLIN };

		if (poll(&pf, 1, 100) > 0) {
			ssize_t n = read(m, buf + len, sizeof(buf) - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
			buf[len] = '\0';
		}
	}
	assert_non_null(strstr(buf, "ready"));
	struct termios t;
	assert_int_equal(tcgetattr(m, &t), 0);
	char intr = (char)t.c_cc[VINTR];
	assert_int_equal(write(m, &intr, 1), 1);
	assert_int_equal(waitpid(p, &st, 0), p);
	close(m);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 128 + SIGINT);
	char *json = report(OUT "/tree-ctrlc.data", "json");
	char *folded = report(OUT "/tree-ctrlc.data", "folded");
	assert_int_equal(procs_matching(json, "\"end\": \"killed\"", "\"code\": 2"), 1);
	assert_non_null(strstr(json, "\"status\": \"complete\""));
	assert_true(sprobe_test_folded_count(folded, "ready_spin", NULL) >= 5);
	free(json);
	free(folded);
}

/* Every process of the tree publishes its node table: `dump PID` of a
 * grandchild of record (a shell's child) while it runs. */
static pid_t find_child_named(pid_t ancestor, const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[300], name[64] = "";
		FILE *f;
		int pid = atoi(de->d_name), pp = pid;

		if (pid <= 1)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(name, sizeof(name), f))
			name[0] = '\0';
		fclose(f);
		name[strcspn(name, "\n")] = '\0';
		if (strcmp(name, comm) != 0)
			continue;
		/* Is ancestor an ancestor? */
		for (int depth = 0; depth < 8 && pp > 1; depth++) {
			char st[512];
			int ppid = 0;

			snprintf(path, sizeof(path), "/proc/%d/stat", pp);
			f = fopen(path, "r");
			if (!f)
				break;
			if (fgets(st, sizeof(st), f)) {
				const char *rp = strrchr(st, ')');
				if (rp)
					sscanf(rp + 2, "%*c %d", &ppid);
			}
			fclose(f);
			if (ppid == ancestor) {
				closedir(d);
				return pid;
			}
			pp = ppid;
		}
	}
	closedir(d);
	return 0;
}

static void test_dump_grandchild(void **state)
{
	int pfd[2], st;
	char buf[4096] = "", cmd[128], *out = NULL;
	size_t len = 0;

	assert_int_equal(pipe(pfd), 0);
	pid_t rec = fork();
	assert_true(rec >= 0);
	if (rec == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execl(CLI, CLI, "record", "-q", "-F", "199", "-o", OUT "/tree-dump.data", "--", "sh", "-c",
		      TW " ready 100; true", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (len < sizeof(buf) - 1 && !strstr(buf, "ready")) {
		ssize_t n = read(pfd[0], buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
	}
	assert_non_null(strstr(buf, "ready"));
	pid_t tw = find_child_named(rec, "treework");
	assert_true(tw > 0);
	snprintf(cmd, sizeof(cmd), CLI " dump %d 2>&1", (int)tw);
	int rc = sprobe_test_run(cmd, &out);
	kill(tw, SIGTERM);
	assert_int_equal(waitpid(rec, &st, 0), rec);
	close(pfd[0]);
	if (rc != 0 || !strstr(out, "ready_spin"))
		fail_msg("dump %d: exit %d:\n%s", (int)tw, rc, out);
	free(out);
}

/* ---- merge: a damaged part ------------------------------------------------ */

static void write_part(const char *path, uint32_t pid, const char *fn_name, int nsamples)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	struct sprobe_datafile_writer *w;
	uint64_t pc = 0x401000 + pid;

	assert_true(fd >= 0);
	w = sprobe_datafile_writer__new(fd, NULL);
	assert_non_null(w);
	struct sprobe_df_record h = { .type = SPROBE_DF_HEADER,
				      .header = { .pid = pid, .freq_hz = 99, .start_mono_ns = pid } };
	struct sprobe_df_record pr = { .type = SPROBE_DF_PROCESS,
				       .process = { .pid = pid, .name = fn_name,
						    .name_len = (uint32_t)strlen(fn_name) } };
	struct sprobe_df_record sym = { .type = SPROBE_DF_SYMBOL,
					.symbol = { .pc = pc, .module = SPROBE_DF_NO_MODULE,
						    .name = fn_name,
						    .name_len = (uint32_t)strlen(fn_name) } };
	assert_int_equal(sprobe_datafile_writer__write(w, &h), 0);
	assert_int_equal(sprobe_datafile_writer__write(w, &pr), 0);
	for (int i = 0; i < nsamples; i++) {
		struct sprobe_df_record s = { .type = SPROBE_DF_SAMPLE,
					      .sample = { .time_ns = pid + 1 + (uint64_t)i, .tid = pid,
							  .pcs = &pc, .nframes = 1 } };
		assert_int_equal(sprobe_datafile_writer__write(w, &s), 0);
	}
	assert_int_equal(sprobe_datafile_writer__write(w, &sym), 0);
	assert_int_equal(sprobe_datafile_writer__finish(w, NULL), 0);
	sprobe_datafile_writer__free(w);
	close(fd);
}

static void test_damaged_part(void **state)
{
	char dir[] = OUT "/tree-merge.XXXXXX", p1[256], p2[256], out[256];
	struct sprobe_merge_result res;
	struct stat st;

	assert_non_null(mkdtemp(dir));
	snprintf(p1, sizeof(p1), "%s/100.0.part", dir);
	snprintf(p2, sizeof(p2), "%s/200.0.part", dir);
	snprintf(out, sizeof(out), "%s.data", dir);
	write_part(p1, 100, "good_fn", 50);
	write_part(p2, 200, "hurt_fn", 50);
	/* Flip a byte in the middle of the second part: a checksum fails
	 * there, after some of its samples. */
	assert_int_equal(stat(p2, &st), 0);
	int fd = open(p2, O_RDWR);
	assert_true(fd >= 0);
	char c;
	assert_int_equal(pread(fd, &c, 1, st.st_size / 2), 1);
	c ^= 0x5a;
	assert_int_equal(pwrite(fd, &c, 1, st.st_size / 2), 1);
	close(fd);

	struct sprobe_merge_opts mo = { .dir = dir, .output = out, .root_pid = 100 };
	assert_int_equal(sprobe_merge__dir(&mo, &res), 0);
	assert_int_equal(res.parts, 2);
	assert_int_equal(res.damaged, 1);
	assert_non_null(strstr(res.damaged_what, "process 200"));

	struct sprobe_report_opts ro = { .sz = sizeof(ro) };
	struct sprobe_report *r = sprobe_report__new(&ro);
	assert_non_null(r);
	assert_int_equal(sprobe_report__load_file(r, out), 0);
	assert_int_equal(sprobe_report__status(r), SPROBE_DF_COMPLETE);
	char *text = NULL;
	size_t tl = 0;
	FILE *m = open_memstream(&text, &tl);
	assert_int_equal(sprobe_report__write(r, m, SPROBE_REPORT_TEXT), 0);
	fclose(m);
	/* The good part whole (50 samples), the damaged one up to the
	 * damage, and the damage named. */
	assert_non_null(strstr(text, "good_fn"));
	assert_non_null(strstr(text, "DAMAGED"));
	assert_true(sprobe_report__samples(r) >= 50 && sprobe_report__samples(r) < 100);
	free(text);
	sprobe_report__free(r);
	/* The parts directory itself (what record leaves when it cannot
	 * merge) reads the same. */
	char cmd[512], *out2 = NULL;
	snprintf(cmd, sizeof(cmd), CLI " report -i %s 2>&1", dir);
	assert_int_equal(sprobe_test_run(cmd, &out2), 0);
	assert_non_null(strstr(out2, "good_fn"));
	assert_non_null(strstr(out2, "DAMAGED"));
	free(out2);
	unlink(p1);
	unlink(p2);
	rmdir(dir);
	unlink(out);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_fork_workers),
	cmocka_unit_test(test_fork_storm),
	cmocka_unit_test(test_no_inherit),
	cmocka_unit_test(test_exec_chain),
	cmocka_unit_test(test_shell_exec_and_child),
	cmocka_unit_test(test_bash_takes_the_settings),
	cmocka_unit_test(test_lines_in_descendant),
	cmocka_unit_test(test_make_j2),
	cmocka_unit_test(test_killed_child),
	cmocka_unit_test(test__exit),
	cmocka_unit_test(test_command_not_found),
	cmocka_unit_test(test_ctrl_c),
	cmocka_unit_test(test_dump_grandchild),
	cmocka_unit_test(test_damaged_part),
};

SPROBE_TEST_MAIN(tests)
