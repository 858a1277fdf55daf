/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Why `record -p` does not record through the process's agent: the reason
 * the kernel tier's line gives (docs/AGENT.md "On demand"), so the user
 * knows whether no agent is there, or one is there but busy, refusing,
 * out of reach or of another version. Read from /proc (the process's
 * maps, environment and namespaces) and from the agent's first reply.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"

/* Does pid map the agent library? 1 yes, 0 no, -errno when its maps
 * cannot be read (another user's process). */
static int maps_agent(pid_t pid)
{
	char path[64], line[4096];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	/* An empty read (EACCES shows only at read time on some kernels). */
	errno = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libstackprobe.so") != NULL;
	int e = errno;
	fclose(f);
	return found ? 1 : e ? -e : 0;
}

/* The value of NAME in pid's initial environment into out ("" if unset
 * or unreadable). */
static void environ_get(pid_t pid, const char *name, char *out, size_t len)
{
	char path[64], buf[65536];
	size_t nl = strlen(name);
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if (!(f = fopen(path, "re")))
		return;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
		if (strncmp(buf + i, name, nl) == 0 && buf[i + nl] == '=') {
			snprintf(out, len, "%s", buf + i + nl + 1);
			return;
		}
}

static pid_t parent_of(pid_t pid)
{
	char path[64], buf[1024];
	int ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return 0;
	return (pid_t)ppid;
}

/* Does an agent listen on pid's control channel (userspace/agent/control.c)? */
static bool listens(pid_t pid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "stackprobe-ctl-%d", (int)pid);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, len) == 0;

	/* Closing at once is a client that went away: the agent drops it. */
	if (fd >= 0)
		close(fd);
	return ok;
}

static bool same_ns(pid_t pid, const char *ns)
{
	char path[64], self[64];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	snprintf(self, sizeof(self), "/proc/self/ns/%s", ns);
	if (stat(path, &a) != 0 || stat(self, &b) != 0)
		return true; /* not known: assume nothing */
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

void cli_why_no_channel(pid_t pid, char *why, size_t len)
{
	char out[16], dir[16], pprof[16], agent[16], control[16];
	int m = maps_agent(pid);

	if (m == 0) {
		snprintf(why, len, "no stackprobe agent is loaded in it");
		return;
	}
	if (m < 0) {
		snprintf(why, len, "no stackprobe agent answers on its control channel (whether one "
				   "is loaded is not known: its maps cannot be read, %s)", strerror(-m));
		return;
	}
	if (!same_ns(pid, "net")) {
		snprintf(why, len, "its stackprobe agent is out of reach: the process is in another "
				   "network namespace (a container's), which the agent's abstract "
				   "socket does not cross");
		return;
	}
	environ_get(pid, "STACKPROBE_OUTPUT_DIR", dir, sizeof(dir));
	environ_get(pid, "STACKPROBE_OUTPUT", out, sizeof(out));
	environ_get(pid, "STACKPROBE_PPROF_DIR", pprof, sizeof(pprof));
	environ_get(pid, "STACKPROBE_AGENT", agent, sizeof(agent));
	environ_get(pid, "STACKPROBE_CONTROL", control, sizeof(control));
	pid_t ppid = parent_of(pid);
	if (dir[0] || out[0])
		snprintf(why, len, "process %d is busy: its stackprobe agent is recording it for "
				   "another `stackprobe record` (or STACKPROBE_OUTPUT), with no control "
				   "channel while it does", (int)pid);
	else if (pprof[0])
		snprintf(why, len, "process %d is busy: its stackprobe agent is profiling it "
				   "continuously (STACKPROBE_PPROF_DIR), with no control channel",
			 (int)pid);
	else if (ppid > 1 && maps_agent(ppid) == 1 && listens(ppid))
		snprintf(why, len, "its stackprobe agent listens in its parent %d only (a child forked "
				   "without exec has no control channel)", (int)ppid);
	else if (strcmp(agent, "idle") != 0 && strcmp(control, "1") != 0)
		snprintf(why, len, "its stackprobe agent runs without the control channel "
				   "(STACKPROBE_AGENT=idle, or STACKPROBE_CONTROL=1, turns it on)");
	else
		snprintf(why, len, "its stackprobe agent has no control channel (it could not open "
				   "one, or was started in another process of the tree)");
}

void cli_why_reply(pid_t pid, const char *line, int n, char *why, size_t len)
{
	unsigned uid;
	int err, off = 0;

	if (n <= 0)
		snprintf(why, len, "its stackprobe agent did not answer (%s)",
			 n == 0 ? "it closed the connection" : strerror(-n));
	else if (strcmp(line, "busy") == 0)
		snprintf(why, len, "process %d is busy: another `stackprobe record -p %d` is "
				   "recording it through its agent", (int)pid, (int)pid);
	else if (sscanf(line, "refused %u", &uid) == 1)
		snprintf(why, len, "its stackprobe agent refused uid %u: only its own user and root "
				   "may record it through the agent", uid);
	else if (sscanf(line, "error %d %n", &err, &off) == 1 && err == EINVAL && off &&
		 strcmp(line + off, "malformed request") == 0)
		snprintf(why, len, "its stackprobe agent does not understand this stackprobe's "
				   "request (another version: use the stackprobe of the agent's version "
				   "to record it through the agent)");
	else if (sscanf(line, "error %d %n", &err, &off) == 1)
		snprintf(why, len, "its stackprobe agent could not start sampling: %s",
			 off ? line + off : strerror(err));
	else
		snprintf(why, len, "its stackprobe agent answered \"%.64s\" (another version of the "
				   "control protocol?)", line);
}
