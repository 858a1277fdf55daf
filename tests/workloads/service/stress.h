/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Part of the service workload (tests/workloads/service.c, which includes it
 * once; its parts are static, as they were in that file).
 * The parts that stress a sampler: a handler on a small sigaltstack,
 * threads that block every signal, a thread storm, a malloc hammer,
 * dlopen/dlclose and dl_iterate_phdr loops, the application's own signal,
 * fork and vfork.
 */
#ifndef SPROBE_SERVICE_STRESS_H
#define SPROBE_SERVICE_STRESS_H

#include "driver.h"

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

#endif
