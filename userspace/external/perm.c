/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Why the kernel refused a perf event, in one line that says what is
 * missing and what to run (contract in external.h). The kernel's checks,
 * in its order (kernel/events/core.c: perf_event_open, perf_check_permission):
 * kernel.perf_event_paranoid (above 2, Debian's "off for users", unless
 * CAP_PERFMON or CAP_SYS_ADMIN), then access to the target (CAP_PERFMON,
 * or ptrace read access: the same user, and a dumpable process: a
 * set-ID program is not), and before all of them a seccomp filter, which
 * cannot be read back, only seen to exist.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "userspace/external/external.h"

#define CAP_SYS_PTRACE_BIT 19
#define CAP_SYS_ADMIN_BIT 21
#define CAP_PERFMON_BIT 38

/* A "Name:" line of /proc/.../status, as text after the name. */
static bool status_field(const char *path, const char *name, char *out, size_t len)
{
	char line[256];
	size_t nl = strlen(name);
	FILE *f = fopen(path, "re");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, name, nl) == 0 && line[nl] == ':') {
			snprintf(out, len, "%s", line + nl + 1);
			found = true;
		}
	fclose(f);
	return found;
}

static bool have_cap(int bit)
{
	char v[64];
	unsigned long long eff;

	return status_field("/proc/self/status", "CapEff", v, sizeof(v)) &&
	       sscanf(v, "%llx", &eff) == 1 && (eff >> bit & 1);
}

void sprobe_ext__explain(int err, pid_t pid, char *why, size_t len)
{
	char v[128];
	long paranoid = -100;
	int seccomp = 0;
	unsigned ru = 0, eu = 0, su = 0;
	bool perfmon = have_cap(CAP_PERFMON_BIT) || have_cap(CAP_SYS_ADMIN_BIT);
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");

	if (f) {
		if (fscanf(f, "%ld", &paranoid) != 1)
			paranoid = -100;
		fclose(f);
	}
	if (err == ESRCH) {
		snprintf(why, len, "no process %d", (int)pid);
		return;
	}
	if (err == ENOSYS || (err == ENOENT && !f)) {
		snprintf(why, len, "this kernel has no perf events (CONFIG_PERF_EVENTS is off): the "
				   "external tier cannot run here");
		return;
	}
	if (err != EACCES && err != EPERM) {
		snprintf(why, len, "perf_event_open: %s", strerror(err));
		return;
	}
	if (status_field("/proc/self/status", "Seccomp", v, sizeof(v)))
		seccomp = atoi(v);
	char path[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	bool known = status_field(path, "Uid", v, sizeof(v)) &&
		     sscanf(v, "%u %u %u", &ru, &eu, &su) == 3;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	/* A process that is not dumpable has its /proc files owned by root. */
	bool nodump = known && stat(path, &st) == 0 && st.st_uid == 0 && eu != 0;
	unsigned me = (unsigned)getuid();

	if (!perfmon && paranoid > 2)
		snprintf(why, len, "perf_event_open: %s: kernel.perf_event_paranoid is %ld, which "
				   "turns perf events off for users without CAP_PERFMON: run `sudo "
				   "sysctl kernel.perf_event_paranoid=2` (user-space sampling of "
				   "your own processes), or run stackprobe as root or with CAP_PERFMON "
				   "(`sudo setcap cap_perfmon,cap_sys_ptrace+ep stackprobe`)",
			 strerror(err), paranoid);
	else if (!perfmon && !have_cap(CAP_SYS_PTRACE_BIT) && known && ru == me &&
		 (eu != me || su != me))
		snprintf(why, len, "perf_event_open: %s: process %d is set-user-ID (started by "
				   "uid %u, runs as effective uid %u): the kernel lets no unprivileged "
				   "user sample it, not even the one who started it; run with sudo or "
				   "with CAP_PERFMON", strerror(err), (int)pid, ru, eu);
	else if (!perfmon && !have_cap(CAP_SYS_PTRACE_BIT) && known &&
		 (ru != me || eu != me || su != me))
		snprintf(why, len, "perf_event_open: %s: process %d runs as uid %u (effective %u) "
				   "and you are uid %u: only its own user, root, or CAP_PERFMON may "
				   "sample it; run as that user, with sudo, or with CAP_PERFMON and "
				   "CAP_SYS_PTRACE (`sudo setcap cap_perfmon,cap_sys_ptrace+ep stackprobe`)",
			 strerror(err), (int)pid, ru, eu, me);
	else if (!perfmon && !have_cap(CAP_SYS_PTRACE_BIT) && nodump)
		snprintf(why, len, "perf_event_open: %s: process %d is not dumpable (a set-ID "
				   "program, or it called prctl(PR_SET_DUMPABLE, 0)): the kernel lets "
				   "no unprivileged user sample it, not even its own; run with sudo or "
				   "with CAP_PERFMON", strerror(err), (int)pid);
	else if (seccomp == 2)
		snprintf(why, len, "perf_event_open: %s: a seccomp filter on stackprobe refuses it "
				   "(Seccomp: 2 in /proc/self/status; a container's default profile "
				   "does this): run it outside the container, or give the container "
				   "perf events (Docker: --cap-add PERFMON, or a --security-opt seccomp= "
				   "profile that allows perf_event_open)", strerror(err));
	else
		snprintf(why, len, "perf_event_open: %s: kernel.perf_event_paranoid is %ld and "
				   "nothing else explains it: a security module (SELinux, AppArmor: "
				   "the perf_event class) or a container's policy refused it; the "
				   "audit log (dmesg) says which", strerror(err), paranoid);
}
