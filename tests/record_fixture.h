/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the end-to-end tests of `stackprobe record` (test_record.c,
 * test_record_agent.c): folded counts, node tables left behind, the output
 * directory. The functions are static and not inline, as they were in
 * test_record.c.
 */
#ifndef SPROBE_RECORD_FIXTURE_H
#define SPROBE_RECORD_FIXTURE_H

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

#define CLI "build/stackprobe"
#define OUT "build/test-out"

/* Sum the counts of folded lines whose thread starts with `thread` and that
 * contain every one of the `need` substrings. */
static __attribute__((unused)) unsigned long folded_count(const char *folded, const char *thread, const char *need1,
				  const char *need2)
{
	unsigned long total = 0;
	const char *line = folded;
	while (*line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char tmp[8192];
		if (len < sizeof(tmp)) {
			memcpy(tmp, line, len);
			tmp[len] = '\0';
			char *sp = strrchr(tmp, ' ');
			if (sp && strncmp(tmp, thread, strlen(thread)) == 0 &&
			    (!need1 || strstr(tmp, need1)) && (!need2 || strstr(tmp, need2)))
				total += strtoul(sp + 1, NULL, 10);
		}
		line += len + (eol ? 1 : 0);
	}
	return total;
}

/* True when no node table is left for the pid written in PIDFILE. */
static __attribute__((unused)) bool table_gone(const char *pidfile)
{
	FILE *f = fopen(pidfile, "r");
	int pid = 0;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%d", &pid), 1);
	fclose(f);
	char path[64];
	snprintf(path, sizeof(path), "/dev/shm/stackprobe-%d.table", pid);
	return access(path, F_OK) != 0;
}

static __attribute__((unused)) int setup_dir(void **state)
{
	mkdir("build", 0755);
	mkdir(OUT, 0755);
	return 0;
}


#endif
