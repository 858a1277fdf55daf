/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the failure-mode tests (test_failure_modes.c,
 * test_failure_modes_signals.c, test_failure_modes_dlclose.c): runs of
 * build/service (tests/workloads/service.c) with an environment and a
 * deadline, what they printed, and the EINTR counts checked against
 * docs/LIMITATIONS.md.
 */
#ifndef SPROBE_FAILURE_MODES_FIXTURE_H
#define SPROBE_FAILURE_MODES_FIXTURE_H

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "sprobe_test.h"

#define SERVICE "build/service"
#define AGENT "build/libstackprobe.so"
#define CLI "build/stackprobe"
#define OUT "build/test-out/failmodes"
#define DEADLINE_S 240

static inline const char *freq(void)
{
	const char *f = getenv("SPROBE_FAILMODE_FREQ");
	return f && *f ? f : "999";
}

static inline uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whole file as a string ("" if unreadable); reads to EOF, so /proc files
 * (size 0 in stat) work too. */
static inline char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t cap = 4096, len = 0, n;
	char *b = malloc(cap);
	assert_non_null(b);
	if (f) {
		while ((n = fread(b + len, 1, cap - len - 1, f)) > 0) {
			len += n;
			if (cap - len < 1024) {
				cap *= 2;
				b = realloc(b, cap);
				assert_non_null(b);
			}
		}
		fclose(f);
	}
	b[len] = '\0';
	return b;
}

struct run {
	int status;	/* exit code, 128+sig if killed, -1 on deadline */
	char *out, *err;
	double seconds;
	/* VmRSS every 250 ms, when asked: first, last, max, and 64 samples
	 * evenly spread over the run (halved and the stride doubled each
	 * time they fill up), so rss_kb's quarters are the run's quarters. */
	long max_rss_kb, first_rss_kb, last_rss_kb, rss_kb[64];
	int nrss;
	long rss_ticks, rss_stride;
};

/* Environment for one run: NAME=VALUE strings, NULL-terminated. */
static inline void run_cmd(struct run *r, const char *const *env, const char *const *argv,
		    int ignore_sig, bool sample_rss, struct sprobe_pause **companion,
		    int companion_sig)
{
	char outp[256], errp[256];
	static int seq;
	snprintf(outp, sizeof(outp), OUT "/run%d-%d.out", (int)getpid(), seq);
	snprintf(errp, sizeof(errp), OUT "/run%d-%d.err", (int)getpid(), seq++);
	memset(r, 0, sizeof(*r));
	uint64_t t0 = mono_ns();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (o < 0 || e < 0)
			_exit(126);
		dup2(o, 1);
		dup2(e, 2);
		unsetenv("LD_PRELOAD");
		unsetenv("STACKPROBE_AGENT_PID");
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		if (ignore_sig)
			signal(ignore_sig, SIG_IGN); /* inherited across exec */
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (companion) {
		struct sprobe_pause_opts po = { .sz = sizeof(po), .tgid = pid,
						.signo = companion_sig, .quiet = true };
		*companion = sprobe_pause__new(&po);
		if (!*companion)
			print_message("eBPF companion not attached: %s\n", strerror(errno));
	}
	int st = 0;
	uint64_t last_rss = 0;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		uint64_t now = mono_ns();
		if (now - t0 > (uint64_t)DEADLINE_S * 1000000000ull +
				       (uint64_t)(atof(getenv("SPROBE_SOAK_SECONDS") ?: "0") * 1e9)) {
			print_message("DEADLINE: %s did not finish; killing it\n", argv[0]);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			r->status = -1;
			goto done;
		}
		if (companion && *companion) {
			sprobe_pause__poll(*companion, 0);
			sprobe_pause__clear(*companion); /* bounded memory */
		}
		if (sample_rss && now - last_rss > 250000000ull) {
			char p[64];
			snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
			char *s = slurp(p);
			char *v = strstr(s, "VmRSS:");
			if (v) {
				long kb = atol(v + 6);
				if (!r->rss_stride)
					r->rss_stride = 1;
				if (r->rss_ticks % r->rss_stride == 0 && r->nrss == 64) {
					for (int i = 0; i < 32; i++)
						r->rss_kb[i] = r->rss_kb[2 * i];
					r->nrss = 32;
					r->rss_stride *= 2;
				}
				if (r->rss_ticks % r->rss_stride == 0)
					r->rss_kb[r->nrss++] = kb;
				if (r->rss_ticks++ == 0)
					r->first_rss_kb = kb;
				r->last_rss_kb = kb;
				if (kb > r->max_rss_kb)
					r->max_rss_kb = kb;
			}
			free(s);
			last_rss = now;
		}
		struct timespec pause = { 0, 5 * 1000 * 1000 };
		nanosleep(&pause, NULL); /* poll interval of a bounded wait */
	}
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
done:
	r->seconds = (double)(mono_ns() - t0) / 1e9;
	r->out = slurp(outp);
	r->err = slurp(errp);
	unlink(outp);
	unlink(errp);
}

static inline void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* "eintr CALL N" from the service's stderr; -1 if absent. */
static inline long eintr_count(const char *err, const char *call)
{
	char key[64];
	snprintf(key, sizeof(key), "eintr %s ", call);
	const char *p = strstr(err, key);
	return p ? atol(p + strlen(key)) : -1;
}

/*
 * docs/LIMITATIONS.md's table: rows "| `call` | yes |" or "| `call` | no |"
 * in the column "EINTR under stackprobe". Returns 1 (yes), 0 (no), -1 (not
 * listed).
 */
static inline int doc_says_eintr(const char *doc, const char *call)
{
	char key[80];
	snprintf(key, sizeof(key), "| `%s` |", call);
	const char *p = strstr(doc, key);
	if (!p)
		return -1;
	p += strlen(key);
	while (*p == ' ')
		p++;
	if (strncmp(p, "yes", 3) == 0)
		return 1;
	if (strncmp(p, "no", 2) == 0)
		return 0;
	return -1;
}

static inline long count_samples(const char *path)
{
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(path);
	struct sprobe_df_record rec;
	long n = 0;
	if (!rd)
		return -1;
	while (sprobe_datafile_reader__next(rd, &rec) == 1)
		n += rec.type == SPROBE_DF_SAMPLE;
	sprobe_datafile_reader__free(rd);
	return n;
}

static const char *const calls[] = {
	"poll", "epoll_wait", "select", "read", "futex_wait_timeout", "nanosleep",
	"sigtimedwait", "accept", "connect", "sem_wait", "waitpid", "write",
	"pthread_cond_wait",
};

static inline int setup(void **state)
{
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

/* Check the EINTR counts of a sampled run against the document. */
static inline void check_eintr(const struct run *probed, const struct run *plain)
{
	char *doc = slurp("docs/LIMITATIONS.md");
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		long n = eintr_count(probed->err, calls[i]);
		long base = eintr_count(plain->err, calls[i]);
		int says = doc_says_eintr(doc, calls[i]);
		print_message("  %-20s EINTR %5ld sampled, %ld unsampled; LIMITATIONS.md: %s\n",
			      calls[i], n, base, says == 1 ? "can" : says == 0 ? "never" : "NOT LISTED");
		assert_true(n >= 0);
		assert_int_equal(base, 0);	/* nothing interrupts it unsampled */
		assert_true(says >= 0);		/* every call is documented */
		if (says == 0)
			assert_int_equal(n, 0);
	}
	free(doc);
}


#endif
