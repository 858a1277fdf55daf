/* SPDX-License-Identifier: BSD-2-Clause */
/* Running a command from an end-to-end test (tests/run_helper.h). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

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
