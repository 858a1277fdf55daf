/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The pause the external tier costs its target: the
 * kernel's sample path (the task-clock hrtimer interrupt, the user call
 * chain walk, the ring write) runs on the target's CPU while the target
 * is stopped. fentry/fexit and kprobes are not available on this kernel
 * (docs/PLATFORM-NOTES), so it is measured from the target's side:
 *
 * The target (a forked child, pinned to the last CPU, `record` pinned to
 * the first) reads CLOCK_MONOTONIC in a loop at DEPTH frames and keeps
 * every gap between two reads longer than THRESH_NS: the time it did not
 * run. In interleaved phases it is sampled by the external tier at HZ
 * (sprobe_ext__attach, as `record -p` does) or not at all.
 *  - matched: each sample's own kernel timestamp (taken inside the
 *    interrupt) falls inside one gap: that gap is the pause of that sample
 *    (median / p90 / p99; samples whose gap stayed under THRESH_NS count
 *    as "unmatched", i.e. shorter than it).
 *  - differential: (time lost per second with sampling - without) /
 *    samples per second: ns of the target's time per sample.
 * Gaps in which the target was switched out (its context-switch count,
 * getrusage(RUSAGE_THREAD), moved) are preemptions by the machine's other
 * jobs: left out of both, and with them the events' own switch-in/out
 * cost (which is not per sample).
 *
 * The same loop measures the signal path the same way (a thread sends a
 * real-time signal at HZ, the handler copies 16 KiB of stack): the
 * two tiers side by side, on the same machine at the same moment.
 *
 *   build/bench/bench_ext_pause [ROUNDS [SECONDS [HZ [DEPTH]]]]
 *   (default 6 rounds of 1 s per phase, 999 Hz, 32 frames)
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include <stackprobe/datafile.h>

#include "userspace/external/external.h"

#define THRESH_NS 150
#define MAX_GAPS (1u << 20)

struct gap {
	uint64_t start, len;
	uint32_t switched; /* the target was switched out in it (preempted) */
};

struct shared {
	_Atomic int phase; /* > 0: record gaps; 0: do not; < 0: exit */
	_Atomic int ready;
	_Atomic uint64_t ngaps;
	struct gap gaps[MAX_GAPS];
	_Atomic uint64_t nsig;
	uint64_t sig_times[MAX_GAPS]; /* the signal path: each handler's entry */
};

static struct shared *sh;

#define SIGNO (SIGRTMIN + 5)
#define COPY_BYTES (16 * 1024)
static unsigned char copy_sink[COPY_BYTES];

/* ASYNC-SIGNAL-SAFE. The signal path as the capture handler does it:
 * its entry time, 16 KiB of the stack copied (docs/PERFORMANCE.md "eBPF
 * companion" measured its window the same way). */
static void on_sig(int sig)
{
	struct timespec ts;
	/* Below the handler's frame: mapped, or grown on the fault. */
	const unsigned char *sp = __builtin_frame_address(0);

	(void)sig;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t n = atomic_load_explicit(&sh->nsig, memory_order_relaxed);
	if (n < MAX_GAPS) {
		sh->sig_times[n] = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		atomic_store_explicit(&sh->nsig, n + 1, memory_order_release);
	}
	memcpy(copy_sink, sp - COPY_BYTES, COPY_BYTES);
	__asm__ volatile("" : : "r"(copy_sink) : "memory");
}


static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

__attribute__((noinline)) static void spin_loop(void)
{
	uint64_t prev = mono_ns();
	long last_sw = 0;

	atomic_store(&sh->ready, 1);
	for (;;) {
		int ph = atomic_load_explicit(&sh->phase, memory_order_relaxed);
		uint64_t t = mono_ns();

		if (ph < 0)
			return;
		if (t - prev > THRESH_NS) {
			/* A switch away always leaves a gap, so a count that moved
			 * since the last gap moved in this one. */
			struct rusage ru;
			getrusage(RUSAGE_THREAD, &ru);
			long sw = ru.ru_nvcsw + ru.ru_nivcsw;
			uint64_t n = atomic_load_explicit(&sh->ngaps, memory_order_relaxed);
			if (ph > 0 && n < MAX_GAPS) {
				sh->gaps[n] = (struct gap){ prev, t - prev, sw != last_sw };
				atomic_store_explicit(&sh->ngaps, n + 1, memory_order_release);
			}
			last_sw = sw;
			t = mono_ns(); /* the getrusage is not the next gap */
		}
		prev = t;
	}
}

/* A stack DEPTH frames deep, as a real program's is, for the kernel's walk. */
__attribute__((noinline)) static void deep(int depth)
{
	if (depth > 0)
		deep(depth - 1);
	else
		spin_loop();
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sample times of the part(s) in dir, sorted; returns the count. */
static size_t read_samples(const char *dir, uint64_t **out)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0, cap = 0;
	char path[4200];

	*out = NULL;
	while (d && (de = readdir(d))) {
		if (!strstr(de->d_name, ".part"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct sprobe_datafile_reader *r = sprobe_datafile_reader__open(path);
		struct sprobe_df_record rec;

		while (r && sprobe_datafile_reader__next(r, &rec) == 1) {
			if (rec.type != SPROBE_DF_SAMPLE)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 4096;
				*out = realloc(*out, cap * sizeof(**out));
				if (!*out)
					exit(1);
			}
			(*out)[n++] = rec.sample.time_ns;
		}
		sprobe_datafile_reader__free(r);
		unlink(path);
	}
	if (d)
		closedir(d);
	if (n > 1)
		qsort(*out, n, sizeof(**out), cmp_u64);
	return n;
}

struct phase {
	uint64_t t0, t1;
	uint64_t g0, g1; /* its gaps: sh->gaps[g0, g1) */
	uint64_t lost_ns;	/* in gaps without a switch: interrupts */
	uint64_t off_cpu_ns;	/* in gaps with one: preempted, not ours */
	size_t samples;
};

/* tier: 0 none, 1 external (perf events), 2 signal (tgkill at hz). */
static void run_phase(struct phase *p, int tag, double secs, pid_t child, int tier, double hz,
		      const char *dir, uint64_t **stimes, size_t *ns)
{
	struct sprobe_ext *x = NULL;
	char why[512];
	uint64_t s0 = atomic_load_explicit(&sh->nsig, memory_order_acquire);

	if (tier == 1) {
		x = sprobe_ext__attach(child, hz, dir, why, sizeof(why));
		if (!x) {
			/* perf events not allowed here: nothing to measure, and
			 * `make bench` goes on to the other benches. */
			int e = errno;
			bool skip = e == EACCES || e == EPERM || e == ENOENT || e == ENOSYS;
			fprintf(stderr, "bench_ext_pause: %s%s\n", skip ? "SKIP: " : "cannot attach: ",
				why);
			kill(child, SIGKILL);
			waitpid(child, NULL, 0);
			exit(skip ? 0 : 1);
		}
	}
	p->g0 = atomic_load_explicit(&sh->ngaps, memory_order_acquire);
	p->t0 = mono_ns();
	atomic_store(&sh->phase, tag);
	uint64_t next = p->t0, period = (uint64_t)(1e9 / hz), polled = p->t0;
	while (mono_ns() - p->t0 < (uint64_t)(secs * 1e9)) {
		if (tier == 2) {
			next += period;
			struct timespec ts = { (time_t)(next / 1000000000ull), (long)(next % 1000000000ull) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			syscall(SYS_tgkill, child, child, SIGNO);
			continue;
		}
		struct timespec ts = { 0, 50 * 1000000 };
		nanosleep(&ts, NULL);
		if (x && mono_ns() - polled > 0) {
			sprobe_ext__poll(x);
			polled = mono_ns();
		}
	}
	atomic_store(&sh->phase, 0);
	p->t1 = mono_ns();
	p->g1 = atomic_load_explicit(&sh->ngaps, memory_order_acquire);
	p->lost_ns = p->off_cpu_ns = 0;
	for (uint64_t i = p->g0; i < p->g1; i++) {
		/* Only the part inside the phase (a gap may start before it). */
		uint64_t a = sh->gaps[i].start > p->t0 ? sh->gaps[i].start : p->t0;
		uint64_t b = sh->gaps[i].start + sh->gaps[i].len;
		if (b > p->t1)
			b = p->t1;
		if (b > a)
			*(sh->gaps[i].switched ? &p->off_cpu_ns : &p->lost_ns) += b - a;
	}
	*stimes = NULL;
	*ns = 0;
	p->samples = 0;
	if (x) {
		sprobe_ext__finish(x);
		sprobe_ext__free(x);
		*ns = read_samples(dir, stimes);
	} else if (tier == 2) {
		uint64_t s1 = atomic_load_explicit(&sh->nsig, memory_order_acquire);
		*ns = (size_t)(s1 - s0);
		*stimes = malloc((*ns + 1) * sizeof(**stimes));
		if (!*stimes)
			exit(1);
		memcpy(*stimes, sh->sig_times + s0, *ns * sizeof(**stimes));
	}
	for (size_t i = 0; i < *ns; i++)
		p->samples += (*stimes)[i] >= p->t0 && (*stimes)[i] < p->t1;
}

static pid_t child;
static int rounds, depth, ncpu;
static double secs, hz;
static char dir[] = "/tmp/sprobe-extpause.XXXXXX";

/* Interleaved rounds of no sampling and sampling by tier; prints them. */
static int measure(int tier)
{
	double *diff = calloc((size_t)rounds, sizeof(*diff));
	uint64_t *matched = NULL;
	size_t nmatched = 0, nsampled = 0, capm = 0;
	double off_lost_total = 0, off_secs_total = 0, on_cpu_share = 0;
	size_t nswitched = 0, nbase = 0, capb = 0;
	uint64_t *base = NULL;
	uint64_t off_gaps = 0;

	printf("\n%s pause: %d rounds x %.2f s per phase, %g Hz, %d frames deep, "
	       "target on cpu %d, gaps > %d ns\n", tier == 1 ? "external tier (perf event)" : "signal path (tgkill, 16 KiB copied in the handler)", rounds, secs, hz, depth, ncpu - 1, THRESH_NS);
	printf("round  off: lost us/s  on: lost us/s  samples/s  ns per sample (differential)\n"
	       "       (time in interrupts per second on CPU, without and with sampling)\n");
	for (int r = 0; r < rounds; r++) {
		struct phase off, on;
		uint64_t *st;
		size_t ns;

		/* Interleaved, the order alternating: drift hits both alike. */
		if (r % 2 == 0) {
			run_phase(&off, 1, secs, child, 0, hz, dir, &st, &ns);
			run_phase(&on, 2, secs, child, tier, hz, dir, &st, &ns);
		} else {
			run_phase(&on, 2, secs, child, tier, hz, dir, &st, &ns);
			uint64_t *st2;
			size_t ns2;
			run_phase(&off, 1, secs, child, 0, hz, dir, &st2, &ns2);
		}
		/* Per second the target was on its CPU (preemptions left out:
		 * on a shared machine they are the other jobs, not the tier). */
		double off_run = (double)(off.t1 - off.t0 - off.off_cpu_ns) / 1e9;
		double on_run = (double)(on.t1 - on.t0 - on.off_cpu_ns) / 1e9;
		double off_rate = (double)off.lost_ns / off_run;
		double on_rate = (double)on.lost_ns / on_run;
		double sps = (double)on.samples / on_run;
		off_secs_total += off_run;
		on_cpu_share += on_run / ((double)(on.t1 - on.t0) / 1e9);
		diff[r] = sps > 0 ? (on_rate - off_rate) / sps : 0;
		off_lost_total += (double)off.lost_ns;
		for (uint64_t i = off.g0; i < off.g1; i++) {
			if (sh->gaps[i].switched)
				continue;
			off_gaps++;
			/* The baseline's long gaps: the tick and other interrupts. */
			if (sh->gaps[i].len >= 1000) {
				if (nbase == capb) {
					capb = capb ? capb * 2 : 4096;
					base = realloc(base, capb * sizeof(*base));
					if (!base)
						return 1;
				}
				base[nbase++] = sh->gaps[i].len;
			}
		}
		printf("%5d  %14.1f  %13.1f  %9.1f  %8.0f\n", r, off_rate / 1e3, on_rate / 1e3, sps,
		       diff[r]);
		/* Each sample of the phase: the gap around its timestamp. */
		uint64_t g = on.g0;
		for (size_t i = 0; i < ns; i++) {
			uint64_t t = st[i];
			if (t < on.t0 || t >= on.t1)
				continue;
			nsampled++;
			while (g < on.g1 && sh->gaps[g].start + sh->gaps[g].len < t)
				g++;
			if (g < on.g1 && sh->gaps[g].start <= t && sh->gaps[g].switched) {
				nswitched++; /* preempted in the same gap: not a measure */
			} else if (g < on.g1 && sh->gaps[g].start <= t) {
				if (nmatched == capm) {
					capm = capm ? capm * 2 : 4096;
					matched = realloc(matched, capm * sizeof(*matched));
					if (!matched)
						return 1;
				}
				matched[nmatched++] = sh->gaps[g].len;
			}
		}
		free(st);
	}

	qsort(diff, (size_t)rounds, sizeof(*diff), cmp_d);
	if (nmatched > 1)
		qsort(matched, nmatched, sizeof(*matched), cmp_u64);
#define PCT(v, n, p) ((n) ? (v)[(size_t)((double)((n) - 1) * (p))] : 0)
	printf("\nmatched (the gap around each sample's own timestamp), ns: median %llu, p90 %llu, "
	       "p99 %llu, max %llu; %zu of %zu samples in a gap > %d ns without a switch (%.1f%%), "
	       "%zu in one with a switch (left out)\n",
	       (unsigned long long)PCT(matched, nmatched, 0.5),
	       (unsigned long long)PCT(matched, nmatched, 0.9),
	       (unsigned long long)PCT(matched, nmatched, 0.99),
	       (unsigned long long)(nmatched ? matched[nmatched - 1] : 0), nmatched, nsampled,
	       THRESH_NS, nsampled ? 100.0 * (double)nmatched / (double)nsampled : 0.0, nswitched);
	printf("differential, ns of the target's time per sample: median %.0f (min %.0f, max %.0f "
	       "over %d rounds)\n", diff[rounds / 2], diff[0], diff[rounds - 1], rounds);
	printf("baseline without sampling: %.1f gaps/s, %.1f us/s lost to interrupts (per second "
	       "on CPU); the target was on its CPU %.0f%% of the time while sampled\n",
	       (double)off_gaps / off_secs_total, off_lost_total / off_secs_total / 1e3,
	       100.0 * on_cpu_share / rounds);
	if (nbase > 1)
		qsort(base, nbase, sizeof(*base), cmp_u64);
	printf("baseline gaps of 1 us or more (interrupts without sampling), ns: median %llu, p90 "
	       "%llu, p99 %llu; %.1f per second on CPU\n",
	       (unsigned long long)PCT(base, nbase, 0.5), (unsigned long long)PCT(base, nbase, 0.9),
	       (unsigned long long)PCT(base, nbase, 0.99), (double)nbase / off_secs_total);
	free(base);
	free(diff);
	free(matched);
	return 0;
}

int main(int argc, char **argv)
{
	rounds = argc > 1 ? atoi(argv[1]) : 6;
	secs = argc > 2 ? atof(argv[2]) : 1.0;
	hz = argc > 3 ? atof(argv[3]) : 999;
	depth = argc > 4 ? atoi(argv[4]) : 32;
	ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);

	if (rounds < 1 || secs <= 0 || hz < 1 || depth < 0) {
		fprintf(stderr, "usage: bench_ext_pause [ROUNDS [SECONDS [HZ [DEPTH]]]]\n");
		return 2;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	child = fork();
	if (child == 0) {
		signal(SIGNO, on_sig);
		if (ncpu > 1)
			pin(ncpu - 1);
		deep(depth);
		_exit(0);
	}
	if (ncpu > 1)
		pin(0);
	while (!atomic_load(&sh->ready))
		sched_yield();

	int err = measure(1);
	if (!err)
		err = measure(2);
	atomic_store(&sh->phase, -1);
	waitpid(child, NULL, 0);
	rmdir(dir);
	return err;
}
