/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared by the unwind tests (test_unwind.c, test_unwind_limits.c): workers
 * parked in known places and the capture + unwind helpers. The workers'
 * functions are global so their names are in .symtab as written: include
 * this header from one source file of a program only.
 */
#ifndef SPROBE_UNWIND_FIXTURE_H
#define SPROBE_UNWIND_FIXTURE_H

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ucontext.h>

#include <stackprobe/capture.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "sprobe_test.h"

/* ---- workers parked in known places ---- */

enum park {
	PARK_KNOWN,	/* spin in unw_marker <- unw_caller <- unw_grandcaller */
	PARK_READ,	/* blocked in read(2) */
	PARK_FUTEX,	/* blocked in pthread_cond_wait (futex wait) */
	PARK_SLEEP,	/* blocked in nanosleep */
	PARK_LIB,	/* spin in a callback called from the test library */
	PARK_NOCFI,	/* spin under an assembly trampoline without CFI */
	PARK_DEEP,	/* spin under `depth` recursive frames */
	PARK_SIGNAL,	/* spin in a signal handler that interrupted a loop */
};

struct parked {
	pthread_t th;
	enum park mode;
	int depth;
	int pipefd[2];
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int (*lib_call)(int (*)(void *), void *);
	_Atomic pid_t tid;
	_Atomic int ready;
	_Atomic int stop;
};

volatile int unw_sink;

/* Prototypes: these are global so their names are in .symtab as written. */
void unw_marker(struct parked *p);
int unw_caller(struct parked *p);
int unw_grandcaller(struct parked *p);
int unw_lib_callback(void *arg);
int unw_nocfi_caller(struct parked *p);
int unw_recurse(struct parked *p, int n);
int unw_blocked_read(struct parked *p);
int unw_blocked_futex(struct parked *p);
int unw_blocked_sleep(struct parked *p);
int unw_nocfi_trampoline(struct parked *p, void (*fn)(struct parked *));
void unw_sig_victim(struct parked *p);
void unw_sig_handler(int sig, siginfo_t *si, void *uc);

/* The worker a SIGUSR2 handler parks (one at a time: a test global). */
static struct parked *sig_parked;

__attribute__((noinline)) void unw_marker(struct parked *p)
{
	atomic_store_explicit(&p->ready, 1, memory_order_release);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed))
		;
}

/* The stores after each call keep the calls from becoming tail jumps, so
 * the callers are real frames. */
__attribute__((noinline)) int unw_caller(struct parked *p)
{
	unw_marker(p);
	unw_sink += 1;
	return unw_sink;
}

__attribute__((noinline)) int unw_grandcaller(struct parked *p)
{
	int r = unw_caller(p);

	unw_sink += r;
	return r + 1;
}

__attribute__((noinline)) int unw_lib_callback(void *arg)
{
	unw_marker(arg);
	unw_sink += 2;
	return unw_sink;
}

/* Frame pointer set up, no CFI at all: the DWARF walk must hand over to
 * frame pointers here. */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl unw_nocfi_trampoline\n"
	".type unw_nocfi_trampoline, @function\n"
	"unw_nocfi_trampoline:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	call *%rsi\n"
	"	pop %rbp\n"
	"	ret\n"
	".size unw_nocfi_trampoline, .-unw_nocfi_trampoline\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl unw_nocfi_trampoline\n"
	".type unw_nocfi_trampoline, %function\n"
	"unw_nocfi_trampoline:\n"
	"	stp x29, x30, [sp, #-16]!\n"
	"	mov x29, sp\n"
	"	blr x1\n"
	"	ldp x29, x30, [sp], #16\n"
	"	ret\n"
	".size unw_nocfi_trampoline, .-unw_nocfi_trampoline\n");
#endif

__attribute__((noinline)) int unw_nocfi_caller(struct parked *p)
{
	int r = unw_nocfi_trampoline(p, unw_marker);

	unw_sink += 3;
	return r + unw_sink;
}

__attribute__((noinline)) int unw_recurse(struct parked *p, int n)
{
	volatile char pad[48];

	pad[n % 48] = (char)n;
	if (n > 0) {
		int r = unw_recurse(p, n - 1);

		return r + pad[n % 48];
	}
	unw_marker(p);
	return pad[0];
}

__attribute__((noinline)) int unw_blocked_read(struct parked *p)
{
	char c;

	atomic_store(&p->ready, 1);
	int r = (int)read(p->pipefd[0], &c, 1);

	unw_sink += r;
	return r;
}

__attribute__((noinline)) int unw_blocked_futex(struct parked *p)
{
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->ready, 1);
	while (!atomic_load(&p->stop))
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	unw_sink += 4;
	return unw_sink;
}

__attribute__((noinline)) int unw_blocked_sleep(struct parked *p)
{
	struct timespec ts = { 3600, 0 };

	atomic_store(&p->ready, 1);
	/* Ended by SIGUSR1 (EINTR, park_stop), not pthread_cancel: a
	 * cancellation's forced unwind skips the frames' epilogues, and
	 * under ASan their stack poison stayed behind: a false
	 * stack-buffer-underflow in ASan's own code at the thread's exit
	 * (1 CI run in 5). */
	while (!atomic_load(&p->stop))
		nanosleep(&ts, NULL);
	unw_sink += 5;
	return unw_sink;
}

/* The pc the signal interrupted, as the kernel saved it. */
static uint64_t sig_interrupted_pc;

__attribute__((noinline)) void unw_sig_handler(int sig, siginfo_t *si, void *uc)
{
	(void)si;
#if defined(__x86_64__)
	sig_interrupted_pc = (uint64_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
	sig_interrupted_pc = (uint64_t)((ucontext_t *)uc)->uc_mcontext.pc;
#else
	(void)uc;
#endif
	unw_marker(sig_parked);
	unw_sink += sig;
}

/* Loops until its own signal handler has run to completion. */
__attribute__((noinline)) void unw_sig_victim(struct parked *p)
{
	atomic_store(&p->ready, 2);
	while (!atomic_load_explicit(&p->stop, memory_order_relaxed))
		unw_sink++;
}

static inline void *park_main(void *arg)
{
	struct parked *p = arg;

	atomic_store(&p->tid, (pid_t)syscall(SYS_gettid));
	switch (p->mode) {
	case PARK_KNOWN: unw_grandcaller(p); break;
	case PARK_READ: unw_blocked_read(p); break;
	case PARK_FUTEX: unw_blocked_futex(p); break;
	case PARK_SLEEP: unw_blocked_sleep(p); break;
	case PARK_LIB: p->lib_call(unw_lib_callback, p); break;
	case PARK_NOCFI: unw_nocfi_caller(p); break;
	case PARK_DEEP: unw_recurse(p, p->depth); break;
	case PARK_SIGNAL: unw_sig_victim(p); break;
	}
	return NULL;
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* qemu delivers signals slowly: be generous there (SPROBE_TEST_SLOW=1). */
static inline uint64_t deadline_ns(void)
{
	const char *slow = getenv("SPROBE_TEST_SLOW");

	return now_ns() + (slow && *slow == '1' ? 30000000000ull : 5000000000ull);
}

/* Bounded wait until the thread is asleep in the kernel ('S'). */
static inline void wait_sleeping(pid_t tid)
{
	uint64_t end = deadline_ns();
	char path[64], buf[256];

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	for (;;) {
		FILE *f = fopen(path, "re");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		char *rp = strrchr(buf, ')');

		if (rp && rp[1] == ' ' && rp[2] == 'S')
			return;
		if (now_ns() > end)
			fail_msg("thread %d never went to sleep", (int)tid);
		sched_yield();
	}
}

static inline void park_start(struct parked *p, enum park mode)
{
	memset(p, 0, sizeof(*p));
	p->mode = mode;
	p->depth = 200;
	assert_int_equal(pipe(p->pipefd), 0);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
}

static inline void park_go(struct parked *p)
{
	uint64_t end = deadline_ns();

	assert_int_equal(pthread_create(&p->th, NULL, park_main, p), 0);
	while (!atomic_load_explicit(&p->ready, memory_order_acquire) || !atomic_load(&p->tid)) {
		if (now_ns() > end)
			fail_msg("worker never got ready");
		sched_yield();
	}
	if (p->mode == PARK_SIGNAL) {
		/* ready == 2: in the loop. The handler's marker sets 1. */
		atomic_store(&p->ready, 0);
		assert_int_equal(pthread_kill(p->th, SIGUSR2), 0);
		while (atomic_load_explicit(&p->ready, memory_order_acquire) != 1) {
			if (now_ns() > end)
				fail_msg("signal handler never ran");
			sched_yield();
		}
	}
	if (p->mode == PARK_READ || p->mode == PARK_FUTEX || p->mode == PARK_SLEEP)
		wait_sleeping(atomic_load(&p->tid));
}

/* SIGUSR1 ends a PARK_SLEEP worker's nanosleep (no SA_RESTART: EINTR). */
static inline void unw_wake_handler(int sig)
{
	(void)sig;
}

static inline void wake_handler_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = unw_wake_handler;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
}

static inline void park_stop(struct parked *p)
{
	atomic_store(&p->stop, 1);
	if (p->mode == PARK_READ)
		assert_int_equal(write(p->pipefd[1], "x", 1), 1);
	if (p->mode == PARK_FUTEX) {
		pthread_mutex_lock(&p->mu);
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	if (p->mode == PARK_SLEEP) {
		/* Signal until it has left: one sent before it entered
		 * nanosleep would be lost. */
		wake_handler_install();
		for (;;) {
			struct timespec dl;

			assert_int_equal(pthread_kill(p->th, SIGUSR1), 0);
			clock_gettime(CLOCK_REALTIME, &dl);
			dl.tv_nsec += 20000000;
			if (dl.tv_nsec >= 1000000000) {
				dl.tv_sec++;
				dl.tv_nsec -= 1000000000;
			}
			if (pthread_timedjoin_np(p->th, NULL, &dl) == 0)
				break;
		}
	} else {
		assert_int_equal(pthread_join(p->th, NULL), 0);
	}
	close(p->pipefd[0]);
	close(p->pipefd[1]);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
}

/* ---- capture + unwind helpers ---- */

/* One capturer per process (its signal handler is process-wide); made on
 * first use and kept, so a failed test cannot leave the next without one. */
static struct sprobe_capturer *g_cap;

struct env {
	struct sprobe_capturer *cap;
	struct sprobe_snapshot *snap;
	struct sprobe_unwinder *u;
	struct sprobe_modules *mods;
};

static inline void env_open(struct env *e, size_t max_stack)
{
	if (!g_cap) {
		g_cap = sprobe_capturer__new(NULL);
		if (!g_cap && errno == ENOTSUP)
			SPROBE_SKIP("no capture backend on this platform");
		assert_non_null(g_cap);
	}
	e->cap = g_cap;
	e->snap = sprobe_snapshot__new(64, max_stack);
	assert_non_null(e->snap);
	e->u = sprobe_unwinder__new(NULL);
	assert_non_null(e->u);
	e->mods = sprobe_unwinder__modules(e->u);
}

static inline void env_close(struct env *e)
{
	sprobe_unwinder__free(e->u);
	sprobe_snapshot__free(e->snap);
}

static inline struct sprobe_thread_sample *find_tid(struct sprobe_snapshot *snap, pid_t tid)
{
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(snap); i++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, i);

		if (t && t->tid == tid)
			return t;
	}
	fail_msg("thread %d not in the snapshot", (int)tid);
	return NULL;
}

/*
 * Capture snap, return tid's sample (raw). A thread still leaving the
 * previous capture's handler has the signal blocked and is dropped as
 * "blocked": retry that case until a deadline.
 */
static inline struct sprobe_thread_sample *capture_into(struct env *e, struct sprobe_snapshot *snap,
						 pid_t tid)
{
	struct sprobe_thread_sample *t;
	uint64_t end = deadline_ns();

	do {
		assert_int_equal(sprobe_capturer__capture(e->cap, snap), 0);
		t = find_tid(snap, tid);
	} while (t->stage == SPROBE_STAGE_EMPTY && t->drop_reason == SPROBE_DROP_BLOCKED &&
		 now_ns() < end);
	if (t->stage == SPROBE_STAGE_EMPTY)
		fail_msg("thread %d dropped: %s", (int)tid, sprobe_drop_reason__str(t->drop_reason));
	return t;
}

static inline struct sprobe_thread_sample *capture_tid(struct env *e, pid_t tid)
{
	return capture_into(e, e->snap, tid);
}

static inline const char *method_str(uint32_t m)
{
	static const char *n[] = { "ip", "lr", "fp", "dwarf", "pe" };

	return m < 5 ? n[m] : "?";
}

static inline void print_stack(struct sprobe_modules *m, const struct sprobe_thread_sample *t,
			enum sprobe_unwind_stop why)
{
	print_message("  tid %d: %u frames, stop=%s%s\n", (int)t->tid, t->nframes,
		      sprobe_unwind_stop__str(why), t->truncated ? " (copy truncated)" : "");
	for (uint32_t i = 0; i < t->nframes; i++) {
		struct sprobe_symbol s;
		char buf[300];

		sprobe_modules__symbolize(m, sprobe_frame_lookup_pc(&t->frames[i]), &s);
		sprobe_symbol__snprintf(&s, buf, sizeof(buf));
		print_message("    #%-3u %-5s %#018llx %s\n", i, method_str(t->frames[i].method),
			      (unsigned long long)t->frames[i].pc, buf);
	}
}

/* Index of the first frame at or after `from` whose symbol is name, or -1. */
static inline int frame_named(struct sprobe_modules *m, const struct sprobe_thread_sample *t,
		       uint32_t from, const char *name)
{
	for (uint32_t i = from; i < t->nframes; i++) {
		struct sprobe_symbol s;

		if (sprobe_modules__symbolize(m, sprobe_frame_lookup_pc(&t->frames[i]), &s) == 0 &&
		    s.name && strcmp(s.name, name) == 0)
			return (int)i;
	}
	return -1;
}

static inline const char *frame_module(struct sprobe_modules *m, const struct sprobe_frame *f)
{
	const struct sprobe_module *mod = sprobe_modules__find(m, sprobe_frame_lookup_pc(f));

	return mod ? mod->name : "?";
}


#endif
