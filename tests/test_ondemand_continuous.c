/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * On demand, continuous profiling (userspace/agent/continuous.c): the
 * periods written to a directory, read back with `go tool pprof`, the bound
 * on files kept, a full disk, a directory that cannot be made or written.
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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_continuous_five_periods, setup_dir),
	cmocka_unit_test_setup(test_continuous_keep_bound, setup_dir),
	cmocka_unit_test_setup(test_continuous_disk_full, setup_dir),
	cmocka_unit_test_setup(test_continuous_bad_dir, setup_dir),
	cmocka_unit_test_setup(test_continuous_unwritable_dir_said_once, setup_dir),
};

SPROBE_TEST_MAIN(tests)
