/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Part of the service workload (tests/workloads/service.c, which includes it
 * once; its parts are static, as they were in that file).
 * The settings, the EINTR accounting, and the lock-step driver: events
 * sent one byte at a time, acknowledged by every consumer.
 */
#ifndef SPROBE_SERVICE_DRIVER_H
#define SPROBE_SERVICE_DRIVER_H

#define DEADLINE_S 60 /* any single wait longer than this is a hang */

struct cfg {
	int rounds;
	double seconds;
	int events, storm, forks, vforks, blocked, dl, mallocs;
	int own_signal;
	const char *dlopen_lib;
	size_t altstack;
};

static struct cfg cfg = {
	.rounds = 1, .events = 200, .storm = 400, .forks = 10, .vforks = 10,
	.blocked = 2, .dl = 0, .mallocs = 20000, .own_signal = 0,
	.dlopen_lib = "libresolv.so.2", .altstack = 0,
};

/* ---- EINTR accounting ------------------------------------------------ */

enum call {
	C_POLL, C_EPOLL, C_SELECT, C_READ, C_FUTEX, C_NANOSLEEP, C_SIGTIMEDWAIT,
	C_ACCEPT, C_CONNECT, C_SEM, C_WAITPID, C_WRITE, C_COND, C__N
};
static const char *const call_name[C__N] = {
	"poll", "epoll_wait", "select", "read", "futex_wait_timeout", "nanosleep",
	"sigtimedwait", "accept", "connect", "sem_wait", "waitpid", "write",
	"pthread_cond_wait",
};
static _Atomic unsigned long eintr[C__N];

static void count_eintr(enum call c)
{
	atomic_fetch_add_explicit(&eintr[c], 1, memory_order_relaxed);
}

static void die(const char *what)
{
	fprintf(stderr, "service: %s: %s\n", what, strerror(errno));
	exit(3);
}

static void fail(const char *what)
{
	fprintf(stderr, "service: FAILED: %s\n", what);
	fflush(stderr);
	exit(3);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- lock-step driver -------------------------------------------------- */

/* Consumers post one ack per event; the driver waits for all of them. */
static sem_t acks;

static void ack(void)
{
	sem_post(&acks);
}

static void wait_acks(int n)
{
	for (int i = 0; i < n; i++) {
		struct timespec dl;
		clock_gettime(CLOCK_REALTIME, &dl);
		dl.tv_sec += DEADLINE_S;
		while (sem_timedwait(&acks, &dl) != 0) {
			if (errno == EINTR) {
				count_eintr(C_SEM);
				continue;
			}
			if (errno == ETIMEDOUT) {
				fprintf(stderr, "service: HANG: an event was not acknowledged in %d s\n",
					DEADLINE_S);
				exit(4);
			}
			die("sem_timedwait");
		}
	}
}

static void write_byte(int fd, unsigned char b)
{
	for (;;) {
		ssize_t w = write(fd, &b, 1);
		if (w == 1)
			return;
		if (w < 0 && errno == EINTR) {
			count_eintr(C_WRITE);
			continue;
		}
		die("write");
	}
}

/* Read exactly one byte, counting EINTR (read on a pipe restarts under
 * SA_RESTART, so the count is expected to stay 0). */
static unsigned char read_byte(int fd)
{
	unsigned char b;
	for (;;) {
		ssize_t r = read(fd, &b, 1);
		if (r == 1)
			return b;
		if (r < 0 && errno == EINTR) {
			count_eintr(C_READ);
			continue;
		}
		if (r < 0 && errno == EAGAIN)
			continue; /* a readiness call said yes; another read will */
		die("read");
	}
}

struct chan {
	int fds[2];
	unsigned long events, sum;
};

/* The byte of event i: every value, in an order that catches a lost or
 * duplicated byte in the sum. */
static unsigned char ev_byte(int i)
{
	return (unsigned char)(i * 37 + 11);
}

static void chan_got(struct chan *c, unsigned char b)
{
	c->events++;
	c->sum = c->sum * 31 + b;
}

#endif
