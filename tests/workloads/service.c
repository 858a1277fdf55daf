/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program that behaves like a real service, for tests/test_failure_modes.c
 * and `make soak`: threads blocked in poll, epoll_wait, select, read,
 * pthread_cond_wait, a raw futex wait with a timeout, nanosleep,
 * sigtimedwait and accept on 127.0.0.1 (with a client connecting in a
 * bounded loop); vfork + exec; fork without exec; a thread-creation storm;
 * threads that block every signal; a thread whose signal handler runs on a
 * small sigaltstack; threads hammering malloc/free; dlopen/dlclose and
 * dl_iterate_phdr in loops.
 *
 * Every part does a fixed amount of work driven by the main thread in lock
 * step (event i is sent, then every consumer acknowledges it), so its
 * results are the same on every run: stdout carries only those results,
 * one "name value" line each, and must be byte-identical with and without
 * a profiler. stderr carries what may legitimately differ: "eintr CALL N"
 * (how often CALL failed with EINTR and was retried), "tid blocked N"
 * (threads that block every signal, for the drop check) and "info ...".
 *
 *   service [--rounds N] [--seconds S] [--events N] [--storm N] [--forks N]
 *           [--vforks N] [--blocked N] [--dl N] [--malloc N]
 *           [--own-signal SIG] [--dlopen LIB] [--altstack BYTES]
 *
 * --seconds S repeats whole rounds until S seconds have passed (at least
 * one); the results printed are those of every round, which must all be
 * equal. --own-signal SIG installs, in main(), a handler for SIG and sends
 * SIG to itself (raise) once per event: the count the handler sees is a result.
 * Exit status: 0, or 3 when a part saw something impossible (a wrong byte,
 * a lost event); it never hangs: every wait has a deadline (exit 4).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* ---- sigaltstack ------------------------------------------------------------ */

static pthread_t alt_tid;
static _Atomic unsigned long alt_handled;
static _Atomic unsigned long alt_on_stack;
static _Atomic int alt_ready;

static void alt_handler(int sig)
{
	stack_t ss;
	volatile char pad[512]; /* uses a little of the alternate stack */
	for (size_t i = 0; i < sizeof(pad); i++)
		pad[i] = (char)i;
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK))
		atomic_fetch_add(&alt_on_stack, 1);
	atomic_fetch_add(&alt_handled, 1);
	(void)pad[7];
}

static void *alt_thread(void *arg)
{
	size_t sz = cfg.altstack;
	stack_t ss = { .ss_sp = malloc(sz), .ss_size = sz, .ss_flags = 0 };
	if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0)
		die("sigaltstack");
	atomic_store(&alt_ready, 1);
	ack();
	/* Wait on a pipe like any worker; SIGUSR1 arrives here (handler on
	 * the alternate stack). */
	int fd = *(int *)arg;
	unsigned char b = read_byte(fd);
	(void)b;
	stack_t off = { .ss_flags = SS_DISABLE };
	sigaltstack(&off, NULL);
	free(ss.ss_sp);
	return NULL;
}

/* ---- threads that block every signal ---------------------------------------- */

static int blocked_pipe[2];

/* Created with every signal blocked (main blocks them around
 * pthread_create, as xz does), which the agent undoes for the capture
 * signal so such threads are sampled (userspace/agent/thread_wrappers.c).
 * So each blocks every signal again first thing, with the raw system call
 * no wrapper sees: from then on no capture signal can reach it, and the
 * test expects it dropped as "blocked" in every capture (a capture may
 * still sample it in the moment before that call). */
static void *blocked_thread(void *arg)
{
	sigset_t all;

	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
	fprintf(stderr, "tid blocked %ld\n", (long)syscall(SYS_gettid));
	ack();
	read_byte(blocked_pipe[0]);
	return NULL;
}

/* ---- thread storm -------------------------------------------------------------- */

static void *storm_child(void *arg)
{
	uintptr_t v = (uintptr_t)arg;
	return (void *)(v * v + 1);
}

static unsigned long storm_sum, storm_count;

static void *storm_thread(void *arg)
{
	for (int i = 0; i < cfg.storm; i += 4) {
		pthread_t t[4];
		int n = 0;
		for (int k = 0; k < 4 && i + k < cfg.storm; k++, n++) {
			int e;
			while ((e = pthread_create(&t[k], NULL, storm_child,
						   (void *)(uintptr_t)(i + k))) == EAGAIN)
				sched_yield();
			if (e) {
				errno = e;
				die("pthread_create");
			}
		}
		for (int k = 0; k < n; k++) {
			void *r;
			pthread_join(t[k], &r);
			storm_sum += (uintptr_t)r;
			storm_count++;
		}
	}
	return NULL;
}

/* ---- malloc hammer ---------------------------------------------------------------- */

static void *malloc_thread(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1, sum = 0;
	void *keep[64] = { 0 };
	for (int i = 0; i < cfg.mallocs; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t sz = 16 + (x % 4096);
		int k = (int)(x >> 40) % 64;
		free(keep[k]);
		unsigned char *p = malloc(sz);
		if (!p)
			die("malloc");
		memset(p, (int)(x & 0xff), sz);
		sum += p[sz - 1] + sz;
		keep[k] = p;
	}
	for (int k = 0; k < 64; k++)
		free(keep[k]);
	return (void *)(uintptr_t)sum;
}

/* ---- dlopen / dlclose and dl_iterate_phdr ----------------------------------- */

static unsigned long dl_loaded, dl_found;

static void *dl_thread(void *arg)
{
	for (int i = 0; i < cfg.dl; i++) {
		void *h = dlopen(cfg.dlopen_lib, RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			fprintf(stderr, "service: dlopen %s: %s\n", cfg.dlopen_lib, dlerror());
			exit(3);
		}
		dl_loaded++;
		dlclose(h);
	}
	return NULL;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(*(unsigned long *)data)++;
	return 0;
}

static void *phdr_thread(void *arg)
{
	for (int i = 0; i < cfg.dl * 4; i++) {
		unsigned long n = 0;
		dl_iterate_phdr(phdr_cb, &n);
		if (n > 0)
			dl_found++;
	}
	return NULL;
}

/* ---- the application's own signal ----------------------------------------------- */

static _Atomic unsigned long own_seen, own_foreign;

static void own_handler(int sig, siginfo_t *si, void *uc)
{
	/* Only our own pthread_kill()s (SI_TKILL) are the program's events;
	 * anything else would be someone else's signal hitting our handler. */
	if (si->si_code == SI_TKILL && si->si_pid == getpid())
		atomic_fetch_add(&own_seen, 1);
	else
		atomic_fetch_add(&own_foreign, 1);
}

/* ---- fork / vfork ---------------------------------------------------------------- */

static int wait_child(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno == EINTR) {
			count_eintr(C_WAITPID);
			continue;
		}
		die("waitpid");
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static unsigned long fork_sum, vfork_sum;

static void do_forks(void)
{
	for (int i = 0; i < cfg.forks; i++) {
		pid_t p = fork();
		if (p < 0)
			die("fork");
		if (p == 0) {
			/* The child does a little work and exits normally, so
			 * exit handlers (the agent's) run in it. */
			unsigned long s = 0;
			for (int k = 0; k < 10000; k++)
				s += (unsigned long)k * (unsigned long)(i + 1);
			exit((int)((s >> 3) % 97));
		}
		fork_sum += (unsigned long)wait_child(p);
	}
	for (int i = 0; i < cfg.vforks; i++) {
		char code[16];
		snprintf(code, sizeof(code), "exit %d", i % 7);
		pid_t p = vfork();
		if (p < 0)
			die("vfork");
		if (p == 0) {
			execl("/bin/sh", "sh", "-c", code, (char *)NULL);
			_exit(127);
		}
		vfork_sum = vfork_sum * 7 + (unsigned long)wait_child(p);
	}
}

/* ---- one round ------------------------------------------------------------------------ */

struct results {
	char text[4096];
};

static void run_round(struct results *res)
{
	pthread_t th[32];
	int nth = 0;
	int alt_pipe[2];
	struct chan *chans[] = { &ch_poll, &ch_epoll, &ch_select, &ch_read };

	for (size_t i = 0; i < 4; i++) {
		memset(chans[i], 0, sizeof(*chans[i]));
		if (pipe2(chans[i]->fds, O_CLOEXEC) < 0)
			die("pipe");
	}
	/* Readiness-driven consumers read from non-blocking ends (a wake-up
	 * without data must not block them in read). */
	fcntl(ch_poll.fds[0], F_SETFL, O_NONBLOCK);
	fcntl(ch_epoll.fds[0], F_SETFL, O_NONBLOCK);
	fcntl(ch_select.fds[0], F_SETFL, O_NONBLOCK);
	cond_posted = 0;
	cond_events = cond_wakeups = 0;
	atomic_store(&futex_word, 0);
	futex_events = sleeps = sigwait_events = 0;
	accepted = accept_sum = connects = 0;
	storm_sum = storm_count = 0;
	dl_loaded = dl_found = 0;
	fork_sum = vfork_sum = 0;
	atomic_store(&alt_handled, 0);
	atomic_store(&alt_on_stack, 0);
	atomic_store(&own_seen, 0);
	atomic_store(&own_foreign, 0);
	if (pipe2(alt_pipe, O_CLOEXEC) < 0 || pipe2(blocked_pipe, O_CLOEXEC) < 0)
		die("pipe");

	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(&listen_addr, 0, sizeof(listen_addr));
	listen_addr.sin_family = AF_INET;
	listen_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof(listen_addr);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&listen_addr, al) < 0 ||
	    listen(listen_fd, 64) < 0 ||
	    getsockname(listen_fd, (struct sockaddr *)&listen_addr, &al) < 0)
		die("listen");

	/* Threads that must be ready before the driver starts. */
	int ready = 0;
	pthread_create(&sigwait_tid, NULL, sigwait_thread, NULL);
	th[nth++] = sigwait_tid;
	ready++;
	if (cfg.altstack) {
		pthread_create(&alt_tid, NULL, alt_thread, &alt_pipe[0]);
		th[nth++] = alt_tid;
		ready++;
	}
	if (cfg.blocked) {
		sigset_t all, old;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		for (int i = 0; i < cfg.blocked; i++) {
			pthread_create(&th[nth++], NULL, blocked_thread, NULL);
			ready++;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	wait_acks(ready);

	void *(*consumers[])(void *) = { poll_thread, epoll_thread, select_thread, read_thread,
					 cond_thread, futex_thread, sleep_thread, accept_thread };
	int ncons = (int)(sizeof(consumers) / sizeof(consumers[0]));
	for (int i = 0; i < ncons; i++)
		pthread_create(&th[nth++], NULL, consumers[i], NULL);
	/* Background load that runs alongside the lock-step events. */
	pthread_t bg[6];
	void *(*bg_fn[6])(void *) = { storm_thread, malloc_thread, malloc_thread, dl_thread,
				      phdr_thread };
	int nbg = cfg.dl ? 5 : 3;
	for (int i = 0; i < nbg; i++)
		pthread_create(&bg[i], NULL, bg_fn[i], (void *)(uintptr_t)i);

	/* The driver: event i to every consumer, then wait for every ack.
	 * The sigwait thread counts too. */
	for (int i = 0; i < cfg.events; i++) {
		unsigned char b = ev_byte(i);
		for (size_t c = 0; c < 4; c++)
			write_byte(chans[c]->fds[1], b);
		pthread_mutex_lock(&cond_mu);
		cond_posted++;
		pthread_cond_signal(&cond_cv);
		pthread_mutex_unlock(&cond_mu);
		futex_post();
		sem_post(&sleep_go);
		pthread_kill(sigwait_tid, SIGUSR2);
		client_connect(i);
		if (cfg.altstack)
			pthread_kill(alt_tid, SIGUSR1);
		if (cfg.own_signal)
			raise(cfg.own_signal); /* handled before raise returns */
		wait_acks(ncons + 1);
		/* The sigaltstack thread: wait (bounded) until it handled it. */
		uint64_t t0 = mono_ns();
		while (cfg.altstack && atomic_load(&alt_handled) < (unsigned long)i + 1) {
			if (mono_ns() - t0 > (uint64_t)DEADLINE_S * 1000000000ull)
				fail("SIGUSR1 on the sigaltstack thread was not handled");
			sched_yield();
		}
		t0 = mono_ns();
		while (cfg.own_signal && atomic_load(&own_seen) < (unsigned long)i + 1) {
			if (mono_ns() - t0 > (uint64_t)DEADLINE_S * 1000000000ull)
				fail("the program's own signal was not handled");
			sched_yield();
		}
	}
	for (int i = 0; i < nbg; i++) {
		void *r;
		pthread_join(bg[i], &r);
		if (bg_fn[i] == malloc_thread) {
			char line[64];
			snprintf(line, sizeof(line), "malloc%d.sum %lu\n", i,
				 (unsigned long)(uintptr_t)r);
			strcat(res->text, line);
		}
	}
	/* fork after the background threads are joined: a child of a
	 * multi-threaded parent that calls exit() deadlocks on glibc's
	 * __exit_funcs_lock if another thread was in dlclose() at fork time
	 * (seen here; the program's own bug, not the profiler's). What still
	 * runs now is the parked threads and, when sampled, stackprobe's. */
	do_forks();
	/* Release the parked threads. */
	write_byte(alt_pipe[1], 1);
	for (int i = 0; i < cfg.blocked; i++)
		write_byte(blocked_pipe[1], 1);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);

	char *o = res->text + strlen(res->text);
	size_t left = sizeof(res->text) - (size_t)(o - res->text);
	int w = snprintf(o, left,
		"poll.events %lu\npoll.sum %lu\nepoll.events %lu\nepoll.sum %lu\n"
		"select.events %lu\nselect.sum %lu\nread.events %lu\nread.sum %lu\n"
		"cond.events %lu\nfutex.events %lu\nnanosleep.count %lu\nsigtimedwait.events %lu\n"
		"accept.count %lu\naccept.sum %lu\nconnect.count %lu\n"
		"storm.threads %lu\nstorm.sum %lu\nfork.sum %lu\nvfork.sum %lu\n"
		"dlopen.count %lu\ndl_iterate_phdr.count %lu\n",
		ch_poll.events, ch_poll.sum, ch_epoll.events, ch_epoll.sum, ch_select.events,
		ch_select.sum, ch_read.events, ch_read.sum, cond_events, futex_events, sleeps,
		sigwait_events, accepted, accept_sum, connects, storm_count, storm_sum, fork_sum,
		vfork_sum, dl_loaded, dl_found);
	o += w;
	left -= (size_t)w;
	if (cfg.altstack)
		o += snprintf(o, left, "altstack.handled %lu\naltstack.on_stack %lu\n",
			      atomic_load(&alt_handled), atomic_load(&alt_on_stack));
	if (cfg.own_signal)
		snprintf(o, sizeof(res->text) - (size_t)(o - res->text),
			 "own_signal.seen %lu\nown_signal.foreign %lu\n", atomic_load(&own_seen),
			 atomic_load(&own_foreign));

	for (size_t i = 0; i < 4; i++) {
		close(chans[i]->fds[0]);
		close(chans[i]->fds[1]);
	}
	close(alt_pipe[0]);
	close(alt_pipe[1]);
	close(blocked_pipe[0]);
	close(blocked_pipe[1]);
	close(listen_fd);
}

static int parse_int(const char *s, int lo, int hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "service: bad number %s\n", s);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "service: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--rounds"))
			cfg.rounds = parse_int(v, 1, 1000000);
		else if (!strcmp(a, "--seconds"))
			cfg.seconds = parse_int(v, 0, 1000000);
		else if (!strcmp(a, "--events"))
			cfg.events = parse_int(v, 1, 1000000);
		else if (!strcmp(a, "--storm"))
			cfg.storm = parse_int(v, 0, 1000000);
		else if (!strcmp(a, "--forks"))
			cfg.forks = parse_int(v, 0, 100000);
		else if (!strcmp(a, "--vforks"))
			cfg.vforks = parse_int(v, 0, 100000);
		else if (!strcmp(a, "--blocked"))
			cfg.blocked = parse_int(v, 0, 16);
		else if (!strcmp(a, "--dl"))
			cfg.dl = parse_int(v, 0, 1000000);
		else if (!strcmp(a, "--malloc"))
			cfg.mallocs = parse_int(v, 0, 100000000);
		else if (!strcmp(a, "--own-signal"))
			cfg.own_signal = parse_int(v, 1, 64);
		else if (!strcmp(a, "--dlopen"))
			cfg.dlopen_lib = v;
		else if (!strcmp(a, "--altstack"))
			cfg.altstack = (size_t)parse_int(v, 0, 1 << 24);
		else {
			fprintf(stderr, "service: unknown option %s\n", a);
			return 2;
		}
	}
	if (sem_init(&acks, 0, 0) != 0 || sem_init(&sleep_go, 0, 0) != 0)
		die("sem_init");

	/* Handlers the program owns. SA_RESTART everywhere, as a careful
	 * service would: what still fails with EINTR is what SA_RESTART
	 * cannot restart. */
	struct sigaction sa = { 0 };
	sa.sa_handler = alt_handler;
	sa.sa_flags = SA_ONSTACK | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	if (cfg.own_signal) {
		struct sigaction os = { 0 };
		os.sa_sigaction = own_handler;
		os.sa_flags = SA_SIGINFO | SA_RESTART;
		sigemptyset(&os.sa_mask);
		if (sigaction(cfg.own_signal, &os, NULL) != 0)
			die("sigaction");
	}

	uint64_t start = mono_ns();
	struct results first, cur;
	int rounds = 0, mismatches = 0;
	do {
		memset(&cur, 0, sizeof(cur));
		run_round(&cur);
		if (rounds == 0)
			first = cur;
		else if (strcmp(first.text, cur.text) != 0) {
			mismatches++;
			fprintf(stderr, "service: round %d differs from round 1:\n%s", rounds + 1, cur.text);
		}
		rounds++;
	} while (rounds < cfg.rounds ||
		 (cfg.seconds > 0 && (double)(mono_ns() - start) / 1e9 < cfg.seconds));

	fputs(first.text, stdout);
	printf("rounds.mismatched %d\n", mismatches);
	fflush(stdout);
	for (int c = 0; c < C__N; c++)
		fprintf(stderr, "eintr %s %lu\n", call_name[c], atomic_load(&eintr[c]));
	fprintf(stderr, "info rounds %d\n", rounds);
	return mismatches ? 3 : 0;
}
