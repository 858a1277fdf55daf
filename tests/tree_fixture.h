/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the process-tree tests (test_tree.c, test_tree_programs.c):
 * `record -- CMD` run for real under build/stackprobe on the workload
 * build/treework (tests/workloads/treework.c), read back through its
 * reports.
 *
 * The functions are static and not inline, as they were in test_tree.c:
 * inlined into the tests, gcc's -Wdangling-pointer misreads the output
 * pointer report() fills.
 */
#ifndef SPROBE_TREE_FIXTURE_H
#define SPROBE_TREE_FIXTURE_H

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

#define CLI "build/stackprobe"
#define OUT "build/test-out"
#define TW "build/treework"

static __attribute__((unused)) char *report(const char *data, const char *fmt)
{
	char cmd[512], *out = NULL;

	snprintf(cmd, sizeof(cmd), CLI " report -i %s --format %s", data, fmt);
	assert_int_equal(sprobe_test_run(cmd, &out), 0);
	return out;
}

/* Lines of the JSON report's "processes" array that mention all of the
 * given fragments (each process is one line). */
static __attribute__((unused)) int procs_matching(const char *json, const char *a, const char *b)
{
	int n = 0;
	const char *p = strstr(json, "\"processes\": [");
	const char *end = p ? strstr(p, "\n  ],") : NULL;

	assert_non_null(p);
	assert_non_null(end);
	for (const char *l = strchr(p, '\n'); l && l < end; l = strchr(l + 1, '\n')) {
		const char *nl = strchr(l + 1, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char *line = strndup(l, len);

		if ((!a || strstr(line, a)) && (!b || strstr(line, b)))
			n++;
		free(line);
	}
	return n;
}

static __attribute__((unused)) void record(const char *name, const char *opts, const char *cmdline, int want_rc,
		   char **stderr_out)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), CLI " record %s -F 199 -o " OUT "/tree-%s.data -- %s 2>&1", opts,
		 name, cmdline);
	int rc = sprobe_test_run(cmd, stderr_out);
	if (rc != want_rc)
		fail_msg("%s: exit %d, want %d; output:\n%s", cmdline, rc, want_rc,
			 stderr_out && *stderr_out ? *stderr_out : "");
}


#endif
