/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * `record`'s side of the agent's request for the programs it cannot enter
 * deeper in the tree (userspace/agent/external_request.c): a process about
 * to exec a static or set-ID program asks, and `record` opens the external
 * tier's events on that thread (userspace/external/) before answering, so
 * the kernel samples the new image from its first instruction (a set-ID
 * one from just after its exec). One thread serves the socket (an answer
 * must not wait for the main loop's next turn: the program's exec waits
 * for it); the main loop polls the rings and retires the events of
 * processes that have ended. Contract in cli.h.
 *
 * The requests come from processes of the tree, which may be hostile:
 * only a process that descends from record is served (the abstract name
 * is visible in /proc/net/unix), it asks only for itself or a child it
 * spawned, a connection gets 500 ms to say what it wants, and what it
 * says is put in the events file and on record's stderr only with its
 * control characters replaced.
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
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "userspace/cli/cli.h"
#include "userspace/external/external.h"

/* Events held at once (a ring per CPU each, until their processes end). */
#define XKIDS_MAX 64
/* Set-ID programs waiting for their exec at once. */
#define XKIDS_WAIT_MAX 64

struct pending {
	int fd, pid, ppid;
	unsigned exec_index;
	char path[256], why[160];
};

struct cli_xkids {
	int lfd, stop[2], wake_fd;
	pthread_t thr;
	bool thr_on;
	pthread_mutex_t mu;
	struct sprobe_ext *v[XKIDS_MAX];
	size_t n;
	char name[64];
	char *dir;
	double freq;
	bool quiet;
	unsigned refused, parts, errors;
	unsigned long long samples_done, lost_done;
	/* Set-ID programs waiting for their exec: the read end of the pipe
	 * the agent passed, whose end of file is the exec. Only the server
	 * thread touches it. */
	struct pending wait[XKIDS_WAIT_MAX];
	size_t nwait;
};

/* A field of a request, made printable (it goes into DIR/events, one line
 * per note, and onto a terminal). */
static void clean(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* pid's parent, from /proc/PID/stat; -1 if unknown. */
static int parent_of(int pid)
{
	char path[64], buf[512], *rp;
	int ppid = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "re")))
		return -1;
	if (!fgets(buf, sizeof(buf), f) || !(rp = strrchr(buf, ')')) ||
	    sscanf(rp + 1, " %*c %d", &ppid) != 1)
		ppid = -1;
	fclose(f);
	return ppid;
}

/* Does pid descend from this record (its tree: record is the command's
 * parent and a subreaper, so orphans stay below it too)? */
static bool in_tree(int pid)
{
	for (int depth = 0; depth < 256 && pid > 1; depth++) {
		pid = parent_of(pid);
		if (pid == (int)getpid())
			return true;
	}
	return false;
}

/* Is tid a thread of process pid? */
static bool thread_of(int pid, int tid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/task/%d", pid, tid);
	return stat(path, &st) == 0;
}

/* Tell the main loop a ring needs reading (cli_xkids__wake_fd). */
static void wake(struct cli_xkids *k)
{
	if (k->wake_fd >= 0)
		(void)!write(k->wake_fd, "w", 1);
}

/* Add x (NULL: refused) under k->mu. */
static bool take(struct cli_xkids *k, struct sprobe_ext *x, int pid, unsigned exec_index,
		 int ppid)
{
	if (!x) {
		k->refused++;
		return false;
	}
	sprobe_ext__set_root(x, pid, exec_index, ppid);
	k->v[k->n++] = x;
	return true;
}

/* Note a program the kernel tier could not take, as the agent would. */
static void note_unsampled(struct cli_xkids *k, const struct pending *w, const char *why)
{
	char ev[4200], line[1024];
	int n = snprintf(line, sizeof(line), "unsampled %d %u %llu %s\t%s; %s\n", w->pid,
			 w->exec_index, 0ull, w->path, w->why, why);
	FILE *f;

	snprintf(ev, sizeof(ev), "%s/events", k->dir);
	if (n > 0 && (size_t)n < sizeof(line) && (f = fopen(ev, "ae"))) {
		fputs(line, f);
		fclose(f);
	}
}

/* A set-ID program's pipe is readable: end of file is its exec (attach);
 * a byte is the agent saying the exec failed (nothing to attach to). */
static void exec_pipe_ready(struct cli_xkids *k, struct pending *w)
{
	char why[256] = "", c;
	struct sprobe_ext *x = NULL;
	ssize_t r = read(w->fd, &c, 1);

	if (r != 0)
		return; /* no exec, or an error: the old image goes on unsampled */
	pthread_mutex_lock(&k->mu);
	if (k->n < XKIDS_MAX)
		x = sprobe_ext__attach(w->pid, k->freq, k->dir, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "%d programs are sampled through the kernel already",
			 XKIDS_MAX);
	bool ok = take(k, x, w->pid, w->exec_index, w->ppid);
	pthread_mutex_unlock(&k->mu);
	if (ok)
		wake(k);
	else
		note_unsampled(k, w, why);
	if (!k->quiet)
		fprintf(stderr, "stackprobe record: %s (pid %d) %s: %s%s\n", w->path, w->pid, w->why,
			ok ? "sampled through the kernel, attached just after its exec (the kernel "
			     "drops perf events at a set-ID exec)"
			   : "not sampled: ",
			ok ? "" : why);
}

/* One request: "VERB PID TID EXEC PPID PATH\tWHY", VERB external (open
 * enable_on_exec events on TID, which will exec), attach (a set-ID
 * program: with the read end of the exec pipe) or spawned (a child
 * posix_spawn made: attach to it now). */
static void serve(struct cli_xkids *k, int c)
{
	char buf[1100], why[256] = "", answer[320];
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int pid = 0, tid = 0, ppid = 0, off = 0, passed = -1;
	unsigned exec_index = 0;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	struct timeval tv = { .tv_usec = 500000 };
	ssize_t n;

	/* A peer that connects and says nothing must not stop the others. */
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	memset(buf, 0, sizeof(buf));
	n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h))
		if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS &&
		    h->cmsg_len >= CMSG_LEN(sizeof(int)))
			memcpy(&passed, CMSG_DATA(h), sizeof(int));
	bool attach = strncmp(buf, "attach ", 7) == 0;
	bool spawned = strncmp(buf, "spawned ", 8) == 0;
	bool external = strncmp(buf, "external ", 9) == 0;
	size_t verb = attach ? 7 : spawned ? 8 : 9;

	if ((!attach && !spawned && !external) ||
	    sscanf(buf + verb, "%d %d %u %d %n", &pid, &tid, &exec_index, &ppid, &off) != 4 ||
	    !off || (attach && passed < 0) || pid <= 0 || tid <= 0) {
		snprintf(answer, sizeof(answer), "no bad request");
	} else if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || !in_tree(cr.pid) ||
		   (spawned ? parent_of(pid) != cr.pid : cr.pid != pid) ||
		   (external && !thread_of(pid, tid))) {
		/* Only a process of the tree, for itself (one of its own
		 * threads), or a parent for the child it just spawned. */
		snprintf(answer, sizeof(answer), "no the request is not from pid %d%s", pid,
			 spawned ? "'s parent" : "");
	} else {
		char *path = buf + verb + off, *tab = strchr(path, '\t');
		const char *reason = tab ? tab + 1 : "cannot be entered";
		struct sprobe_ext *x = NULL;

		if (tab)
			*tab = '\0';
		clean(path);
		clean(tab ? tab + 1 : path);
		if (attach) {
			/* Answer now; attach when the exec closes the pipe. */
			if (k->nwait < XKIDS_WAIT_MAX) {
				struct pending *w = &k->wait[k->nwait++];

				*w = (struct pending){ .fd = passed, .pid = pid, .ppid = ppid,
						       .exec_index = exec_index };
				snprintf(w->path, sizeof(w->path), "%s", path);
				snprintf(w->why, sizeof(w->why), "%s", reason);
				passed = -1;
				snprintf(answer, sizeof(answer), "ok");
			} else {
				snprintf(answer, sizeof(answer), "no %d set-ID programs wait for their "
								 "exec already", XKIDS_WAIT_MAX);
			}
		} else {
			pthread_mutex_lock(&k->mu);
			if (k->n < XKIDS_MAX)
				x = spawned ? sprobe_ext__attach(pid, k->freq, k->dir, why, sizeof(why))
					    : sprobe_ext__open(tid, k->freq, k->dir, why, sizeof(why));
			else
				snprintf(why, sizeof(why), "%d programs are sampled through the kernel "
							   "at once already", XKIDS_MAX);
			take(k, x, pid, exec_index, ppid);
			pthread_mutex_unlock(&k->mu);
			if (x) {
				wake(k);
				snprintf(answer, sizeof(answer), "ok");
			} else {
				snprintf(answer, sizeof(answer),
					 "no cannot sample it through the kernel: %s", why);
			}
			if (!k->quiet)
				fprintf(stderr, "stackprobe record: %s (pid %d) %s: %s\n", path, pid,
					reason,
					!x ? answer + 3
					: spawned ? "sampled through the kernel, attached once "
						    "posix_spawn returned"
						  : "sampled through the kernel");
		}
	}
	if (passed >= 0)
		close(passed);
	(void)!send(c, answer, strlen(answer), MSG_NOSIGNAL);
}

static void *server(void *arg)
{
	struct cli_xkids *k = arg;
	struct pollfd p[2 + XKIDS_WAIT_MAX];

	for (;;) {
		size_t np = 2;

		p[0] = (struct pollfd){ .fd = k->lfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = k->stop[0], .events = POLLIN };
		for (size_t i = 0; i < k->nwait; i++)
			p[np++] = (struct pollfd){ .fd = k->wait[i].fd, .events = POLLIN };
		if (poll(p, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		/* Downwards: a removal moves the last entry, already seen. */
		for (size_t i = np - 2; i-- > 0;) {
			if (!p[2 + i].revents)
				continue;
			struct pending w = k->wait[i];

			k->wait[i] = k->wait[--k->nwait];
			exec_pipe_ready(k, &w);
			close(w.fd);
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

struct cli_xkids *cli_xkids__new(const char *dir, double freq, bool quiet, int wake_fd)
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
	k->wake_fd = wake_fd;
	k->stop[0] = k->stop[1] = -1;
	pthread_mutex_init(&k->mu, NULL);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	/* Abstract: nothing on disk to clean up. Its name is listed in
	 * /proc/net/unix: in_tree() decides who is served. */
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
	unsigned long long n, s, l;

	pthread_mutex_lock(&k->mu);
	n = k->samples_done;
	for (size_t i = 0; i < k->n; i++) {
		sprobe_ext__counts(k->v[i], &s, &l);
		n += s;
	}
	pthread_mutex_unlock(&k->mu);
	return n;
}

/* Write x's parts and let it go. Under k->mu. */
static void retire(struct cli_xkids *k, struct sprobe_ext *x)
{
	unsigned long long s, l;
	int np = sprobe_ext__finish(x);

	sprobe_ext__counts(x, &s, &l);
	k->samples_done += s;
	k->lost_done += l;
	if (np > 0)
		k->parts += (unsigned)np;
	else if (np < 0) {
		k->errors++;
		fprintf(stderr, "stackprobe record: could not write the kernel's samples: %s\n",
			strerror(-np));
	}
	sprobe_ext__free(x);
}

void cli_xkids__poll(struct cli_xkids *k)
{
	pthread_mutex_lock(&k->mu);
	for (size_t i = k->n; i-- > 0;) {
		sprobe_ext__poll(k->v[i]);
		/* Its processes have ended: free the rings now (a build runs
		 * hundreds of static tools, each with a ring per CPU). */
		if (sprobe_ext__gone(k->v[i])) {
			retire(k, k->v[i]);
			k->v[i] = k->v[--k->n];
		}
	}
	pthread_mutex_unlock(&k->mu);
}

size_t cli_xkids__finish(struct cli_xkids *k, unsigned long long *lost)
{
	if (k->thr_on) {
		(void)!write(k->stop[1], "x", 1);
		pthread_join(k->thr, NULL);
		k->thr_on = false;
	}
	pthread_mutex_lock(&k->mu);
	while (k->n > 0)
		retire(k, k->v[--k->n]);
	*lost = k->lost_done;
	pthread_mutex_unlock(&k->mu);
	return k->parts;
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
