/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A process of the tree is about to exec a program the agent cannot enter
 * (statically linked, set-ID: userspace/common/enterable.c). Under
 * `record`, the kernel can still sample it: this asks `record` to open its
 * external-tier events on this pid (enable_on_exec: they start counting
 * at the exec) and waits for the answer before the exec goes on, so not
 * one instruction of the new image runs unsampled.
 *
 * The channel is the abstract Unix socket `record` names in
 * STACKPROBE_EXTERNAL_SOCK (userspace/cli/ext_children.c); `record`
 * checks with SO_PEERCRED that the asking process is the pid it asks for.
 * One request, one answer, then the socket is closed: the new image
 * inherits nothing of ours. The wait is bounded (an answer normally takes
 * a few ms): past it the program runs unsampled, noted as before.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "userspace/agent/agent.h"
#include "userspace/common/fds.h"

#define ANSWER_WAIT_MS 3000

bool sprobe_agent__ask_external(unsigned next_exec, const char *path, const char *why,
				char *answer, size_t alen)
{
	const char *name = sprobe_agent__getenv("STACKPROBE_EXTERNAL_SOCK");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char msg[1024];
	size_t nl = name ? strlen(name) : 0;
	int saved = errno, h, fd, n;
	bool ok = false;

	answer[0] = '\0';
	if (!nl || nl + 1 > sizeof(a.sun_path))
		return false;
	memcpy(a.sun_path + 1, name, nl); /* abstract: a leading NUL */
	n = snprintf(msg, sizeof(msg), "external %d %u %d %s\t%s", (int)getpid(), next_exec,
		     (int)getppid(), path, why);
	if (n <= 0 || (size_t)n >= sizeof(msg))
		return false;
	sprobe_fd__alloc_begin();
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	h = fd < 0 ? -errno : sprobe_fd__adopt(fd, SPROBE_FD_TRANSIENT);
	sprobe_fd__alloc_end();
	fd = sprobe_fd__get(h);
	socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, al) == 0 &&
	    send(fd, msg, (size_t)n, MSG_NOSIGNAL) == n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		char buf[256];
		ssize_t got;

		while ((got = poll(&p, 1, ANSWER_WAIT_MS)) < 0 && errno == EINTR)
			;
		if (got > 0 && (got = recv(fd, buf, sizeof(buf) - 1, 0)) > 0) {
			buf[got] = '\0';
			ok = strncmp(buf, "ok", 2) == 0;
			snprintf(answer, alen, "%s", ok ? "" : buf + (strncmp(buf, "no ", 3) ? 0 : 3));
		} else {
			snprintf(answer, alen, "record did not answer in time");
		}
	}
	if (fd >= 0)
		sprobe_fd__put(h);
	sprobe_fd__close(h);
	errno = saved;
	return ok;
}
