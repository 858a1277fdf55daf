/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `record -- CMD` on programs of the tree the agent cannot preload or that
 * test its edges: static binaries (alone, deeper in a tree, spawned by make,
 * exec'd from a thread), a set-ID program, an external request for another
 * pid, the agent's messages kept out of the program's stderr, a silent peer
 * on record's socket, a deleted program and a nested record, an environment
 * without the agent, an external tree. Everything runs for real under
 * build/stackprobe on tests/workloads/treework.c; the fixtures in
 * tree_fixture.h.
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

static void test_static_binary(void **state)
{
	char *out, *json;

	record("static", "--no-report", "build/treework-static _exit 5 200", 5, &out);
	assert_non_null(strstr(out, "is statically linked: the agent cannot be loaded into it"));
	json = report(OUT "/tree-static.data", "json");
	assert_int_equal(procs_matching(json, "\"end\": \"exited\"", "\"code\": 5"), 1);
	if (strstr(out, "sampled through the kernel instead")) {
		/* The external tier: the kernel's samples of it, named. */
		char *folded = report(OUT "/tree-static.data", "folded");

		assert_int_equal(procs_matching(json, "\"sampled\": true", NULL), 1);
		assert_true(sprobe_test_folded_count(folded, "spin_leaf", NULL) >= 15);
		free(folded);
	} else {
		print_message("  (perf events refused here: %s)\n", out);
		assert_int_equal(procs_matching(json, "\"sampled\": false", "statically linked"), 1);
	}
	free(out);
	free(json);
}

/* Deeper in a tree (a shell runs it; a #! wrapper script execs it): the
 * agent in the process about to exec asks record, which has the kernel
 * sample the new image from its first instruction (userspace/agent/
 * external_request.c, userspace/cli/ext_children.c). Each is its own
 * process image in the report, with its exit status, and the processes
 * the agent entered are sampled as before. */
static void test_static_binary_in_tree(void **state)
{
	char *out, *json, *folded;
	FILE *f;

	(void)state;
	f = fopen(OUT "/tree-wrapper.sh", "w");
	assert_non_null(f);
	fputs("#!/bin/sh\nexec build/treework-static _exit 4 300\n", f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(OUT "/tree-wrapper.sh", 0755), 0);
	record("static2", "--no-report --mode cpu",
	       "sh -c 'build/treework-static _exit 3 300; " OUT "/tree-wrapper.sh; "
	       TW " spin 100; true'", 0, &out);
	json = report(OUT "/tree-static2.data", "json");
	if (strstr(out, "cannot sample it through the kernel")) {
		print_message("  (perf events refused here: %s)\n", out);
		assert_int_equal(procs_matching(json, "\"sampled\": false", "statically linked"), 2);
		free(out);
		free(json);
		return;
	}
	/* One line each, saying so. */
	const char *l1 = strstr(out, "(pid "), *l2 = l1 ? strstr(l1 + 1, "(pid ") : NULL;
	assert_non_null(l2);
	assert_null(strstr(l2 + 1, "(pid "));
	assert_non_null(strstr(l1, "sampled through the kernel"));
	assert_non_null(strstr(l2, "sampled through the kernel"));
	assert_int_equal(procs_matching(json, "\"sampled\": false", NULL), 0);
	assert_int_equal(procs_matching(json, "\"code\": 3", "treework-static"), 1);
	assert_int_equal(procs_matching(json, "\"code\": 4", "treework-static"), 1);
	/* The wrapper's image, then the static program under the same pid. */
	assert_int_equal(procs_matching(json, "\"end\": \"exec'd\"", "tree-wrapper.sh"), 1);
	folded = report(OUT "/tree-static2.data", "folded");
	int procs = 0;
	unsigned long kern = sprobe_test_folded_count(folded, "treework-static", &procs);

	print_message("  static programs in the tree: %lu samples in %d processes\n", kern, procs);
	/* 2 x 300 ms of CPU at 199 Hz: ~60 samples each. */
	assert_int_equal(procs, 2);
	assert_true(kern >= 40);
	assert_true(sprobe_test_folded_count(folded, "spin_leaf", NULL) >= 40 + 8);
	free(folded);
	free(out);
	free(json);
}

/* GNU make starts its recipes with posix_spawn: a static program there
 * runs no code of ours before its exec, so record attaches the kernel
 * tier to it once posix_spawn has returned (the parent asks; record
 * checks that the asker is the child's parent). */
static void test_static_spawned_by_make(void **state)
{
	char *out, *json, *folded;
	FILE *f;
	int procs = 0;

	(void)state;
	if (sprobe_test_run("command -v make >/dev/null", NULL) != 0)
		SPROBE_SKIP("no make");
	mkdir(OUT "/tree-mk", 0755);
	f = fopen(OUT "/tree-mk/Makefile", "w");
	assert_non_null(f);
	fputs("all:\n\t../../treework-static _exit 0 300\n\t../../treework-static spin 300\n", f);
	assert_int_equal(fclose(f), 0);
	record("mkstatic", "--no-report --mode cpu", "make -s -C " OUT "/tree-mk", 0, &out);
	json = report(OUT "/tree-mkstatic.data", "json");
	if (strstr(out, "not sampled") || strstr(out, "cannot sample")) {
		print_message("  (perf events refused here: %s)\n", out);
		free(out);
		free(json);
		return;
	}
	assert_non_null(strstr(out, "attached once posix_spawn returned"));
	assert_int_equal(procs_matching(json, "\"sampled\": false", NULL), 0);
	folded = report(OUT "/tree-mkstatic.data", "folded");
	unsigned long n = sprobe_test_folded_count(folded, "spin_leaf", &procs);

	print_message("  static recipes of make: %lu samples in %d processes\n", n, procs);
	assert_int_equal(procs, 2);
	assert_true(n >= 60); /* 2 x 300 ms at 199 Hz: ~120 */
	free(folded);
	free(json);
	free(out);
}

/* A set-ID program (of another user): the loader ignores LD_PRELOAD and
 * the kernel drops perf events at its exec, so record attaches the
 * kernel tier right after the exec: as the command itself (the exec
 * pipe's end of file) and deeper in the tree (the agent passes record
 * such a pipe before the exec). */
static void test_setid_program(void **state)
{
	char *out, *json, *folded;

	(void)state;
	if (geteuid() != 0)
		SPROBE_SKIP("needs root to make a set-user-ID program of another user");
	assert_int_equal(sprobe_test_run("cp " TW " " OUT "/tree-suid && chown 65534 " OUT
					 "/tree-suid && chmod 4755 " OUT "/tree-suid", NULL), 0);
	record("suid", "--no-report --mode cpu", OUT "/tree-suid _exit 3 300", 3, &out);
	if (strstr(out, "it runs unsampled")) {
		print_message("  (perf events refused here: %s)\n", out);
		free(out);
		return;
	}
	assert_non_null(strstr(out, "attached just after its exec"));
	folded = report(OUT "/tree-suid.data", "folded");
	/* 300 ms of CPU at 199 Hz: ~60 samples, less what ran before the
	 * attach. */
	assert_true(sprobe_test_folded_count(folded, "spin_leaf", NULL) >= 30);
	free(folded);
	free(out);
	record("suid2", "--no-report --mode cpu",
	       "sh -c '" OUT "/tree-suid _exit 4 300; " OUT "/tree-suid spin 300; true'", 0, &out);
	json = report(OUT "/tree-suid2.data", "json");
	assert_int_equal(procs_matching(json, "\"sampled\": false", NULL), 0);
	assert_int_equal(procs_matching(json, "\"code\": 4", "tree-suid"), 1);
	folded = report(OUT "/tree-suid2.data", "folded");
	int procs = 0;
	unsigned long n = sprobe_test_folded_count(folded, "spin_leaf", &procs);

	print_message("  set-ID programs in the tree: %lu samples in %d processes\n", n, procs);
	assert_int_equal(procs, 2);
	assert_true(n >= 60);
	free(folded);
	free(json);
	free(out);
	/* Python's subprocess starts it with vfork: the child shares the
	 * parent's memory, and the request it makes must leave the parent's
	 * descriptors alone (its pipes must still close: EBADF here before). */
	if (sprobe_test_run("python3 -c 'import subprocess' 2>/dev/null", NULL) == 0) {
		record("suid3", "--no-report --mode cpu",
		       "python3 -c \"import subprocess; subprocess.run(['" OUT "/tree-suid', "
		       "'spin', '100'], capture_output=True, check=True); print('ran')\"",
		       0, &out);
		assert_non_null(strstr(out, "ran"));
		free(out);
	}
}

/* record opens kernel events only for the process that asks for itself:
 * a request naming another pid (here record's own parent, the test) is
 * refused, whatever the asker. */
static void test_external_request_for_another_pid(void **state)
{
	char cmd[1024], *out;

	(void)state;
	if (sprobe_test_run("python3 -c 'import socket' 2>/dev/null", NULL) != 0)
		SPROBE_SKIP("no python3 to forge a request with");
	snprintf(cmd, sizeof(cmd),
		 "python3 -c \"import os,socket; s=socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); "
		 "s.connect('\\\\0'+os.environ['STACKPROBE_EXTERNAL_SOCK']); "
		 "s.send(b'external %d %d 0 1 /bin/true\\\\tforged'); print(s.recv(300).decode())\"",
		 (int)getpid(), (int)getpid());
	record("forged", "--no-report", cmd, 0, &out);
	assert_non_null(strstr(out, "no the request is not from pid"));
	assert_null(strstr(out, "sampled through the kernel"));
	free(out);
}

/* The agent writes nothing on the program's descriptor 2 under record
 * (a program may point it at its own file: a daemon's log): its messages
 * go to record, which prints them on its own stderr. */
static void test_agent_messages_not_in_program_stderr(void **state)
{
	char *out, *err = NULL;

	(void)state;
	unlink(OUT "/tree-own-stderr.txt");
	record("ownerr", "--no-report --mode cpu",
	       "sh -c 'exec 2>" OUT "/tree-own-stderr.txt; exec " TW " spin 50'", 0, &out);
	assert_non_null(strstr(out, "cpu engine: "));
	assert_int_equal(sprobe_test_run("cat " OUT "/tree-own-stderr.txt", &err), 0);
	if (err[0])
		fail_msg("the program's own stderr file got: %s", err);
	free(err);
	free(out);
}

/* A static program exec'd by a thread other than the main one: the
 * kernel frees the main thread (and events on it) at that exec, so the
 * events go on the thread that execs. */
static void test_static_exec_from_a_thread(void **state)
{
	char *out, *folded;

	(void)state;
	record("threxec", "--no-report --mode cpu", TW " threxec build/treework-static spin 300", 0,
	       &out);
	if (strstr(out, "cannot sample it through the kernel")) {
		print_message("  (perf events refused here: %s)\n", out);
		free(out);
		return;
	}
	assert_non_null(strstr(out, "sampled through the kernel"));
	folded = report(OUT "/tree-threxec.data", "folded");
	assert_true(sprobe_test_folded_count(folded, "spin_leaf", NULL) >= 30); /* ~60 */
	free(folded);
	free(out);
}

/* A process of the tree that connects to record's socket and says
 * nothing (here for 2 s) does not stop record serving the next request:
 * the static program exec'd meanwhile is sampled. */
static void test_silent_peer_does_not_block(void **state)
{
	char *out, *folded;

	(void)state;
	if (sprobe_test_run("python3 -c 'import socket' 2>/dev/null", NULL) != 0)
		SPROBE_SKIP("no python3 to make a silent peer with");
	record("silent", "--no-report --mode cpu",
	       "sh -c 'python3 -c \"import os,socket,sys,time; s=socket.socket(socket.AF_UNIX, "
	       "socket.SOCK_SEQPACKET); s.connect(chr(0)+os.environ[chr(83)+\\\"TACKPROBE_EXTERNAL_SOCK\\\"]); "
	       "print(1, flush=True); time.sleep(2)\" | { read x; build/treework-static spin 300; }'",
	       0, &out);
	if (strstr(out, "cannot sample it through the kernel")) {
		print_message("  (perf events refused here: %s)\n", out);
		free(out);
		return;
	}
	assert_non_null(strstr(out, "sampled through the kernel"));
	folded = report(OUT "/tree-silent.data", "folded");
	assert_true(sprobe_test_folded_count(folded, "spin_leaf", NULL) >= 30);
	free(folded);
	free(out);
}

/* A program the tree builds, runs and deletes (a configure test, `make
 * check`) keeps its names: pcs of files outside the system's
 * directories are named in the process, not left for record. And a
 * record inside a record names what its own agents left to it. */
static void test_names_of_deleted_program_and_nested_record(void **state)
{
	char *out, *folded;

	(void)state;
	record("deleted", "--no-report",
	       "sh -c 'cp " TW " " OUT "/tree-tmpprog && " OUT "/tree-tmpprog spin 200; rm -f " OUT
	       "/tree-tmpprog'", 0, &out);
	folded = report(OUT "/tree-deleted.data", "folded");
	assert_true(sprobe_test_folded_count(folded, "spin_leaf", NULL) >= 10);
	free(folded);
	free(out);
	record("nested", "--no-report",
	       CLI " record --no-report -F 499 -o " OUT "/tree-inner.data -- sh -c "
	       "\"seq 1 1000000 | gzip -9 >/dev/null\"",
	       0, &out);
	folded = report(OUT "/tree-inner.data", "folded");
	/* gzip is stripped; libc's names are there once named by someone. */
	assert_non_null(strstr(folded, "__libc_start_main"));
	free(folded);
	free(out);
}

static void test_environment_without_agent(void **state)
{
	char *out, *json;

	(void)state;
	/* An exec with an environment that drops LD_PRELOAD (env -i). */
	record("envi", "--no-report", "sh -c 'env -i " TW " spin 20; true'", 0, &out);
	json = report(OUT "/tree-envi.data", "json");
	assert_int_equal(procs_matching(json, "\"sampled\": false", "no LD_PRELOAD"), 1);
	free(out);
	free(json);
}

/* record --external: the kernel samples the whole tree (no agent): a
 * static program's forked workers, named and with their exit codes. */
static void test_external_tree(void **state)
{
	char *out, *folded, *json;
	int procs;

	record("ext", "--no-report --external", TW " fork 2 300", 0, &out);
	if (strstr(out, "cannot sample")) {
		print_message("SKIP: perf events refused here: %s\n", out);
		free(out);
		skip();
	}
	folded = report(OUT "/tree-ext.data", "folded");
	json = report(OUT "/tree-ext.data", "json");
	unsigned long child = sprobe_test_folded_count(folded, "fork_child_spin", &procs);
	print_message("  external: fork_child_spin %lu samples in %d processes\n", child, procs);
	assert_int_equal(procs, 2);
	assert_true(child >= 60);
	assert_true(sprobe_test_folded_count(folded, "fork_parent_spin", NULL) >= 5);
	assert_non_null(strstr(json, "\"perf-event\": "));
	free(out);
	free(folded);
	free(json);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_static_binary),
	cmocka_unit_test(test_static_binary_in_tree),
	cmocka_unit_test(test_static_spawned_by_make),
	cmocka_unit_test(test_setid_program),
	cmocka_unit_test(test_external_request_for_another_pid),
	cmocka_unit_test(test_agent_messages_not_in_program_stderr),
	cmocka_unit_test(test_static_exec_from_a_thread),
	cmocka_unit_test(test_silent_peer_does_not_block),
	cmocka_unit_test(test_names_of_deleted_program_and_nested_record),
	cmocka_unit_test(test_environment_without_agent),
	cmocka_unit_test(test_external_tree),
};

SPROBE_TEST_MAIN(tests)
