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

#include "service/driver.h"
#include "service/consumers.h"
#include "service/stress.h"

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
