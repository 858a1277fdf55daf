/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Continuous profiling: one gzipped pprof profile per period, for a
 * profiling backend to pick up (docs/OUTPUTS.md "Continuous profiling").
 *
 *   STACKPROBE_PPROF_DIR=DIR   where the profiles go (created 0755 if absent)
 *   STACKPROBE_PERIOD=S        seconds per profile, 1..86400 (default 10)
 *   STACKPROBE_PPROF_KEEP=N    profiles of this process kept, 1..100000
 *                              (default 12: the oldest are removed)
 *   STACKPROBE_SERVICE=NAME    the service_name label (default: comm)
 *   STACKPROBE_FREQ, STACKPROBE_MODE, ...: as for any sampler
 *
 * One thread of the agent's (sprobe-period), blocking every signal and
 * left out of the captures, runs the periods back to back: at the end of
 * each it stops the sampler (its part gets symbols and trailer), moves the
 * part aside, starts the next period's sampler at once (the gap between
 * two periods is one stop and one start: milliseconds), and only then
 * turns the finished part into a profile with the report library, in the
 * service's process: NAME.PID.YYYYmmddTHHMMSSZ.Ss.pb.gz (start time in
 * UTC, the period), written to a hidden temporary name in DIR and renamed
 * into place, so a reader never sees half a file. Each sample carries the
 * labels pid, comm, thread_id, thread_name (the pprof writer's own) and
 * service_name, hostname. A directory that cannot be made or written
 * (read-only, another user's) is said once, with the path and the error,
 * for the process and every process it starts (STACKPROBE_PPROF_SAID in
 * their environment), and they run unprofiled. A profile that cannot be written (disk full) is
 * dropped, said on stderr (once per run of failures), and the periods go
 * on; the service is not disturbed. A period whose part itself could not
 * be written in full becomes a profile of what reached it, whose comment
 * says "CUT SHORT" and why. The period running at exit is not written (its part stays
 * in DIR/.stackprobe-PID.parts, readable with `stackprobe report -i`).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/report.h>
#include <stackprobe/sampler.h>

#include "userspace/agent/agent_internal.h"

/* Set to DIR once a process of the tree said DIR cannot be used. */
#define PP_SAID_ENV "STACKPROBE_PPROF_SAID"

static pid_t period_tid;
static sem_t period_ready;
static char *pp_dir, *pp_parts, *pp_labels, pp_name[64];
static double pp_period = 10;
static unsigned long pp_keep = 12;
static bool pp_quiet, pp_warned;

pid_t sprobe_agent__continuous_tid(void)
{
	return __atomic_load_n(&period_tid, __ATOMIC_RELAXED);
}

static void warn_once(const char *what, int err)
{
	if (pp_quiet || pp_warned)
		return;
	pp_warned = true;
	fprintf(stderr, "stackprobe agent: %s: %s; the periods go on (said once until one "
			"is written again)\n", what, strerror(err));
}

/* The directory cannot be used: say so once per process tree, not once
 * per process (a shim that execs one program after another would print
 * it for each). The first process to say it leaves the directory's name
 * in the environment its children inherit (the constructor's thread:
 * no other thread of the program reads the environment yet). */
static void say_dir_once(const char *dir, const char *path, int err)
{
	const char *said = sprobe_agent__getenv(PP_SAID_ENV);

	if (pp_quiet || (said && strcmp(said, dir) == 0))
		return;
	sprobe_agent__setenv(PP_SAID_ENV, dir);
	fprintf(stderr, "stackprobe agent: STACKPROBE_PPROF_DIR=%s: cannot create %s: %s%s; no "
			"continuous profiling (said once for this process and its children)\n",
		dir, path, strerror(err),
		err == EACCES || err == EPERM ? " (the service's user cannot write there)" : "");
}

/* Keep the pp_keep newest profiles of this process: the names sort by
 * start time. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void prune(void)
{
	char prefix[96], path[PATH_MAX];
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d = opendir(pp_dir);
	struct dirent *de;

	if (!d)
		return;
	int pl = snprintf(prefix, sizeof(prefix), "%s.%d.", pp_name, (int)getpid());
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (strncmp(de->d_name, prefix, (size_t)pl) != 0 || len < 7 ||
		    strcmp(de->d_name + len - 6, ".pb.gz") != 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 32;
			char **nn = realloc(names, nc * sizeof(*nn));
			if (!nn)
				break;
			names = nn;
			cap = nc;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n > pp_keep) {
		qsort(names, n, sizeof(*names), cmp_str);
		for (size_t i = 0; i < n - pp_keep; i++)
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", pp_dir, names[i]) < sizeof(path))
				unlink(path);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The finished part at PART -> a profile named for START. */
static void write_profile(const char *part, time_t start)
{
	char final[PATH_MAX], tmp[PATH_MAX], stamp[32];
	struct tm tm;

	gmtime_r(&start, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if ((size_t)snprintf(final, sizeof(final), "%s/%s.%d.%s.%gs.pb.gz", pp_dir, pp_name,
			     (int)getpid(), stamp, pp_period) >= sizeof(final) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", pp_dir, pp_name, (int)getpid()) >=
		    sizeof(tmp))
		return;
	struct sprobe_report_opts ro = { .sz = sizeof(ro), .source = part, .labels = pp_labels };
	struct sprobe_report *r = sprobe_report__new(&ro);
	if (!r)
		return;
	int err = sprobe_report__load_file(r, part);
	if (err < 0 && sprobe_report__samples(r) == 0) {
		sprobe_report__free(r);
		warn_once("a period's part could not be read", -err);
		return;
	}
	/* 0600, as the parts: the profile is the service user's to read
	 * (the backend that collects them runs as that user or root). */
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		sprobe_report__free(r);
		warn_once(tmp, e);
		return;
	}
	err = sprobe_report__write(r, f, SPROBE_REPORT_PPROF);
	sprobe_report__free(r);
	/* The stream's own errno (ENOSPC) says more than the writer's. */
	if (fflush(f) != 0 || ferror(f))
		err = errno ? -errno : -EIO;
	if (!err && fsync(fileno(f)) != 0)
		err = -errno;
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (!err && rename(tmp, final) != 0)
		err = -errno;
	if (err) {
		unlink(tmp);
		warn_once("a period's profile could not be written", -err);
		return;
	}
	pp_warned = false; /* the next failure after a success is said again */
	prune();
}

/* DIR/.stackprobe-PID.parts of processes that are gone (killed, or
 * exited mid-period): their last part, never converted, is removed. A
 * live process's (or one of another user's: EPERM) is left alone. */
static void remove_stale_parts(const char *dir)
{
	DIR *d = opendir(dir), *pd;
	struct dirent *de, *pe;
	char path[PATH_MAX], file[PATH_MAX];
	int pid, end;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (sscanf(de->d_name, ".stackprobe-%d.parts%n", &pid, &end) != 1 ||
		    de->d_name[end] || pid <= 0 || pid == getpid() || kill(pid, 0) == 0 ||
		    errno != ESRCH)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path) ||
		    !(pd = opendir(path)))
			continue;
		while ((pe = readdir(pd)))
			if (pe->d_name[0] != '.' &&
			    (size_t)snprintf(file, sizeof(file), "%s/%s", path, pe->d_name) < sizeof(file))
				unlink(file);
		closedir(pd);
		rmdir(path);
	}
	closedir(d);
}

static void sleep_until(const struct timespec *t)
{
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL) == EINTR)
		;
}

static void *period_main(void *arg)
{
	char part[PATH_MAX], done[PATH_MAX];
	struct timespec next;
	unsigned exec = 0;

	(void)arg;
	__atomic_store_n(&period_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
	sem_post(&period_ready);
	/* The agent's constructor saves the sampler options after this
	 * thread exists: wait for them (bounded by the constructor). */
	while (!sprobe_agent__ondemand_ready())
		sched_yield();
	time_t start = time(NULL);
	int err = sprobe_agent__ondemand_start(pp_parts, 0, 0, &exec);
	if (err) {
		warn_once("continuous profiling could not start a sampler", -err);
		return NULL;
	}
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (unsigned long k = 0;; k++) {
		uint64_t ns = (uint64_t)(pp_period * 1e9);
		next.tv_sec += (time_t)(ns / 1000000000ull);
		next.tv_nsec += (long)(ns % 1000000000ull);
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		sleep_until(&next);
		err = sprobe_agent__ondemand_stop();
		snprintf(part, sizeof(part), "%s/%d.%u.part", pp_parts, (int)getpid(), exec);
		snprintf(done, sizeof(done), "%s/period-%lu.done", pp_parts, k);
		bool have = err != -ESRCH && rename(part, done) == 0;
		time_t this_start = start;
		start = time(NULL);
		int serr = sprobe_agent__ondemand_start(pp_parts, 0, 0, &exec);
		if (have) {
			write_profile(done, this_start);
			unlink(done);
		}
		if (serr) {
			warn_once("continuous profiling stopped: no sampler", -serr);
			return NULL;
		}
	}
	return NULL;
}

static bool env_number(const char *name, double lo, double hi, double *out)
{
	const char *v = sprobe_agent__getenv(name);
	char *end;

	if (!v || !*v)
		return true;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || *end || !(d >= lo && d <= hi)) {
		if (!pp_quiet)
			fprintf(stderr, "stackprobe agent: %s=%s: expected a number in %g..%g; no "
					"continuous profiling\n", name, v, lo, hi);
		return false;
	}
	*out = d;
	return true;
}

int sprobe_agent__continuous_start(const char *dir, bool quiet)
{
	double keep = (double)pp_keep;
	char host[256] = "", comm[32] = "";

	pp_quiet = quiet;
	if (!env_number("STACKPROBE_PERIOD", 1, 86400, &pp_period) ||
	    !env_number("STACKPROBE_PPROF_KEEP", 1, 100000, &keep))
		return -EINVAL;
	pp_keep = (unsigned long)keep;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		int e = errno;
		say_dir_once(dir, dir, e);
		return -e;
	}
	const char *svc = sprobe_agent__getenv("STACKPROBE_SERVICE");
	FILE *cf = fopen("/proc/self/comm", "re");
	if (cf) {
		if (fgets(comm, sizeof(comm), cf))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(cf);
	}
	if (!svc || !*svc)
		svc = comm[0] ? comm : "service";
	/* The file name part: the service name without '/' or '.'-only. */
	snprintf(pp_name, sizeof(pp_name), "%s", svc);
	for (char *c = pp_name; *c; c++)
		if (*c == '/' || *c == ' ')
			*c = '_';
	gethostname(host, sizeof(host) - 1);
	size_t cap = strlen(dir) + 64;
	pp_dir = strdup(dir);
	pp_parts = malloc(cap);
	pp_labels = malloc(strlen(svc) + strlen(host) + 40);
	if (!pp_dir || !pp_parts || !pp_labels)
		return -ENOMEM;
	sprintf(pp_labels, "service_name=%s\nhostname=%s", svc, host);
	snprintf(pp_parts, cap, "%s/.stackprobe-%d.parts", dir, (int)getpid());
	remove_stale_parts(dir);
	if (mkdir(pp_parts, 0700) != 0 && errno != EEXIST) {
		int e = errno;
		say_dir_once(dir, pp_parts, e);
		return -e;
	}

	sigset_t all, old;
	pthread_attr_t at;
	pthread_t t;
	int err;
	sem_init(&period_ready, 0, 0);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_attr_init(&at);
	if (!err) {
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		/* Loading a part and writing a profile run here. */
		pthread_attr_setstacksize(&at, 2 * 1024 * 1024);
		err = pthread_create(&t, &at, period_main, NULL);
		pthread_attr_destroy(&at);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	pthread_setname_np(t, "sprobe-period");
	while (sem_wait(&period_ready) != 0 && errno == EINTR)
		;
	return 0;
}
