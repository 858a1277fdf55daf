/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `record`'s side of the agent's request for the programs it cannot enter
 * deeper in the tree (userspace/agent/external_request.c): a process about
 * to exec a static or set-ID program asks, and `record` opens the external
 * tier's events on that pid (userspace/external/) before answering, so
 * the kernel samples the new image from its first instruction. One thread
 * serves the socket (an answer must not wait for the main loop's next
 * turn: the program's exec waits for it); the main loop polls the rings.
 * Contract in cli.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "userspace/cli/cli.h"
#include "userspace/external/external.h"

/* Each instance holds a ring per CPU until the recording ends. */
#define XKIDS_MAX 64

struct cli_xkids {
	int lfd, stop[2];
	pthread_t thr;
	bool thr_on;
	pthread_mutex_t mu;
	struct sprobe_ext *v[XKIDS_MAX];
	size_t n;
	char name[64];
	char *dir;
	double freq;
	bool quiet;
	unsigned refused;
};

/* One request: "external PID EXEC PPID PATH\tWHY". */
static void serve(struct cli_xkids *k, int c)
{
	char buf[1100], why[256] = "", answer[320];
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int pid, ppid, off = 0;
	unsigned exec_index;
	ssize_t n = recv(c, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return;
	buf[n] = '\0';
	if (sscanf(buf, "external %d %u %d %n", &pid, &exec_index, &ppid, &off) != 3 || !off) {
		snprintf(answer, sizeof(answer), "no bad request");
	} else if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.pid != pid) {
		/* Only a process asks for itself. */
		snprintf(answer, sizeof(answer), "no the request is not from pid %d", pid);
	} else {
		char *path = buf + off, *tab = strchr(path, '\t');
		struct sprobe_ext *x = NULL;

		if (tab)
			*tab = '\0';
		pthread_mutex_lock(&k->mu);
		if (k->n < XKIDS_MAX)
			x = sprobe_ext__open(pid, k->freq, k->dir, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "%d programs are sampled through the kernel already",
				 XKIDS_MAX);
		if (x) {
			sprobe_ext__set_root(x, exec_index, ppid);
			k->v[k->n++] = x;
			kill(getpid(), SIGCHLD); /* the main loop: a ring to read now */
		} else {
			k->refused++;
		}
		pthread_mutex_unlock(&k->mu);
		if (x)
			snprintf(answer, sizeof(answer), "ok");
		else
			snprintf(answer, sizeof(answer), "no cannot sample it through the kernel: %s",
				 why);
		if (!k->quiet)
			fprintf(stderr, "stackprobe record: %s (pid %d) %s: %s\n", path, pid,
				tab ? tab + 1 : "cannot be entered",
				x ? "sampled through the kernel" : answer + 3);
	}
	(void)!send(c, answer, strlen(answer), MSG_NOSIGNAL);
}

static void *server(void *arg)
{
	struct cli_xkids *k = arg;
	struct pollfd p[2] = { { .fd = k->lfd, .events = POLLIN }, { .fd = k->stop[0], .events = POLLIN } };

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		int c = accept4(k->lfd, NULL, NULL, SOCK_CLOEXEC);

		if (c >= 0) {
			serve(k, c);
			close(c);
		}
	}
	return NULL;
}

struct cli_xkids *cli_xkids__new(const char *dir, double freq, bool quiet)
{
	struct cli_xkids *k = calloc(1, sizeof(*k));
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timespec ts;
	sigset_t all, old;
	int e;

	if (!k || !(k->dir = strdup(dir))) {
		free(k);
		return NULL;
	}
	k->freq = freq;
	k->quiet = quiet;
	k->stop[0] = k->stop[1] = -1;
	pthread_mutex_init(&k->mu, NULL);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* Abstract (nothing on disk to clean up), and not guessable from the
	 * pid alone. */
	snprintf(k->name, sizeof(k->name), "stackprobe-record-%d-%lx", (int)getpid(),
		 (unsigned long)ts.tv_nsec ^ (unsigned long)ts.tv_sec);
	memcpy(a.sun_path + 1, k->name, strlen(k->name));
	k->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (k->lfd < 0 ||
	    bind(k->lfd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(k->name))) != 0 ||
	    listen(k->lfd, 16) != 0 || pipe2(k->stop, O_CLOEXEC) != 0)
		goto fail;
	/* record's own signal handling stays on its main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&k->thr, NULL, server, k);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		errno = e;
		goto fail;
	}
	k->thr_on = true;
	return k;
fail:
	e = errno;
	cli_xkids__free(k);
	errno = e;
	return NULL;
}

const char *cli_xkids__name(const struct cli_xkids *k)
{
	return k->name;
}

size_t cli_xkids__count(struct cli_xkids *k)
{
	size_t n;

	pthread_mutex_lock(&k->mu);
	n = k->n;
	pthread_mutex_unlock(&k->mu);
	return n;
}

void cli_xkids__poll(struct cli_xkids *k)
{
	pthread_mutex_lock(&k->mu);
	for (size_t i = 0; i < k->n; i++)
		sprobe_ext__poll(k->v[i]);
	pthread_mutex_unlock(&k->mu);
}

size_t cli_xkids__finish(struct cli_xkids *k, unsigned long long *lost)
{
	size_t parts = 0;

	*lost = 0;
	if (k->thr_on) {
		(void)!write(k->stop[1], "x", 1);
		pthread_join(k->thr, NULL);
		k->thr_on = false;
	}
	for (size_t i = 0; i < k->n; i++) {
		unsigned long long s, l;
		int np = sprobe_ext__finish(k->v[i]);

		sprobe_ext__counts(k->v[i], &s, &l);
		*lost += l;
		if (np > 0)
			parts += (size_t)np;
		else if (np < 0)
			fprintf(stderr, "stackprobe record: could not write the kernel's samples: %s\n",
				strerror(-np));
	}
	return parts;
}

void cli_xkids__free(struct cli_xkids *k)
{
	if (!k)
		return;
	if (k->thr_on) {
		(void)!write(k->stop[1], "x", 1);
		pthread_join(k->thr, NULL);
	}
	for (size_t i = 0; i < k->n; i++)
		sprobe_ext__free(k->v[i]);
	if (k->lfd >= 0)
		close(k->lfd);
	if (k->stop[0] >= 0)
		close(k->stop[0]);
	if (k->stop[1] >= 0)
		close(k->stop[1]);
	pthread_mutex_destroy(&k->mu);
	free(k->dir);
	free(k);
}
