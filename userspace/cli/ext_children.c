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
	/* Set-ID programs waiting for their exec: the read end of the pipe
	 * the agent passed, whose end of file is the exec. */
	struct pending {
		int fd, pid, ppid;
		unsigned exec_index;
		char path[256], why[160];
	} wait[XKIDS_MAX];
	size_t nwait;
};

/* pid's parent, from /proc/PID/stat; -1 if unknown. */
static int parent_of(int pid)
{
	char path[64], buf[512], *rp;
	int ppid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "re")))
		return -1;
	if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) && sscanf(rp + 1, " %*c %d", &ppid) != 1)
		ppid = -1;
	fclose(f);
	return ppid;
}

/* Add x (NULL: refused, why says why) and say so. Under k->mu. */
static bool take(struct cli_xkids *k, struct sprobe_ext *x, int pid, unsigned exec_index,
		 int ppid)
{
	if (!x) {
		k->refused++;
		return false;
	}
	sprobe_ext__set_root(x, exec_index, ppid);
	k->v[k->n++] = x;
	kill(getpid(), SIGCHLD); /* the main loop: a ring to read now */
	return true;
}

/* A set-ID program's exec happened (or its process ended): attach. */
static void attach_after_exec(struct cli_xkids *k, struct pending *w)
{
	char why[256] = "";
	struct sprobe_ext *x = NULL;

	pthread_mutex_lock(&k->mu);
	if (k->n < XKIDS_MAX)
		x = sprobe_ext__attach(w->pid, k->freq, k->dir, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%d programs are sampled through the kernel already",
			 XKIDS_MAX);
	bool ok = take(k, x, w->pid, w->exec_index, w->ppid);
	pthread_mutex_unlock(&k->mu);
	if (!ok) {
		/* Too late to tell the agent: note it as the agent would. */
		char ev[4200], line[1024];
		int n = snprintf(line, sizeof(line), "unsampled %d %u %llu %s\t%s; %s\n", w->pid,
				 w->exec_index, (unsigned long long)0, w->path, w->why, why);
		FILE *f;

		snprintf(ev, sizeof(ev), "%s/events", k->dir);
		if (n > 0 && (size_t)n < sizeof(line) && (f = fopen(ev, "ae"))) {
			fputs(line, f);
			fclose(f);
		}
	}
	if (!k->quiet)
		fprintf(stderr, "stackprobe record: %s (pid %d) %s: %s%s\n", w->path, w->pid, w->why,
			ok ? "sampled through the kernel, attached just after its exec (the kernel "
			     "drops perf events at a set-ID exec)"
			   : "not sampled: ",
			ok ? "" : why);
}

/* One request: "external PID EXEC PPID PATH\tWHY", or "attach ..." with
 * the read end of the exec pipe (a set-ID program). */
static void serve(struct cli_xkids *k, int c)
{
	char buf[1100], why[256] = "", answer[320];
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int pid, ppid, off = 0;
	unsigned exec_index;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	ssize_t n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
	int passed = -1;
	bool attach;

	if (n <= 0)
		return;
	buf[n] = '\0';
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
		    h->cmsg_len >= CMSG_LEN(sizeof(int)))
			memcpy(&passed, CMSG_DATA(h), sizeof(int));
	attach = strncmp(buf, "attach ", 7) == 0;
	bool spawned = strncmp(buf, "spawned ", 8) == 0;
	size_t verb = attach ? 7 : spawned ? 8 : 9;

	if (sscanf(buf + verb, "%d %u %d %n", &pid, &exec_index, &ppid, &off) != 3 || !off ||
	    (!attach && !spawned && strncmp(buf, "external ", 9) != 0) || (attach && passed < 0)) {
		snprintf(answer, sizeof(answer), "no bad request");
	} else if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 ||
		   (spawned ? parent_of(pid) != cr.pid : cr.pid != pid)) {
		/* Only a process asks for itself, or a parent for the child
		 * it just spawned. */
		snprintf(answer, sizeof(answer), "no the request is not from pid %d%s", pid,
			 spawned ? "'s parent" : "");
	} else {
		char *path = buf + verb + off, *tab = strchr(path, '\t');
		struct sprobe_ext *x = NULL;

		if (tab)
			*tab = '\0';
		if (attach) {
			/* Answer now; attach when the exec closes the pipe. */
			pthread_mutex_lock(&k->mu);
			if (k->nwait < XKIDS_MAX && k->n + k->nwait < XKIDS_MAX) {
				struct pending *w = &k->wait[k->nwait++];

				*w = (struct pending){ .fd = passed, .pid = pid, .ppid = ppid,
						       .exec_index = exec_index };
				snprintf(w->path, sizeof(w->path), "%s", path);
				snprintf(w->why, sizeof(w->why), "%s", tab ? tab + 1 : "");
				passed = -1;
				snprintf(answer, sizeof(answer), "ok");
			} else {
				snprintf(answer, sizeof(answer), "no %d programs are sampled through the "
								 "kernel already", XKIDS_MAX);
			}
			pthread_mutex_unlock(&k->mu);
			if (passed >= 0)
				close(passed);
			(void)!send(c, answer, strlen(answer), MSG_NOSIGNAL);
			return;
		}
		pthread_mutex_lock(&k->mu);
		if (k->n < XKIDS_MAX)
			x = spawned ? sprobe_ext__attach(pid, k->freq, k->dir, why, sizeof(why))
				    : sprobe_ext__open(pid, k->freq, k->dir, why, sizeof(why));
		else
			snprintf(why, sizeof(why), "%d programs are sampled through the kernel already",
				 XKIDS_MAX);
		take(k, x, pid, exec_index, ppid);
		pthread_mutex_unlock(&k->mu);
		if (x)
			snprintf(answer, sizeof(answer), "ok");
		else
			snprintf(answer, sizeof(answer), "no cannot sample it through the kernel: %s",
				 why);
		if (!k->quiet)
			fprintf(stderr, "stackprobe record: %s (pid %d) %s: %s\n", path, pid,
				tab ? tab + 1 : "cannot be entered",
				!x ? answer + 3
				: spawned ? "sampled through the kernel, attached once posix_spawn returned"
					  : "sampled through the kernel");
	}
	if (passed >= 0)
		close(passed);
	(void)!send(c, answer, strlen(answer), MSG_NOSIGNAL);
}

static void *server(void *arg)
{
	struct cli_xkids *k = arg;
	struct pollfd p[2 + XKIDS_MAX];

	for (;;) {
		size_t np = 2;

		p[0] = (struct pollfd){ .fd = k->lfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = k->stop[0], .events = POLLIN };
		/* Only this thread changes the waiting list's length down;
		 * serve() (also this thread) adds. */
		for (size_t i = 0; i < k->nwait; i++)
			p[np++] = (struct pollfd){ .fd = k->wait[i].fd, .events = POLLIN };
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		/* An exec (end of file; nothing is ever written) or the
		 * process's end: attach, and forget the pipe. */
		for (size_t i = np - 2; i-- > 0;) {
			if (!p[2 + i].revents)
				continue;
			struct pending w = k->wait[i];

			close(w.fd);
			pthread_mutex_lock(&k->mu);
			k->wait[i] = k->wait[--k->nwait];
			pthread_mutex_unlock(&k->mu);
			attach_after_exec(k, &w);
		}
		if (p[0].revents) {
			int c = accept4(k->lfd, NULL, NULL, SOCK_CLOEXEC);

			if (c >= 0) {
				serve(k, c);
				close(c);
			}
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

unsigned long long cli_xkids__samples(struct cli_xkids *k)
{
	unsigned long long n = 0, s, l;

	pthread_mutex_lock(&k->mu);
	for (size_t i = 0; i < k->n; i++) {
		sprobe_ext__counts(k->v[i], &s, &l);
		n += s;
	}
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
	for (size_t i = 0; i < k->nwait; i++)
		close(k->wait[i].fd);
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
