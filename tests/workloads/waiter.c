/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * A program whose threads wait in the calls a signal handler interrupts
 * with EINTR whatever SA_RESTART says (tests/test_eintr.c).
 *
 *   waiter time N MS    one thread per call, each N waits of MS ms with a
 *                       timeout (or, for the calls without one, woken by a
 *                       poster thread every MS ms); prints per call
 *                       "CALL eintr=E ms=T" (T: the thread's total time)
 *   waiter own          the program's own SIGUSR1 (sigaction handler,
 *                       no SA_RESTART), sent with pthread_kill by another
 *                       thread while the waiter waits (5 s timeouts), must
 *                       interrupt every call; prints "CALL own=E ms=T"
 *                       (E: 1 when it returned EINTR; exit 3 when a call
 *                       without a timeout still waits after 8 s) and "readback=ok"
 *                       when sigaction, signal() and sysv_signal() read
 *                       back the program's handler (SA_RESETHAND too)
 *   waiter usleep US    one usleep(US), prints "usleep ms=T"
 * Exit status 0 unless a call failed in an unexpected way.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int n_waits = 20, wait_ms = 20;

/* What sigtimedwait and sigwaitinfo wait for: a real-time signal, so that
 * wakes sent before the waiter took the previous one queue up instead of
 * merging (the capture signal is one from the top of the range). */
#define WAKE_SIG (SIGRTMIN + 1)

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static struct timespec rel(int ms)
{
	return (struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
}

static struct timespec abs_in(clockid_t clk, int ms)
{
	struct timespec t;
	clock_gettime(clk, &t);
	t.tv_nsec += (ms % 1000) * 1000000L;
	t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	return t;
}

/* One call's shared objects: each call's thread has its own. */
struct call {
	const char *name;
	int kind;
	pthread_t th;
	sem_t sem;
	int msq, semid;
	int ep;
	atomic_int entering, done;
	int eintr;
	double ms;
};

enum {
	POLL, PPOLL, SELECT, PSELECT, EPOLL_WAIT, EPOLL_PWAIT, EPOLL_PWAIT2, NANOSLEEP,
	CLOCK_NANOSLEEP, CLOCK_NANOSLEEP_ABS, USLEEP, SEM_TIMEDWAIT, SEM_CLOCKWAIT, SIGTIMEDWAIT,
	SEMTIMEDOP,
	/* no timeout: woken by a poster (time mode) */
	SEM_WAIT, SIGWAITINFO, MSGRCV, SEMOP,
	/* return only on a handler: own mode only */
	PAUSE, SIGSUSPEND, KINDS
};
static const char *const names[KINDS] = {
	"poll", "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait", "epoll_pwait2",
	"nanosleep", "clock_nanosleep", "clock_nanosleep_abs", "usleep", "sem_timedwait",
	"sem_clockwait", "sigtimedwait", "semtimedop", "sem_wait", "sigwaitinfo", "msgrcv",
	"semop", "pause", "sigsuspend",
};

struct msg {
	long type;
	char c;
};

/* One wait of ms in c's call: 0 when it returned as it should (timed out
 * or woken), EINTR, or another errno (a failure). */
static int wait_once(struct call *c, int ms)
{
	struct timespec ts = rel(ms), abs;
	struct epoll_event ev;
	sigset_t wake_set;
	int r = 0;

	sigemptyset(&wake_set);
	sigaddset(&wake_set, WAKE_SIG);
	switch (c->kind) {
	case POLL:
		r = poll(NULL, 0, ms);
		break;
	case PPOLL:
		r = ppoll(NULL, 0, &ts, NULL);
		break;
	case SELECT: {
		struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
		r = select(0, NULL, NULL, NULL, &tv);
		break;
	}
	case PSELECT:
		r = pselect(0, NULL, NULL, NULL, &ts, NULL);
		break;
	case EPOLL_WAIT:
		r = epoll_wait(c->ep, &ev, 1, ms);
		break;
	case EPOLL_PWAIT:
		r = epoll_pwait(c->ep, &ev, 1, ms, NULL);
		break;
	case EPOLL_PWAIT2:
		r = epoll_pwait2(c->ep, &ev, 1, &ts, NULL);
		break;
	case NANOSLEEP:
		r = nanosleep(&ts, NULL);
		break;
	case CLOCK_NANOSLEEP:
		errno = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		r = errno ? -1 : 0;
		break;
	case CLOCK_NANOSLEEP_ABS:
		abs = abs_in(CLOCK_MONOTONIC, ms);
		errno = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, NULL);
		r = errno ? -1 : 0;
		break;
	case USLEEP:
		r = usleep((useconds_t)ms * 1000);
		break;
	case SEM_TIMEDWAIT:
		abs = abs_in(CLOCK_REALTIME, ms);
		r = sem_timedwait(&c->sem, &abs);
		if (r < 0 && errno == ETIMEDOUT)
			r = 0;
		break;
	case SEM_CLOCKWAIT:
		abs = abs_in(CLOCK_MONOTONIC, ms);
		r = sem_clockwait(&c->sem, CLOCK_MONOTONIC, &abs);
		if (r < 0 && errno == ETIMEDOUT)
			r = 0;
		break;
	case SIGTIMEDWAIT:
		r = sigtimedwait(&wake_set, NULL, &ts);
		if (r < 0 && errno == EAGAIN)
			r = 0;
		break;
	case SEMTIMEDOP: {
		struct sembuf op = { .sem_num = 0, .sem_op = -1, .sem_flg = 0 };
		r = semtimedop(c->semid, &op, 1, &ts);
		if (r < 0 && errno == EAGAIN)
			r = 0;
		break;
	}
	case SEM_WAIT:
		r = sem_wait(&c->sem);
		break;
	case SIGWAITINFO:
		r = sigwaitinfo(&wake_set, NULL);
		break;
	case MSGRCV: {
		struct msg m;
		r = (int)msgrcv(c->msq, &m, 1, 0, 0);
		break;
	}
	case SEMOP: {
		struct sembuf op = { .sem_num = 0, .sem_op = -1, .sem_flg = 0 };
		r = semop(c->semid, &op, 1);
		break;
	}
	case PAUSE:
		r = pause();
		break;
	case SIGSUSPEND: {
		sigset_t cur;
		pthread_sigmask(SIG_BLOCK, NULL, &cur);
		r = sigsuspend(&cur);
		break;
	}
	}
	if (r >= 0)
		return 0;
	return errno;
}

/* Wakes a call without a timeout (one wake per wait). */
static void wake(struct call *c)
{
	struct msg m = { .type = 1, .c = 'x' };
	struct sembuf op = { .sem_num = 0, .sem_op = 1, .sem_flg = 0 };

	switch (c->kind) {
	case SEM_WAIT:
		sem_post(&c->sem);
		break;
	case SIGWAITINFO:
		pthread_kill(c->th, WAKE_SIG);
		break;
	case MSGRCV:
		msgsnd(c->msq, &m, 1, 0);
		break;
	case SEMOP:
		semop(c->semid, &op, 1);
		break;
	}
}

static void setup(struct call *c, int kind)
{
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->name = names[kind];
	sem_init(&c->sem, 0, 0);
	c->ep = epoll_create1(0);
	c->msq = msgget(IPC_PRIVATE, 0600);
	c->semid = semget(IPC_PRIVATE, 1, 0600);
	if (c->ep < 0 || c->msq < 0 || c->semid < 0) {
		perror("waiter: setup");
		exit(2);
	}
}

static void teardown(struct call *c)
{
	close(c->ep);
	msgctl(c->msq, IPC_RMID, NULL);
	semctl(c->semid, 0, IPC_RMID);
	sem_destroy(&c->sem);
}

static int failed;

/* Every time thread has taken its start time before the poster's first
 * sleep begins: a thread started late (a loaded machine) would otherwise
 * miss a post and measure one wait short. */
static pthread_barrier_t time_start;

static void *time_thread(void *arg)
{
	struct call *c = arg;
	double t0 = now_ms();

	pthread_barrier_wait(&time_start);

	for (int i = 0; i < n_waits; i++) {
		int err = wait_once(c, wait_ms);
		if (err == EINTR)
			c->eintr++;
		else if (err) {
			fprintf(stderr, "waiter: %s: %s\n", c->name, strerror(err));
			failed = 1;
		}
	}
	c->ms = now_ms() - t0;
	return NULL;
}

/* The poster: wakes each call without a timeout every wait_ms, n_waits
 * times (its own nanosleep is a wrapped call too). */
static void *poster(void *arg)
{
	struct call *calls = arg;
	struct timespec ts = rel(wait_ms);

	pthread_barrier_wait(&time_start);
	for (int i = 0; i < n_waits; i++) {
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		ts = rel(wait_ms);
		for (int k = SEM_WAIT; k <= SEMOP; k++)
			wake(&calls[k]);
	}
	return NULL;
}

static int time_mode(void)
{
	static struct call calls[KINDS];
	pthread_t post;
	sigset_t wake_set;

	/* WAKE_SIG is what sigtimedwait/sigwaitinfo wait for: blocked in every
	 * thread (inherited), so it stays pending for them. */
	sigemptyset(&wake_set);
	sigaddset(&wake_set, WAKE_SIG);
	pthread_sigmask(SIG_BLOCK, &wake_set, NULL);
	for (int k = 0; k < PAUSE; k++)
		setup(&calls[k], k);
	pthread_barrier_init(&time_start, NULL, PAUSE + 1);
	for (int k = 0; k < PAUSE; k++)
		pthread_create(&calls[k].th, NULL, time_thread, &calls[k]);
	pthread_create(&post, NULL, poster, calls);
	for (int k = 0; k < PAUSE; k++) {
		pthread_join(calls[k].th, NULL);
		printf("%s eintr=%d ms=%.1f\n", calls[k].name, calls[k].eintr, calls[k].ms);
	}
	pthread_join(post, NULL);
	for (int k = 0; k < PAUSE; k++)
		teardown(&calls[k]);
	return failed;
}

/* ---- own mode ---------------------------------------------------------- */

static atomic_int usr1_runs;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr1_runs, 1);
}

static atomic_int usr2_runs;

static void on_info(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
}

static void on_usr2(int sig)
{
	(void)sig;
	atomic_fetch_add(&usr2_runs, 1);
}

static void *own_thread(void *arg)
{
	struct call *c = arg;
	double t0 = now_ms();

	atomic_store(&c->entering, 1);
	int err = wait_once(c, 5000);
	c->ms = now_ms() - t0;
	c->eintr = err == EINTR;
	atomic_store(&c->done, 1);
	return NULL;
}

/* The thread's state letter from /proc (S: asleep in the kernel). */
static char task_state(pid_t tid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static atomic_int own_tid;

static void *own_start(void *arg)
{
	atomic_store(&own_tid, (int)syscall(SYS_gettid));
	return own_thread(arg);
}

static int own_mode(void)
{
	struct sigaction sa, back;
	sigset_t wake_set;
	int ok = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1; /* no SA_RESTART, one-argument handler */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	/* Read-back: the program's handler and flags, not a trampoline. */
	if (sigaction(SIGUSR1, NULL, &back) != 0 || back.sa_handler != on_usr1 ||
	    (back.sa_flags & (SA_SIGINFO | SA_RESTART)))
		ok = 0;
	if (signal(SIGUSR1, on_usr1) != on_usr1 || signal(SIGUSR1, on_usr1) != on_usr1)
		ok = 0;
	/* signal() set BSD semantics (SA_RESTART); back to none. */
	sigaction(SIGUSR1, &sa, NULL);
	/* A three-argument handler reads back as given. */
	struct sigaction rs;
	memset(&rs, 0, sizeof(rs));
	rs.sa_sigaction = on_info;
	rs.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR2, &rs, NULL);
	if (sigaction(SIGUSR2, NULL, &back) != 0 || back.sa_sigaction != on_info ||
	    !(back.sa_flags & SA_SIGINFO))
		ok = 0;
	/* A one-argument handler with SA_RESETHAND: read back as given, runs
	 * once, then reads back SIG_DFL without SA_SIGINFO (the kernel reset
	 * it; the flags stay as the program gave them). */
	memset(&rs, 0, sizeof(rs));
	rs.sa_handler = on_usr2;
	rs.sa_flags = SA_RESETHAND;
	sigaction(SIGUSR2, &rs, NULL);
	if (sigaction(SIGUSR2, NULL, &back) != 0 || back.sa_handler != on_usr2 ||
	    (back.sa_flags & SA_SIGINFO) || !(back.sa_flags & SA_RESETHAND))
		ok = 0;
	raise(SIGUSR2);
	if (atomic_load(&usr2_runs) != 1 || sigaction(SIGUSR2, NULL, &back) != 0 ||
	    back.sa_handler != SIG_DFL || (back.sa_flags & SA_SIGINFO))
		ok = 0;
	/* System V signal(): the previous handler as the program gave it. */
	if (sysv_signal(SIGUSR2, on_usr1) != SIG_DFL || sysv_signal(SIGUSR2, SIG_DFL) != on_usr1)
		ok = 0;
	printf("readback=%s\n", ok ? "ok" : "wrong");

	sigemptyset(&wake_set);
	sigaddset(&wake_set, WAKE_SIG);
	pthread_sigmask(SIG_BLOCK, &wake_set, NULL);
	for (int k = 0; k < KINDS; k++) {
		struct call c;
		setup(&c, k);
		atomic_store(&own_tid, 0);
		pthread_create(&c.th, NULL, own_start, &c);
		/* Signal it each time it is seen asleep in the kernel, until its
		 * call returned: a signal that lands before the call only runs
		 * the handler, the next one interrupts the call. */
		double t0 = now_ms();
		while (!atomic_load(&c.done)) {
			int tid = atomic_load(&own_tid);
			/* The calls without a timeout would wait forever if the
			 * signal were resumed: say so and end the process. */
			if (now_ms() - t0 > 8000) {
				printf("%s own=0 ms=never\n", c.name);
				_exit(3);
			}
			if (tid && atomic_load(&c.entering) && task_state(tid) == 'S')
				pthread_kill(c.th, SIGUSR1);
			sched_yield();
		}
		pthread_join(c.th, NULL);
		printf("%s own=%d ms=%.1f\n", c.name, c.eintr, c.ms);
		teardown(&c);
	}
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 4 && strcmp(argv[1], "time") == 0) {
		n_waits = atoi(argv[2]);
		wait_ms = atoi(argv[3]);
		return time_mode();
	}
	if (argc >= 2 && strcmp(argv[1], "own") == 0)
		return own_mode();
	if (argc >= 3 && strcmp(argv[1], "usleep") == 0) {
		double t0 = now_ms();
		usleep((useconds_t)atoi(argv[2]));
		printf("usleep ms=%.1f\n", now_ms() - t0);
		return 0;
	}
	fprintf(stderr, "usage: waiter time N MS | own | usleep US\n");
	return 2;
}
