/* SPDX-License-Identifier: BSD-2-Clause */
/* A program running beside a test (tests/prog_helper.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sprobe_test.h"
#include "prog_helper.h"

/* The program sprobe_test_prog_start() runs: killed by _stop(), or by the
 * teardown when a failed assertion skipped that. */
static pid_t running = -1;

int sprobe_test_prog_teardown(void **state)
{
	(void)state;
	if (running > 0) {
		kill(running, SIGKILL);
		waitpid(running, NULL, 0);
	}
	running = -1;
	return 0;
}

struct sprobe_modules *sprobe_test_prog_start(const char *prog, const char *name, pid_t *pid,
					      const struct sprobe_module **mod)
{
	int gate[2];
	char c, fdarg[16];

	assert_int_equal(pipe(gate), 0);
	snprintf(fdarg, sizeof(fdarg), "%d", gate[1]);
	*pid = fork();
	assert_true(*pid >= 0);
	if (*pid == 0) {
		close(gate[0]);
		execl(prog, prog, "100000000000000", fdarg, (char *)NULL);
		_exit(127);
	}
	running = *pid;
	close(gate[1]);
	assert_int_equal(read(gate[0], &c, 1), 1);
	close(gate[0]);
	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = *pid };
	struct sprobe_modules *m = sprobe_modules__new(&o);

	assert_non_null(m);
	*mod = NULL;
	for (size_t i = 0; i < sprobe_modules__count(m); i++)
		if (strcmp(sprobe_modules__get(m, i)->name, name) == 0)
			*mod = sprobe_modules__get(m, i);
	assert_non_null(*mod);
	return m;
}

void sprobe_test_prog_stop(struct sprobe_modules *m, pid_t pid)
{
	sprobe_modules__free(m);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	running = -1;
}
