/* SPDX-License-Identifier: BSD-2-Clause */
/* Running a command from an end-to-end test (tests/run_helper.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sprobe_test.h"
#include "run_helper.h"

int sprobe_test_run(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);

	assert_non_null(p);
	assert_non_null(buf);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
	}
	buf[len] = '\0';
	int st = pclose(p);
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

unsigned long sprobe_test_folded_count(const char *folded, const char *fn, int *roots)
{
	unsigned long total = 0;
	char seen[32][64];
	int nseen = 0;
	char *copy = strdup(folded), *save = NULL;

	assert_non_null(copy);
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' '), *semi = strchr(line, ';');

		if (!sp || !strstr(line, fn))
			continue;
		total += strtoul(sp + 1, NULL, 10);
		if (semi && nseen < 32) {
			size_t l = (size_t)(semi - line) < 63 ? (size_t)(semi - line) : 63;
			bool dup = false;

			for (int i = 0; i < nseen; i++)
				dup |= strncmp(seen[i], line, l) == 0 && seen[i][l] == '\0';
			if (!dup) {
				memcpy(seen[nseen], line, l);
				seen[nseen++][l] = '\0';
			}
		}
	}
	free(copy);
	if (roots)
		*roots = nseen;
	return total;
}

int sprobe_test_perf_allowed(bool regs_stack)
{
	struct perf_event_attr a;
	long fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = 1000000;
	a.disabled = 1;
	if (regs_stack) {
		a.sample_type = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		a.sample_regs_user = 1;
		a.sample_stack_user = 4096;
	}
	fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0) {
		a.exclude_kernel = a.exclude_hv = 1;
		fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	close((int)fd);
	return 0;
}
