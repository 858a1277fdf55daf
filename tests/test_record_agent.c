/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * End-to-end tests of the LD_PRELOAD agent under `stackprobe record` and
 * alone, on real processes (build/demo, build/victim, build/cxxcleanup; see
 * tests/workloads/): what a recorded program maps (not libdw, not libbpf),
 * the agent's own pcs named, walks through C++ cleanup frames, lines left
 * to report, a stale node table started over, the DWARF cache, data files
 * private to their user, a program with file capabilities.
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

/* A program under record maps what the agent needs, not libdw (lines and
 * inlined frames are record's), libbz2 (libdw's) nor libbpf (the companion
 * is loaded by record): the agent opens them on first use
 * (userspace/symbols/libdw_dl.h, userspace/pause/libbpf_dl.h). And the
 * companion's embedded BPF object is parked (a PROT_NONE mapping of
 * libstackprobe.so). The test's own maps, after it loaded both, show
 * that the names match libraries that are mapped. */
static void test_record_child_maps_no_libdw_libbpf(void **state)
{
	char *out;
	FILE *f = fopen("/proc/self/maps", "r");
	char line[8192];
	bool self_dw = false, self_bpf = false;

	/* Loaded on first use here too (the test links neither). */
	assert_int_equal(sprobe__libdw_load(), 0);
	assert_int_equal(sprobe__libbpf_load(NULL), 0);
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		self_dw |= strstr(line, "/libdw") != NULL;
		self_bpf |= strstr(line, "/libbpf") != NULL;
	}
	fclose(f);
	assert_true(self_dw && self_bpf);

	for (int cpu = 0; cpu < 2; cpu++) {
		int rc = sprobe_test_run(cpu ? CLI " record -q --no-bpf --no-report --mode cpu -o " OUT
						"/maps-cpu.data -- cat /proc/self/maps"
					     : CLI " record -q --no-bpf --no-report -o " OUT
						"/maps-wall.data -- cat /proc/self/maps",
					 &out);

		assert_int_equal(rc, 0);
		assert_non_null(strstr(out, "/libstackprobe.so"));
		assert_null(strstr(out, "/libdw"));
		assert_null(strstr(out, "/libbz2"));
		assert_null(strstr(out, "/libbpf"));
		bool parked = false;
		for (char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			char *end = strchr(l, '\n');
			char *hit = strstr(l, "/libstackprobe.so");

			if (hit && (!end || hit < end) && strncmp(strchr(l, ' ') + 1, "---p", 4) == 0)
				parked = true;
		}
		assert_true(parked);
		free(out);
	}
}

/* The agent's own pcs (its wrappers are on the stack of a thread that
 * waits in them) are named by record, which has the same library
 * (emit.c own_file()): a shell from /usr waiting in wait4 under record,
 * sampled in wall mode, maps neither libelf nor zlib, and its samples
 * are named. */
static void test_record_own_pcs_named_by_record(void **state)
{
	char *out, *rep;
	int rc = sprobe_test_run(CLI " record -q --no-bpf --no-report -o " OUT
				     "/own.data -- sh -c 'sleep 1; cat /proc/$$/maps'",
				 &out);

	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "/libstackprobe.so"));
	assert_null(strstr(out, "/libelf"));
	assert_null(strstr(out, "/libz."));
	free(out);
	rc = sprobe_test_run(CLI " report -i " OUT "/own.data -f folded", &rep);
	assert_int_equal(rc, 0);
	/* the shell was sampled waiting, and its frames were named */
	assert_true(sprobe_test_folded_count(rep, "__wait4", NULL) > 0);
	free(rep);
}

/* Walks go through frames whose FDE's CIE names a personality routine
 * (every C++ and Rust function with a cleanup or a catch: here mid() and
 * top() hold a std::string). libunwind reads that routine's pointer, a
 * data word, when it parses the CIE; the unwinder refused reads of data,
 * so every such walk ended at the first of those frames (a C++ program's
 * stacks stopped at mid(); a Rust program's at its first function with a
 * drop). Built without frame pointers: only the CFI can walk it. cpu and
 * wall mode. */
static void test_record_walks_cxx_cleanup_frames(void **state)
{
	for (int cpu = 0; cpu < 2; cpu++) {
		char *out, *rep;
		int rc = sprobe_test_run(cpu ? CLI " record -q --no-bpf --no-report --mode cpu -F 499 -o " OUT
						"/cxx-cpu.data -- build/cxxcleanup 150"
					     : CLI " record -q --no-bpf --no-report -F 499 -o " OUT
						"/cxx-wall.data -- build/cxxcleanup 150",
					 &out);

		assert_int_equal(rc, 0);
		free(out);
		rc = sprobe_test_run(cpu ? CLI " report -i " OUT "/cxx-cpu.data -f folded"
					 : CLI " report -i " OUT "/cxx-wall.data -f folded",
				     &rep);
		assert_int_equal(rc, 0);
		unsigned long in_leaf = sprobe_test_folded_count(rep, "leaf(long)", NULL);
		unsigned long whole = sprobe_test_folded_count(rep, ";main;top(long, int);mid(long);leaf(long)", NULL);

		print_message("%s: %lu samples in leaf(), %lu of them walked to main\n",
			      cpu ? "cpu" : "wall", in_leaf, whole);
		assert_true(in_leaf >= 20);
		/* every one of them: the walk does not depend on timing */
		assert_int_equal(whole, in_leaf);
		assert_true(sprobe_test_folded_count(rep, "_start;__libc_start_main", NULL) >= in_leaf);
		free(rep);
	}
}

/* The agent alone (LD_PRELOAD and STACKPROBE_OUTPUT, no record) reads no
 * DWARF into the program: it leaves the source view to the file's reader,
 * and `stackprobe report` adds it as it reads the file, from the module
 * files. The report's source lines are those of an agent that read them
 * itself (STACKPROBE_LINES=1, which maps libdw into the program). */
static void test_agent_alone_leaves_lines_to_report(void **state)
{
	char cmd[1024], *maps[2], *rep[2];

	(void)state;
	for (int inproc = 0; inproc < 2; inproc++) {
		snprintf(cmd, sizeof(cmd),
			 "%sLD_PRELOAD=$PWD/build/libstackprobe.so STACKPROBE_OUTPUT=" OUT
			 "/alone-%d.data STACKPROBE_INHERIT=0 STACKPROBE_QUIET=1 "
			 "sh -c 'sleep 1; cat /proc/$$/maps'",
			 inproc ? "STACKPROBE_LINES=1 " : "", inproc);
		assert_int_equal(sprobe_test_run(cmd, &maps[inproc]), 0);
		assert_non_null(strstr(maps[inproc], "/libstackprobe.so"));
		snprintf(cmd, sizeof(cmd),
			 CLI " report -i " OUT "/alone-%d.data 2>&1 | grep -o '[^ ]*:[0-9]*  __wait4$' | sort -u",
			 inproc);
		assert_int_equal(sprobe_test_run(cmd, &rep[inproc]), 0);
	}
	print_message("  the agent alone: %s  with STACKPROBE_LINES=1: %s", rep[0], rep[1]);
	/* Read from a pipe: spooled, then the same (it was read once and
	 * had no names before). */
	char *piped;

	assert_int_equal(sprobe_test_run("cat " OUT "/alone-0.data | " CLI
					 " report -i - -f folded | grep -c ';__wait4'",
					 &piped),
			 0);
	assert_true(atoi(piped) > 0);
	free(piped);
	/* The same file read where libc is another build: nothing names the
	 * pcs, and the report says why (not "install libc6-dbg"). */
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(OUT "/alone-0.data");
	int fd = open(OUT "/alone-other.data", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	struct sprobe_datafile_writer *w = fd >= 0 ? sprobe_datafile_writer__new(fd, NULL) : NULL;
	struct sprobe_df_record rec;
	uint8_t other[SPROBE_BUILD_ID_MAX];
	unsigned changed = 0;

	assert_non_null(rd);
	assert_non_null(w);
	while (sprobe_datafile_reader__next(rd, &rec) == 1) {
		if (rec.type == SPROBE_DF_MODULE && rec.module.path_len &&
		    strstr(rec.module.path, "/libc.so") && rec.module.build_id_len) {
			memcpy(other, rec.module.build_id, rec.module.build_id_len);
			other[0] ^= 0xff;
			rec.module.build_id = other;
			changed++;
		}
		assert_int_equal(sprobe_datafile_writer__write(w, &rec), 0);
	}
	assert_int_equal(sprobe_datafile_writer__flush(w), 0);
	sprobe_datafile_writer__free(w);
	sprobe_datafile_reader__free(rd);
	close(fd);
	assert_true(changed > 0);
	char *other_rep;

	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/alone-other.data 2>&1", &other_rep), 0);
	assert_null(strstr(other_rep, "__wait4"));
	assert_non_null(strstr(other_rep, "libc.so.6: no symbols (its names were left to the reader"));
	/* dash, here with that build-id but stripped: no symbol table */
	assert_non_null(strstr(other_rep, "dash: no symbols (no symbol table"));
	free(other_rep);

	/* STACKPROBE_LINES=1 with STACKPROBE_NAMES=record: the names from
	 * the files, and the lines from them too */
	char *both;

	assert_int_equal(sprobe_test_run("STACKPROBE_LINES=1 STACKPROBE_NAMES=record LD_PRELOAD=$PWD/build/libstackprobe.so "
					 "STACKPROBE_OUTPUT=" OUT "/alone-both.data STACKPROBE_INHERIT=0 STACKPROBE_QUIET=1 "
					 "sh -c 'sleep 1' && " CLI " report -i " OUT "/alone-both.data 2>&1 | "
					 "grep -o '[^ ]*:[0-9]*  __wait4$' | sort -u",
					 &both),
			 0);
	assert_string_equal(both, rep[1]);
	free(both);
	assert_null(strstr(maps[0], "/libdw"));
	assert_non_null(strstr(maps[1], "/libdw")); /* the test tells them apart */
	/* the report's line view of the wait: file:line, as the agent's own */
	assert_non_null(strstr(rep[0], ".c:"));
	assert_string_equal(rep[0], rep[1]);
	for (int k = 0; k < 2; k++) {
		free(maps[k]);
		free(rep[k]);
	}
}

/* A node table left under the agent's pid by a dead process (killed
 * while it made its table: a file with no header) does not keep the agent
 * of the process that reuses the pid from sampling: it is removed. A
 * table of another user's by that name stays (the sticky /dev/shm keeps
 * it) and the agent says why it does not sample. */
static void test_agent_starts_over_stale_table(void **state)
{
	char *out;

	(void)state;
	for (int other = 0; other < (geteuid() == 0 ? 2 : 1); other++) {
		char cmd[1024];

		snprintf(cmd, sizeof(cmd),
			 "rm -f " OUT "/stale.data; sh -c 't=/dev/shm/stackprobe-$$.table; echo table $t; : > $t; %s"
			 "exec env LD_PRELOAD=$PWD/build/libstackprobe.so STACKPROBE_OUTPUT=" OUT
			 "/stale.data STACKPROBE_INHERIT=0 build/demo 1 >/dev/null; ' 2>&1; "
			 "ls " OUT "/stale.data 2>/dev/null; true",
			 other ? "chown 65534 $t; " : "");
		assert_int_equal(sprobe_test_run(cmd, &out), 0);
		print_message("  %s: %s", other ? "another user's table" : "a table left without a header",
			      out);
		if (other) {
			char *t = strstr(out, "table /dev/shm/stackprobe-");

			assert_non_null(strstr(out, "a node table for this pid already exists"));
			assert_non_null(t);
			t += strlen("table ");
			t[strcspn(t, "\n")] = '\0';
			assert_int_equal(unlink(t), 0); /* the other user's table made here */
		} else {
			assert_null(strstr(out, "not sampling"));
			assert_non_null(strstr(out, OUT "/stale.data"));
			free(out);
			assert_int_equal(sprobe_test_run(CLI " report -i " OUT
							 "/stale.data -f folded | grep -c main",
							 &out),
					 0);
			assert_true(atoi(out) > 0);
		}
		free(out);
	}
}

/* record keeps the DWARF images it builds in the cache directory it is
 * given and says nothing of the cache when it works: the second run finds
 * the image the first stored. (The first-ever open of the directory set
 * the "problem" to the descriptor it returned, so every run said "not
 * used (Unknown error -11)" while the cache worked.) */
static void test_record_dwarf_cache_quiet_when_used(void **state)
{
	char cwd[1024], cmd[4096], dir[1100], *out;

	(void)state;
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(dir, sizeof(dir), "%s/" OUT "/dwc", cwd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s && mkdir -m 700 %s", dir, dir);
	assert_int_equal(system(cmd), 0);
	for (int run = 0; run < 2; run++) {
		snprintf(cmd, sizeof(cmd),
			 "STACKPROBE_DWARF_CACHE=%s " CLI " record --no-bpf --no-report -F 199 -o " OUT
			 "/dwc.data -- build/demo 1 2>&1 >/dev/null",
			 dir);
		int rc = sprobe_test_run(cmd, &out);

		assert_int_equal(rc, 0);
		assert_non_null(strstr(out, "stackprobe record: wrote"));
		if (strstr(out, "DWARF image cache"))
			fail_msg("record spoke of a cache that works: %s", out);
		free(out);
		snprintf(cmd, sizeof(cmd), "ls %s", dir);
		assert_int_equal(sprobe_test_run(cmd, &out), 0);
		assert_true(strlen(out) > 0); /* an image was stored */
		free(out);
	}
}

/* Data files are their user's to read, as perf.data: 0600 under umask 022
 * for record's output, the agent's own file, its parts and the events
 * file of a recording directory. */
static mode_t file_mode(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 0777;
}

static void test_data_files_private(void **state)
{
	char *out = NULL;

	(void)state;
	unlink(OUT "/mode.data");
	unlink(OUT "/mode-agent.data");
	assert_int_equal(sprobe_test_run("rm -rf " OUT "/mode-dir && mkdir " OUT "/mode-dir", NULL), 0);
	assert_int_equal(sprobe_test_run("umask 022; " CLI " record -q -o " OUT "/mode.data -- true", NULL), 0);
	assert_int_equal(file_mode(OUT "/mode.data"), 0600);
	assert_int_equal(sprobe_test_run("umask 022; LD_PRELOAD=$PWD/build/libstackprobe.so "
					 "STACKPROBE_OUTPUT=" OUT "/mode-agent.data STACKPROBE_QUIET=1 "
					 "sh -c 'exit 0'", NULL), 0);
	assert_int_equal(file_mode(OUT "/mode-agent.data"), 0600);
	assert_int_equal(sprobe_test_run("umask 022; LD_PRELOAD=$PWD/build/libstackprobe.so "
					 "STACKPROBE_OUTPUT_DIR=" OUT "/mode-dir STACKPROBE_QUIET=1 "
					 "sh -c 'exit 3'", NULL), 3);
	assert_int_equal(sprobe_test_run("cd " OUT "/mode-dir && stat -c '%a %n' * | sort", &out), 0);
	print_message("  %s", out);
	assert_non_null(strstr(out, ".0.part"));
	assert_non_null(strstr(out, "events"));
	for (char *l = out; *l; l = strchr(l, '\n') + 1) {
		assert_true(strncmp(l, "600 ", 4) == 0);
		if (!strchr(l, '\n'))
			break;
	}
	free(out);
}

/* A program with file capabilities is run by the kernel in secure-
 * execution mode for anyone but root, as a set-ID one: the loader ignores
 * LD_PRELOAD there. record says so, and takes the set-ID way (the kernel
 * tier attached after its exec, or unsampled, saying why). Root only (a
 * capability on a file, a record run by nobody). */
static void test_file_caps_program(void **state)
{
	char dir[] = "/tmp/sprobe-caps-XXXXXX", prog[64], errp[64], outp[64], cli[PATH_MAX];
	char cmd[256], *out = NULL;
	/* VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE, CAP_NET_RAW (13)
	 * permitted: what `setcap cap_net_raw+ep` writes (ping's). */
	const uint32_t caps[5] = { 0x02000001u, 1u << 13, 0, 0, 0 };

	(void)state;
	if (geteuid() != 0)
		SPROBE_SKIP("needs root to give a file capabilities and run record as nobody");
	assert_non_null(realpath(CLI, cli));
	assert_non_null(mkdtemp(dir));
	assert_int_equal(chmod(dir, 0777), 0);
	snprintf(prog, sizeof(prog), "%s/capsleep", dir);
	snprintf(errp, sizeof(errp), "%s/err", dir);
	snprintf(outp, sizeof(outp), "%s/caps.data", dir);
	snprintf(cmd, sizeof(cmd), "cp /bin/sleep %s && chmod 755 %s", prog, prog);
	assert_int_equal(sprobe_test_run(cmd, NULL), 0);
	if (setxattr(prog, "security.capability", caps, sizeof(caps), 0) != 0)
		SPROBE_SKIP("no file capabilities here: %s", strerror(errno));
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		if (setgroups(0, NULL) || setgid(65534) || setuid(65534))
			_exit(99);
		int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (e < 0)
			_exit(98);
		dup2(e, 2);
		execl(cli, "stackprobe", "record", "--no-report", "-o", outp, "--", prog, "0.1",
		      (char *)NULL);
		_exit(127);
	}
	int st = 0;
	assert_int_equal(waitpid(c, &st, 0), c);
	snprintf(cmd, sizeof(cmd), "cat %s", errp);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("record as nobody: status %d:\n%s", st, out);
	if (!strstr(out, "capsleep is a file-capability program (security.capability): the "
			 "loader ignores LD_PRELOAD there; "))
		fail_msg("no word on the file capabilities:\n%s", out);
	assert_true(strstr(out, "attached just after its exec") || strstr(out, "it runs unsampled"));
	free(out);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	sprobe_test_run(cmd, NULL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_record_child_maps_no_libdw_libbpf, setup_dir),
	cmocka_unit_test_setup(test_record_own_pcs_named_by_record, setup_dir),
	cmocka_unit_test_setup(test_record_walks_cxx_cleanup_frames, setup_dir),
	cmocka_unit_test_setup(test_record_dwarf_cache_quiet_when_used, setup_dir),
	cmocka_unit_test_setup(test_agent_alone_leaves_lines_to_report, setup_dir),
	cmocka_unit_test_setup(test_agent_starts_over_stale_table, setup_dir),
	cmocka_unit_test_setup(test_data_files_private, setup_dir),
	cmocka_unit_test_setup(test_file_caps_program, setup_dir),
};

SPROBE_TEST_MAIN(tests)
