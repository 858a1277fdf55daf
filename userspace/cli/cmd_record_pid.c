/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe record -p PID: a recording of a running service, on demand.
 *
 * Without an agent to record it (none answers on the channel, or it is
 * busy, refuses us, speaks another version), or with --external, the
 * kernel samples it instead: cmd_record_ext.c (the external tier), whose
 * line says why (record_pid_why.c).
 *
 * The service runs with the agent idle (STACKPROBE_AGENT=idle: no sampler,
 * no signal, no CPU) and its control channel (userspace/agent/control.c,
 * docs/AGENT.md "On demand"). This command connects, asks the agent to
 * sample at -F HZ in --mode for -d SECONDS into a part in a fresh
 * directory next to the output, waits, asks it to stop, merges the part
 * into one data file (userspace/datafile/merge.h) and prints the report.
 * The agent is idle again afterwards.
 *
 * Ctrl-C (or SIGTERM) ends the wait early: what was taken is kept. The
 * terminal's SIGINT reaches this process only (the service is in another
 * process group), so the service never sees it. If this process dies
 * instead, the agent sees the socket close and stops by itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <stackprobe/report.h>

#include "userspace/common/clock.h"
#include "userspace/common/ctl_line.h"
#include "userspace/datafile/merge.h"

#include "cli.h"

static volatile sig_atomic_t stop_asked;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static int plain_fd(void *fd)
{
	return *(int *)fd;
}

/* Read one reply line within ms (ctl_line.h). A Ctrl-C does not cut
 * this wait short: the replies it waits for are the agent's, which come
 * in bounded time. */
static int read_reply(int fd, char *buf, size_t cap, int ms)
{
	struct sprobe_ctl_sock s = { plain_fd, NULL, &fd };

	return sprobe_ctl__read_line(&s, buf, cap, ms);
}

/* Connect to pid's control channel: the socket, -1 after saying why, or
 * -2 (nothing said) when no agent listens there. */
static int connect_agent(pid_t pid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "stackprobe-ctl-%d", (int)pid);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);

	if (kill(pid, 0) != 0 && errno == ESRCH) {
		fprintf(stderr, "stackprobe record: no process %d\n", (int)pid);
		return -1;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "stackprobe record: socket: %s\n", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&a, len) != 0) {
		int e = errno;
		close(fd);
		if (e == ECONNREFUSED || e == ENOENT)
			return -2;
		else
			fprintf(stderr, "stackprobe record: cannot reach process %d's agent: %s\n",
				(int)pid, strerror(e));
		return -1;
	}
	return fd;
}

int cli_record_pid(const struct cli_record_pid_opts *o)
{
	pid_t pid = o->pid;
	char dir[PATH_MAX], line[PATH_MAX + 96];
	int code = CLI_EXIT_OK;

	if (o->external)
		return cli_record_pid_external(o, "--external");
	int fd = connect_agent(pid);
	char why[512];
	/* No agent listens (none was loaded, one busy under `record`, one
	 * out of reach): the kernel samples it instead, saying why. */
	if (fd == -2) {
		cli_why_no_channel(pid, why, sizeof(why));
		return cli_record_pid_external(o, why);
	}
	if (fd < 0)
		return CLI_EXIT_ERROR;
	int probe = open(o->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (probe < 0) {
		fprintf(stderr, "stackprobe record: cannot write %s: %s\n", o->output, strerror(errno));
		close(fd);
		return CLI_EXIT_ERROR;
	}
	close(probe);
	/* The part goes next to the output (same file system), in a
	 * directory the service's user can write to (we may be root). */
	char *abs = realpath(o->output, NULL);
	if ((size_t)snprintf(dir, sizeof(dir), "%s.parts.XXXXXX", abs ? abs : o->output) >=
		    sizeof(dir) || !mkdtemp(dir)) {
		fprintf(stderr, "stackprobe record: cannot create a directory next to %s: %s\n",
			o->output, strerror(errno));
		free(abs);
		close(fd);
		return CLI_EXIT_ERROR;
	}
	free(abs);
	char proc[32];
	struct stat pst;
	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	if (geteuid() == 0 && stat(proc, &pst) == 0 && pst.st_uid != 0 &&
	    chown(dir, pst.st_uid, pst.st_gid))
		fprintf(stderr, "stackprobe record: cannot give %s to uid %u: %s\n", dir,
			(unsigned)pst.st_uid, strerror(errno));

	int n = snprintf(line, sizeof(line), "start 1 %g %s %g %s\n", o->freq, o->mode,
			 o->seconds, dir);
	if (n <= 0 || (size_t)n >= sizeof(line)) {
		fprintf(stderr, "stackprobe record: %s: path too long\n", dir);
		goto fail;
	}
	/* A send that fails (the agent turned us away at once and closed)
	 * still leaves its reply to read: the reply says why. */
	(void)!send(fd, line, (size_t)n, MSG_NOSIGNAL);
	n = read_reply(fd, line, sizeof(line), 10000);
	if (n <= 0 || strncmp(line, "ok ", 3) != 0) {
		/* Busy with another client, refusing our uid, another version:
		 * the kernel can still sample it. */
		cli_why_reply(pid, line, n, why, sizeof(why));
		close(fd);
		cli_remove_dir(dir);
		unlink(o->output);
		return cli_record_pid_external(o, why);
	}

	struct sigaction sa = { .sa_handler = on_stop_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	uint64_t t0 = sprobe_mono_ns(), end = t0 + (uint64_t)(o->seconds * 1e9);
	bool gone = false;
	if (!o->quiet)
		fprintf(stderr, "stackprobe record: sampling process %d at %g Hz (%s) for %g s; "
				"Ctrl-C ends it early\n", (int)pid, o->freq, o->mode, o->seconds);
	/* Its workers: the agent listens in this process only. */
	struct cli_kids *kids = NULL;
	if (!o->no_children) {
		pid_t kv[CLI_KIDS_MAX];
		double kcpu;
		size_t nk = cli_kids_list(pid, kv, CLI_KIDS_MAX, &kcpu);

		if (nk)
			kids = cli_kids__attach(pid, kv, nk, kcpu, o->freq, dir, o->quiet);
	}
	while (!stop_asked) {
		uint64_t now = sprobe_mono_ns();
		if (now >= end)
			break;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int ms = (int)((end - now) / 1000000ull) + 1;
		/* The children's rings are read every 50 ms. */
		int r = poll(&p, 1, cli_kids__count(kids) && ms > 50 ? 50 : ms);
		cli_kids__poll(kids);
		if (r > 0) {
			/* The agent ended it: its process exited or exec'd
			 * (end of file), or its own deadline ("done"). */
			gone = true;
			break;
		}
	}
	if (stop_asked && !o->quiet)
		fprintf(stderr, "stackprobe record: stopped early after %.2f s; keeping what was "
				"taken\n", (double)(sprobe_mono_ns() - t0) / 1e9);
	int err = 0;
	if (!gone)
		(void)!send(fd, "stop\n", 5, MSG_NOSIGNAL);
	/* Stopping writes the part's symbols and trailer: bounded by the
	 * agent, which is given time for a big process. */
	n = read_reply(fd, line, sizeof(line), 60000);
	if (n > 0 && sscanf(line, "done %d", &err) == 1 && err)
		fprintf(stderr, "stackprobe record: process %d's agent could not finish its part: "
				"%s\n", (int)pid, strerror(err));
	else if (n <= 0 && !o->quiet)
		fprintf(stderr, "stackprobe record: process %d ended the recording (it exited or "
				"exec'd); keeping what was taken\n", (int)pid);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	close(fd);
	fd = -1;
	unsigned long long klost = 0, ksamples = cli_kids__finish(kids, &klost);
	size_t nkids = cli_kids__count(kids);
	cli_kids__free(kids);
	if (!o->quiet && klost)
		fprintf(stderr, "stackprobe record: the kernel lost %llu samples of the children "
				"(ring full)\n", klost);
	if (o->no_children && !o->quiet)
		cli_kids_say_left(pid);

	struct sprobe_merge_opts mo = { .dir = dir, .output = o->output, .root_pid = pid };
	struct sprobe_merge_result mr;
	int merr = sprobe_merge__dir(&mo, &mr);
	if (merr < 0) {
		fprintf(stderr, "stackprobe record: could not write %s: %s; the part is kept in %s\n",
			o->output, strerror(-merr), dir);
		return CLI_EXIT_ERROR;
	}
	cli_remove_dir(dir);
	/* Killed during the recording: no exit handler removed its table. */
	cli_say_dead_table(pid, o->quiet);
	if (mr.parts == 0) {
		fprintf(stderr, "stackprobe record: process %d wrote nothing\n", (int)pid);
		return CLI_EXIT_ERROR;
	}
	/* The service's agent left names and lines to the reader (no symbol
	 * table or DWARF in the service): added here, as record adds them,
	 * from the files as the service sees them (its root: another mount
	 * namespace's, a container's) while it runs, and its JIT's map. */
	if (cli_lines_left_to_reader(o->output)) {
		char root[64];
		struct cli_lines_opts lo = { .jit = true };
		struct stat rs, ms, ps;

		snprintf(root, sizeof(root), "/proc/%d", (int)pid);
		if (!gone && stat(root, &ps) == 0) {
			/* still the image recorded: its map is its own */
			lo.live = true;
			lo.owner_set = true;
			lo.owner = ps.st_uid;
		}
		/* another mount namespace than ours (a container's, or files
		 * mounted over ours): its files through its root */
		snprintf(root, sizeof(root), "/proc/%d/ns/mnt", (int)pid);
		if (lo.live && stat(root, &rs) == 0 && stat("/proc/self/ns/mnt", &ms) == 0 &&
		    (rs.st_dev != ms.st_dev || rs.st_ino != ms.st_ino)) {
			snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
			lo.root = root;
		}
		long nl = cli_record_lines(o->output, &lo, why, sizeof(why));

		if (nl < 0)
			fprintf(stderr, "stackprobe record: %s keeps no source lines and no names of "
					"module files: %s\n",
				o->output, why[0] ? why : strerror((int)-nl));
	}
	if (!o->quiet && nkids)
		fprintf(stderr, "stackprobe record: wrote %s (%.2f s of process %d, and %llu samples "
				"of its %zu child process%s)\n", o->output,
			(double)(sprobe_mono_ns() - t0) / 1e9, (int)pid, ksamples, nkids,
			nkids == 1 ? "" : "es");
	else if (!o->quiet)
		fprintf(stderr, "stackprobe record: wrote %s (%.2f s of process %d)\n", o->output,
			(double)(sprobe_mono_ns() - t0) / 1e9, (int)pid);
	if (o->report)
		cli_report_text(o->output);
	return code;
fail:
	if (fd >= 0)
		close(fd);
	cli_remove_dir(dir);
	unlink(o->output);
	return CLI_EXIT_ERROR;
}
