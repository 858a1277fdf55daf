/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * stackprobe record -p PID through the kernel (the external tier): for a
 * process with no agent listening (or --external). The kernel samples it
 * (userspace/external/external.h: sprobe_ext__attach, one perf event per
 * thread and CPU, inherited by the threads and children it makes from
 * then on); the target runs no code of ours and sees no signal.
 *
 * It ends at -d SECONDS, at Ctrl-C (SIGINT, SIGTERM), or when the process
 * exits (its pidfd becomes readable: how it ended is kept when the
 * kernel still knows it). The parts go through the same merge as
 * `record -- CMD`, so the reports are the same. A refusal (no process, a
 * kernel thread, perf events not allowed) is one line and exit 1, before
 * the output is created or truncated: nothing is left claiming success.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stackprobe/datafile.h>

#include "userspace/common/clock.h"
#include "userspace/datafile/merge.h"
#include "userspace/external/external.h"

#include "cli.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* PIDFD_GET_INFO (Linux 6.15): the exit status of a process that is not
 * ours, kept as long as a pidfd is held, also after its parent reaped it.
 * Its first version (64 bytes); absent from older headers. */
struct pidfd_info_v0 {
	uint64_t mask, cgroupid;
	uint32_t pid, tgid, ppid, ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
};
#define PIDFD_INFO_EXIT_BIT (1ull << 3)
#define PIDFD_GET_INFO_V0 _IOWR(0xFF, 11, struct pidfd_info_v0)

static volatile sig_atomic_t stop_asked;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
}

/* How pid ended, as a wait status: from its pidfd (6.15+), else from
 * /proc/PID/stat while it is a zombie (field 52). false: not known. */
static bool exit_status(pid_t pid, int pidfd, int *wst)
{
	struct pidfd_info_v0 in = { .mask = PIDFD_INFO_EXIT_BIT };
	char path[64], buf[1024];

	if (pidfd >= 0 && ioctl(pidfd, PIDFD_GET_INFO_V0, &in) == 0 && (in.mask & PIDFD_INFO_EXIT_BIT)) {
		*wst = in.exit_code;
		return true;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	char *p = strrchr(buf, ')'), state = 0;
	if (!p || sscanf(p + 1, " %c", &state) != 1 || state != 'Z')
		return false;
	/* Fields 3..52 after the comm: the last one is the exit code. */
	p = strrchr(p, ' ');
	return p && sscanf(p + 1, "%d", wst) == 1;
}

/* The output's absolute name, without creating it: its directory must
 * exist. */
static int output_path(const char *output, char *out, size_t len)
{
	char dirbuf[PATH_MAX];
	const char *slash = strrchr(output, '/');
	const char *base = slash ? slash + 1 : output;

	if (!slash)
		snprintf(dirbuf, sizeof(dirbuf), ".");
	else if (slash == output)
		snprintf(dirbuf, sizeof(dirbuf), "/");
	else if ((size_t)snprintf(dirbuf, sizeof(dirbuf), "%.*s", (int)(slash - output), output) >=
		 sizeof(dirbuf))
		return -ENAMETOOLONG;
	char *d = realpath(dirbuf, NULL);
	if (!d)
		return -errno;
	int n = snprintf(out, len, "%s/%s", strcmp(d, "/") ? d : "", base);
	free(d);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int cli_record_pid_external(const struct cli_record_pid_opts *o, const char *tier)
{
	pid_t pid = o->pid;
	char abs[PATH_MAX], dir[PATH_MAX + 16], why[768];

	/* A CPU clock cannot see a thread that is blocked: no wall mode. */
	if (o->mode_given && strcmp(o->mode, "wall") == 0) {
		fprintf(stderr, "stackprobe record: process %d: %s; the kernel tier samples CPU time "
				"only, so --mode wall needs the agent (start the process with "
				"LD_PRELOAD=/path/to/libstackprobe.so STACKPROBE_AGENT=idle, docs/AGENT.md "
				"\"On demand\"), or record it with --mode cpu\n", (int)pid, tier);
		return CLI_EXIT_ERROR;
	}
	/* Held from before the attach: the process, not a pid reused later. */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno == ESRCH) {
		fprintf(stderr, "stackprobe record: no process %d\n", (int)pid);
		return CLI_EXIT_ERROR;
	}
	int err = output_path(o->output, abs, sizeof(abs));
	if (err) {
		fprintf(stderr, "stackprobe record: cannot write %s: %s\n", o->output, strerror(-err));
		goto fail_pidfd;
	}
	snprintf(dir, sizeof(dir), "%s.parts.XXXXXX", abs);
	if (!mkdtemp(dir)) {
		fprintf(stderr, "stackprobe record: cannot create a directory next to %s: %s\n",
			o->output, strerror(errno));
		goto fail_pidfd;
	}
	/* Ctrl-C from the tier line on (it is printed once attached) ends
	 * the recording and keeps what was taken. */
	struct sigaction sa = { .sa_handler = on_stop_signal }, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	/* Its children now, before its events exist: one forked after the
	 * attach inherits them (listed here too, it would count twice). */
	pid_t kv[CLI_KIDS_MAX];
	double kcpu = 0;
	size_t nk = o->no_children ? 0 : cli_kids_list(pid, kv, CLI_KIDS_MAX, &kcpu);
	struct sprobe_ext *x = sprobe_ext__attach(pid, o->freq, dir, why, sizeof(why));
	if (!x) {
		/* Why the agent was not used either, so the user has both. */
		fprintf(stderr, "stackprobe record: process %d: %s; cannot sample process %d through "
				"the kernel either: %s\n", (int)pid, tier, (int)pid, why);
		rmdir(dir);
		goto fail_sig;
	}
	int probe = open(o->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (probe < 0) {
		fprintf(stderr, "stackprobe record: cannot write %s: %s\n", o->output, strerror(errno));
		sprobe_ext__free(x);
		cli_remove_dir(dir);
		goto fail_sig;
	}
	close(probe);
	int nthreads = sprobe_ext__refresh(x);
	/* Its modules are read through /proc/PID/root (ptrace access: its
	 * own user, root, CAP_SYS_PTRACE; CAP_PERFMON gives its maps but not
	 * its files). */
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root/", (int)pid);
	int mfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int merrno = errno;
	if (mfd >= 0)
		close(mfd);
	if (!o->quiet) {
		const char *kwhy = sprobe_ext__kernel_why(x);

		fprintf(stderr, "stackprobe record: process %d: %s; sampling it through the kernel "
				"(external tier: perf events, cpu time%s, %s, frame-pointer call chains, "
				"%d thread%s and what it starts from now on) at %g Hz for %g s; Ctrl-C "
				"ends it early\n", (int)pid, tier,
			o->mode_given ? "" : " (not wall: a CPU clock)",
			kwhy ? kwhy : "user and kernel", nthreads, nthreads == 1 ? "" : "s", o->freq,
			o->seconds);
		if (mfd < 0)
			fprintf(stderr, "stackprobe record: cannot read process %d's files through %s "
					"(%s): its samples will have no function names; CAP_SYS_PTRACE (or "
					"its own user) can read them\n", (int)pid, root, strerror(merrno));
	}

	struct cli_kids *kids = nk ? cli_kids__attach(pid, kv, nk, kcpu, o->freq, dir, o->quiet)
				   : NULL;
	uint64_t t0 = sprobe_mono_ns(), end = t0 + (uint64_t)(o->seconds * 1e9), named = t0;
	bool gone = false;
	while (!stop_asked && !gone) {
		uint64_t now = sprobe_mono_ns();
		if (now >= end)
			break;
		uint64_t left_ms = (end - now) / 1000000ull + 1;
		struct pollfd p = { .fd = pidfd, .events = POLLIN };
		/* The rings are read every 50 ms (1 MiB each holds far more). */
		int r = poll(&p, pidfd >= 0 ? 1 : 0, left_ms < 50 ? (int)left_ms : 50);
		if (r > 0)
			gone = true;
		else if (pidfd < 0 && kill(pid, 0) != 0 && errno == ESRCH)
			gone = true;
		sprobe_ext__poll(x);
		cli_kids__poll(kids);
		if (!gone && now - named >= 1000000000ull) {
			sprobe_ext__refresh(x);
			named = now;
		}
	}
	double secs = (double)(sprobe_mono_ns() - t0) / 1e9;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	struct sprobe_merge_exit ex = { .pid = (uint32_t)pid, .exec_index = SPROBE_MERGE_LATEST,
					.how = SPROBE_DF_EXIT_UNKNOWN, .time_ns = sprobe_mono_ns() };
	int wst = 0;
	bool status = gone && exit_status(pid, pidfd, &wst);
	if (status) {
		ex.how = WIFSIGNALED(wst) ? SPROBE_DF_EXIT_KILLED : SPROBE_DF_EXIT_EXITED;
		ex.code = WIFSIGNALED(wst) ? WTERMSIG(wst) : WEXITSTATUS(wst);
	}
	if (!o->quiet) {
		if (stop_asked)
			fprintf(stderr, "stackprobe record: stopped early after %.2f s; keeping what "
					"was taken\n", secs);
		else if (gone && status && WIFSIGNALED(wst))
			fprintf(stderr, "stackprobe record: process %d was killed by signal %d (%s) "
					"after %.2f s; keeping what was taken\n", (int)pid, WTERMSIG(wst),
				strsignal(WTERMSIG(wst)), secs);
		else if (gone && status)
			fprintf(stderr, "stackprobe record: process %d exited with status %d after "
					"%.2f s; keeping what was taken\n", (int)pid, WEXITSTATUS(wst), secs);
		else if (gone)
			fprintf(stderr, "stackprobe record: process %d exited after %.2f s (how is not "
					"known: its parent reaped it); keeping what was taken\n", (int)pid,
				secs);
	}
	int np = sprobe_ext__finish(x);
	unsigned long long xs = 0, xl = 0, kl = 0;
	sprobe_ext__counts(x, &xs, &xl);
	sprobe_ext__free(x);
	xs += cli_kids__finish(kids, &kl);
	xl += kl;
	cli_kids__free(kids);
	if (o->no_children && !o->quiet)
		cli_kids_say_left(pid);
	if (pidfd >= 0)
		close(pidfd);
	if (np < 0) {
		fprintf(stderr, "stackprobe record: could not write the kernel's samples: %s\n",
			strerror(-np));
		cli_remove_dir(dir);
		unlink(o->output);
		return CLI_EXIT_ERROR;
	}
	if (!o->quiet && xl)
		fprintf(stderr, "stackprobe record: the kernel lost %llu samples (ring full)\n", xl);
	struct sprobe_merge_opts mo = { .dir = dir, .output = o->output, .root_pid = pid,
					.exits = gone ? &ex : NULL, .nexits = gone ? 1 : 0 };
	struct sprobe_merge_result mr;
	int merr = sprobe_merge__dir(&mo, &mr);
	if (merr < 0) {
		fprintf(stderr, "stackprobe record: could not write %s: %s; the parts are kept in %s\n",
			o->output, strerror(-merr), dir);
		return CLI_EXIT_ERROR;
	}
	cli_remove_dir(dir);
	/* An agent without a channel (busy, table only) publishes a table:
	 * a killed process leaves it. */
	cli_say_dead_table(pid, o->quiet);
	if (!o->quiet)
		fprintf(stderr, "stackprobe record: wrote %s (%.2f s of process %d: %llu samples, "
				"%u process%s)\n", o->output, secs, (int)pid, xs, mr.processes,
			mr.processes == 1 ? "" : "es");
	if (o->report)
		cli_report_text(o->output);
	return CLI_EXIT_OK;
fail_sig:
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
fail_pidfd:
	if (pidfd >= 0)
		close(pidfd);
	return CLI_EXIT_ERROR;
}
