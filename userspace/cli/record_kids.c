/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * record -p's children: the processes a service had already started when
 * the recording began (a prefork server's workers, where the work is).
 * Neither tier reaches them by itself: the agent listens in the process
 * it started in only, and inherited perf events follow the children made
 * after the attach only. Each is attached through the kernel here
 * (sprobe_ext__attach), its parts written into the recording's directory
 * beside the parent's, so the merge makes one tree of them.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "userspace/external/external.h"

#include "cli.h"

struct cli_kids {
	pid_t pid[CLI_KIDS_MAX];
	struct sprobe_ext *x[CLI_KIDS_MAX];
	size_t n;
};

/* pid's parent and CPU seconds (user + system) from /proc/PID/stat; false
 * if it has gone. */
static bool proc_stat(pid_t pid, pid_t *ppid, double *cpu)
{
	char path[64], buf[1024];
	unsigned long long ut = 0, st = 0;
	int pp = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	/* state ppid pgrp sid tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime */
	if (!p || sscanf(p + 1, " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &pp, &ut,
			 &st) != 3)
		return false;
	*ppid = (pid_t)pp;
	*cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	return true;
}

size_t cli_kids_list(pid_t pid, pid_t *out, size_t max, double *cpu)
{
	struct {
		pid_t pid, ppid;
		double cpu;
	} *all = NULL;
	size_t nall = 0, cap = 0, n = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");

	*cpu = 0;
	while (d && (de = readdir(d))) {
		char *end;
		long v = strtol(de->d_name, &end, 10);
		pid_t pp;
		double c;

		if (v <= 0 || *end || !proc_stat((pid_t)v, &pp, &c))
			continue;
		if (nall == cap) {
			cap = cap ? cap * 2 : 1024;
			void *nv = realloc(all, cap * sizeof(*all));
			if (!nv)
				break;
			all = nv;
		}
		all[nall].pid = (pid_t)v;
		all[nall].ppid = pp;
		all[nall++].cpu = c;
	}
	if (d)
		closedir(d);
	/* Breadth first: children, then theirs (out doubles as the queue). */
	pid_t parent = pid;
	for (size_t q = 0;; parent = out[q++]) {
		for (size_t i = 0; i < nall && n < max; i++)
			if (all[i].ppid == parent) {
				out[n++] = all[i].pid;
				*cpu += all[i].cpu;
			}
		if (q >= n)
			break;
	}
	free(all);
	return n;
}

struct cli_kids *cli_kids__attach(pid_t pid, const pid_t *v, size_t n, double cpu, double freq,
				  const char *dir, bool quiet)
{
	struct cli_kids *k = calloc(1, sizeof(*k));
	char why[512];

	if (!k)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		struct sprobe_ext *x = sprobe_ext__attach(v[i], freq, dir, why, sizeof(why));

		if (!x) {
			/* Gone meanwhile: nothing to say. */
			if (errno != ESRCH && !quiet)
				fprintf(stderr, "stackprobe record: cannot sample child %d of process "
						"%d through the kernel: %s\n", (int)v[i], (int)pid, why);
			continue;
		}
		k->pid[k->n] = v[i];
		k->x[k->n++] = x;
	}
	if (!quiet && k->n) {
		fprintf(stderr, "stackprobe record: and its %zu child process%s (", k->n,
			k->n == 1 ? "" : "es");
		for (size_t i = 0; i < k->n && i < 8; i++)
			fprintf(stderr, "%s%d", i ? " " : "", (int)k->pid[i]);
		fprintf(stderr, "%s; %.2f s of CPU so far), through the kernel (perf events, cpu "
				"time); --no-children leaves them out\n", k->n > 8 ? " ..." : "", cpu);
	}
	return k;
}

size_t cli_kids__count(const struct cli_kids *k)
{
	return k ? k->n : 0;
}

void cli_kids__poll(struct cli_kids *k)
{
	for (size_t i = 0; k && i < k->n; i++)
		sprobe_ext__poll(k->x[i]);
}

unsigned long long cli_kids__finish(struct cli_kids *k, unsigned long long *lost)
{
	unsigned long long samples = 0;

	*lost = 0;
	for (size_t i = 0; k && i < k->n; i++) {
		unsigned long long s, l;
		int np = sprobe_ext__finish(k->x[i]);

		sprobe_ext__counts(k->x[i], &s, &l);
		if (np < 0)
			fprintf(stderr, "stackprobe record: could not write child %d's samples: %s\n",
				(int)k->pid[i], strerror(-np));
		samples += s;
		*lost += l;
	}
	return samples;
}

void cli_kids__free(struct cli_kids *k)
{
	for (size_t i = 0; k && i < k->n; i++)
		sprobe_ext__free(k->x[i]);
	free(k);
}

void cli_kids_say_left(pid_t pid)
{
	pid_t v[CLI_KIDS_MAX];
	double cpu;
	size_t n = cli_kids_list(pid, v, CLI_KIDS_MAX, &cpu);

	if (n)
		fprintf(stderr, "stackprobe record: process %d has %zu child process%s (%.2f s of CPU "
				"so far) not recorded (--no-children); record without it to follow "
				"them\n", (int)pid, n, n == 1 ? "" : "es", cpu);
}
