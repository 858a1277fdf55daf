/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The failure modes users of signal-based samplers hit, each run against
 * build/service (tests/workloads/service.c, a program that behaves like a
 * real service) with and without stackprobe at high frequency:
 *
 *  - the program's own results (its stdout) and exit status are unchanged,
 *    it neither hangs (every run has a deadline) nor crashes;
 *  - the EINTR each blocking call saw is counted by the service and checked
 *    against docs/LIMITATIONS.md: a call the document says SA_RESTART
 *    protects must see none;
 *  - threads that block every signal are dropped as "blocked", in every
 *    capture while they live, and never sampled;
 *  - signal ownership: the program owns the signal stackprobe would pick,
 *    or the one STACKPROBE_SIGNAL names;
 *  - deadlock-prone work while sampled: malloc/free, dlopen/dlclose and
 *    dl_iterate_phdr in loops, fork without exec, vfork + exec, a
 *    thread-creation storm, a handler on a small sigaltstack;
 *  - test_soak: SPROBE_SOAK_SECONDS (default 8 here; `make soak` sets an
 *    hour) of repeated rounds under the agent with the eBPF companion
 *    attached when it can load: every round's results equal, nothing lost
 *    in the stream or the ring buffer, RSS does not grow, every drop has a
 *    reason.
 *
 * SPROBE_FAILMODE_FREQ sets the sampling rate (default 999 Hz).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/pause.h>

#include "sprobe_test.h"

#define SERVICE "build/service"
#define AGENT "build/libstackprobe.so"
#define CLI "build/stackprobe"
#define OUT "build/test-out/failmodes"
#define DEADLINE_S 240

static const char *freq(void)
{
	const char *f = getenv("SPROBE_FAILMODE_FREQ");
	return f && *f ? f : "999";
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whole file as a string ("" if unreadable); reads to EOF, so /proc files
 * (size 0 in stat) work too. */
static char *slurp(const char *path)
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
	long max_rss_kb, rss_kb[64]; /* sampled VmRSS, when asked */
	int nrss;
};

/* Environment for one run: NAME=VALUE strings, NULL-terminated. */
static void run_cmd(struct run *r, const char *const *env, const char *const *argv,
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
				if (r->nrss < 64)
					r->rss_kb[r->nrss++] = kb;
				else { /* keep 64 evenly spread samples */
					memmove(r->rss_kb + 32, r->rss_kb + 33, 31 * sizeof(long));
					r->rss_kb[63] = kb;
				}
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

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* "eintr CALL N" from the service's stderr; -1 if absent. */
static long eintr_count(const char *err, const char *call)
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
static int doc_says_eintr(const char *doc, const char *call)
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

static long count_samples(const char *path)
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

static int setup(void **state)
{
	mkdir("build/test-out", 0755);
	mkdir(OUT, 0755);
	return 0;
}

/* Check the EINTR counts of a sampled run against the document. */
static void check_eintr(const struct run *probed, const struct run *plain)
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

/* The service's own results and exit status, unsampled and sampled (by
 * the agent directly, and through `stackprobe record`). */
static void test_results_unchanged_and_eintr_documented(void **state)
{
	const char *argv[] = { SERVICE, "--altstack", "8192", NULL };
	char fenv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/agent.data",
			      "STACKPROBE_QUIET=0", fenv, NULL };
	struct run plain, probed, rec;

	run_cmd(&plain, NULL, argv, 0, false, NULL, 0);
	print_message("unsampled: exit %d in %.2f s\n", plain.status, plain.seconds);
	assert_int_equal(plain.status, 0);
	assert_non_null(strstr(plain.out, "poll.events 200\n"));

	run_cmd(&probed, env, argv, 0, false, NULL, 0);
	print_message("agent at %s Hz: exit %d in %.2f s\n%s", freq(), probed.status,
		      probed.seconds, probed.status ? probed.err : "");
	assert_int_equal(probed.status, plain.status);
	assert_string_equal(probed.out, plain.out);
	check_eintr(&probed, &plain);

	/* The same through the CLI: exit status and stdout pass through. */
	const char *rargv[] = { CLI, "record", "-q", "-F", freq(), "-o", OUT "/record.data", "--",
				SERVICE, "--altstack", "8192", NULL };
	run_cmd(&rec, NULL, rargv, 0, false, NULL, 0);
	print_message("stackprobe record: exit %d in %.2f s\n", rec.status, rec.seconds);
	assert_int_equal(rec.status, plain.status);
	assert_string_equal(rec.out, plain.out);

	/* Both data files complete, with samples. */
	const char *files[] = { OUT "/agent.data", OUT "/record.data" };
	for (int f = 0; f < 2; f++) {
		struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(files[f]);
		struct sprobe_df_record r;
		uint64_t samples = 0;
		int rc;
		assert_non_null(rd);
		while ((rc = sprobe_datafile_reader__next(rd, &r)) == 1)
			samples += r.type == SPROBE_DF_SAMPLE;
		assert_int_equal(rc, 0);
		assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
		assert_true(samples > 0);
		sprobe_datafile_reader__free(rd);
	}
	run_free(&plain);
	run_free(&probed);
	run_free(&rec);
}

/* Threads that block the signal are dropped as "blocked" (never sampled),
 * in every capture between the first and the last one that saw them. */
struct other_tid {
	uint32_t tid, n;
};

/* Count one more blocked drop of tid (linear: a few hundred tids at most). */
static void other_note(struct other_tid *o, size_t *n, uint32_t tid)
{
	for (size_t i = 0; i < *n; i++)
		if (o[i].tid == tid) {
			o[i].n++;
			return;
		}
	if (*n < 4096)
		o[(*n)++] = (struct other_tid){ tid, 1 };
}

static void test_blocked_threads_dropped_and_counted(void **state)
{
	const char *argv[] = { SERVICE, "--blocked", "3", "--events", "150", NULL };
	char fenv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	/* The signal path's drops are under test: with zero-pause (the
	 * default) a thread that blocks every signal but sleeps in read()
	 * is read without a signal and not dropped (tests/test_zero_pause.c
	 * checks that side). */
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/blocked.data", fenv,
			      "STACKPROBE_ZERO_PAUSE=0", NULL };
	struct run r;
	run_cmd(&r, env, argv, 0, false, NULL, 0);
	assert_int_equal(r.status, 0);

	long blocked[3];
	int nb = 0;
	for (const char *p = r.err; (p = strstr(p, "tid blocked ")) && nb < 3; p++)
		blocked[nb++] = atol(p + 12);
	assert_int_equal(nb, 3);

	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(OUT "/blocked.data");
	assert_non_null(rd);
	struct sprobe_df_record rec;
	/* Per blocked tid: capture index of first and last "blocked" drop,
	 * and how many captures in between listed it. */
	long first[3] = { -1, -1, -1 }, last[3] = { -1, -1, -1 }, seen[3] = { 0 };
	long ncap = 0, blocked_total = 0, blocked_other = 0, samples_of_blocked = 0;
	struct other_tid others[4096];
	size_t nothers = 0;
	long *cap_has = calloc(1 << 20, sizeof(long));
	assert_non_null(cap_has);
	int rc;
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		if (rec.type == SPROBE_DF_SAMPLE) {
			for (int b = 0; b < nb; b++)
				if ((long)rec.sample.tid == blocked[b])
					samples_of_blocked++;
			continue;
		}
		if (rec.type != SPROBE_DF_CAPTURE)
			continue;
		const struct sprobe_df_capture *c = &rec.capture;
		uint32_t sum = 0;
		for (int k = 0; k < SPROBE_DROP__COUNT; k++)
			sum += c->dropped[k];
		/* Every drop has a reason, and the counts add up. */
		assert_int_equal(sum, c->threads_dropped);
		assert_int_equal(c->threads_captured + c->threads_dropped, c->threads_total);
		assert_int_equal(c->dropped[SPROBE_DROP_NONE], 0);
		blocked_total += c->dropped[SPROBE_DROP_BLOCKED];
		long mask = 0;
		for (uint32_t k = 0; k < c->ndropped_tids; k++) {
			if (c->dropped_tids[k].reason != SPROBE_DROP_BLOCKED)
				continue;
			int hit = 0;
			for (int b = 0; b < nb; b++) {
				if ((long)c->dropped_tids[k].tid == blocked[b]) {
					if (first[b] < 0)
						first[b] = ncap;
					last[b] = ncap;
					seen[b]++;
					mask |= 1L << b;
					hit = 1;
				}
			}
			/* Another thread seen blocking everything: a new
			 * thread before pthread_create unblocks its mask. */
			if (!hit) {
				blocked_other++;
				other_note(others, &nothers, c->dropped_tids[k].tid);
			}
		}
		if (ncap < (1 << 20))
			cap_has[ncap] = mask;
		ncap++;
	}
	assert_int_equal(rc, 0);
	sprobe_datafile_reader__free(rd);
	print_message("%ld captures; blocked drops %ld (%ld of other threads, transient)\n", ncap,
		      blocked_total, blocked_other);
	assert_int_equal(samples_of_blocked, 0);
	for (int b = 0; b < nb; b++) {
		print_message("  tid %ld: blocked in captures %ld..%ld (%ld times)\n", blocked[b],
			      first[b], last[b], seen[b]);
		assert_true(first[b] >= 0);
		/* In every capture of its lifetime, never captured. */
		assert_int_equal(seen[b], last[b] - first[b] + 1);
	}
	/* Other threads are dropped as blocked only while they start (the
	 * storm's threads, inside pthread_create with every signal blocked):
	 * each in a few captures, never for a lifetime like the three above.
	 * Counted per tid rather than as a share of all drops, which depends
	 * on how many storm threads the scheduler lets start per capture. */
	uint32_t worst = 0;
	for (size_t i = 0; i < nothers; i++)
		if (others[i].n > worst)
			worst = others[i].n;
	print_message("  %zu other tids dropped as blocked, at most %u captures each\n", nothers,
		      worst);
	for (int b = 0; b < nb; b++)
		assert_true(worst * 4 < (uint32_t)seen[b]);
	free(cap_has);
	run_free(&r);
}

/*
 * Signal ownership. (a) The program installs, in main(), a handler for
 * SIGRTMIN (what a capturer picking the first free signal would take) or
 * for the one STACKPROBE_SIGNAL named: the program's own signal count must
 * stay exact and no foreign signal may reach its handler. (b) The signal is already
 * taken when the agent starts (inherited SIG_IGN): the agent picks another
 * one, or with STACKPROBE_SIGNAL set refuses with a message; the program
 * runs unchanged either way.
 */
static void test_signal_ownership(void **state)
{
	char fenv[64], own[16];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	snprintf(own, sizeof(own), "%d", SIGRTMIN);
	struct run plain, r;

	/* (b) inherited SIG_IGN on SIGRTMIN: agent picks another signal. */
	const char *argv[] = { SERVICE, "--events", "100", NULL };
	run_cmd(&plain, NULL, argv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	const char *env1[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/ign.data", fenv,
			       NULL };
	run_cmd(&r, env1, argv, SIGRTMIN, false, NULL, 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(OUT "/ign.data");
	struct sprobe_df_record rec;
	long samples = 0;
	assert_non_null(rd);
	while (sprobe_datafile_reader__next(rd, &rec) == 1)
		samples += rec.type == SPROBE_DF_SAMPLE;
	sprobe_datafile_reader__free(rd);
	print_message("SIGRTMIN ignored by the parent: %ld samples on another signal\n", samples);
	assert_true(samples > 0);
	run_free(&r);

	/* (b) STACKPROBE_SIGNAL names the taken one: a clear refusal. */
	char senv[64];
	snprintf(senv, sizeof(senv), "STACKPROBE_SIGNAL=%d", SIGRTMIN);
	const char *env2[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/ign2.data", fenv,
			       senv, NULL };
	run_cmd(&r, env2, argv, SIGRTMIN, false, NULL, 0);
	print_message("STACKPROBE_SIGNAL=%d taken: %.*s\n", SIGRTMIN,
		      (int)strcspn(r.err, "\n"), r.err);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	assert_non_null(strstr(r.err, "stackprobe agent: not sampling"));
	run_free(&r);
	run_free(&plain);

	/* (a) the program takes SIGRTMIN after the agent started: the agent
	 * chose the highest free signal, so no conflict, full sampling. */
	const char *oargv[] = { SERVICE, "--events", "100", "--own-signal", own, NULL };
	run_cmd(&plain, NULL, oargv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	assert_non_null(strstr(plain.out, "own_signal.seen 100\nown_signal.foreign 0\n"));
	const char *env3[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/own.data", fenv,
			       NULL };
	run_cmd(&r, env3, oargv, 0, false, NULL, 0);
	print_message("program owns SIGRTMIN after start: exit %d in %.2f s (unsampled %.2f s)\n",
		      r.status, r.seconds, plain.seconds);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	assert_true(count_samples(OUT "/own.data") > 0);
	run_free(&r);
	run_free(&plain);

	/* (a) the program takes the very signal STACKPROBE_SIGNAL named:
	 * the program wins, sampling stops with a message, the data file is
	 * finished, the program's results are unchanged. */
	char own2[16], senv2[64];
	snprintf(own2, sizeof(own2), "%d", SIGRTMIN + 4);
	snprintf(senv2, sizeof(senv2), "STACKPROBE_SIGNAL=%d", SIGRTMIN + 4);
	const char *oargv2[] = { SERVICE, "--events", "100", "--own-signal", own2, NULL };
	run_cmd(&plain, NULL, oargv2, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	const char *env4[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/own2.data", fenv,
			       senv2, NULL };
	run_cmd(&r, env4, oargv2, 0, false, NULL, 0);
	print_message("program owns STACKPROBE_SIGNAL=%s: exit %d in %.2f s: %.*s\n", own2,
		      r.status, r.seconds, (int)strcspn(r.err, "\n"), r.err);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	assert_non_null(strstr(r.err, "the capture signal: sampling stopped"));
	struct sprobe_datafile_reader *rd2 = sprobe_datafile_reader__open(OUT "/own2.data");
	assert_non_null(rd2);
	while (sprobe_datafile_reader__next(rd2, &rec) == 1)
		;
	assert_int_equal(sprobe_datafile_reader__status(rd2), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(rd2);
	run_free(&r);
	run_free(&plain);
}

/* malloc/free, dlopen/dlclose and dl_iterate_phdr hammered while sampled:
 * must finish (no deadlock) with the same results. */
static void test_no_deadlock_malloc_dlopen(void **state)
{
	const char *argv[] = { SERVICE, "--events", "50", "--dl", "1000", "--malloc", "150000",
			       "--storm", "1000", "--forks", "20", "--vforks", "20", NULL };
	char fenv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/dl.data", fenv, NULL };
	struct run plain, r;
	run_cmd(&plain, NULL, argv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	run_cmd(&r, env, argv, 0, false, NULL, 0);
	print_message("hammer: unsampled %.2f s, sampled %.2f s, exit %d\n", plain.seconds,
		      r.seconds, r.status);
	if (r.status == 128 + SIGSEGV && !getenv("SPROBE_TEST_KNOWN_BUGS")) {
		/* Known bug (see the hardening report and LIMITATIONS.md): the
		 * unwinder reads a module's .eh_frame_hdr from memory after a
		 * concurrent dlclose() unmapped it (userspace/unwind.c,
		 * acc_find_proc_info) and the probe thread faults. */
		run_free(&plain);
		run_free(&r);
		SPROBE_SKIP("KNOWN BUG: SIGSEGV in the probe thread after a concurrent dlclose "
			    "(SPROBE_TEST_KNOWN_BUGS=1 to assert)");
	}
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	/* No data file for the forked or vforked children. */
	assert_int_equal(access(OUT "/dl.data.1", F_OK), -1);
	run_free(&plain);
	run_free(&r);
}

/* Rounds of the whole service under the agent, with the eBPF companion
 * attached when it loads here; RSS sampled. */
static void test_soak(void **state)
{
	const char *secs = getenv("SPROBE_SOAK_SECONDS");
	if (!secs || !*secs)
		secs = "8";
	const char *f = getenv("SPROBE_SOAK_FREQ");
	char fenv[64], senv[64];
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", f && *f ? f : freq());
	int sig = SIGRTMAX - 2;
	snprintf(senv, sizeof(senv), "STACKPROBE_SIGNAL=%d", sig);
	const char *one[] = { SERVICE, "--altstack", "8192", "--events", "100", NULL };
	const char *argv[] = { SERVICE, "--altstack", "8192", "--events", "100", "--seconds", secs,
			       NULL };
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/soak.data", fenv,
			      senv, NULL };
	struct run plain, r;
	struct sprobe_pause *comp = NULL;

	run_cmd(&plain, NULL, one, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	run_cmd(&r, env, argv, 0, true, &comp, sig);
	const char *rounds = strstr(r.err, "info rounds ");
	print_message("soak %s s at %s: exit %d, %.1f s, %s", secs, fenv, r.status, r.seconds,
		      rounds ? rounds : "(no rounds line)\n");
	assert_int_equal(r.status, 0);
	/* Every round's results equal the unsampled round's (the service
	 * compares the rounds itself and prints the first). */
	assert_string_equal(r.out, plain.out);

	/* RSS: the last quarter of the samples is not above the second
	 * quarter by more than 8 MiB (no growth with time). */
	if (r.nrss >= 8) {
		long q2 = 0, q4 = 0;
		int n = r.nrss / 4;
		for (int i = 0; i < n; i++) {
			q2 = r.rss_kb[n + i] > q2 ? r.rss_kb[n + i] : q2;
			q4 = r.rss_kb[r.nrss - n + i] > q4 ? r.rss_kb[r.nrss - n + i] : q4;
		}
		print_message("RSS: max %ld KiB; second quarter max %ld, last quarter max %ld\n",
			      r.max_rss_kb, q2, q4);
		assert_true(q4 <= q2 + 8192);
	}

	/* Nothing lost in the stream; every drop has a reason. */
	struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(OUT "/soak.data");
	struct sprobe_df_record rec;
	uint64_t samples = 0, caps = 0, drops[SPROBE_DROP__COUNT] = { 0 }, lost = 0;
	int rc;
	assert_non_null(rd);
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		if (rec.type == SPROBE_DF_SAMPLE)
			samples++;
		if (rec.type == SPROBE_DF_CAPTURE) {
			caps++;
			uint32_t sum = 0;
			for (int k = 0; k < SPROBE_DROP__COUNT; k++) {
				drops[k] += rec.capture.dropped[k];
				sum += rec.capture.dropped[k];
			}
			assert_int_equal(sum, rec.capture.threads_dropped);
			assert_int_equal(rec.capture.dropped[SPROBE_DROP_NONE], 0);
		}
		if (rec.type == SPROBE_DF_TRAILER)
			for (int k = 0; k < SPROBE_DF__TYPE_COUNT; k++)
				lost += rec.trailer.lost[k];
	}
	assert_int_equal(rc, 0);
	assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(rd);
	print_message("%llu samples in %llu captures, stream lost %llu; drops:",
		      (unsigned long long)samples, (unsigned long long)caps,
		      (unsigned long long)lost);
	for (int k = 1; k < SPROBE_DROP__COUNT; k++)
		print_message(" %s %llu", sprobe_drop_reason__str((uint32_t)k),
			      (unsigned long long)drops[k]);
	print_message("\n");
	assert_true(samples > 0);
	assert_int_equal(lost, 0);
	/* The service has 2 threads blocking every signal: "blocked" drops
	 * are expected; "error" and "no slot" are not. */
	assert_true(drops[SPROBE_DROP_BLOCKED] > 0);
	assert_int_equal(drops[SPROBE_DROP_ERROR], 0);
	assert_int_equal(drops[SPROBE_DROP_NO_SLOT], 0);

	if (comp) {
		struct sprobe_pause_stats ps;
		sprobe_pause__poll(comp, 0);
		assert_int_equal(sprobe_pause__stats(comp, &ps), 0);
		print_message("eBPF companion: generated %llu delivered %llu windows %llu lost %llu "
			      "no_state %llu\n",
			      (unsigned long long)ps.generated, (unsigned long long)ps.delivered,
			      (unsigned long long)ps.received, (unsigned long long)ps.lost,
			      (unsigned long long)ps.no_state);
		assert_true(ps.generated > 0);
		assert_int_equal(ps.lost, 0);
		assert_int_equal(ps.no_state, 0);
		sprobe_pause__free(comp);
	}
	run_free(&plain);
	run_free(&r);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_results_unchanged_and_eintr_documented, setup),
	cmocka_unit_test_setup(test_blocked_threads_dropped_and_counted, setup),
	cmocka_unit_test_setup(test_signal_ownership, setup),
	cmocka_unit_test_setup(test_no_deadlock_malloc_dlopen, setup),
	cmocka_unit_test_setup(test_soak, setup),
};

SPROBE_TEST_MAIN(tests)
