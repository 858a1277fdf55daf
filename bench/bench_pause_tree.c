/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What following a process tree costs (opts.follow_children, docs/PAUSE.md
 * "Process trees"): the round trip of fork + _exit + waitpid of a child,
 * which is what a build starting many short processes repeats, in three
 * phases alternated twice: no companion, the companion for this process
 * alone (no fork program attached), the companion following this process's
 * children (sched_process_fork adds each child to `procs`, its exit removes
 * it and writes an exit record). Then, with the kernel's BPF run-time
 * statistics on, ns per run of the fork and exit programs.
 *
 * The forking process is a small one started before anything is loaded
 * (the "forker"), as the processes of a build are: fork copies the
 * parent's page tables, so forking from this process, which parsed kernel
 * BTF and maps the ring buffer, would measure its size, not the companion.
 *
 *   build/bench/bench_pause_tree [FORKS]     (default 2000 per phase)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include <stackprobe/pause.h>

#define SIGNO (SIGRTMIN + 6)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t pct(const uint64_t *v, size_t n, unsigned q)
{
	size_t r = (n * q + 99) / 100;
	return v[r ? r - 1 : 0];
}

struct phase {
	uint64_t med, p90;
};

/* n times: fork a child that leaves at once, wait for it. */
static int run_phase(size_t n, struct phase *out)
{
	uint64_t *rt = calloc(n, sizeof(*rt));

	if (!rt)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = mono_ns();
		pid_t c = fork();
		if (c < 0) {
			free(rt);
			return -errno;
		}
		if (c == 0)
			_exit(0);
		if (waitpid(c, NULL, 0) != c) {
			free(rt);
			return -errno;
		}
		rt[i] = mono_ns() - t0;
	}
	qsort(rt, n, sizeof(*rt), cmp_u64);
	out->med = pct(rt, n, 50);
	out->p90 = pct(rt, n, 90);
	free(rt);
	return 0;
}

/* The forker: runs a phase of the size it reads, writes the result back. */
static void forker(int cmd, int res)
{
	size_t n;

	while (read(cmd, &n, sizeof(n)) == (ssize_t)sizeof(n)) {
		struct phase out = { 0 };
		int err = run_phase(n, &out);
		if (write(res, &err, sizeof(err)) != sizeof(err) ||
		    write(res, &out, sizeof(out)) != sizeof(out))
			_exit(1);
	}
	_exit(0);
}

static int cmd_fd = -1, res_fd = -1;
static pid_t forker_pid;

static int remote_phase(size_t n, struct phase *out)
{
	int err;

	if (write(cmd_fd, &n, sizeof(n)) != sizeof(n) ||
	    read(res_fd, &err, sizeof(err)) != sizeof(err) ||
	    read(res_fd, out, sizeof(*out)) != sizeof(*out))
		return -EIO;
	return err;
}

static struct sprobe_pause *attach(bool follow)
{
	struct sprobe_pause_opts o = {
		.sz = sizeof(o), .tgid = forker_pid, .signo = SIGNO, .quiet = true,
		.ringbuf_bytes = 4u << 20, .follow_children = follow,
	};
	return sprobe_pause__new(&o);
}

/* Drain the ring buffer so exit records do not pile up between phases. */
static void drain(struct sprobe_pause *p)
{
	while (sprobe_pause__poll(p, 0) > 0)
		sprobe_pause__clear(p);
	sprobe_pause__clear(p);
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
	static const char *const names[3] = { "no companion", "companion, this process",
					       "companion, following children" };
	struct phase ph[2][3];
	char why[512];
	int err;

	if (n < 10) {
		fprintf(stderr, "usage: bench_pause_tree [FORKS >= 10]\n");
		return 2;
	}
	int c2f[2], f2c[2];
	if (pipe2(c2f, O_CLOEXEC) || pipe2(f2c, O_CLOEXEC)) {
		perror("bench_pause_tree: pipe");
		return 1;
	}
	forker_pid = fork();
	if (forker_pid < 0) {
		perror("bench_pause_tree: fork");
		return 1;
	}
	if (forker_pid == 0) {
		close(c2f[1]);
		close(f2c[0]);
		forker(c2f[0], f2c[1]);
	}
	close(c2f[0]);
	close(f2c[1]);
	cmd_fd = c2f[1];
	res_fd = f2c[0];
	err = sprobe_pause__probe(why, sizeof(why));
	if (err) {
		printf("bench_pause_tree: companion unavailable, nothing to measure: %s\n", why);
		close(cmd_fd);
		waitpid(forker_pid, NULL, 0);
		return 0;
	}
	remote_phase(n / 5, &ph[0][0]);	/* warm-up */
	for (int r = 0; r < 2; r++) {
		for (int k = 0; k < 3; k++) {
			struct sprobe_pause *p = k ? attach(k == 2) : NULL;
			if (k && !p) {
				err = -errno;
				goto fail;
			}
			err = remote_phase(n, &ph[r][k]);
			if (p) {
				drain(p);
				sprobe_pause__free(p);
			}
			if (err)
				goto fail;
		}
	}

	/* Per-program cost while following, stats on. */
	int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		err = -errno;
		goto fail;
	}
	struct sprobe_pause *p = attach(true);
	if (!p) {
		err = -errno;
		close(stats_fd);
		goto fail;
	}
	struct phase stat_phase;
	err = remote_phase(n, &stat_phase);
	drain(p);
	struct sprobe_pause_prog_stats ps[SPROBE_PAUSE_NPROGS];
	int np = sprobe_pause__prog_stats(p, ps, SPROBE_PAUSE_NPROGS);
	struct sprobe_pause_stats st;
	sprobe_pause__stats(p, &st);
	sprobe_pause__free(p);
	close(stats_fd);
	if (err || np < 0) {
		err = err ? err : np;
		goto fail;
	}

	printf("fork + _exit + waitpid round trip, %zu forks per phase (us; median / p90)\n", n);
	for (int r = 0; r < 2; r++)
		for (int k = 0; k < 3; k++)
			printf("  %-32s %8.1f / %-8.1f\n", names[k], (double)ph[r][k].med / 1e3,
			       (double)ph[r][k].p90 / 1e3);
	printf("\nfollowing, BPF run-time stats (all invocations machine-wide):\n");
	printf("  %-20s %12s %10s\n", "program", "runs", "ns/run");
	for (int i = 0; i < np; i++)
		printf("  %-20s %12llu %10.1f\n", ps[i].name, (unsigned long long)ps[i].run_cnt,
		       ps[i].run_cnt ? (double)ps[i].run_time_ns / (double)ps[i].run_cnt : 0.0);
	printf("  followed %llu, exits %llu, procs_full %llu, exits_lost %llu\n",
	       (unsigned long long)st.followed, (unsigned long long)st.exits,
	       (unsigned long long)st.procs_full, (unsigned long long)st.exits_lost);
	close(cmd_fd);
	waitpid(forker_pid, NULL, 0);
	return 0;
fail:
	fprintf(stderr, "bench_pause_tree: %s\n", strerror(-err));
	close(cmd_fd);
	waitpid(forker_pid, NULL, 0);
	return 1;
}
