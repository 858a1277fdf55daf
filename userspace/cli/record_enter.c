/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Where the agent library is, and whether it can enter a command: record
 * preloads it into what it runs, and takes the kernel tier for a program
 * the loader will not preload it into.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "userspace/common/enterable.h"

#include "cli.h"

int cli_find_agent(char *out, size_t len)
{
	const char *env = getenv("STACKPROBE_AGENT_LIB");
	char exe[PATH_MAX];
	static const char *const rel[] = { "libstackprobe.so", "../lib/libstackprobe.so",
					   "../lib/libstackprobe.so.0" };

	if (env && *env) {
		if (access(env, R_OK) != 0)
			return -errno;
		snprintf(out, len, "%s", env);
		return 0;
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if ((size_t)snprintf(out, len, "%s/%s", exe, rel[i]) >= len)
			continue;
		if (access(out, R_OK) == 0) {
			char *r = realpath(out, NULL);
			if (r) {
				snprintf(out, len, "%s", r);
				free(r);
			}
			return 0;
		}
	}
	return -ENOENT;
}

/* Is CMD (looked up on PATH like execvp) one the agent cannot enter?
 * Returns SPROBE_ENTER_STATIC or _SETID with why ("is ...") filled, else
 * SPROBE_ENTER_OK. The agent's exec wrapper asks the same question of the
 * same file (userspace/common/enterable.c). */
enum sprobe_enter cli_unenterable(const char *cmd, char *why, size_t len)
{
	char path[PATH_MAX], phrase[128];

	if (!sprobe_enter__resolve(cmd, getenv("PATH"), path, sizeof(path)))
		return SPROBE_ENTER_OK;
	for (int depth = 0; depth <= SPROBE_ENTER_MAX_SCRIPTS; depth++) {
		char interp[256];
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		enum sprobe_enter r = sprobe_enter__check_fd(fd, phrase, sizeof(phrase), interp,
							     sizeof(interp));

		if (fd >= 0)
			close(fd);
		if (r == SPROBE_ENTER_STATIC || r == SPROBE_ENTER_SETID) {
			snprintf(why, len, "is %s", phrase);
			return r;
		}
		if (r != SPROBE_ENTER_SCRIPT)
			return SPROBE_ENTER_OK;
		snprintf(path, sizeof(path), "%s", interp);
	}
	return SPROBE_ENTER_OK;
}
