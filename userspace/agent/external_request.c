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
 * inherits nothing of ours.
 *
 * A set-ID program is another case: the kernel drops every perf event at
 * its exec (the image is not dumpable), so `record` must attach after
 * the exec. The request passes the read end of a close-on-exec pipe whose
 * write end stays here: the exec closes it, and that end of file is
 * `record`'s signal to attach (what runs before the attach is not
 * sampled). An exec that fails closes it too (sprobe_agent__exec_failed),
 * after writing one byte into it: data before the end of file tells
 * `record` there was no exec, and it attaches to nothing.
 *
 * Descriptors here are raw (not in the registry of
 * userspace/common/fds.h): this runs in vfork children too, which share
 * the parent's memory but not its descriptor table, so a registration
 * would mark the parent's number of the same value as ours. They live
 * only inside the exec call (the socket is closed before returning; the
 * pipe's write end is close-on-exec, and closed if the exec fails), when
 * no code of the program runs in this thread.
 *
 * A child made by posix_spawn runs no code of ours before its exec: the
 * parent asks once posix_spawn has returned (the child has exec'd by
 * then), and `record` attaches to the running child, checking that the
 * asker is its parent. The wait is bounded (an answer normally takes
 * a few ms): past it the program runs unsampled, noted as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "userspace/agent/agent_internal.h"

#define ANSWER_WAIT_MS 3000

/* The write end of the exec pipe of a set-ID request
 * (sprobe_agent__ask_attach_at_exec) and the process that made it: in a
 * vfork child these variables are the parent's memory too, and the
 * parent must not close its own descriptor of that number. */
static int exec_pipe_fd = -1;
static pid_t exec_pipe_pid;

/* Send "VERB PID TID EXEC PPID PATH\tWHY" (and pass_fd, if >= 0) to
 * record, wait for its answer. tid: the thread that will exec (the
 * kernel's events must be on it: an exec from a thread other than the
 * leader frees the leader and its events). */
static bool ask(const char *verb, pid_t pid, pid_t tid, int pass_fd, unsigned next_exec,
		const char *path, const char *why, char *answer, size_t alen)
{
	const char *name = sprobe_agent__getenv("STACKPROBE_EXTERNAL_SOCK");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char msg[1024];
	size_t nl = name ? strlen(name) : 0;
	int fd, n;
	bool ok = false;

	answer[0] = '\0';
	if (!nl || nl + 1 > sizeof(a.sun_path))
		return false;
	memcpy(a.sun_path + 1, name, nl); /* abstract: a leading NUL */
	n = snprintf(msg, sizeof(msg), "%s %d %d %u %d %s\t%s", verb, (int)pid, (int)tid,
		     next_exec, (int)(pid == getpid() ? getppid() : getpid()), path, why);
	if (n <= 0 || (size_t)n >= sizeof(msg))
		return false;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl);
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = msg, .iov_len = (size_t)n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (pass_fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
		CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
		CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &pass_fd, sizeof(int));
	}
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, al) == 0 &&
	    sendmsg(fd, &mh, MSG_NOSIGNAL) == n) {
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
		close(fd);
	return ok;
}

static pid_t self_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

bool sprobe_agent__ask_external(unsigned next_exec, const char *path, const char *why,
				char *answer, size_t alen)
{
	int saved = errno;
	bool ok = ask("external", getpid(), self_tid(), -1, next_exec, path, why, answer, alen);

	errno = saved;
	return ok;
}

bool sprobe_agent__ask_attach_at_exec(unsigned next_exec, const char *path, const char *why,
				      char *answer, size_t alen)
{
	int saved = errno, p[2];
	bool ok = false;

	answer[0] = '\0';
	sprobe_agent__exec_failed(); /* an earlier exec's, if it failed */
	if (pipe2(p, O_CLOEXEC) == 0) {
		exec_pipe_fd = p[1];
		exec_pipe_pid = getpid();
		ok = ask("attach", getpid(), self_tid(), p[0], next_exec, path, why, answer, alen);
		close(p[0]); /* record holds its own copy now */
		if (!ok)
			sprobe_agent__exec_failed();
	}
	errno = saved;
	return ok;
}

bool sprobe_agent__ask_attach_spawned(pid_t child, const char *path, const char *why,
				      char *answer, size_t alen)
{
	int saved = errno;
	bool ok = ask("spawned", child, child, -1, 0, path, why, answer, alen);

	errno = saved;
	return ok;
}

void sprobe_agent__exec_failed(void)
{
	int saved = errno;

	/* Only the process that made the pipe owns that number. */
	if (exec_pipe_fd >= 0 && exec_pipe_pid == getpid()) {
		/* A byte before the end of file: no exec happened. */
		(void)!write(exec_pipe_fd, "x", 1);
		close(exec_pipe_fd);
	}
	exec_pipe_fd = -1;
	errno = saved;
}
