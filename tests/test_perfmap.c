/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * JIT frames named from /tmp/perf-PID.map (userspace/symbols/perfmap.c):
 * code this test generates in an anonymous page, named by a map it writes
 * and appends to while the inventory reads it; a hostile map (garbage,
 * over-long lines, a half-written last line, a symlink, a FIFO); another
 * process's map; and a recording of a small JIT (tests/workloads/jitloop.c)
 * whose hot frame must carry the map's name, as in perf report.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/symbolize.h>

#include "run_helper.h"
#include "userspace/symbols/perfmap.h"
#include "sprobe_test.h"

#define CLI "build/stackprobe"
#define OUT "build/test-out/perfmap"

static char map_path[64];
static unsigned char *page;
static size_t page_size;

static int setup(void **state)
{
	(void)state;
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	page = mmap(NULL, 2 * page_size, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (page == MAP_FAILED) /* a kernel refusing W+X pages: R+X is enough to name */
		page = mmap(NULL, 2 * page_size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
			    -1, 0);
	if (page == MAP_FAILED)
		return -1;
	snprintf(map_path, sizeof(map_path), "/tmp/perf-%d.map", (int)getpid());
	unlink(map_path);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(map_path);
	munmap(page, 2 * page_size);
	return 0;
}

static void write_map(const char *mode, const char *text)
{
	FILE *f = fopen(map_path, mode);

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static uint64_t at(size_t off)
{
	return (uint64_t)(uintptr_t)page + off;
}

/* "START SIZE NAME" for [at(off), at(off) + size). */
static void map_line(char *buf, size_t len, size_t off, size_t size, const char *name)
{
	snprintf(buf, len, "%llx %zx %s\n", (unsigned long long)at(off), size, name);
}

static void expect_jit(struct sprobe_modules *m, uint64_t pc, const char *name, uint64_t start)
{
	struct sprobe_symbol s;
	char buf[256];

	assert_int_equal(sprobe_modules__symbolize(m, pc, &s), 0);
	assert_null(s.module);
	assert_non_null(s.name);
	assert_string_equal(s.name, name);
	assert_int_equal(s.sym_start, start);
	assert_int_equal(s.sym_offset, pc - start);
	assert_string_equal(s.source, "perf-map");
	sprobe_symbol__snprintf(&s, buf, sizeof(buf));
	print_message("  %#llx -> %s\n", (unsigned long long)pc, buf);
	assert_non_null(strstr(buf, "([jit])"));
}

static void expect_unnamed(struct sprobe_modules *m, uint64_t pc)
{
	struct sprobe_symbol s;

	int rc = sprobe_modules__symbolize(m, pc, &s);

	if (rc != -ENOENT)
		fail_msg("%#llx: %d, named %s, want no name", (unsigned long long)pc, rc,
			 s.name ? s.name : "-");
	assert_null(s.module);
	assert_null(s.name);
}

/* The map is read when a pc in no module is looked up, and re-read (only
 * its new part) when a later lookup misses: a JIT appends as it compiles. */
static void test_names_and_appends(void **state)
{
	char l1[128], l2[128], l3[128], all[512];
	struct sprobe_modules *m;
	(void)state;

	m = sprobe_modules__new(NULL);
	assert_non_null(m);
	expect_unnamed(m, at(0x10)); /* no map yet */

	map_line(l1, sizeof(l1), 0x0, 0x40, "LazyCompile:*alpha app.js:1");
	map_line(l2, sizeof(l2), 0x40, 0x20, "beta with spaces (and parens)");
	snprintf(all, sizeof(all), "%s%s", l1, l2);
	write_map("w", all);
	expect_jit(m, at(0x10), "LazyCompile:*alpha app.js:1", at(0));
	expect_jit(m, at(0x3f), "LazyCompile:*alpha app.js:1", at(0));
	expect_jit(m, at(0x40), "beta with spaces (and parens)", at(0x40));
	expect_unnamed(m, at(0x60)); /* past beta's end */

	/* appended after the first read */
	map_line(l3, sizeof(l3), 0x100, 0x80, "gamma");
	write_map("a", l3);
	expect_jit(m, at(0x180 - 1), "gamma", at(0x100));
	/* the names handed out before stay valid (blocks never move) */
	struct sprobe_symbol s;

	assert_int_equal(sprobe_modules__symbolize(m, at(0x10), &s), 0);
	const char *alpha = s.name;

	/* memory reused by the JIT: the later line wins */
	map_line(l3, sizeof(l3), 0x200, 0x40, "old_code");
	write_map("a", l3);
	expect_jit(m, at(0x210), "old_code", at(0x200));
	map_line(l3, sizeof(l3), 0x200, 0x40, "new_code");
	write_map("a", l3);
	expect_jit(m, at(0x220 + 0x10), "old_code", at(0x200)); /* a hit: not re-read */
	assert_string_equal(alpha, "LazyCompile:*alpha app.js:1"); /* still valid after re-reads */
	sprobe_modules__free(m);
	m = sprobe_modules__new(NULL);
	expect_jit(m, at(0x210), "new_code", at(0x200));

	/* opts.no_perf_map turns it off */
	sprobe_modules__free(m);
	struct sprobe_modules_opts o = { .sz = sizeof(o), .no_perf_map = true };

	m = sprobe_modules__new(&o);
	assert_non_null(m);
	expect_unnamed(m, at(0x10));
	sprobe_modules__free(m);
	/* empty (offline) inventories have no process and no map */
	struct sprobe_modules_opts e = { .sz = sizeof(e), .empty = true };

	m = sprobe_modules__new(&e);
	assert_non_null(m);
	expect_unnamed(m, at(0x10));
	sprobe_modules__free(m);
	unlink(map_path);
}

/* Garbage in the map: every bad line is skipped, the good ones still name
 * their code, nothing else is named. */
static void test_hostile_map(void **state)
{
	char good[128], good2[128], buf[16384];
	struct sprobe_modules *m;
	(void)state;

	map_line(good, sizeof(good), 0x300, 0x10, "good_one");
	map_line(good2, sizeof(good2), 0x400, 0x10, "good_two");
	FILE *f = fopen(map_path, "w");

	assert_non_null(f);
	fputs("\n", f);
	fputs("not a map line at all\n", f);
	fprintf(f, "%llx\n", (unsigned long long)at(0x500));			/* no size */
	fprintf(f, "%llx 10\n", (unsigned long long)at(0x500));		/* no name */
	fprintf(f, "%llx 0 zero_size\n", (unsigned long long)at(0x500));
	fprintf(f, "%llx zz bad_size\n", (unsigned long long)at(0x500));
	fputs("ffffffffffffffff 10 wraps_around\n", f);
	fputs("11112222333344445555 10 too_many_digits\n", f);
	fprintf(f, "%llx\t10 tab_separated\n", (unsigned long long)at(0x500));
	fputs(good, f);
	/* a line of 10000 bytes: skipped whole, even though it starts well */
	memset(buf, 'x', sizeof(buf));
	int k = snprintf(buf, sizeof(buf), "%llx 10 ", (unsigned long long)at(0x600));

	buf[k] = 'x';
	buf[10000] = '\n';
	fwrite(buf, 1, 10001, f);
	fprintf(f, "%llx 10 with\x01" "control\n", (unsigned long long)at(0x700));
	fputc(0, f);
	fprintf(f, "%llx 10 after_nul\n", (unsigned long long)at(0x800));
	fputs(good2, f);
	/* a last line still being written: no newline yet */
	fprintf(f, "%llx 10 half_writ", (unsigned long long)at(0x900));
	fclose(f);

	m = sprobe_modules__new(NULL);
	assert_non_null(m);
	expect_jit(m, at(0x305), "good_one", at(0x300));
	expect_jit(m, at(0x405), "good_two", at(0x400));
	expect_jit(m, at(0x705), "with\x01" "control", at(0x700)); /* bytes kept as written */
	expect_unnamed(m, at(0x505));
	expect_unnamed(m, at(0x605));
	expect_unnamed(m, at(0x805));
	expect_unnamed(m, at(0x905));
	/* the line is finished: now it names its code */
	write_map("a", "ten\n");
	expect_jit(m, at(0x905), "half_written", at(0x900));
	sprobe_modules__free(m);

	/* a symlink is not followed (anyone can plant one in /tmp) */
	char target[] = OUT "/planted.map";

	mkdir("build", 0755);
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	unlink(map_path);
	f = fopen(target, "w");
	assert_non_null(f);
	fputs(good, f);
	fclose(f);
	char abs[4096];

	assert_non_null(realpath(target, abs));
	assert_int_equal(symlink(abs, map_path), 0);
	m = sprobe_modules__new(NULL);
	expect_unnamed(m, at(0x305));
	sprobe_modules__free(m);
	unlink(map_path);

	/* a FIFO with no writer: refused at once, no hang */
	assert_int_equal(mkfifo(map_path, 0600), 0);
	m = sprobe_modules__new(NULL);
	expect_unnamed(m, at(0x305));
	sprobe_modules__free(m);
	unlink(map_path);

	/* replaced by a shorter file: read again from the start */
	write_map("w", good);
	m = sprobe_modules__new(NULL);
	expect_jit(m, at(0x305), "good_one", at(0x300));
	unlink(map_path);
	map_line(good, sizeof(good), 0x300, 0x8, "g1");
	write_map("w", good);
	expect_jit(m, at(0x302), "good_one", at(0x300)); /* a hit: not re-read */
	expect_unnamed(m, at(0x1000 + 5));		  /* a miss: re-read, new file */
	expect_jit(m, at(0x302), "g1", at(0x300));

	/* written again in place, longer (same inode: fopen "w", as
	 * perf-map-agent does): read again from the start */
	char big[512];

	map_line(big, sizeof(big), 0x300, 0x8, "g2_rewritten_in_place");
	map_line(good2, sizeof(good2), 0x340, 0x8, "g3");
	strcat(big, good2);
	struct stat before, after;

	assert_int_equal(stat(map_path, &before), 0);
	write_map("w", big);
	assert_int_equal(stat(map_path, &after), 0);
	assert_int_equal(before.st_ino, after.st_ino);
	expect_jit(m, at(0x342), "g3", at(0x340));	/* a miss: the new content */
	expect_jit(m, at(0x302), "g2_rewritten_in_place", at(0x300));
	sprobe_modules__free(m);
	unlink(map_path);
}

/* Another process's map, through /proc/PID/root (what `stackprobe dump`
 * uses). */
static void test_other_process_map(void **state)
{
	int down[2];
	pid_t pid;
	char path[64], line[128];
	(void)state;

	assert_int_equal(pipe(down), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;

		close(down[1]);
		(void)!read(down[0], &c, 1);
		_exit(0);
	}
	close(down[0]);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	map_line(line, sizeof(line), 0x80, 0x20, "child_jit_fn");
	fputs(line, f);
	fclose(f);
	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = pid };
	struct sprobe_modules *m = sprobe_modules__new(&o);

	assert_non_null(m);
	expect_jit(m, at(0x90), "child_jit_fn", at(0x80));
	sprobe_modules__free(m);
	unlink(path);
	close(down[1]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* Sum of the folded lines' counts for the thread "<thread>-*" whose stack
 * ends in a frame that starts with leaf (all of them when leaf is NULL). */
static unsigned long leaf_count_of(const char *folded, const char *thread, const char *leaf)
{
	unsigned long total = 0;
	const char *line = folded;

	while (*line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char tmp[8192];

		if (len < sizeof(tmp) && strncmp(line, thread, strlen(thread)) == 0 &&
		    line[strlen(thread)] == '-') {
			memcpy(tmp, line, len);
			tmp[len] = '\0';
			char *sp = strrchr(tmp, ' ');

			if (sp) {
				*sp = '\0';
				char *last = strrchr(tmp, ';');

				if (!leaf || (last && strncmp(last + 1, leaf, strlen(leaf)) == 0))
					total += strtoul(sp + 1, NULL, 10);
			}
		}
		line += len + (eol ? 1 : 0);
	}
	return total;
}

static unsigned long leaf_count(const char *folded, const char *leaf)
{
	return leaf_count_of(folded, "jitloop", leaf);
}

/* A recording of a JIT: the hot frame is named by the map, as perf names it. */
static void test_recording_names_jit_code(void **state)
{
	char *out = NULL, *folded = NULL, cmd[512];
	int pid;
	(void)state;

#if !defined(__x86_64__)
	SPROBE_SKIP("tests/workloads/jitloop.c generates x86-64 code");
#endif
	mkdir("build", 0755);
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	assert_int_equal(sprobe_test_run(CLI " record -q -F 499 -o " OUT "/jit.data -- build/jitloop 3000000000",
					 &out), 0);
	pid = atoi(out);
	assert_true(pid > 0);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/jit.data --format folded", &folded), 0);
	unsigned long all = leaf_count(folded, NULL), hot = leaf_count(folded, "jit_hot_loop");

	print_message("  jitloop: %lu of %lu samples in jit_hot_loop\n", hot, all);
	/* the loop is nearly all the program does; the rest is start-up */
	assert_true(all > 0);
	assert_true(hot * 2 > all);
	assert_null(strstr(folded, "jit_stub_before"));
	snprintf(cmd, sizeof(cmd), "/tmp/perf-%d.map", pid);
	unlink(cmd);
	free(folded);

	/* perf, reading the same kind of map, names the same frame */
	if (sprobe_test_run("command -v perf >/dev/null 2>&1", NULL) != 0) {
		print_message("  no perf here: not compared\n");
		return;
	}
	if (sprobe_test_run("perf record -q -F 499 -o " OUT "/perf.data build/jitloop 3000000000 > " OUT
			    "/perf.pid 2>/dev/null", NULL) != 0) {
		print_message("  perf record failed (perf_event_paranoid?): not compared\n");
		return;
	}
	assert_int_equal(sprobe_test_run("perf report -i " OUT "/perf.data --stdio --sort sym 2>/dev/null | "
					 "grep -m1 '%'", &out), 0);
	print_message("  perf's top: %s", out);
	assert_non_null(strstr(out, "jit_hot_loop"));
	free(out);
	assert_int_equal(sprobe_test_run("cat " OUT "/perf.pid", &out), 0);
	snprintf(cmd, sizeof(cmd), "/tmp/perf-%d.map", atoi(out));
	unlink(cmd);
	free(out);
}

/* node --perf-basic-prof: V8's JIT frames named as perf names them
 * ("JS:*hotLoop file:line:col"), where they were bare addresses. */
static void test_recording_names_node_js(void **state)
{
	char *out = NULL, *folded = NULL, *perf = NULL, cmd[512];
	int pid;
	(void)state;

	if (sprobe_test_run("command -v node >/dev/null 2>&1", NULL) != 0)
		SPROBE_SKIP("no node (nodejs, tools/deps.d/outputs.list)");
	mkdir("build", 0755);
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	assert_int_equal(sprobe_test_run(CLI " record -q -F 199 -o " OUT "/node.data -- "
					 "node --perf-basic-prof --no-logfile-per-isolate --logfile=" OUT "/v8.log tests/workloads/jshot.js 300", &out), 0);
	pid = atoi(out);
	assert_true(pid > 0);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/node.data --format folded", &folded), 0);
	unsigned long all = leaf_count_of(folded, "node", NULL);
	/* V8's name for optimised code is "JS:*name", older nodes wrote "LazyCompile:*name" */
	unsigned long hot = leaf_count_of(folded, "node", "JS:*hotLoop ") +
			    leaf_count_of(folded, "node", "LazyCompile:*hotLoop ");

	print_message("  node: %lu of %lu samples of node's threads in hotLoop\n", hot, all);
	assert_true(hot > 0);
	snprintf(cmd, sizeof(cmd), "/tmp/perf-%d.map", pid);
	unlink(cmd);

	if (sprobe_test_run("command -v perf >/dev/null 2>&1", NULL) != 0 ||
	    sprobe_test_run("perf record -q -F 199 -o " OUT "/perf-node.data node --perf-basic-prof "
			    "--no-logfile-per-isolate --logfile=" OUT "/v8-perf.log tests/workloads/jshot.js 300 > " OUT "/perf-node.pid 2>/dev/null", NULL) != 0) {
		print_message("  perf unavailable here: not compared\n");
		free(folded);
		return;
	}
	assert_int_equal(sprobe_test_run("perf report -i " OUT "/perf-node.data --stdio --sort sym 2>/dev/null | "
					 "grep -m1 '%' | sed 's/.*\\[\\.\\] //; s/ *$//'", &perf), 0);
	perf[strcspn(perf, "\n")] = '\0';
	print_message("  perf's top: %s\n", perf);
	/* perf's hottest frame, by name, is in the recording as a leaf */
	snprintf(cmd, sizeof(cmd), ";%s ", perf);
	if (!strstr(folded, cmd))
		fail_msg("perf's top frame %s is not a leaf of the recording", perf);
	assert_non_null(strstr(perf, "hotLoop"));
	free(perf);
	assert_int_equal(sprobe_test_run("cat " OUT "/perf-node.pid", &out), 0);
	snprintf(cmd, sizeof(cmd), "/tmp/perf-%d.map", atoi(out));
	unlink(cmd);
	free(out);
	free(folded);
}

/* A JIT that writes its map only at exit (the JVM's -XX:+DumpPerfMapAtExit):
 * nothing named the code while the agent ran, and record names it after
 * the merge from the map the process left, as perf report does (before,
 * every sample's leaf was a bare 0x address). */
static void test_recording_names_map_written_at_exit(void **state)
{
	char *out = NULL, *folded = NULL, cmd[512];
	int pid;
	(void)state;

#if !defined(__x86_64__)
	SPROBE_SKIP("tests/workloads/jitloop.c generates x86-64 code");
#endif
	mkdir("build", 0755);
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	for (int cpu = 0; cpu < 2; cpu++) {
		assert_int_equal(sprobe_test_run(cpu ? CLI " record -q --no-bpf -m cpu -F 499 -o " OUT
						       "/jit-exit.data -- build/jitloop 3000000000 at-exit"
						     : CLI " record -q --no-bpf -F 499 -o " OUT
						       "/jit-exit.data -- build/jitloop 3000000000 at-exit",
						 &out),
				 0);
		pid = atoi(out);
		assert_true(pid > 0);
		free(out);
		assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/jit-exit.data --format folded",
						 &folded),
				 0);
		unsigned long all = leaf_count(folded, NULL), hot = leaf_count(folded, "jit_hot_loop");

		print_message("  %s mode, map written at exit: %lu of %lu samples in jit_hot_loop\n",
			      cpu ? "cpu" : "wall", hot, all);
		assert_true(all > 0);
		assert_true(hot * 2 > all);
		assert_null(strstr(folded, "jit_stub_before"));
		free(folded);
		/* The names are in the file: a map written later over this
		 * one's (the pid reused) changes nothing. */
		snprintf(cmd, sizeof(cmd),
			 "printf '1000 100000000000000 later_process_fn\\n' > /tmp/perf-%d.map", pid);
		assert_int_equal(sprobe_test_run(cmd, NULL), 0);
		assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/jit-exit.data --format folded",
						 &folded),
				 0);
		assert_null(strstr(folded, "later_process_fn"));
		assert_true(leaf_count(folded, "jit_hot_loop") == hot);
		free(folded);
		snprintf(cmd, sizeof(cmd), "/tmp/perf-%d.map", pid);
		unlink(cmd);
	}

	/* record reads the map whatever the agents did with names and
	 * lines (STACKPROBE_LINES=0: no pass for lines, the map still read) */
	assert_int_equal(sprobe_test_run("STACKPROBE_LINES=0 " CLI " record -q --no-bpf -F 499 -o " OUT
					 "/jit-l0.data -- build/jitloop 1500000000 at-exit",
					 &out),
			 0);
	pid = atoi(out);
	free(out);
	assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/jit-l0.data --format folded", &folded), 0);
	assert_true(leaf_count(folded, "jit_hot_loop") * 2 > leaf_count(folded, NULL));
	free(folded);
	snprintf(cmd, sizeof(cmd), "/tmp/perf-%d.map", pid);
	unlink(cmd);

	/* The agent alone: report names the pcs from the map the process
	 * left, but not from a map modified after the process ended. */
	for (int later = 0; later < 2; later++) {
		assert_int_equal(sprobe_test_run("rm -f " OUT "/jit-alone.data && LD_PRELOAD=$PWD/build/libstackprobe.so "
						 "STACKPROBE_OUTPUT=" OUT "/jit-alone.data STACKPROBE_FREQ=499 "
						 "STACKPROBE_QUIET=1 build/jitloop 1500000000 at-exit",
						 &out),
				 0);
		pid = atoi(out);
		assert_true(pid > 0);
		free(out);
		snprintf(cmd, sizeof(cmd), "/tmp/perf-%d.map", pid);
		if (later) {
			struct timespec t[2];

			clock_gettime(CLOCK_REALTIME, &t[0]);
			t[0].tv_sec += 3600;
			t[1] = t[0];
			assert_int_equal(utimensat(AT_FDCWD, cmd, t, 0), 0);
		}
		assert_int_equal(sprobe_test_run(CLI " report -i " OUT "/jit-alone.data --format folded",
						 &folded),
				 0);
		unsigned long all = leaf_count(folded, NULL), hot = leaf_count(folded, "jit_hot_loop");

		print_message("  the agent alone, map %s: %lu of %lu samples in jit_hot_loop\n",
			      later ? "modified an hour after the end" : "written at exit", hot, all);
		assert_true(all > 0);
		if (later)
			assert_int_equal(hot, 0);
		else
			assert_true(hot * 2 > all);
		free(folded);
		unlink(cmd);
	}
}

/* The reader of an exited process's map (perfmap.h): names from a fresh
 * map; a map older than the process (an earlier process of the same pid
 * left it), a symlink to a map, or no file: nothing. */
static void test_exited_process_map(void **state)
{
	char path[256], link[256];
	struct sprobe_symbol sym;
	struct sprobe_perfmap_file *f;
	int64_t now = (int64_t)time(NULL);
	(void)state;

	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	snprintf(path, sizeof(path), OUT "/exited.map");
	snprintf(link, sizeof(link), OUT "/exited-link.map");
	FILE *m = fopen(path, "w");

	assert_non_null(m);
	fprintf(m, "1000 100 stub_a\n2000 40 hot_b\n");
	fclose(m);
	f = sprobe_perfmap_file__new(path, now - 1, 0, geteuid());
	assert_non_null(f);
	memset(&sym, 0, sizeof(sym));
	assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), 0);
	assert_string_equal(sym.name, "hot_b");
	assert_int_equal(sym.sym_start, 0x2000);
	assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x1800, &sym), -ENOENT);
	sprobe_perfmap_file__free(f);

	/* Two days old, the process started now: another process's map. */
	struct timespec old[2] = { { now - 172800, 0 }, { now - 172800, 0 } };

	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
	f = sprobe_perfmap_file__new(path, now - 1, 0, geteuid());
	assert_non_null(f);
	assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), -ENOENT);
	sprobe_perfmap_file__free(f);
	/* ... and named when the process is older than it */
	f = sprobe_perfmap_file__new(path, now - 172801, 0, geteuid());
	assert_non_null(f);
	assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), 0);
	sprobe_perfmap_file__free(f);
	/* ... but not when it ended before the map was written (a later
	 * process of that pid wrote it) */
	f = sprobe_perfmap_file__new(path, now - 172801, now - 172800 - 10, geteuid());
	assert_non_null(f);
	assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), -ENOENT);
	sprobe_perfmap_file__free(f);

	/* Another user's map: refused, unless that user is the process's */
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 65534, 65534), 0);
		f = sprobe_perfmap_file__new(path, 0, 0, 1000);
		assert_non_null(f);
		assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), -ENOENT);
		sprobe_perfmap_file__free(f);
		f = sprobe_perfmap_file__new(path, 0, 0, 65534);
		assert_non_null(f);
		assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), 0);
		sprobe_perfmap_file__free(f);
	}
	unlink(link);
	assert_int_equal(symlink("exited.map", link), 0);
	f = sprobe_perfmap_file__new(link, 0, 0, geteuid());
	assert_non_null(f);
	assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), -ENOENT);
	sprobe_perfmap_file__free(f);
	unlink(link);
	unlink(path);
	f = sprobe_perfmap_file__new(path, 0, 0, geteuid());
	assert_non_null(f);
	assert_int_equal(sprobe_perfmap_file__symbolize(f, 0x2010, &sym), -ENOENT);
	sprobe_perfmap_file__free(f);
	assert_null(sprobe_perfmap_file__new(NULL, 0, 0, geteuid()));
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup_teardown(test_names_and_appends, setup, teardown),
	cmocka_unit_test_setup_teardown(test_hostile_map, setup, teardown),
	cmocka_unit_test_setup_teardown(test_other_process_map, setup, teardown),
	cmocka_unit_test(test_recording_names_jit_code),
	cmocka_unit_test(test_recording_names_node_js),
	cmocka_unit_test(test_recording_names_map_written_at_exit),
	cmocka_unit_test(test_exited_process_map),
};

SPROBE_TEST_MAIN(tests)
