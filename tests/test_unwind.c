/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Deferred unwinding of real captures (the capture backend's signal
 * capturer), built -O2 -fomit-frame-pointer so callers can only be found
 * through DWARF CFI:
 *   - the known stack: marker <- caller <- grandcaller <- thread start;
 *   - threads blocked in Debian's libc (read, futex wait, nanosleep) unwind
 *     through libc up to the thread's start;
 *   - a stack running through a dlopen'ed library, and through assembly
 *     without CFI (frame-pointer fallback, recorded per frame);
 *   - an unwinder on another process's inventory (a forked child, exited)
 *     reads the module files and gives the live unwinder's frames;
 *   - truncated copies give partial frames and keep the truncated flag;
 *     random bytes terminate; the frame limit holds; warm caches skip the
 *     unwind-table search.
 */
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

static void *park_main(void *arg)
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

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* qemu delivers signals slowly: be generous there (SPROBE_TEST_SLOW=1). */
static uint64_t deadline_ns(void)
{
	const char *slow = getenv("SPROBE_TEST_SLOW");

	return now_ns() + (slow && *slow == '1' ? 30000000000ull : 5000000000ull);
}

/* Bounded wait until the thread is asleep in the kernel ('S'). */
static void wait_sleeping(pid_t tid)
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

static void park_start(struct parked *p, enum park mode)
{
	memset(p, 0, sizeof(*p));
	p->mode = mode;
	p->depth = 200;
	assert_int_equal(pipe(p->pipefd), 0);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
}

static void park_go(struct parked *p)
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
static void unw_wake_handler(int sig)
{
	(void)sig;
}

static void wake_handler_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = unw_wake_handler;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
}

static void park_stop(struct parked *p)
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

static void env_open(struct env *e, size_t max_stack)
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

static void env_close(struct env *e)
{
	sprobe_unwinder__free(e->u);
	sprobe_snapshot__free(e->snap);
}

static struct sprobe_thread_sample *find_tid(struct sprobe_snapshot *snap, pid_t tid)
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
static struct sprobe_thread_sample *capture_into(struct env *e, struct sprobe_snapshot *snap,
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

static struct sprobe_thread_sample *capture_tid(struct env *e, pid_t tid)
{
	return capture_into(e, e->snap, tid);
}

static const char *method_str(uint32_t m)
{
	static const char *n[] = { "ip", "lr", "fp", "dwarf", "pe" };

	return m < 5 ? n[m] : "?";
}

static void print_stack(struct sprobe_modules *m, const struct sprobe_thread_sample *t,
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
static int frame_named(struct sprobe_modules *m, const struct sprobe_thread_sample *t,
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

static const char *frame_module(struct sprobe_modules *m, const struct sprobe_frame *f)
{
	const struct sprobe_module *mod = sprobe_modules__find(m, sprobe_frame_lookup_pc(f));

	return mod ? mod->name : "?";
}

/* ---- tests ---- */

/* The seed's acceptance test, DWARF edition: -fomit-frame-pointer code, so
 * the marker's caller and grandcaller can only come from CFI. */
static void test_known_stack_dwarf(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	int c, g, start;

	env_open(&e, 0);
	park_start(&p, PARK_KNOWN);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_int_equal(frame_named(e.mods, t, 0, "unw_marker"), 0);
	c = frame_named(e.mods, t, 1, "unw_caller");
	g = frame_named(e.mods, t, 1, "unw_grandcaller");
	start = frame_named(e.mods, t, 1, "park_main");
	assert_int_equal(c, 1);
	assert_int_equal(g, 2);
	assert_int_equal(start, 3);
	assert_int_equal(t->frames[c].method, SPROBE_FRAME_DWARF);
	assert_int_equal(t->frames[g].method, SPROBE_FRAME_DWARF);
	/* ... and on to the thread's start, through libc, by CFI alone. */
	assert_int_equal(why, SPROBE_UNWIND_END);
	for (uint32_t i = 1; i < t->nframes; i++)
		assert_int_equal(t->frames[i].method, SPROBE_FRAME_DWARF);
	park_stop(&p);
	env_close(&e);
}

static void check_blocked_in_libc(enum park mode, const char *fn)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	int at;

	env_open(&e, 0);
	park_start(&p, mode);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	/* Stopped inside libc, in the system call. */
	assert_non_null(strstr(frame_module(e.mods, &t->frames[0]), "libc.so"));
	at = frame_named(e.mods, t, 1, fn);
	assert_true(at > 0);
	assert_int_equal(frame_named(e.mods, t, (uint32_t)at, "park_main"), at + 1);
	/* The walk reached the thread's start (clone3's CFI ends it) in libc. */
	assert_int_equal(why, SPROBE_UNWIND_END);
	assert_non_null(strstr(frame_module(e.mods, &t->frames[t->nframes - 1]), "libc.so"));
	for (uint32_t i = 1; i < t->nframes; i++)
		assert_int_equal(t->frames[i].method, SPROBE_FRAME_DWARF);
	park_stop(&p);
	env_close(&e);
}

static void test_blocked_in_libc_read(void **state)
{
	check_blocked_in_libc(PARK_READ, "unw_blocked_read");
}

static void test_blocked_in_libc_futex(void **state)
{
	check_blocked_in_libc(PARK_FUTEX, "unw_blocked_futex");
}

static void test_blocked_in_libc_nanosleep(void **state)
{
	check_blocked_in_libc(PARK_SLEEP, "unw_blocked_sleep");
}

/* build/tests/unwind_testlib/<name>, next to this executable. */
static void *open_testlib(const char *name)
{
	char exe[PATH_MAX], path[PATH_MAX + 64];
	ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	void *h;

	assert_true(k > 0);
	exe[k] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(path, sizeof(path), "%s/unwind_testlib/%s", exe, name);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", path, dlerror());
	return h;
}

/* Through a library loaded after the unwinder was made: the snapshot
 * unwind refreshes the inventory, then finds the library's CFI. */
static void test_stack_through_dlopened_library(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	void *h;
	int i, j;

	env_open(&e, 0);
	h = open_testlib("libsprobe_testlib_stripped.so");
	park_start(&p, PARK_LIB);
	p.lib_call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
	assert_non_null(p.lib_call);
	park_go(&p);
	assert_int_equal(sprobe_capturer__capture(e.cap, e.snap), 0);
	assert_false(sprobe_snapshot__frames_resolved(e.snap));
	assert_true(sprobe_unwinder__unwind_snapshot(e.u, e.snap) >= 1);
	assert_true(sprobe_snapshot__frames_resolved(e.snap));
	t = find_tid(e.snap, p.tid);
	print_stack(e.mods, t, SPROBE_UNWIND_END);
	i = frame_named(e.mods, t, 1, "unw_lib_callback");
	assert_int_equal(i, 1);
	/* The stripped library's internal frame: module+offset, by CFI. */
	assert_string_equal(frame_module(e.mods, &t->frames[2]), "libsprobe_testlib_stripped.so");
	assert_int_equal(t->frames[2].method, SPROBE_FRAME_DWARF);
	j = frame_named(e.mods, t, 2, "sprobe_testlib_call");
	assert_int_equal(j, 3);
	assert_int_equal(t->frames[j].method, SPROBE_FRAME_DWARF);
	assert_int_equal(frame_named(e.mods, t, 3, "park_main"), 4);
	park_stop(&p);
	dlclose(h);
	env_close(&e);
}

/* Another process's inventory (the external tier's case): a forked child
 * maps what we map, at the same addresses, so a sample of ours unwound
 * with an unwinder on the child's inventory, which reads code and
 * .eh_frame from the module files by segment offset, must give the very
 * frames the live unwinder gives: through the executable, libc and a
 * stripped dlopen'ed library, after the child has exited and been
 * reaped (its files were opened while it lived). */
static void test_other_process_from_files(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	struct sprobe_frame live[SPROBE_MAX_FRAMES];
	enum sprobe_unwind_stop why_live, why_files;
	uint32_t nlive;
	int fds[2];
	void *h;
	const char *qemu = getenv("SPROBE_TEST_QEMU");

	(void)state;
	if (qemu && *qemu == '1')
		SPROBE_SKIP("qemu-user shows another process's /proc/PID/maps as the host maps "
			    "it (the emulator's own mappings), not the guest's");
	env_open(&e, 0);
	h = open_testlib("libsprobe_testlib_stripped.so");
	park_start(&p, PARK_LIB);
	p.lib_call = (int (*)(int (*)(void *), void *))dlsym(h, "sprobe_testlib_call");
	assert_non_null(p.lib_call);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_modules__refresh(e.mods) >= 0); /* the library is new */
	assert_true(sprobe_unwinder__unwind(e.u, t, &why_live) >= 4);
	nlive = t->nframes;
	memcpy(live, t->frames, nlive * sizeof(*live));

	assert_int_equal(pipe(fds), 0);
	pid_t child = fork();

	assert_true(child >= 0);
	if (child == 0) {
		char c;

		close(fds[1]);
		while (read(fds[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(fds[0]);
	struct sprobe_modules_opts mo = { .sz = sizeof(mo), .pid = child };
	struct sprobe_modules *other = sprobe_modules__new(&mo);

	assert_non_null(other);
	/* As the external tier does while the process lives: open each
	 * module's file (with its symbol table). */
	for (size_t i = 0; i < sprobe_modules__count(other); i++) {
		struct sprobe_symbol sym;

		sprobe_modules__symbolize(other, sprobe_modules__get(other, i)->start, &sym);
	}
	close(fds[1]);
	assert_int_equal(waitpid(child, NULL, 0), child);

	struct sprobe_unwinder_opts uo = { .sz = sizeof(uo), .modules = other };
	struct sprobe_unwinder *fu = sprobe_unwinder__new(&uo);

	assert_non_null(fu);
	t->stage = SPROBE_STAGE_RAW;
	assert_int_equal(sprobe_unwinder__unwind(fu, t, &why_files), (int)nlive);
	print_stack(other, t, why_files);
	assert_int_equal(why_files, why_live);
	for (uint32_t i = 0; i < nlive; i++) {
		assert_int_equal(t->frames[i].pc, live[i].pc);
		assert_int_equal(t->frames[i].method, live[i].method);
	}
	/* Names from the files too, through the stripped library's CFI. */
	assert_int_equal(frame_named(other, t, 1, "unw_lib_callback"), 1);
	assert_true(frame_named(other, t, 2, "park_main") > 2);
	struct sprobe_unwinder_stats st;

	assert_int_equal(sprobe_unwinder__stats(fu, &st), 0);
	assert_true(st.frames_by_method[SPROBE_FRAME_DWARF] >= 3);
	assert_int_equal(st.pins, 0); /* files need no pin */
	sprobe_unwinder__free(fu);
	sprobe_modules__free(other);
	park_stop(&p);
	dlclose(h);
	env_close(&e);
}

/* No CFI in the trampoline: frame pointers take over there, and the frames
 * say so. */
static void test_fp_fallback_without_cfi(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	struct sprobe_unwinder_stats st;
	enum sprobe_unwind_stop why;
	int k;

	env_open(&e, 0);
	park_start(&p, PARK_NOCFI);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	assert_int_equal(frame_named(e.mods, t, 0, "unw_marker"), 0);
	assert_int_equal(frame_named(e.mods, t, 1, "unw_nocfi_trampoline"), 1);
	assert_int_equal(t->frames[1].method, SPROBE_FRAME_DWARF);
	k = frame_named(e.mods, t, 2, "unw_nocfi_caller");
	assert_int_equal(k, 2);
	assert_int_equal(t->frames[k].method, SPROBE_FRAME_FP);
	assert_int_equal(why, SPROBE_UNWIND_FP_END);
	assert_int_equal(sprobe_unwinder__stats(e.u, &st), 0);
	assert_true(st.table_failures >= 1);
	assert_true(st.frames_by_method[SPROBE_FRAME_FP] >= 1);

	/* With the fallback off, the walk stops at the trampoline instead. */
	struct sprobe_unwinder_opts o = { .sz = sizeof(o), .no_fp_fallback = true };
	struct sprobe_unwinder *u2 = sprobe_unwinder__new(&o);

	assert_non_null(u2);
	assert_int_equal(sprobe_unwinder__unwind(u2, t, &why), 2);
	assert_int_equal(why, SPROBE_UNWIND_BAD);
	sprobe_unwinder__free(u2);
	park_stop(&p);
	env_close(&e);
}

/* Through a signal frame: the handler, libc's sigreturn trampoline, then
 * the interrupted function, whose pc is exact (not a return address). */
static void test_through_signal_handler(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	struct sigaction sa, old;
	int h, v;
	const char *qemu = getenv("SPROBE_TEST_QEMU");

	if (qemu && *qemu == '1')
		SPROBE_SKIP("qemu-user's sigreturn trampoline lives in a page of its own "
			    "with no CFI (a real kernel's vDSO has it)");
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = unw_sig_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
	env_open(&e, 0);
	park_start(&p, PARK_SIGNAL);
	sig_parked = &p;
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 0);
	print_stack(e.mods, t, why);
	assert_int_equal(frame_named(e.mods, t, 0, "unw_marker"), 0);
	h = frame_named(e.mods, t, 1, "unw_sig_handler");
	assert_int_equal(h, 1);
	/* h + 1 is the trampoline in libc; then the interrupted loop. */
	v = frame_named(e.mods, t, 2, "unw_sig_victim");
	assert_int_equal(v, h + 2);
	assert_non_null(strstr(frame_module(e.mods, &t->frames[h + 1]), "libc.so"));
	assert_int_equal(frame_named(e.mods, t, (uint32_t)v, "park_main"), v + 1);
	/* The interrupted loop is named at the pc the signal interrupted, not
	 * one byte before it: it was not calling anything. */
	assert_int_equal(sprobe_frame_lookup_pc(&t->frames[v]), sig_interrupted_pc);
#if defined(__x86_64__)
	{
		/* The trampoline is named at its first instruction, where the
		 * handler returns (glibc's sa_restorer, as the kernel holds
		 * it), not at the padding before it. */
		struct {
			uint64_t handler, flags, restorer, mask;
		} ksa;
		struct sprobe_symbol sym;

		assert_int_equal(syscall(SYS_rt_sigaction, SIGUSR2, NULL, &ksa, 8), 0);
		assert_int_equal(sprobe_frame_lookup_pc(&t->frames[h + 1]), ksa.restorer);
		/* Named when libc's symbols (its debug file) have it, as perf
		 * shows it. */
		if (sprobe_modules__symbolize(e.mods, ksa.restorer, &sym) == 0 && sym.name)
			assert_string_equal(sym.name, "__restore_rt");
	}
#endif
	assert_int_equal(why, SPROBE_UNWIND_END);
	park_stop(&p);
	sig_parked = NULL;
	sigaction(SIGUSR2, &old, NULL);
	env_close(&e);
}

/* A copy cut short by the capture cap: partial frames, flag kept, and the
 * frames found agree with those of a full copy. */
static void test_truncated_copy(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t, full;
	struct sprobe_snapshot *small;
	enum sprobe_unwind_stop why;
	uint8_t *fullstack;
	int n;

	env_open(&e, 0);
	park_start(&p, PARK_DEEP);
	p.depth = 60;
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_false(t->truncated);
	assert_true(sprobe_unwinder__unwind(e.u, t, &why) > 60);
	assert_int_equal(why, SPROBE_UNWIND_END);
	full = *t;
	fullstack = malloc(t->stack_len);
	assert_non_null(fullstack);
	memcpy(fullstack, t->stack, t->stack_len);
	full.stack = fullstack;

	/* A real truncated capture: 1 KiB of a much deeper stack. */
	small = sprobe_snapshot__new(64, 1024);
	assert_non_null(small);
	t = capture_into(&e, small, p.tid);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_true(t->truncated);
	n = sprobe_unwinder__unwind(e.u, t, &why);
	print_stack(e.mods, t, why);
	assert_true(n >= 3);
	assert_true((uint32_t)n < full.nframes);
	assert_int_equal(why, SPROBE_UNWIND_TRUNCATED);
	assert_true(t->truncated);
	for (int i = 1; i < n; i++)
		assert_int_equal(t->frames[i].pc, full.frames[i].pc);
	sprobe_snapshot__free(small);

	/* Every cut of the full copy: a prefix of the full walk, never more. */
	for (size_t len = 16; len < full.stack_len; len += len / 3 + 8) {
		struct sprobe_thread_sample cut = full;

		cut.stack_len = len;
		cut.truncated = true;
		n = sprobe_unwinder__unwind(e.u, &cut, &why);
		assert_true(n >= 1 && (uint32_t)n <= full.nframes);
		assert_true(cut.truncated);
		for (int i = 1; i < n; i++)
			assert_int_equal(cut.frames[i].pc, full.frames[i].pc);
		if ((uint32_t)n < full.nframes && why != SPROBE_UNWIND_TRUNCATED)
			fail_msg("cut at %zu: %d of %u frames, stop %s", len, n, full.nframes,
				 sprobe_unwind_stop__str(why));
	}
	free(fullstack);
	park_stop(&p);
	env_close(&e);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random bytes where the stack was, random registers: the walk ends, within
 * the limit, without touching anything it should not. */
static void test_random_bytes_terminate(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t, r;
	const struct sprobe_module *exe;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint8_t *junk;
	enum sprobe_unwind_stop why;
	unsigned stops[SPROBE_UNWIND__COUNT] = { 0 };

	env_open(&e, 0);
	park_start(&p, PARK_KNOWN);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	exe = sprobe_modules__find(e.mods, t->ip);
	assert_non_null(exe);
	junk = malloc(t->stack_len);
	assert_non_null(junk);
	for (int iter = 0; iter < 3000; iter++) {
		for (size_t i = 0; i + 8 <= t->stack_len; i += 8) {
			uint64_t v = xorshift(&seed);

			/* Some words look like stack or code addresses, the
			 * kind of garbage that gets furthest. */
			if ((v & 3) == 0)
				v = t->stack_addr + (v >> 8) % t->stack_len;
			else if ((v & 3) == 1)
				v = exe->start + (v >> 8) % (exe->end - exe->start);
			memcpy(junk + i, &v, 8);
		}
		r = *t;
		r.stack = junk;
		if (iter % 3 == 1) {
			for (int k = 0; k < SPROBE_NREGS; k++)
				r.regs[k] = xorshift(&seed);
			r.ip = exe->start + xorshift(&seed) % (exe->end - exe->start);
			r.fp = t->stack_addr + xorshift(&seed) % t->stack_len;
		} else if (iter % 3 == 2) {
			r.ip = xorshift(&seed);
			r.sp = xorshift(&seed);
			r.fp = xorshift(&seed);
		}
		int n = sprobe_unwinder__unwind(e.u, &r, &why);

		assert_true(n >= 0 && n <= SPROBE_MAX_FRAMES);
		assert_int_equal(r.stage, SPROBE_STAGE_UNWOUND);
		stops[why]++;
	}
	print_message("  3000 random copies: end %u, fp-end %u, truncated %u, bad %u, loop %u, max %u\n",
		      stops[0], stops[1], stops[2], stops[3], stops[4], stops[5]);
	free(junk);
	park_stop(&p);
	env_close(&e);
}

static void test_frame_limit(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	enum sprobe_unwind_stop why;
	struct sprobe_unwinder_opts o = { .sz = sizeof(o), .max_frames = 8 };
	struct sprobe_unwinder *u8;

	env_open(&e, 0);
	park_start(&p, PARK_DEEP);
	p.depth = 200;
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_int_equal(sprobe_unwinder__unwind(e.u, t, &why), SPROBE_MAX_FRAMES);
	assert_int_equal(why, SPROBE_UNWIND_MAX_FRAMES);
	for (uint32_t i = 2; i < t->nframes; i++)
		assert_true(t->frames[i].fp > t->frames[i - 1].fp);
	u8 = sprobe_unwinder__new(&o);
	assert_non_null(u8);
	assert_int_equal(sprobe_unwinder__unwind(u8, t, &why), 8);
	assert_int_equal(why, SPROBE_UNWIND_MAX_FRAMES);
	sprobe_unwinder__free(u8);
	park_stop(&p);
	env_close(&e);
}

/* Repeated captures of the same code need no new unwind-table searches. */
static void test_warm_cache_skips_table_search(void **state)
{
	struct env e;
	struct parked p;
	struct sprobe_thread_sample *t;
	struct sprobe_unwinder_stats a, b;
	uint64_t pcs[SPROBE_MAX_FRAMES];
	uint32_t n;

	env_open(&e, 0);
	park_start(&p, PARK_FUTEX);
	park_go(&p);
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, NULL) > 3);
	n = t->nframes;
	for (uint32_t i = 0; i < n; i++)
		pcs[i] = t->frames[i].pc;
	assert_int_equal(sprobe_unwinder__stats(e.u, &a), 0);
	assert_true(a.table_lookups >= n - 1);
	/* A second capture of the same blocked thread. */
	t = capture_tid(&e, p.tid);
	assert_true(sprobe_unwinder__unwind(e.u, t, NULL) > 3);
	assert_int_equal(sprobe_unwinder__stats(e.u, &b), 0);
	assert_int_equal(t->nframes, n);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(t->frames[i].pc, pcs[i]);
	assert_int_equal(b.table_lookups, a.table_lookups);
	assert_int_equal(b.samples, a.samples + 1);
	park_stop(&p);
	env_close(&e);
}

static void test_capture_and_resolve(void **state)
{
	struct env e;
	struct parked p[2];
	struct sprobe_thread_sample *t;

	env_open(&e, 0);
	park_start(&p[0], PARK_KNOWN);
	park_go(&p[0]);
	park_start(&p[1], PARK_READ);
	park_go(&p[1]);
	assert_int_equal(sprobe_capture_and_resolve(e.cap, e.snap, e.u), 0);
	assert_true(sprobe_snapshot__frames_resolved(e.snap));
	for (uint32_t i = 0; i < sprobe_snapshot__nthreads(e.snap); i++) {
		t = sprobe_snapshot__thread(e.snap, i);
		if (t->stage != SPROBE_STAGE_EMPTY) {
			assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
			assert_true(t->nframes >= 1);
		}
	}
	t = find_tid(e.snap, p[0].tid);
	assert_int_equal(frame_named(e.mods, t, 1, "unw_caller"), 1);
	t = find_tid(e.snap, p[1].tid);
	assert_true(frame_named(e.mods, t, 1, "unw_blocked_read") > 0);
	park_stop(&p[0]);
	park_stop(&p[1]);
	env_close(&e);
}

static void test_bad_input(void **state)
{
	struct sprobe_unwinder *u = sprobe_unwinder__new(NULL);
	struct sprobe_thread_sample t;
	struct sprobe_unwinder_opts o = { .sz = 1 };

	assert_non_null(u);
	memset(&t, 0, sizeof(t));
	assert_int_equal(sprobe_unwinder__unwind(NULL, &t, NULL), -EINVAL);
	assert_int_equal(sprobe_unwinder__unwind(u, NULL, NULL), -EINVAL);
	assert_int_equal(sprobe_unwinder__unwind(u, &t, NULL), -EINVAL); /* stage EMPTY */
	t.stage = SPROBE_STAGE_RAW;
	assert_int_equal(sprobe_unwinder__unwind(u, &t, NULL), -EINVAL); /* no stack */
	assert_int_equal(sprobe_unwinder__unwind_snapshot(u, NULL), -EINVAL);
	assert_int_equal(sprobe_capture_and_resolve(NULL, NULL, u), -EINVAL);
	assert_int_equal(sprobe_unwinder__stats(u, NULL), -EINVAL);
	assert_null(sprobe_unwinder__new(&o));
	assert_int_equal(errno, EINVAL);

	/* An inventory of another process is read from its files (the
	 * external tier: tests/test_external.c). */
	struct sprobe_modules_opts mo = { .sz = sizeof(mo), .pid = getppid() };
	struct sprobe_modules *other = sprobe_modules__new(&mo);

	if (other) {
		struct sprobe_unwinder_opts uo = { .sz = sizeof(uo), .modules = other };
		struct sprobe_unwinder *ou = sprobe_unwinder__new(&uo);

		assert_non_null(ou);
		assert_ptr_equal(sprobe_unwinder__modules(ou), other);
		sprobe_unwinder__free(ou);
		sprobe_modules__free(other);
	}
	/* Nor can an offline one (module records from a data file). */
	struct sprobe_modules_opts eo = { .sz = sizeof(eo), .empty = true };
	struct sprobe_modules *offline = sprobe_modules__new(&eo);
	struct sprobe_unwinder_opts uo2 = { .sz = sizeof(uo2), .modules = offline };

	assert_non_null(offline);
	assert_null(sprobe_unwinder__new(&uo2));
	assert_int_equal(errno, EINVAL);
	sprobe_modules__free(offline);
	sprobe_unwinder__free(u);
	sprobe_unwinder__free(NULL);
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test(test_known_stack_dwarf),
	cmocka_unit_test(test_blocked_in_libc_read),
	cmocka_unit_test(test_blocked_in_libc_futex),
	cmocka_unit_test(test_blocked_in_libc_nanosleep),
	cmocka_unit_test(test_stack_through_dlopened_library),
	cmocka_unit_test(test_other_process_from_files),
	cmocka_unit_test(test_fp_fallback_without_cfi),
	cmocka_unit_test(test_through_signal_handler),
	cmocka_unit_test(test_truncated_copy),
	cmocka_unit_test(test_random_bytes_terminate),
	cmocka_unit_test(test_frame_limit),
	cmocka_unit_test(test_warm_cache_skips_table_search),
	cmocka_unit_test(test_capture_and_resolve),
	cmocka_unit_test(test_bad_input),
};

SPROBE_TEST_MAIN(tests)
