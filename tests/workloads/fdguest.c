/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program that does to its descriptors what daemons do, for
 * tests/test_agent_fds.c: the agent's descriptors must survive it and the
 * program's files must hold exactly what it wrote.
 *
 *   fdguest loop|range|from|dup2|target DIR MS
 *       Close every descriptor above stderr (a close loop to the soft
 *       limit, close_range, closefrom, or dup2 of /dev/null over 3..63 and
 *       then close them; "target": dup2 over every number the agent holds,
 *       found in /proc/self/fd), open DIR/log00..log19, then for MS ms
 *       compute in guest_work() and append numbered lines to every file.
 *       Then read every file back: exit 0 when each holds exactly its
 *       lines, 3 otherwise (what differs on stderr).
 *   fdguest raw DIR MS
 *       Work MS/2 ms, then close the agent's data file descriptor with a
 *       raw close system call, put a file of its own at that number
 *       (fcntl F_DUPFD) and write to it for MS/2 ms; exit as above.
 *   fdguest rlimit N
 *       Lower RLIMIT_NOFILE to 40, start 8 threads that spin in
 *       guest_work(), open /dev/null until EMFILE (at most N times) and
 *       print "opened K". Exit 0.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NFILES 20

static volatile unsigned long sink;
static atomic_int stop;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

__attribute__((noinline)) void guest_work(unsigned n)
{
	unsigned long x = sink;

	for (unsigned i = 0; i < n * 10000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	sink = x;
}

static int fds[NFILES];
static unsigned lines;

static void write_line(int i, unsigned k)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "log%02d line %u\n", i, k);

	if (write(fds[i], buf, (size_t)n) != n) {
		fprintf(stderr, "fdguest: write log%02d: %s\n", i, strerror(errno));
		exit(4);
	}
}

static void open_logs(const char *dir)
{
	for (int i = 0; i < NFILES; i++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/log%02d", dir, i);
		fds[i] = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fds[i] < 0) {
			fprintf(stderr, "fdguest: open %s: %s\n", path, strerror(errno));
			exit(4);
		}
	}
}

static void work_and_log(uint64_t ms)
{
	uint64_t end = now_ms() + ms;

	while (now_ms() < end) {
		guest_work(50);
		for (int i = 0; i < NFILES; i++)
			write_line(i, lines);
		lines++;
	}
}

/* Read every log back; 0 when each holds exactly lines lines of its own. */
static int check_logs(const char *dir, int extra_fd, const char *extra_name, unsigned extra_lines)
{
	int bad = 0;

	for (int i = 0; i < NFILES + (extra_fd >= 0); i++) {
		char path[PATH_MAX], want[64];
		unsigned n = i < NFILES ? lines : extra_lines;

		if (i < NFILES)
			snprintf(path, sizeof(path), "%s/log%02d", dir, i);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, extra_name);
		FILE *f = fopen(path, "r");
		char line[256];
		unsigned k = 0;

		if (!f) {
			fprintf(stderr, "fdguest: reopen %s: %s\n", path, strerror(errno));
			return 3;
		}
		while (fgets(line, sizeof(line), f)) {
			snprintf(want, sizeof(want), "%s%02d line %u\n", i < NFILES ? "log" : "own",
				 i < NFILES ? i : 0, k);
			if (strcmp(line, want) != 0) {
				fprintf(stderr, "fdguest: %s line %u is \"%.60s\", not \"%s\"\n", path, k,
					line, want);
				bad = 3;
				break;
			}
			k++;
		}
		if (!bad && (k != n || ferror(f))) {
			fprintf(stderr, "fdguest: %s has %u lines, %u written\n", path, k, n);
			bad = 3;
		}
		fclose(f);
		if (bad)
			return bad;
	}
	return 0;
}

/* The numbers whose /proc/self/fd link contains what (the agent's). */
static int find_fds(const char *what, int *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		char p[64], link[PATH_MAX];
		int fd = atoi(e->d_name);
		ssize_t l;

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d))
			continue;
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		l = readlink(p, link, sizeof(link) - 1);
		if (l <= 0)
			continue;
		link[l] = '\0';
		if (!what || strstr(link, what))
			out[n++] = fd;
	}
	closedir(d);
	return n;
}

static void close_all(const char *how)
{
	struct rlimit rl;

	getrlimit(RLIMIT_NOFILE, &rl);
	if (strcmp(how, "loop") == 0) {
		for (long fd = 3; fd < (long)rl.rlim_cur; fd++)
			close((int)fd);
	} else if (strcmp(how, "range") == 0) {
		if (close_range(3, ~0u, 0) != 0) {
			perror("fdguest: close_range");
			exit(4);
		}
	} else if (strcmp(how, "from") == 0) {
		closefrom(3);
	} else if (strcmp(how, "dup2") == 0 || strcmp(how, "target") == 0) {
		int null = open("/dev/null", O_RDONLY), targets[256], n = 0;

		if (strcmp(how, "dup2") == 0)
			for (int fd = 3; fd < 64; fd++)
				targets[n++] = fd;
		else
			n = find_fds(NULL, targets, 256);
		for (int i = 0; i < n; i++)
			if (targets[i] > 2 && targets[i] != null && dup2(null, targets[i]) < 0) {
				perror("fdguest: dup2");
				exit(4);
			}
		for (int i = 0; i < n; i++)
			if (targets[i] > 2)
				close(targets[i]);
		close(null);
	}
}

static void *spinner(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		guest_work(10);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "rlimit") == 0) {
		struct rlimit rl = { 40, 40 };
		pthread_t th[8];
		int n = 0, max = atoi(argv[2]);

		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = 40;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			perror("fdguest: setrlimit");
			return 4;
		}
		for (int i = 0; i < 8; i++)
			pthread_create(&th[i], NULL, spinner, NULL);
		guest_work(2000); /* let the agent meet the threads */
		while (n < max && open("/dev/null", O_RDONLY) >= 0)
			n++;
		printf("opened %d\n", n);
		if (getenv("FDGUEST_LIST")) { /* what else holds numbers below the limit */
			int all[64], k;

			close(3 + n - 1 > 39 ? 39 : 3 + n - 1);
			k = find_fds(NULL, all, 64);
			for (int i = 0; i < k; i++) {
				char p[64], link[PATH_MAX];
				ssize_t l;

				snprintf(p, sizeof(p), "/proc/self/fd/%d", all[i]);
				l = readlink(p, link, sizeof(link) - 1);
				link[l > 0 ? l : 0] = '\0';
				if (!strstr(link, "/dev/null"))
					fprintf(stderr, "fd %d -> %s\n", all[i], link);
			}
		}
		atomic_store(&stop, 1);
		for (int i = 0; i < 8; i++)
			pthread_join(th[i], NULL);
		return 0;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: fdguest loop|range|from|dup2|target|raw DIR MS | rlimit N\n");
		return 2;
	}
	const char *dir = argv[2];
	uint64_t ms = strtoull(argv[3], NULL, 10);

	if (strcmp(argv[1], "raw") == 0) {
		const char *out = getenv("STACKPROBE_OUTPUT");
		char real[PATH_MAX], own[PATH_MAX];
		int agent[4], n, fd, own_fd;
		unsigned own_lines = 0;

		if (!out || !realpath(out, real)) {
			fprintf(stderr, "fdguest raw: no STACKPROBE_OUTPUT file\n");
			return 4;
		}
		open_logs(dir);
		work_and_log(ms / 2);
		n = find_fds(real, agent, 4);
		if (n != 1) {
			fprintf(stderr, "fdguest raw: %d descriptors name %s\n", n, real);
			return 4;
		}
		fd = agent[0];
		syscall(SYS_close, fd);
		snprintf(own, sizeof(own), "%s/own00", dir);
		int tmp = open(own, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		own_fd = fcntl(tmp, F_DUPFD, fd);
		close(tmp);
		if (own_fd != fd) {
			fprintf(stderr, "fdguest raw: could not reuse %d (got %d)\n", fd, own_fd);
			return 4;
		}
		printf("reused %d\n", fd);
		uint64_t end = now_ms() + ms / 2;
		while (now_ms() < end) {
			char buf[64];
			int l = snprintf(buf, sizeof(buf), "own00 line %u\n", own_lines);

			guest_work(50);
			if (write(own_fd, buf, (size_t)l) != l)
				return 4;
			own_lines++;
			for (int i = 0; i < NFILES; i++)
				write_line(i, lines);
			lines++;
		}
		return check_logs(dir, own_fd, "own00", own_lines);
	}
	close_all(argv[1]);
	open_logs(dir);
	work_and_log(ms);
	for (int i = 0; i < NFILES; i++)
		close(fds[i]);
	return check_logs(dir, -1, NULL, 0);
}
