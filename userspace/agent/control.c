/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The agent's control channel: `stackprobe record -p PID` asks a running
 * service for a recording (docs/AGENT.md "On demand").
 *
 * The channel is a Unix stream socket in the abstract namespace,
 * "\0stackprobe-ctl-PID". An abstract name has no file: nothing is left
 * behind when the process dies (killed, or exec'd: the socket is
 * close-on-exec), so there is no stale socket to find or remove, and the
 * name cannot be taken over by a file someone else created. It has no
 * permission bits either, so every connection is checked with
 * SO_PEERCRED: only the service's own effective uid and root are served;
 * any other uid gets "refused" and is closed. (A limitation: abstract
 * names are per network namespace; a client in another one cannot reach
 * it, docs/LIMITATIONS.md.)
 *
 * One thread (sprobe-ctl) serves it. It blocks every signal, so the
 * program's process-directed signals never land on it, and is left out of
 * every capture (sprobe_sampler_opts.exclude_tid). Idle, it sleeps in
 * poll() without a timeout: no wake-up, no CPU, no signal (measured in
 * docs/PERFORMANCE.md "On demand"). Its descriptors go through the
 * registry (userspace/common/fds.h): the listening socket and the one
 * client being served are KEEP descriptors at the top of the range,
 * close-on-exec; replies to a client turned away use a transient one.
 * Because a number can move under it (the program's dup2 onto ours), the
 * thread polls an unpinned number and takes the current one again after
 * each wake-up; all sockets are non-blocking, so a wake-up on a number
 * that moved costs one EAGAIN.
 *
 * The protocol: text lines.
 *   client: "start 1 FREQ MODE SECONDS DIR\n"   (DIR: absolute, to the end)
 *   agent:  "ok PID EXEC\n"  the part is DIR/PID.EXEC.part
 *           "busy\n"         a recording runs for another client
 *           "refused UID\n"  not the service's uid, nor root
 *           "error ERRNO TEXT\n"
 *   client: "stop\n" (or closes the socket, or dies: the same)
 *   agent:  "done ERRNO\n"   the part is finished (trailer written), and
 *                            the agent is idle again
 * Bounded: a client that sends no request within CONTROL_REQUEST_MS is
 * dropped; a recording ends by itself SECONDS + CONTROL_GRACE_S after it
 * started even if its client neither stops it nor goes away.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <stackprobe/sampler.h>

#include "userspace/agent/agent_internal.h"
#include "userspace/common/clock.h"
#include "userspace/common/ctl_line.h"
#include "userspace/common/fds.h"

#define CONTROL_REQUEST_MS 5000
#define CONTROL_GRACE_S 10
#define CONTROL_MAX_SECONDS (7 * 24 * 3600)

static pid_t control_tid;
static int listen_h = -1;
static sem_t control_ready;

pid_t sprobe_agent__control_tid(void)
{
	return __atomic_load_n(&control_tid, __ATOMIC_RELAXED);
}

/* The abstract address of pid's channel; returns its length. */
static socklen_t control_addr(pid_t pid, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "stackprobe-ctl-%d", (int)pid);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* Write all of s to fd (non-blocking: a client that does not read a
 * line this short has gone wrong; it is not waited for). */
static void reply(int fd, const char *s)
{
	(void)!send(fd, s, strlen(s), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The client's line (h: its registry handle), through the shared reader. */
static int ctl_get(void *h)
{
	return sprobe_fd__get(*(int *)h);
}

static void ctl_put(void *h)
{
	sprobe_fd__put(*(int *)h);
}

static int read_line(int h, char *buf, size_t cap, int ms)
{
	struct sprobe_ctl_sock s = { ctl_get, ctl_put, &h };

	return sprobe_ctl__read_line(&s, buf, cap, ms);
}

/* Is the peer on fd the service's uid or root? Fills *uid. */
static bool peer_allowed(int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return false;
	*uid = cr.uid;
	return cr.uid == geteuid() || cr.uid == 0;
}

/* The recording being served: its client (a handle), when it must end. */
struct session {
	int client_h;
	bool recording;
	uint64_t deadline_ns;
};

static void session_end(struct session *ss, bool tell)
{
	char line[48] = "done 0\n";

	if (ss->recording) {
		int err = sprobe_agent__ondemand_stop();
		ss->recording = false;
		snprintf(line, sizeof(line), "done %d\n", err == -ESRCH ? 0 : -err);
	}
	if (ss->client_h >= 0) {
		int fd = sprobe_fd__get(ss->client_h);
		if (fd >= 0) {
			if (tell)
				reply(fd, line);
			sprobe_fd__put(ss->client_h);
		}
		sprobe_fd__close(ss->client_h);
		ss->client_h = -1;
	}
}

/* Parse "start 1 FREQ MODE SECONDS DIR" and start. Replies either way. */
static void session_start(struct session *ss, char *req)
{
	char mode[8], line[PATH_MAX + 64];
	double freq = 0, secs = 0;
	int off = 0, v = 0, m;
	int fd;

	if (sscanf(req, "start %d %lf %7s %lf %n", &v, &freq, mode, &secs, &off) < 4 || v != 1 ||
	    !off || req[off] != '/' || !(freq >= 1 && freq <= 10000) ||
	    !(secs > 0 && secs <= CONTROL_MAX_SECONDS) || (m = sprobe_sampler_mode__parse(mode)) < 0) {
		snprintf(line, sizeof(line), "error %d malformed request\n", EINVAL);
	} else {
		unsigned exec = 0;
		int err = sprobe_agent__ondemand_start(req + off, freq, (uint32_t)m, &exec);
		if (err) {
			snprintf(line, sizeof(line), "error %d %s\n", -err, strerror(-err));
		} else {
			ss->recording = true;
			ss->deadline_ns = sprobe_mono_ns() +
					  (uint64_t)((secs + CONTROL_GRACE_S) * 1e9);
			snprintf(line, sizeof(line), "ok %d %u\n", (int)getpid(), exec);
		}
	}
	fd = sprobe_fd__get(ss->client_h);
	if (fd >= 0) {
		reply(fd, line);
		sprobe_fd__put(ss->client_h);
	}
	if (!ss->recording) {
		sprobe_fd__close(ss->client_h);
		ss->client_h = -1;
	}
}

/* A connection is waiting: serve it, or turn it away. */
static void accept_one(struct session *ss)
{
	int lfd = sprobe_fd__get(listen_h);
	if (lfd < 0)
		return;
	/* In an allocation section: the program's close wrappers cannot
	 * close the number between accept and its registration. */
	sprobe_fd__alloc_begin();
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	sprobe_fd__put(listen_h);
	if (fd < 0) {
		sprobe_fd__alloc_end();
		return;
	}
	uid_t uid = 0;
	char line[PATH_MAX + 64];
	bool allowed = peer_allowed(fd, &uid);
	if (!allowed || ss->client_h >= 0) {
		/* Another uid learns nothing, not even that a recording runs. */
		if (!allowed) {
			snprintf(line, sizeof(line), "refused %u\n", (unsigned)uid);
			reply(fd, line);
		} else {
			reply(fd, "busy\n");
		}
		close(fd);
		sprobe_fd__alloc_end();
		return;
	}
	ss->client_h = sprobe_fd__adopt(fd, SPROBE_FD_KEEP);
	sprobe_fd__alloc_end();
	if (ss->client_h < 0)
		return;
	int n = read_line(ss->client_h, line, sizeof(line), CONTROL_REQUEST_MS);
	if (n <= 0) {
		sprobe_fd__close(ss->client_h);
		ss->client_h = -1;
		return;
	}
	session_start(ss, line);
}

/* The client wrote or went away: "stop", or end of file, or an error. */
static void client_event(struct session *ss)
{
	char buf[64];
	int fd = sprobe_fd__get(ss->client_h);
	if (fd < 0) {
		session_end(ss, false);
		return;
	}
	ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	int e = errno;
	sprobe_fd__put(ss->client_h);
	if (r < 0 && (e == EAGAIN || e == EINTR))
		return;
	/* Anything the client sends is "stop"; nothing (EOF, reset) is
	 * a client that died: the recording ends either way. */
	session_end(ss, r > 0);
}

static void *control_main(void *arg)
{
	struct session ss = { .client_h = -1 };

	(void)arg;
	__atomic_store_n(&control_tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELAXED);
	sem_post(&control_ready);
	for (;;) {
		struct pollfd p[2];
		int n = 0, timeout = -1;

		p[n++] = (struct pollfd){ .fd = sprobe_fd__get(listen_h), .events = POLLIN };
		sprobe_fd__put(listen_h);
		if (p[0].fd < 0)
			return NULL; /* given up (the program dup2'd over it, nowhere to move) */
		if (ss.client_h >= 0) {
			p[n++] = (struct pollfd){ .fd = sprobe_fd__get(ss.client_h), .events = POLLIN };
			sprobe_fd__put(ss.client_h);
			if (p[1].fd < 0) {
				session_end(&ss, false);
				continue;
			}
		}
		if (ss.recording) {
			uint64_t now = sprobe_mono_ns();
			if (now >= ss.deadline_ns) {
				session_end(&ss, true);
				continue;
			}
			timeout = (int)((ss.deadline_ns - now) / 1000000ull) + 1;
		}
		if (poll(p, (nfds_t)n, timeout) < 0)
			continue;
		if (n == 2 && p[1].revents)
			client_event(&ss);
		if (p[0].revents & POLLIN)
			accept_one(&ss);
	}
	return NULL;
}

/* A forked child (no exec) has no control thread: close its copies of
 * the listening socket (a connection must never wait in a backlog nobody
 * accepts from) and of the client being served (whose end must see the
 * connection close when the service goes away, not when its last forked
 * child does), with every other descriptor the parent's agent held (a
 * recording's part): the registry's fork reset. Idempotent, so the tree
 * handler (process_wrappers.c) may run it again. */
static void control_atfork_child(void)
{
	__atomic_store_n(&control_tid, 0, __ATOMIC_RELAXED);
	sprobe_fd__atfork_child();
	listen_h = -1;
}

int sprobe_agent__control_start(bool quiet)
{
	struct sockaddr_un a;
	socklen_t alen = control_addr(getpid(), &a);
	int err = 0;

	sprobe_fd__alloc_begin();
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, alen) != 0 || listen(fd, 4) != 0)
		err = -errno;
	if (err && fd >= 0)
		close(fd);
	if (!err) {
		listen_h = sprobe_fd__adopt(fd, SPROBE_FD_KEEP);
		if (listen_h < 0)
			err = listen_h;
	}
	sprobe_fd__alloc_end();
	if (err) {
		if (!quiet)
			fprintf(stderr, "stackprobe agent: no control channel (%s): `stackprobe "
					"record -p %d` will not reach this process\n",
				strerror(-err), (int)getpid());
		return err;
	}
	sigset_t all, old;
	pthread_attr_t at;
	pthread_t t;
	sem_init(&control_ready, 0, 0);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_attr_init(&at);
	if (!err) {
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		/* Starting and stopping a sampler runs here (its setup, the
		 * symbols written at the end): a stack of ordinary size,
		 * resident only as far as it is used. */
		pthread_attr_setstacksize(&at, 1024 * 1024);
		err = pthread_create(&t, &at, control_main, NULL);
		pthread_attr_destroy(&at);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		sprobe_fd__close(listen_h);
		listen_h = -1;
		return -err;
	}
	pthread_setname_np(t, "sprobe-ctl");
	/* Its tid is what the samplers leave out: wait until it is known. */
	while (sem_wait(&control_ready) != 0 && errno == EINTR)
		;
	pthread_atfork(NULL, NULL, control_atfork_child);
	return 0;
}
