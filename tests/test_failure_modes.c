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
	/* VmRSS every 250 ms, when asked: first, last, max, and 64 samples
	 * evenly spread over the run (halved and the stride doubled each
	 * time they fill up), so rss_kb's quarters are the run's quarters. */
	long max_rss_kb, first_rss_kb, last_rss_kb, rss_kb[64];
	int nrss;
	long rss_ticks, rss_stride;
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

/* Threads that block the signal are dropped as "blocked", in every capture
 * between the first and the last one that saw them; these wait in read()
 * and use no CPU, so the perf-event fallback (which samples CPU only:
 * tests/test_blocked_perf.c) never has a sample of them either. */
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
	long samples_before_block = 0;
	struct other_tid others[4096];
	size_t nothers = 0;
	long *cap_has = calloc(1 << 20, sizeof(long));
	assert_non_null(cap_has);
	int rc;
	while ((rc = sprobe_datafile_reader__next(rd, &rec)) == 1) {
		if (rec.type == SPROBE_DF_SAMPLE) {
			/* A blocked thread blocks itself first thing, but it
			 * runs unblocked from its start until that call: a
			 * capture may land there, before any capture that
			 * finds it blocked. After that, never. */
			for (int b = 0; b < nb; b++)
				if ((long)rec.sample.tid == blocked[b]) {
					if (first[b] < 0)
						samples_before_block++;
					else
						samples_of_blocked++;
				}
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
	print_message("%ld captures; blocked drops %ld (%ld of other threads, transient); "
		      "samples of the blocked threads before they blocked %ld, after %ld\n",
		      ncap, blocked_total, blocked_other, samples_before_block, samples_of_blocked);
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
	 * the signal is shared (backends/linux/chain.c): the program gets
	 * its own deliveries and no capture, sampling goes on, no message,
	 * the data file is finished, the program's results are unchanged. */
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
	assert_non_null(strstr(r.out, "own_signal.seen 100\nown_signal.foreign 0\n"));
	assert_null(strstr(r.err, "stackprobe agent:"));
	assert_true(count_samples(OUT "/own2.data") > 0);
	struct sprobe_datafile_reader *rd2 = sprobe_datafile_reader__open(OUT "/own2.data");
	assert_non_null(rd2);
	while (sprobe_datafile_reader__next(rd2, &rec) == 1)
		;
	assert_int_equal(sprobe_datafile_reader__status(rd2), SPROBE_DF_COMPLETE);
	sprobe_datafile_reader__free(rd2);
	run_free(&r);
	run_free(&plain);
}

/*
 * Every libc entry point that takes a signal, used by a program on the very
 * signal STACKPROBE_SIGNAL named (build/sigown, tests/workloads/sigown.c):
 * the program's own signals all reach it and no capture signal does, its
 * results are unchanged, its disposition is what it set, and the data file
 * is complete. An install (any entry point, or a raw rt_sigaction system
 * call, which the capture backend finds before its next round) shares the
 * signal: no message, sampling goes on. Blocking it (to sigwait for it)
 * makes the agent give it up, with a message on stderr, keeping the
 * samples taken until then. At the end the program's disposition is in the
 * kernel (SIG_IGN across exec).
 */
static void test_signal_entry_points(void **state)
{
	static const struct {
		const char *via;
		int seen;		/* of EVENTS */
		const char *disp;	/* at the end */
		bool shared;		/* else yielded */
	} cases[] = {
		{ "sigaction", 1, "handler", true },	 { "__sigaction", 1, "handler", true },
		{ "signal", 1, "handler", true },	 { "bsd_signal", 1, "handler", true },
		{ "ssignal", 1, "handler", true },	 { "sysv_signal", 1, "handler", true },
		{ "__sysv_signal", 1, "handler", true }, { "sigset", 1, "handler", true },
		{ "sigset_hold", 1, "default", false },	 { "sighold", 1, "default", false },
		{ "sigignore", 0, "ignore", true },	 { "sigprocmask", 1, "default", false },
		{ "pthread_sigmask", 1, "default", false }, { "raw", 1, "handler", true },
		{ "raw_ign", 0, "ignore", true },
	};
	char fenv[64], senv[64], signo[16];
	int sig = SIGRTMIN + 5;
	snprintf(fenv, sizeof(fenv), "STACKPROBE_FREQ=%s", freq());
	snprintf(senv, sizeof(senv), "STACKPROBE_SIGNAL=%d", sig);
	snprintf(signo, sizeof(signo), "%d", sig);

	struct run plain;
	const char *pargv[] = { "build/sigown", "sigaction", signo, "50", NULL };
	run_cmd(&plain, NULL, pargv, 0, false, NULL, 0);
	assert_int_equal(plain.status, 0);
	const char *work = strstr(plain.out, "work ");
	assert_non_null(work);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char oenv[160], data[128], want[64];
		struct run r;
		bool raw = !strncmp(cases[i].via, "raw", 3);
		snprintf(data, sizeof(data), OUT "/entry-%s.data", cases[i].via);
		snprintf(oenv, sizeof(oenv), "STACKPROBE_OUTPUT=%s", data);
		const char *env[] = { "LD_PRELOAD=" AGENT, oenv, fenv, senv, NULL };
		const char *argv[] = { "build/sigown", cases[i].via, signo, "50", NULL };
		unlink(data);
		run_cmd(&r, env, argv, 0, false, NULL, 0);
		long samples = count_samples(data);
		print_message("%-16s exit %d, %ld samples: %.*s\n", cases[i].via, r.status, samples,
			      (int)strcspn(r.err, "\n"), r.err);
		assert_int_equal(r.status, 0);
		snprintf(want, sizeof(want), "seen %d\n", cases[i].seen ? 50 : 0);
		assert_non_null(strstr(r.out, want));
		/* Captures reach the program only after a raw install, until the
		 * probe's next round looks (a few at most, docs/AGENT.md). */
		const char *fo = strstr(r.out, "foreign ");
		assert_non_null(fo);
		if (raw)
			assert_true(atoi(fo + 8) <= 4);
		else
			assert_int_equal(atoi(fo + 8), 0);
		assert_non_null(strstr(r.out, work)); /* same result as unsampled */
		snprintf(want, sizeof(want), "disposition %s\n", cases[i].disp);
		assert_non_null(strstr(r.err, want));
		/* (raw_ign's exec'd image finds the signal ignored and says it
		 * does not sample: that one is not shared, see (b) above.) */
		if (cases[i].shared)
			assert_null(strstr(r.err, "sampling stopped"));
		else
			assert_non_null(strstr(r.err, "the capture signal: sampling stopped"));
		if (!strcmp(cases[i].via, "raw_ign"))
			assert_non_null(strstr(r.out, "inherited ignore\n"));
		/* The file is complete; it holds what was sampled before the
		 * program took the signal. */
		struct sprobe_datafile_reader *rd = sprobe_datafile_reader__open(data);
		struct sprobe_df_record rec;
		assert_non_null(rd);
		while (sprobe_datafile_reader__next(rd, &rec) == 1)
			;
		assert_int_equal(sprobe_datafile_reader__status(rd), SPROBE_DF_COMPLETE);
		sprobe_datafile_reader__free(rd);
		assert_true(samples > 0);
		run_free(&r);
	}
	run_free(&plain);
}

/* malloc/free, dlopen/dlclose and dl_iterate_phdr hammered while sampled:
 * must finish (no deadlock, no fault: the unwinder pins what it reads, see
 * test_unwind_races_dlclose) with the same results. */
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
	assert_int_equal(r.status, 0);
	assert_string_equal(r.out, plain.out);
	/* No data file for the forked or vforked children. */
	assert_int_equal(access(OUT "/dl.data.1", F_OK), -1);
	run_free(&plain);
	run_free(&r);
}

/* ---- dlclose() racing the unwinder (in this process) ----------------------
 *
 * The unwinder reads code and .eh_frame of the modules in its inventory from
 * live memory. A library another thread dlclose()s after the inventory was
 * refreshed must never be read once unmapped: each round pins what it reads
 * (docs/LIMITATIONS.md, "dlclose while unwinding").
 */
/* The test library next to this executable (build/tests/unwind_testlib/,
 * or the sanitizer build's own copy). */
static const char *testlib(void)
{
	static char path[4200];
	char exe[4096];
	if (!path[0]) {
		ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		assert_true(k > 0);
		exe[k] = '\0';
		*strrchr(exe, '/') = '\0';
		snprintf(path, sizeof(path), "%s/unwind_testlib/libsprobe_testlib.so", exe);
	}
	return path;
}
#define TESTLIB testlib()

/* One capturer per process (its signal handler is process-wide). */
static struct sprobe_capturer *g_cap;

static struct sprobe_capturer *capturer(void)
{
	if (!g_cap) {
		g_cap = sprobe_capturer__new(NULL);
		if (!g_cap && errno == ENOTSUP)
			SPROBE_SKIP("no capture backend on this platform");
		assert_non_null(g_cap);
	}
	return g_cap;
}

/* A thread parked inside the library: thread main -> sprobe_testlib_call
 * -> testlib_inner -> inlib_cb (spinning until told to leave). */
struct inlib {
	pthread_t th;
	int (*call)(int (*)(void *), void *);
	_Atomic int state;	/* 0 starting, 1 inside, 2 leave */
	_Atomic pid_t tid;
	_Atomic long spins;	/* stress: iterations inside before leaving */
	_Atomic int quit;
	_Atomic long cycles;	/* stress: dlopen/call/dlclose cycles done */
};

static int inlib_cb(void *arg)
{
	struct inlib *p = arg;
	long n = atomic_load(&p->spins);
	atomic_store(&p->tid, (pid_t)syscall(SYS_gettid));
	/* Release; pairs with the acquire load in inlib_start(). */
	atomic_store_explicit(&p->state, 1, memory_order_release);
	if (n > 0) {
		for (long i = 0; i < n; i++)
			__asm__ __volatile__("" ::: "memory");
		return 1;
	}
	uint64_t end = mono_ns() + (uint64_t)DEADLINE_S * 1000000000ull;
	while (atomic_load_explicit(&p->state, memory_order_acquire) != 2 && mono_ns() < end)
		sched_yield();
	return 1;
}

static void *inlib_main(void *arg)
{
	struct inlib *p = arg;
	p->call(inlib_cb, p);
	return NULL;
}

static void *open_testlib(int (**call)(int (*)(void *), void *))
{
	void *h = dlopen(TESTLIB, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", TESTLIB, dlerror());
	*call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
	assert_non_null(*call);
	return h;
}

/* True if the library is no longer loaded (its pages unmapped). */
static bool testlib_gone(void)
{
	void *h = dlopen(TESTLIB, RTLD_NOW | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	return h == NULL;
}

static void inlib_start(struct inlib *p)
{
	uint64_t end = mono_ns() + (uint64_t)DEADLINE_S * 1000000000ull;
	assert_int_equal(pthread_create(&p->th, NULL, inlib_main, p), 0);
	while (atomic_load_explicit(&p->state, memory_order_acquire) != 1) {
		if (mono_ns() > end)
			fail_msg("thread never entered the library");
		sched_yield();
	}
}

/* Capture snap until p's thread is in it (a thread still leaving the
 * previous capture's handler is dropped as blocked: retry). */
static struct sprobe_thread_sample *capture_inlib(struct sprobe_snapshot *snap, struct inlib *p)
{
	uint64_t end = mono_ns() + (uint64_t)DEADLINE_S * 1000000000ull;
	pid_t tid = atomic_load(&p->tid);
	do {
		assert_int_equal(sprobe_capturer__capture(capturer(), snap), 0);
		for (uint32_t i = 0; i < sprobe_snapshot__nthreads(snap); i++) {
			struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, i);
			if (t->tid == tid && t->stage == SPROBE_STAGE_RAW)
				return t;
		}
	} while (mono_ns() < end);
	fail_msg("thread %d never captured", (int)tid);
	return NULL;
}

/*
 * The sample was captured inside the library; the inventory was refreshed
 * while it was loaded; then the library is dlclose()d (unmapped) and the
 * sample unwound without a refresh. cold: nothing of the library was read
 * before (its .eh_frame_hdr would be read now); warm: the same sample was
 * unwound before the dlclose (rows cached: the walk must give the same
 * frames without reading the unmapped code).
 */
static void check_unwind_after_dlclose(bool warm)
{
	struct sprobe_snapshot *snap = sprobe_snapshot__new(64, 0);
	struct inlib p = { 0 };
	void *h = open_testlib(&p.call);
	struct sprobe_unwinder *u = sprobe_unwinder__new(NULL);
	struct sprobe_unwinder_stats st;
	struct sprobe_frame before[SPROBE_MAX_FRAMES];
	enum sprobe_unwind_stop why;
	uint32_t nbefore = 0;
	int n;

	assert_non_null(snap);
	assert_non_null(u);
	inlib_start(&p);
	struct sprobe_thread_sample *t = capture_inlib(snap, &p);
	/* The inventory knows the library (refreshed while it is loaded). */
	assert_true(sprobe_modules__refresh(sprobe_unwinder__modules(u)) >= 0);
	const struct sprobe_module *m =
		sprobe_modules__find(sprobe_unwinder__modules(u), (uint64_t)(uintptr_t)p.call);
	assert_non_null(m);
	if (warm) {
		n = sprobe_unwinder__unwind(u, t, &why);
		assert_true(n >= 4); /* cb, testlib_inner, sprobe_testlib_call, ... */
		nbefore = t->nframes;
		memcpy(before, t->frames, nbefore * sizeof(before[0]));
		bool in_lib = false;
		for (uint32_t i = 0; i < nbefore; i++)
			in_lib |= before[i].pc >= m->start && before[i].pc < m->end;
		assert_true(in_lib);
	}
	atomic_store_explicit(&p.state, 2, memory_order_release);
	assert_int_equal(pthread_join(p.th, NULL), 0);
	assert_int_equal(dlclose(h), 0);
	/* Unloaded: the round's pins were all released. */
	assert_true(testlib_gone());

	t->stage = SPROBE_STAGE_RAW;
	n = sprobe_unwinder__unwind(u, t, &why);
	print_message("%s unwind after dlclose: %d frames, stop %s\n", warm ? "warm" : "cold", n,
		      sprobe_unwind_stop__str(why));
	assert_true(n >= 1);
	assert_int_equal(sprobe_unwinder__stats(u, &st), 0);
	print_message("  pins %llu, pin failures %llu\n", (unsigned long long)st.pins,
		      (unsigned long long)st.pin_failures);
	if (warm) {
		/* Cached rows: the same frames, nothing of the library read. */
		assert_int_equal(t->nframes, nbefore);
		for (uint32_t i = 0; i < nbefore; i++)
			assert_int_equal(t->frames[i].pc, before[i].pc);
	} else {
		/* The library's CFI was needed and could not be pinned. */
		assert_true(st.pin_failures >= 1);
	}
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(snap);
}

static void test_unwind_after_dlclose_cold(void **state)
{
	check_unwind_after_dlclose(false);
}

static void test_unwind_after_dlclose_warm(void **state)
{
	check_unwind_after_dlclose(true);
}

static void *dl_cycler(void *arg)
{
	struct inlib *p = arg;
	uint32_t x = 12345;
	while (!atomic_load(&p->quit)) {
		int (*call)(int (*)(void *), void *);
		/* Time inside the library varies (1k..200k iterations) so the
		 * unload lands at every point of the capture-unwind round. */
		x = x * 1103515245u + 12345u;
		atomic_store(&p->spins, 1000 + (long)((x >> 8) % 200000));
		void *h = dlopen(TESTLIB, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			return (void *)1;
		call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
		call(inlib_cb, p);
		dlclose(h);
		atomic_fetch_add(&p->cycles, 1);
	}
	return NULL;
}

/*
 * A thread dlopen()s the library, runs in it and dlclose()s it in a loop
 * while this thread captures and unwinds it (the sampler's order: capture,
 * refresh, unwind), caches flushed every other round so the cold path
 * (.eh_frame_hdr, .eh_frame) races the unload too.
 */
static void test_unwind_races_dlclose(void **state)
{
	const char *s = getenv("SPROBE_DLCLOSE_ROUNDS");
	long rounds = s && *s ? atol(s) : 3000;
	struct sprobe_snapshot *snap = sprobe_snapshot__new(64, 0);
	struct sprobe_unwinder *u = sprobe_unwinder__new(NULL);
	struct sprobe_unwinder_stats st;
	struct inlib p = { 0 };
	void *ret = NULL;
	long unwound = 0;

	assert_non_null(snap);
	assert_non_null(u);
	capturer();
	assert_int_equal(pthread_create(&p.th, NULL, dl_cycler, &p), 0);
	for (long r = 0; r < rounds; r++) {
		if (r & 1)
			sprobe_unwinder__flush(u);
		assert_int_equal(sprobe_capturer__capture(capturer(), snap), 0);
		/* 0 when the one other thread was dropped (still leaving the
		 * previous capture's handler, the signal blocked). */
		int k = sprobe_unwinder__unwind_snapshot(u, snap);
		assert_true(k >= 0);
		unwound += k;
	}
	atomic_store(&p.quit, 1);
	assert_int_equal(pthread_join(p.th, &ret), 0);
	assert_null(ret);
	assert_int_equal(sprobe_unwinder__stats(u, &st), 0);
	print_message("%ld rounds, %ld samples unwound, %ld dlopen/dlclose cycles; pins %llu, "
		      "pin failures %llu, refreshes that changed the set %llu\n",
		      rounds, unwound, atomic_load(&p.cycles), (unsigned long long)st.pins,
		      (unsigned long long)st.pin_failures,
		      (unsigned long long)st.module_refreshes);
	assert_true(atomic_load(&p.cycles) > 0);
	assert_true(unwound > rounds / 2);
	/* Every pin was released: the library is unloaded. */
	assert_true(testlib_gone());
	sprobe_unwinder__free(u);
	sprobe_snapshot__free(snap);
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
	/* Each round also loads and unloads a library 100 times (and walks
	 * dl_iterate_phdr 400 times) while sampled: the unwinder's pins. */
	const char *dl = getenv("SPROBE_SOAK_DL");
	if (!dl || !*dl)
		dl = "100";
	const char *one[] = { SERVICE, "--altstack", "8192", "--events", "100", "--dl", dl, NULL };
	const char *argv[] = { SERVICE, "--altstack", "8192", "--events", "100", "--dl", dl,
			       "--seconds", secs, NULL };
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

	/* RSS: the last quarter of the run is not above its second quarter
	 * by more than 8 MiB (no growth with time; the first quarter is
	 * warm-up: symbol tables, stream buffers). */
	print_message("RSS: %ld samples; first %ld KiB, last %ld KiB, max %ld KiB\n", r.rss_ticks,
		      r.first_rss_kb, r.last_rss_kb, r.max_rss_kb);
	if (r.nrss >= 8) {
		long q2 = 0, q4 = 0;
		int n = r.nrss / 4;
		for (int i = 0; i < n; i++) {
			q2 = r.rss_kb[n + i] > q2 ? r.rss_kb[n + i] : q2;
			q4 = r.rss_kb[r.nrss - n + i] > q4 ? r.rss_kb[r.nrss - n + i] : q4;
		}
		print_message("RSS: second quarter max %ld KiB, last quarter max %ld KiB\n", q2, q4);
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
	/* The service has 2 threads blocking every signal: they are read
	 * without a signal while they sleep in the kernel (zero-pause) and
	 * dropped as "blocked" only in the captures that find them running,
	 * which scheduling decides (test_blocked_threads_dropped_and_counted
	 * checks the blocked path itself); "error" and "no slot" never. */
	assert_int_equal(drops[SPROBE_DROP_ERROR], 0);
	assert_int_equal(drops[SPROBE_DROP_NO_SLOT], 0);

	/* `make soak` insists on the companion (SOAK_REQUIRE_BPF=0 to run
	 * without); the short run in `make test` takes it when it loads. */
	const char *need = getenv("SPROBE_SOAK_REQUIRE_BPF");
	if (need && atoi(need) && !comp)
		fail_msg("the eBPF companion did not attach (SOAK_REQUIRE_BPF=0 to soak without it)");
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
		/* A capture signal the kernel generated but never delivered
		 * went to a thread that exited first (or was still pending at
		 * the capture deadline): each is an "exited" or "timeout"
		 * drop in the data file. */
		print_message("undelivered capture signals %llu, exited + timeout drops %llu\n",
			      (unsigned long long)(ps.generated - ps.delivered),
			      (unsigned long long)(drops[SPROBE_DROP_EXITED] +
						   drops[SPROBE_DROP_TIMEOUT]));
		assert_true(ps.generated >= ps.delivered);
		assert_true(ps.generated - ps.delivered <=
			    drops[SPROBE_DROP_EXITED] + drops[SPROBE_DROP_TIMEOUT]);
		assert_int_equal(ps.lost, 0);
		assert_int_equal(ps.no_state, 0);
		sprobe_pause__free(comp);
	}
	run_free(&plain);
	run_free(&r);
}

/* exit() from a plugin's constructor, i.e. inside dlopen with the loader's
 * lock held, while the agent samples at 999 Hz: the program ends with the
 * plugin's status. A probe in a dlopen of its own (the unwinder's pin of
 * the plugin it had just sampled, or a first-use load) waits for that
 * lock, so the agent's exit handler joins it with a bound
 * (SPROBE_SAMPLER_STOP_TIMEOUT_S): an unbounded join hangs the program. */
static void test_exit_in_constructor_ends(void **state)
{
	const char *argv[] = { "build/dlexit", "build/dlexit_plugin.so", NULL };
	char table[96], tenv[128];
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/dlexit.data",
			      "STACKPROBE_FREQ=999", "STACKPROBE_QUIET=0", tenv, NULL };
	(void)state;

	for (int i = 0; i < 3; i++) {
		struct run r;

		snprintf(table, sizeof(table), "/dev/shm/sprobe-dlexit-%d-%d.table", (int)getpid(), i);
		snprintf(tenv, sizeof(tenv), "STACKPROBE_TABLE=%s", table);
		unlink(table);
		run_cmd(&r, env, argv, 0, false, NULL, 0);
		print_message("run %d: status %d in %.2f s%s%s\n", i, r.status, r.seconds,
			      r.err[0] ? ": " : "", r.err);
		assert_int_equal(r.status, 3);
		assert_non_null(strstr(r.err, "plugin constructor: exit(3)"));
		/* Given up or finished, the node table's name is gone. */
		assert_int_not_equal(access(table, F_OK), 0);
		run_free(&r);
	}
}

/* A library the agent opens on first use that cannot be opened (here: a
 * file by its name that is not an ELF object, first on LD_LIBRARY_PATH):
 * the program runs as without the agent, and the agent says once, in one
 * line each, what it turned off (userspace/sampler/sampler.c
 * libs_notice()); before, nothing was said and a report blamed the
 * program's symbol table. */
static void test_missing_libraries_said(void **state)
{
	const char *argv[] = { "build/demo", "2", NULL };
	char dir[] = "/tmp/sprobe-nolib-XXXXXX", path[128], lenv[160];
	static const char *const names[] = { "libunwind-x86_64.so.8", "libunwind-aarch64.so.8",
					     "libelf.so.1" };
	struct run r;
	(void)state;

	assert_non_null(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		FILE *f = fopen(path, "w");

		assert_non_null(f);
		fputs("not an ELF object\n", f);
		fclose(f);
	}
	snprintf(lenv, sizeof(lenv), "LD_LIBRARY_PATH=%s", dir);
	const char *env[] = { "LD_PRELOAD=" AGENT, "STACKPROBE_OUTPUT=" OUT "/nolib.data",
			      "STACKPROBE_QUIET=0", lenv, NULL };

	run_cmd(&r, env, argv, 0, false, NULL, 0);
	assert_int_equal(r.status, 0);
	assert_non_null(strstr(r.out, "requests"));
	assert_non_null(strstr(r.err, "stackprobe: libunwind could not be loaded"));
	assert_non_null(strstr(r.err, "stackprobe: libelf could not be loaded"));
	/* once each */
	const char *first = strstr(r.err, "libunwind could not be loaded");

	assert_null(strstr(first + 1, "libunwind could not be loaded"));
	run_free(&r);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_setup(test_results_unchanged_and_eintr_documented, setup),
	cmocka_unit_test_setup(test_blocked_threads_dropped_and_counted, setup),
	cmocka_unit_test_setup(test_signal_ownership, setup),
	cmocka_unit_test_setup(test_signal_entry_points, setup),
	cmocka_unit_test_setup(test_no_deadlock_malloc_dlopen, setup),
	cmocka_unit_test_setup(test_unwind_after_dlclose_cold, setup),
	cmocka_unit_test_setup(test_unwind_after_dlclose_warm, setup),
	cmocka_unit_test_setup(test_unwind_races_dlclose, setup),
	cmocka_unit_test_setup(test_soak, setup),
	cmocka_unit_test_setup(test_missing_libraries_said, setup),
	cmocka_unit_test_setup(test_exit_in_constructor_ends, setup),
};

SPROBE_TEST_MAIN(tests)
