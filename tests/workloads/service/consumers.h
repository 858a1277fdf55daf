/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Part of the service workload (tests/workloads/service.c, which includes it
 * once; its parts are static, as they were in that file).
 * The blocking consumers: poll, epoll_wait, select, read,
 * pthread_cond_wait, a raw futex wait, nanosleep, sigtimedwait, and accept
 * on loopback with its client.
 */
#ifndef SPROBE_SERVICE_CONSUMERS_H
#define SPROBE_SERVICE_CONSUMERS_H

#include "driver.h"

/* ---- the blocking consumers ---------------------------------------------- */

static struct chan ch_poll, ch_epoll, ch_select, ch_read;

static void *poll_thread(void *arg)
{
	for (int i = 0; i < cfg.events; i++) {
		struct pollfd p = { .fd = ch_poll.fds[0], .events = POLLIN };
		for (;;) {
			int r = poll(&p, 1, DEADLINE_S * 1000);
			if (r == 1)
				break;
			if (r < 0 && errno == EINTR) {
				count_eintr(C_POLL);
				continue;
			}
			if (r == 0)
				fail("poll timed out");
			die("poll");
		}
		chan_got(&ch_poll, read_byte(ch_poll.fds[0]));
		ack();
	}
	return NULL;
}

static void *epoll_thread(void *arg)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ch_epoll.fds[0], &ev) < 0)
		die("epoll");
	for (int i = 0; i < cfg.events; i++) {
		struct epoll_event out;
		for (;;) {
			int r = epoll_wait(ep, &out, 1, DEADLINE_S * 1000);
			if (r == 1)
				break;
			if (r < 0 && errno == EINTR) {
				count_eintr(C_EPOLL);
				continue;
			}
			if (r == 0)
				fail("epoll_wait timed out");
			die("epoll_wait");
		}
		chan_got(&ch_epoll, read_byte(ch_epoll.fds[0]));
		ack();
	}
	close(ep);
	return NULL;
}

static void *select_thread(void *arg)
{
	int fd = ch_select.fds[0];
	for (int i = 0; i < cfg.events; i++) {
		for (;;) {
			fd_set rd;
			struct timeval tv = { DEADLINE_S, 0 };
			FD_ZERO(&rd);
			FD_SET(fd, &rd);
			int r = select(fd + 1, &rd, NULL, NULL, &tv);
			if (r == 1)
				break;
			if (r < 0 && errno == EINTR) {
				count_eintr(C_SELECT);
				continue;
			}
			if (r == 0)
				fail("select timed out");
			die("select");
		}
		chan_got(&ch_select, read_byte(fd));
		ack();
	}
	return NULL;
}

static void *read_thread(void *arg)
{
	for (int i = 0; i < cfg.events; i++) {
		chan_got(&ch_read, read_byte(ch_read.fds[0]));
		ack();
	}
	return NULL;
}

/* pthread_cond_wait: POSIX says it never fails with EINTR (a signal may
 * cause a spurious wake-up, which the predicate loop absorbs). */
static pthread_mutex_t cond_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond_cv = PTHREAD_COND_INITIALIZER;
static int cond_posted;
static unsigned long cond_events, cond_wakeups;

static void *cond_thread(void *arg)
{
	int seen = 0;
	pthread_mutex_lock(&cond_mu);
	for (int i = 0; i < cfg.events; i++) {
		while (cond_posted == seen) {
			int r = pthread_cond_wait(&cond_cv, &cond_mu);
			if (r == EINTR)
				count_eintr(C_COND);
			cond_wakeups++;
		}
		seen++;
		cond_events++;
		pthread_mutex_unlock(&cond_mu);
		ack();
		pthread_mutex_lock(&cond_mu);
	}
	pthread_mutex_unlock(&cond_mu);
	return NULL;
}

/* Raw FUTEX_WAIT with a timeout: returns EINTR when a handler runs (the
 * kernel restarts it only without a timeout... and not even then across
 * handlers: see docs/LIMITATIONS.md). */
static _Atomic uint32_t futex_word;
static unsigned long futex_events;

static void *futex_thread(void *arg)
{
	uint32_t seen = 0;
	for (int i = 0; i < cfg.events; i++) {
		uint64_t t0 = mono_ns();
		while (atomic_load(&futex_word) == seen) {
			struct timespec ts = { 1, 0 };
			long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
			if (r < 0 && errno == EINTR)
				count_eintr(C_FUTEX);
			else if (r < 0 && errno != EAGAIN && errno != ETIMEDOUT)
				die("futex");
			if (mono_ns() - t0 > (uint64_t)DEADLINE_S * 1000000000ull)
				fail("futex wait timed out");
		}
		seen++;
		futex_events++;
		ack();
	}
	return NULL;
}

static void futex_post(void)
{
	atomic_fetch_add(&futex_word, 1);
	syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* nanosleep: 200 us each, resumed with the remaining time on EINTR (the
 * documented way); the total is not a result (time is not deterministic),
 * the count is. */
static unsigned long sleeps;
static sem_t sleep_go; /* one post per event, so the thread keeps lock step */

static void *sleep_thread(void *arg)
{
	for (int i = 0; i < cfg.events; i++) {
		while (sem_wait(&sleep_go) != 0) {
			if (errno != EINTR)
				die("sem_wait");
			count_eintr(C_SEM);
		}
		struct timespec req = { 0, 200 * 1000 }, rem;
		while (nanosleep(&req, &rem) != 0) {
			if (errno != EINTR)
				die("nanosleep");
			count_eintr(C_NANOSLEEP);
			req = rem;
		}
		sleeps++;
		ack();
	}
	return NULL;
}

/* sigtimedwait on SIGUSR2 (blocked in this thread, sent by the driver with
 * pthread_kill): interrupted by any other handler with EINTR. */
static pthread_t sigwait_tid;
static unsigned long sigwait_events;

static void *sigwait_thread(void *arg)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	ack(); /* ready: SIGUSR2 is blocked here */
	for (int i = 0; i < cfg.events; i++) {
		struct timespec to = { DEADLINE_S, 0 };
		for (;;) {
			int s = sigtimedwait(&set, NULL, &to);
			if (s == SIGUSR2)
				break;
			if (s < 0 && errno == EINTR) {
				count_eintr(C_SIGTIMEDWAIT);
				continue;
			}
			if (s < 0 && errno == EAGAIN)
				fail("sigtimedwait timed out");
			die("sigtimedwait");
		}
		sigwait_events++;
		ack();
	}
	return NULL;
}

/* ---- accept on loopback, with a client ---------------------------------- */

static int listen_fd;
static struct sockaddr_in listen_addr;
static unsigned long accepted, accept_sum;
static unsigned long connects;

static void *accept_thread(void *arg)
{
	for (int i = 0; i < cfg.events; i++) {
		int c;
		for (;;) {
			c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0)
				break;
			if (errno == EINTR) {
				count_eintr(C_ACCEPT);
				continue;
			}
			die("accept");
		}
		unsigned char b = read_byte(c);
		close(c);
		accepted++;
		accept_sum = accept_sum * 31 + b;
		ack();
	}
	return NULL;
}

/* The client: one connection per event, in a bounded loop. */
static void client_connect(int i)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		die("socket");
	for (int tries = 0;; tries++) {
		if (connect(s, (struct sockaddr *)&listen_addr, sizeof(listen_addr)) == 0)
			break;
		if (errno == EINTR) {
			/* A connect interrupted by a handler goes on in the
			 * background: wait for it with poll (POSIX). */
			count_eintr(C_CONNECT);
			struct pollfd p = { .fd = s, .events = POLLOUT };
			while (poll(&p, 1, DEADLINE_S * 1000) < 0 && errno == EINTR)
				count_eintr(C_POLL);
			int err = 0;
			socklen_t l = sizeof(err);
			getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
			if (err == 0)
				break;
			errno = err;
		}
		if (tries > 100)
			die("connect");
	}
	write_byte(s, ev_byte(i));
	close(s);
	connects++;
}

#endif
