/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Capture backend: the seed's known-stack acceptance test, the contract of
 * the signal protocol (drops with reasons, refusing a taken signal, stale
 * signals), the copy itself (bytes, bounds, truncation, sigaltstack), the
 * frame-pointer unwinder on hostile input, and the no-allocation claim
 * checked by a malloc interposer.
 *
 * Built with -fno-omit-frame-pointer (mk/capture.mk). Runs natively and
 * under qemu-aarch64 (SPROBE_TEST_SLOW=1: generous deadlines; no timing is
 * asserted anywhere).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/linux/chain.h"
#include "backends/linux/linux.h"
#include "capture_fixture.h"
#include "userspace/common/fds.h"
#include "sprobe_test.h"

/* ------------------------------------------------------------------ */
/* malloc interposer                                                   */
/* ------------------------------------------------------------------ */

/*
 * Every allocation entry point of the process comes through here. A call
 * made while the calling thread has the capture signal blocked is a call
 * from inside the capture handler (the handler blocks every signal while
 * it runs, and no worker here blocks it otherwise). Calls by the thread
 * that marked itself `t_count_mine` are counted separately: that is the
 * probe thread, whose warm captures must not allocate either.
 */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static _Atomic int g_watch_signo;
static _Atomic unsigned g_alloc_in_handler;
static _Atomic unsigned g_alloc_mine;
static __thread int t_count_mine;

static void note_alloc(void)
{
	int sig = atomic_load_explicit(&g_watch_signo, memory_order_relaxed);

	if (sig) {
		sigset_t cur;

		pthread_sigmask(SIG_BLOCK, NULL, &cur);
		if (sigismember(&cur, sig))
			atomic_fetch_add(&g_alloc_in_handler, 1);
	}
	if (t_count_mine)
		atomic_fetch_add(&g_alloc_mine, 1);
}

void *malloc(size_t n)
{
	note_alloc();
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	note_alloc();
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	note_alloc();
	return __libc_realloc(p, n);
}

void free(void *p)
{
	if (p)
		note_alloc();
	__libc_free(p);
}

/* ------------------------------------------------------------------ */
/* Known stack: a leaf with a fixed shape, called from a marker        */
/* ------------------------------------------------------------------ */

/*
 * sprobe_test_leaf(int *ready, int *stop): sets *ready, spins until *stop.
 * Written in assembly so its shape does not depend on the compiler: on
 * x86_64 it keeps a frame record (push rbp), on aarch64 it is a true leaf
 * without one, so its caller is only in LR, which the unwinder must use.
 */
void sprobe_test_leaf(_Atomic int *ready, _Atomic int *stop);
#if defined(__x86_64__)
__asm__(".text\n"
	".globl sprobe_test_leaf\n"
	".type sprobe_test_leaf, @function\n"
	"sprobe_test_leaf:\n"
	".cfi_startproc\n"
	"	push %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp, -16\n"
	"	mov %rsp, %rbp\n"
	".cfi_def_cfa_register %rbp\n"
	"	movl $1, (%rdi)\n"
	"1:	pause\n"
	"	movl (%rsi), %eax\n"
	"	test %eax, %eax\n"
	"	je 1b\n"
	"	pop %rbp\n"
	".cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	".cfi_endproc\n"
	".size sprobe_test_leaf, .-sprobe_test_leaf\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl sprobe_test_leaf\n"
	".type sprobe_test_leaf, %function\n"
	"sprobe_test_leaf:\n"
	".cfi_startproc\n"
	"	mov w2, #1\n"
	"	stlr w2, [x0]\n"
	"1:	yield\n"
	"	ldar w3, [x1]\n"
	"	cbz w3, 1b\n"
	"	ret\n"
	".cfi_endproc\n"
	".size sprobe_test_leaf, .-sprobe_test_leaf\n");
#endif

struct known {
	_Atomic int ready, stop;
	_Atomic pid_t tid;
	uint64_t marker_ret; /* known_marker's return address: in its caller */
	volatile int after;
};

/* The marker: the leaf's caller. Its own return address (into
 * known_caller) must show up too. The store after the call keeps the call
 * from becoming a tail call. */
__attribute__((noinline, noclone)) static void known_marker(struct known *k)
{
	k->marker_ret = (uint64_t)(uintptr_t)__builtin_return_address(0);
	sprobe_test_leaf(&k->ready, &k->stop);
	k->after++;
}

__attribute__((noinline, noclone)) static void known_caller(struct known *k)
{
	known_marker(k);
	k->after++;
}

static void *known_main(void *arg)
{
	struct known *k = arg;

	atomic_store(&k->tid, (pid_t)syscall(SYS_gettid));
	known_caller(k);
	return NULL;
}

/* The capturer of the running test, freed by the teardown if the test
 * fails half-way (one capturer per process: a leak would fail the rest). */
static struct sprobe_capturer *g_cur;

static struct sprobe_capturer *track(struct sprobe_capturer *c)
{
	if (c)
		g_cur = c;
	return c;
}

static void untrack(struct sprobe_capturer *c)
{
	if (c == g_cur)
		g_cur = NULL;
	sprobe_capturer__free(c);
}

static int teardown(void **state)
{
	untrack(g_cur);
	return 0;
}

/* qemu-user emulates the guest's signal masks: /proc/<tid>/status shows
 * the host thread's, so "this thread blocks the signal" cannot be seen. */
static bool under_qemu(void)
{
	const char *q = getenv("SPROBE_TEST_QEMU");

	return q && *q == '1';
}

static struct sprobe_capturer *new_capturer(uint32_t strategy, uint32_t method)
{
	struct sprobe_capture_opts o = {
		.sz = sizeof(o),
		.timeout_ns = fx_timeout_ns(),
		.strategy = strategy,
		.method = method,
	};
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));

	if (!c)
		print_message("sprobe_capturer__new: %s\n", strerror(errno));
	return c;
}

static void check_known_stack(uint32_t strategy)
{
	struct known k = { 0 };
	struct sprobe_capturer *c = new_capturer(strategy, SPROBE_METHOD_SIGNAL);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_thread_sample *t;
	pthread_t th;
	bool leaf = false, marker = false, caller = false;
	uint64_t m = (uint64_t)(uintptr_t)known_marker;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(pthread_create(&th, NULL, known_main, &k), 0);
	assert_int_equal(fx_wait_flag(&k.ready, fx_timeout_ns()), 0);

	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_false(sprobe_snapshot__frames_resolved(s));
	assert_int_equal(sprobe_snapshot__unwind_fp(s), 0);
	assert_true(sprobe_snapshot__frames_resolved(s));
	atomic_store(&k.stop, 1);
	pthread_join(th, NULL);

	t = fx_find(s, atomic_load(&k.tid));
	assert_non_null(t);
	assert_int_equal(t->drop_reason, SPROBE_DROP_NONE);
	assert_int_equal(t->stage, SPROBE_STAGE_UNWOUND);
	assert_true(t->nframes >= 3);
	for (uint32_t i = 0; i < t->nframes; i++) {
		uint64_t pc = t->frames[i].pc;

		if (i == 0 && pc >= (uint64_t)(uintptr_t)sprobe_test_leaf &&
		    pc < (uint64_t)(uintptr_t)sprobe_test_leaf + 64)
			leaf = true;
		if (i > 0 && pc > m && pc - m < 4096)
			marker = true;
		if (i > 0 && pc == k.marker_ret)
			caller = true;
	}
	if (!leaf || !marker || !caller) {
		print_message("ip=%#llx leaf=%p marker=%p marker_ret=%#llx frames:",
			      (unsigned long long)t->ip, (void *)sprobe_test_leaf,
			      (void *)known_marker, (unsigned long long)k.marker_ret);
		for (uint32_t i = 0; i < t->nframes; i++)
			print_message(" %#llx", (unsigned long long)t->frames[i].pc);
		print_message("\n");
	}
	assert_true(leaf);   /* frame 0: the parked leaf */
	assert_true(marker); /* the leaf's caller: known_marker */
	assert_true(caller); /* the marker's caller: known_caller */
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	sprobe_snapshot__free(s);
	untrack(c);
}

static void test_known_stack(void **state)
{
	check_known_stack(SPROBE_STRATEGY_PARALLEL);
}

static void test_known_stack_sequential(void **state)
{
	check_known_stack(SPROBE_STRATEGY_SEQUENTIAL);
}

/* ------------------------------------------------------------------ */
/* Coverage and drop reasons                                           */
/* ------------------------------------------------------------------ */

static void test_all_siblings_not_caller(void **state)
{
	enum { N = 6 };
	struct worker w[N];
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	const struct sprobe_snapshot_stats *st;
	pid_t self = (pid_t)syscall(SYS_gettid);

	assert_non_null(c);
	assert_non_null(s);
	for (int i = 0; i < N; i++)
		assert_int_equal(fx_worker_start(&w[i], i % 2 ? PARK_PIPE : PARK_SPIN, 0), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	st = sprobe_snapshot__stats(s);
	assert_true(fx_stats_consistent(st));
	assert_null(fx_find(s, self));
	for (int i = 0; i < N; i++) {
		struct sprobe_thread_sample *t = fx_find(s, atomic_load(&w[i].tid));

		assert_non_null(t);
		if (t->stage != SPROBE_STAGE_RAW)
			print_message("tid %d dropped: %s\n", t->tid,
				      sprobe_drop_reason__str(t->drop_reason));
		assert_int_equal(t->stage, SPROBE_STAGE_RAW);
		assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
		assert_true(t->stack_len > 0);
		assert_true(t->stack_addr <= t->sp && t->sp < t->stack_addr + t->stack_len);
		assert_true(t->sp - t->stack_addr <= SPROBE_REDZONE);
		assert_true(t->stack_top >= t->stack_addr + t->stack_len);
		assert_true(t->signal_ns <= t->entry_ns && t->entry_ns <= t->exit_ns);
		assert_true(t->ip != 0);
#if defined(__x86_64__)
		assert_true(t->regs[7] == t->sp && t->regs[16] == t->ip && t->regs[6] == t->fp);
#else
		assert_true(t->has_lr && t->regs[30] == t->lr && t->regs[31] == t->sp &&
			    t->regs[32] == t->ip && t->regs[29] == t->fp);
#endif
	}
	assert_true(st->threads_captured >= N);
	assert_true(st->pause_ns > 0);
	for (int i = 0; i < N; i++)
		fx_worker_stop(&w[i]);
	sprobe_snapshot__free(s);
	untrack(c);
}

static void test_blocking_thread_dropped(void **state)
{
	struct worker blk, run;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_thread_sample *t;

	if (under_qemu())
		SPROBE_SKIP("qemu-user: /proc status shows the host's signal mask, not the guest's");

	assert_non_null(c);
	assert_int_equal(fx_worker_start(&blk, PARK_SIGBLOCK, sprobe_capturer__signo(c)), 0);
	assert_int_equal(fx_worker_start(&run, PARK_PIPE, 0), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = fx_find(s, atomic_load(&blk.tid));
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_EMPTY);
	assert_int_equal(t->drop_reason, SPROBE_DROP_BLOCKED);
	assert_true(sprobe_snapshot__stats(s)->dropped[SPROBE_DROP_BLOCKED] >= 1);
	t = fx_find(s, atomic_load(&run.tid));
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	/* Unwinding skips the dropped thread and says so. */
	assert_int_equal(sprobe_unwind_fp(fx_find(s, atomic_load(&blk.tid))), -ENODATA);
	/* Found out while waiting the first time (its signal is now pending);
	 * from then on checked before signalling (and, its signal pending,
	 * not signalled again): still dropped as blocked. */
	for (int k = 0; k < 3; k++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		t = fx_find(s, atomic_load(&blk.tid));
		assert_non_null(t);
		assert_int_equal(t->drop_reason, SPROBE_DROP_BLOCKED);
		assert_int_equal(fx_find(s, atomic_load(&run.tid))->stage, SPROBE_STAGE_RAW);
	}
	fx_worker_stop(&blk);
	fx_worker_stop(&run);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* The hook runs between enumeration and the signal. */
struct hook_ctx {
	pid_t victim;
	int action; /* 0 exit, 1 block the signal */
	struct worker *w;
	int fired;
};

static void before_signal(void *arg, pid_t tid)
{
	struct hook_ctx *h = arg;

	if (tid != h->victim || h->fired)
		return;
	h->fired = 1;
	if (h->action == 0) {
		/* The thread exits and is reaped: its tid is gone. */
		fx_worker_stop(h->w);
	} else {
		/* The thread starts blocking the signal after we checked. */
		atomic_store(&h->w->ready, 0);
		char ch = 'b';
		assert_int_equal(write(h->w->pipe[1], &ch, 1), 1);
		assert_int_equal(fx_wait_flag(&h->w->ready, fx_timeout_ns()), 0);
	}
}

/* A worker variant that, on its first pipe byte, blocks sig then parks. */
static void *late_block_main(void *arg)
{
	struct worker *w = arg;
	sigset_t set;
	char ch;

	atomic_store(&w->tid, (pid_t)syscall(SYS_gettid));
	atomic_store(&w->ready, 1);
	while (read(w->pipe[0], &ch, 1) < 0 && errno == EINTR)
		;
	sigemptyset(&set);
	sigaddset(&set, w->signo);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	atomic_store(&w->ready, 1);
	while (read(w->pipe[0], &ch, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

static void test_thread_exits_before_signal(void **state)
{
	struct worker victim, other;
	struct hook_ctx h = { .action = 0, .w = &victim };
	struct sprobe_capture_opts o = {
		.sz = sizeof(o), .timeout_ns = fx_timeout_ns(),
		.before_signal = before_signal, .hook_ctx = &h,
	};
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_thread_sample *t;

	assert_non_null(c);
	assert_int_equal(fx_worker_start(&victim, PARK_PIPE, 0), 0);
	assert_int_equal(fx_worker_start(&other, PARK_SPIN, 0), 0);
	h.victim = atomic_load(&victim.tid);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_int_equal(h.fired, 1);
	t = fx_find(s, h.victim);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_EMPTY);
	assert_int_equal(t->drop_reason, SPROBE_DROP_EXITED);
	assert_non_null(fx_find(s, atomic_load(&other.tid)));
	assert_int_equal(fx_find(s, atomic_load(&other.tid))->stage, SPROBE_STAGE_RAW);
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	assert_true(sprobe_snapshot__stats(s)->dropped[SPROBE_DROP_EXITED] >= 1);
	fx_worker_stop(&other);
	sprobe_snapshot__free(s);
	untrack(c);
}

static void test_thread_blocks_after_check(void **state)
{
	struct worker victim;
	struct hook_ctx h = { .action = 1, .w = &victim };
	struct sprobe_capture_opts o = {
		.sz = sizeof(o), .timeout_ns = fx_timeout_ns(),
		.before_signal = before_signal, .hook_ctx = &h,
	};
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_thread_sample *t;
	char ch = 'x';

	if (under_qemu())
		SPROBE_SKIP("qemu-user: /proc status shows the host's signal mask, not the guest's");

	assert_non_null(c);
	memset(&victim, 0, sizeof(victim));
	victim.signo = sprobe_capturer__signo(c);
	assert_int_equal(pipe(victim.pipe), 0);
	assert_int_equal(pthread_create(&victim.th, NULL, late_block_main, &victim), 0);
	assert_int_equal(fx_wait_flag(&victim.ready, fx_timeout_ns()), 0);
	h.victim = atomic_load(&victim.tid);
	/* The signal stays pending in the blocking thread; the capture must
	 * notice (SigBlk re-read while waiting) and drop it as blocked, not
	 * hang and not wait for the thread. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = fx_find(s, h.victim);
	assert_non_null(t);
	assert_int_equal(t->drop_reason, SPROBE_DROP_BLOCKED);
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	/* The stale signal is still queued. Freeing the capturer discards it
	 * (SIG_IGN) before restoring the default action, which would
	 * otherwise kill the process when the thread unblocks. */
	untrack(c);
	{
		sigset_t set;

		/* The victim exits with the signal still blocked; check the
		 * queue was really emptied from this thread's view too. */
		sigpending(&set);
		assert_false(sigismember(&set, victim.signo));
	}
	assert_int_equal(write(victim.pipe[1], &ch, 1), 1);
	pthread_join(victim.th, NULL);
	close(victim.pipe[0]);
	close(victim.pipe[1]);
	sprobe_snapshot__free(s);
}

static void app_handler(int sig)
{
	(void)sig;
}

static void test_app_handler_refused(void **state)
{
	struct sigaction sa, cur;
	struct sprobe_capture_opts o = { .sz = sizeof(o) };
	struct sprobe_capturer *c;
	int sig;

	/* Take the signal the capturer would pick first. */
	c = track(sprobe_capturer__new(NULL));
	assert_non_null(c);
	sig = sprobe_capturer__signo(c);
	assert_true(sig >= SIGRTMIN && sig <= SIGRTMAX);
	untrack(c);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_handler;
	assert_int_equal(sigaction(sig, &sa, NULL), 0);

	/* Asked for explicitly: refused with EBUSY. */
	o.signo = sig;
	errno = 0;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EBUSY);
	/* Picked automatically: another one. */
	c = track(sprobe_capturer__new(NULL));
	assert_non_null(c);
	assert_int_not_equal(sprobe_capturer__signo(c), sig);
	untrack(c);
	/* The application's handler was never replaced. */
	assert_int_equal(sigaction(sig, NULL, &cur), 0);
	assert_ptr_equal(cur.sa_handler, app_handler);
	sa.sa_handler = SIG_DFL;
	sigaction(sig, &sa, NULL);
}

/* The application replaces our handler after we installed it: captures
 * refuse instead of sending signals that would now reach the app. */
static _Atomic unsigned long app_runs;

static void app_counting_handler(int sig)
{
	(void)sig;
	atomic_fetch_add(&app_runs, 1);
}

/*
 * A handler installed over ours without the agent (here libc's sigaction
 * is the raw install: no wrapper; in a Go program the runtime's raw
 * rt_sigaction): the next capture puts ours back in front and makes that
 * handler the program's disposition, which then gets the signals the probe
 * did not send (and none it did).
 */
static void test_handler_replaced(void **state)
{
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(8, 4096);
	struct sigaction sa, cur;
	struct worker w;
	uint64_t absorbed0, absorbed;
	int sig;

	(void)state;
	assert_non_null(c);
	sig = sprobe_capturer__signo(c);
	sprobe_lx_chain_stats(NULL, &absorbed0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_counting_handler;
	atomic_store(&app_runs, 0);
	assert_int_equal(sigaction(sig, &sa, NULL), 0);
	assert_int_equal(fx_worker_start(&w, PARK_PIPE, 0), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_non_null(fx_find(s, atomic_load(&w.tid)));
	assert_int_equal(fx_find(s, atomic_load(&w.tid))->stage, SPROBE_STAGE_RAW);
	sprobe_lx_chain_stats(NULL, &absorbed);
	assert_int_equal(absorbed - absorbed0, 1);
	/* The kernel holds ours again; the record, the program's. */
	assert_int_equal(sigaction(sig, NULL, &cur), 0);
	assert_true((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction != NULL &&
		    cur.sa_handler != app_counting_handler);
	assert_int_equal(sprobe_lx_chain_sigaction(sig, NULL, &cur), 0);
	assert_true(cur.sa_handler == app_counting_handler && !(cur.sa_flags & SA_SIGINFO));
	/* The capture did not reach it; a signal of the program's does. */
	assert_int_equal(atomic_load(&app_runs), 0);
	assert_int_equal(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig), 0);
	assert_int_equal(atomic_load(&app_runs), 1); /* delivered before tgkill returns */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_int_equal(atomic_load(&app_runs), 1);
	fx_worker_stop(&w);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	assert_int_equal(sprobe_lx_chain_sigaction(sig, &sa, NULL), 0);
	sprobe_snapshot__free(s);
	untrack(c);
}

static void test_bad_options(void **state)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o) };
	struct sprobe_capturer *c, *c2;

	o.signo = SIGURG;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	o.signo = SIGPROF;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	o.signo = SIGRTMAX + 1;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	o.signo = 0;
	o.max_stack_bytes = SPROBE_MAX_STACK_BYTES + 1;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	o.max_stack_bytes = 0;
	o.method = SPROBE_METHOD_SUSPEND;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	o.method = 0;
	o.sz = 0;
	assert_null(sprobe_capturer__new(&o));
	assert_int_equal(errno, EINVAL);
	assert_null(sprobe_snapshot__new(SPROBE_MAX_THREADS_LIMIT + 1, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(sprobe_snapshot__new(1, SPROBE_MAX_STACK_BYTES + 1));
	assert_int_equal(errno, EINVAL);

	/* One capturer per process. */
	c = track(sprobe_capturer__new(NULL));
	assert_non_null(c);
	c2 = track(sprobe_capturer__new(NULL));
	assert_null(c2);
	assert_int_equal(errno, EBUSY);
	assert_int_equal(sprobe_capturer__capture(c, NULL), -EINVAL);
	assert_int_equal(sprobe_capturer__capture(NULL, NULL), -EINVAL);
	untrack(c);
	sprobe_capturer__free(NULL);
	sprobe_snapshot__free(NULL);
	assert_int_equal(sprobe_capturer__signo(NULL), -EINVAL);
	assert_int_equal(sprobe_unwind_fp(NULL), -EINVAL);
	assert_int_equal(sprobe_snapshot__unwind_fp(NULL), -EINVAL);
	assert_int_equal(sprobe_snapshot__nthreads(NULL), 0);
	assert_null(sprobe_snapshot__stats(NULL));
	assert_string_equal(sprobe_drop_reason__str(SPROBE_DROP_BLOCKED), "blocked");
	assert_string_equal(sprobe_drop_reason__str(999), "unknown");
}

/* ------------------------------------------------------------------ */
/* The copy                                                            */
/* ------------------------------------------------------------------ */

struct patterned {
	_Atomic int ready, stop;
	_Atomic pid_t tid;
	uint64_t pat_addr;
	size_t depth; /* bytes of stack to use below the pattern */
};

__attribute__((noinline, noclone)) static void spin_with(struct patterned *p, volatile uint8_t *buf)
{
	atomic_store(&p->ready, 1);
	while (!atomic_load(&p->stop))
		buf[0] = buf[0];
}

__attribute__((noinline, noclone)) static void patterned_frame(struct patterned *p)
{
	volatile uint8_t pat[1024];
	volatile uint8_t *deep;

	for (size_t i = 0; i < sizeof(pat); i++)
		pat[i] = (uint8_t)(i * 7 + 3);
	p->pat_addr = (uint64_t)(uintptr_t)pat;
	deep = p->depth ? __builtin_alloca(p->depth) : pat;
	if (p->depth)
		memset((void *)deep, 0x5a, p->depth);
	spin_with(p, deep);
	p->tid = p->tid; /* keep pat alive across the call */
	pat[0] = pat[1];
}

static void *patterned_main(void *arg)
{
	struct patterned *p = arg;

	atomic_store(&p->tid, (pid_t)syscall(SYS_gettid));
	patterned_frame(p);
	return NULL;
}

static void test_copy_bytes_match(void **state)
{
	struct patterned p = { .depth = 0 };
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_thread_sample *t;
	pthread_t th;

	assert_non_null(c);
	assert_int_equal(pthread_create(&th, NULL, patterned_main, &p), 0);
	assert_int_equal(fx_wait_flag(&p.ready, fx_timeout_ns()), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	atomic_store(&p.stop, 1);
	pthread_join(th, NULL);
	t = fx_find(s, p.tid);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_false(t->truncated);
	assert_true(p.pat_addr >= t->stack_addr);
	assert_true(p.pat_addr + 1024 <= t->stack_addr + t->stack_len);
	for (size_t i = 0; i < 1024; i++)
		assert_int_equal(t->stack[p.pat_addr - t->stack_addr + i], (uint8_t)(i * 7 + 3));
	sprobe_snapshot__free(s);
	untrack(c);
}

static void test_truncated_at_cap(void **state)
{
	struct patterned p = { .depth = 64 * 1024 };
	struct sprobe_capture_opts o = {
		.sz = sizeof(o), .timeout_ns = fx_timeout_ns(), .max_stack_bytes = 8192,
	};
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_snapshot *small = sprobe_snapshot__new(64, 4096);
	struct sprobe_thread_sample *t;
	pthread_t th;

	assert_non_null(c);
	assert_non_null(small);
	assert_int_equal(pthread_create(&th, NULL, patterned_main, &p), 0);
	assert_int_equal(fx_wait_flag(&p.ready, fx_timeout_ns()), 0);
	/* The capturer's cap. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	t = fx_find(s, p.tid);
	assert_non_null(t);
	if (!t->truncated)
		print_message("sp=%#llx top=%#llx len=%zu stage=%u drop=%u\n",
			      (unsigned long long)t->sp, (unsigned long long)t->stack_top,
			      t->stack_len, t->stage, t->drop_reason);
	assert_true(t->truncated);
	assert_int_equal(t->stack_len, (t->sp - t->stack_addr) + 8192);
	assert_true(t->stack_top > t->sp + 8192);
	/* The snapshot's cap, when smaller. */
	assert_int_equal(sprobe_capturer__capture(c, small), 0);
	t = fx_find(small, p.tid);
	assert_non_null(t);
	if (!t->truncated)
		print_message("sp=%#llx top=%#llx len=%zu stage=%u drop=%u\n",
			      (unsigned long long)t->sp, (unsigned long long)t->stack_top,
			      t->stack_len, t->stage, t->drop_reason);
	assert_true(t->truncated);
	assert_int_equal(t->stack_len, (t->sp - t->stack_addr) + 4096);
	atomic_store(&p.stop, 1);
	pthread_join(th, NULL);
	sprobe_snapshot__free(small);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* A thread interrupted while it runs an application handler on a
 * sigaltstack: the copy comes from the altstack, bounded by it. */
static _Atomic int alt_ready, alt_stop;
static void alt_handler(int sig)
{
	(void)sig;
	atomic_store(&alt_ready, 1);
	while (!atomic_load(&alt_stop))
		;
}

struct alt_thread {
	_Atomic pid_t tid;
	uint8_t *mem;
	size_t size;
};

static void *alt_main(void *arg)
{
	struct alt_thread *a = arg;
	stack_t ss = { .ss_sp = a->mem, .ss_size = a->size };

	atomic_store(&a->tid, (pid_t)syscall(SYS_gettid));
	sigaltstack(&ss, NULL);
	raise(SIGUSR2); /* runs alt_handler on the altstack until alt_stop */
	return NULL;
}

static void test_sigaltstack(void **state)
{
	struct alt_thread a = { .size = 64 * 1024 };
	struct sigaction sa, old;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_thread_sample *t;
	pthread_t th;

	assert_non_null(c);
	a.mem = malloc(a.size);
	assert_non_null(a.mem);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = alt_handler;
	sa.sa_flags = SA_ONSTACK;
	assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
	atomic_store(&alt_ready, 0);
	atomic_store(&alt_stop, 0);
	assert_int_equal(pthread_create(&th, NULL, alt_main, &a), 0);
	assert_int_equal(fx_wait_flag(&alt_ready, fx_timeout_ns()), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	atomic_store(&alt_stop, 1);
	pthread_join(th, NULL);
	sigaction(SIGUSR2, &old, NULL);
	t = fx_find(s, a.tid);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_true(t->sp >= (uint64_t)(uintptr_t)a.mem &&
		    t->sp < (uint64_t)(uintptr_t)a.mem + a.size);
	assert_int_equal(t->stack_top, (uint64_t)(uintptr_t)a.mem + a.size);
	assert_true(t->stack_addr >= (uint64_t)(uintptr_t)a.mem);
	free(a.mem);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* ------------------------------------------------------------------ */
/* Signals the probe did not send                                      */
/* ------------------------------------------------------------------ */

/* The program's handler on the capture signal (set through the backend's
 * record, as the agent's sigaction wrapper does): what it received. */
static _Atomic unsigned long foreign_seen, foreign_queued;

static void foreign_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	atomic_fetch_add(&foreign_seen, 1);
	if (si->si_code == SI_QUEUE)
		atomic_fetch_add(&foreign_queued, 1);
}

/*
 * Deliveries of the capture signal the probe did not send go to the
 * program's disposition (backends/linux/chain.c), never into a capture: a
 * plain tgkill (SI_TKILL), and forged SI_QUEUE values from our own pid with
 * every slot index and generations never handed out but no capture key.
 * The program's handler gets each exactly once, its read-back is its own,
 * and captures go on.
 */
static void test_foreign_signals_forwarded(void **state)
{
	struct worker w;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sigaction sa, cur, dfl;
	siginfo_t si;
	int sig;

	(void)state;
	assert_non_null(c);
	sig = sprobe_capturer__signo(c);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = foreign_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sprobe_lx_chain_sigaction(sig, &sa, NULL), 0);
	assert_int_equal(sprobe_lx_chain_sigaction(sig, NULL, &cur), 0);
	assert_true(cur.sa_sigaction == foreign_handler && (cur.sa_flags & SA_SIGINFO));
	atomic_store(&foreign_seen, 0);
	atomic_store(&foreign_queued, 0);
	assert_int_equal(fx_worker_start(&w, PARK_PIPE, 0), 0);
	assert_int_equal(syscall(SYS_tgkill, getpid(), atomic_load(&w.tid), sig), 0);
	for (uint64_t v = 0; v < 64; v++) {
		memset(&si, 0, sizeof(si));
		si.si_signo = sig;
		si.si_code = SI_QUEUE;
		si.si_pid = getpid();
		si.si_uid = getuid();
		si.si_value.sival_ptr = (void *)(uintptr_t)((v * 0x10001ull) << 16 | v);
		assert_int_equal(syscall(SYS_rt_tgsigqueueinfo, getpid(), atomic_load(&w.tid), sig, &si), 0);
	}
	/* Real-time signals queue: all 65 are delivered. */
	uint64_t t0 = fx_now_ns();
	while (atomic_load(&foreign_seen) < 65 && fx_now_ns() - t0 < 10000000000ull)
		sched_yield();
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_non_null(fx_find(s, atomic_load(&w.tid)));
	assert_int_equal(fx_find(s, atomic_load(&w.tid))->stage, SPROBE_STAGE_RAW);
	/* Exactly the 65: the capture's own signal went nowhere else. */
	assert_int_equal(atomic_load(&foreign_seen), 65);
	assert_int_equal(atomic_load(&foreign_queued), 64);
	fx_worker_stop(&w);
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	assert_int_equal(sprobe_lx_chain_sigaction(sig, &dfl, NULL), 0);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* A handler that passes every signal back to "the previous handler",
 * ours, as a chaining profiler that found ours installed would. */
static _Atomic unsigned long bounce_runs;

static void bounce_handler(int sig, siginfo_t *si, void *uc)
{
	atomic_fetch_add(&bounce_runs, 1);
	sprobe_lx_capture_handler(sig, si, uc);
}

/* forward() hands such a delivery to the program once: handed back, it
 * is dropped, not forwarded again for ever (a stack overflow). */
static void test_forward_loop_broken(void **state)
{
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sigaction sa;
	int sig;

	(void)state;
	assert_non_null(c);
	sig = sprobe_capturer__signo(c);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = bounce_handler;
	sa.sa_flags = SA_SIGINFO;
	assert_int_equal(sprobe_lx_chain_sigaction(sig, &sa, NULL), 0);
	atomic_store(&bounce_runs, 0);
	assert_int_equal(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig), 0);
	assert_int_equal(atomic_load(&bounce_runs), 1);
	/* A second delivery at the same depth is the program's again. */
	assert_int_equal(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig), 0);
	assert_int_equal(atomic_load(&bounce_runs), 2);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	assert_int_equal(sprobe_lx_chain_sigaction(sig, &sa, NULL), 0);
	untrack(c);
}

/* ------------------------------------------------------------------ */
/* No allocation                                                       */
/* ------------------------------------------------------------------ */

static void test_no_alloc_in_window(void **state)
{
	enum { N = 8 };
	const int CAPTURES = under_qemu() ? 4 : 200;
	struct worker w[N];
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	sigset_t set, old;
	int sig;

	assert_non_null(c);
	sig = sprobe_capturer__signo(c);
	/* The interposer works: an allocation with the signal blocked counts. */
	atomic_store(&g_watch_signo, sig);
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	{
		/* volatile: the compiler may drop a malloc/free pair. */
		void *volatile p = malloc(8);

		free(p);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	assert_int_equal(atomic_load(&g_alloc_in_handler), 2);
	atomic_store(&g_alloc_in_handler, 0);

	for (int i = 0; i < N; i++)
		assert_int_equal(fx_worker_start(&w[i], i < N / 2 ? PARK_MALLOC : PARK_PIPE, 0), 0);
	/* Warm up the snapshot and the capturer. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	unsigned captured = 0;
	t_count_mine = 1;
	for (int k = 0; k < CAPTURES; k++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);

		captured += st->threads_captured;
		if (st->threads_dropped)
			for (int r = 0; r < SPROBE_DROP__COUNT; r++)
				if (st->dropped[r])
					print_message("capture %d: %u dropped %s\n", k,
						      st->dropped[r], sprobe_drop_reason__str(r));
	}
	t_count_mine = 0;
	for (int i = 0; i < N; i++)
		fx_worker_stop(&w[i]);
	atomic_store(&g_watch_signo, 0);
	/* The workers allocated all along; the handlers never did. */
	for (int i = 0; i < N / 2; i++)
		assert_true(w[i].iterations > 0);
	assert_true(captured >= (unsigned)CAPTURES * N);
	assert_int_equal(atomic_load(&g_alloc_in_handler), 0);
	/* A warm capture allocates nothing on the probe side either. */
	assert_int_equal(atomic_load(&g_alloc_mine), 0);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* Many threads (sorting and range tables beyond small-buffer sizes):
 * still no allocation once warm. */
static void test_warm_capture_many_threads(void **state)
{
	enum { N = 300 };
	struct worker *w;
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	unsigned captured = 0;

	if (under_qemu())
		SPROBE_SKIP("300 threads under qemu-user: native lane only");
	w = calloc(N, sizeof(*w));
	c = new_capturer(0, 0);
	s = sprobe_snapshot__new(N + 16, 16384);
	assert_non_null(w);
	assert_non_null(c);
	assert_non_null(s);
	for (int i = 0; i < N; i++)
		assert_int_equal(fx_worker_start(&w[i], PARK_PIPE, 0), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	atomic_store(&g_alloc_mine, 0);
	t_count_mine = 1;
	for (int k = 0; k < 3; k++) {
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		captured += sprobe_snapshot__stats(s)->threads_captured;
		assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	}
	t_count_mine = 0;
	assert_int_equal(atomic_load(&g_alloc_mine), 0);
	assert_true(captured >= 3 * N);
	for (int i = 0; i < N; i++)
		fx_worker_stop(&w[i]);
	free(w);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* ------------------------------------------------------------------ */
/* VM_READV method (the seed's strategy)                               */
/* ------------------------------------------------------------------ */

static void test_vm_readv_method(void **state)
{
	struct patterned p = { .depth = 0 };
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	struct sprobe_thread_sample *t;
	pthread_t th;
	char a[8] = "abcdefg", b[8];
	struct iovec l = { b, 8 }, r = { a, 8 };

	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) < 0)
		SPROBE_SKIP("process_vm_readv: %s (qemu-user has none)", strerror(errno));
	c = new_capturer(0, SPROBE_METHOD_VM_READV);
	s = sprobe_snapshot__new(64, 0);
	assert_non_null(c);
	assert_int_equal(pthread_create(&th, NULL, patterned_main, &p), 0);
	assert_int_equal(fx_wait_flag(&p.ready, fx_timeout_ns()), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	atomic_store(&p.stop, 1);
	pthread_join(th, NULL);
	t = fx_find(s, p.tid);
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_int_equal(t->method, SPROBE_METHOD_VM_READV);
	for (size_t i = 0; i < 1024; i++)
		assert_int_equal(t->stack[p.pat_addr - t->stack_addr + i], (uint8_t)(i * 7 + 3));
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	sprobe_snapshot__free(s);
	untrack(c);
}

/* ------------------------------------------------------------------ */
/* Frame-pointer unwinder on hostile copies                            */
/* ------------------------------------------------------------------ */

static uint64_t fake_stack[1024];

static void fake_sample(struct sprobe_thread_sample *t, size_t words)
{
	memset(t, 0, sizeof(*t));
	t->stage = SPROBE_STAGE_RAW;
	t->stack = (const uint8_t *)fake_stack;
	t->stack_addr = 0x7f0000000000ull;
	t->sp = t->stack_addr;
	t->stack_len = words * 8;
	t->ip = 0x401000;
}

#define FAKE_ADDR(w) (0x7f0000000000ull + (uint64_t)(w) * 8)

static void test_unwind_fp_hostile(void **state)
{
	static struct sprobe_thread_sample t;
	int n;

	/* A clean chain of 3 records then a zero frame pointer. */
	fake_sample(&t, 64);
	memset(fake_stack, 0, sizeof(fake_stack));
	t.fp = FAKE_ADDR(4);
	fake_stack[4] = FAKE_ADDR(10); fake_stack[5] = 0x402000;
	fake_stack[10] = FAKE_ADDR(20); fake_stack[11] = 0x403000;
	fake_stack[20] = 0; fake_stack[21] = 0x404000;
	n = sprobe_unwind_fp(&t);
	assert_int_equal(n, 4);
	assert_int_equal(t.stage, SPROBE_STAGE_UNWOUND);
	assert_int_equal(t.frames[0].pc, 0x401000);
	assert_int_equal(t.frames[0].method, SPROBE_FRAME_IP);
	assert_int_equal(t.frames[1].pc, 0x402000);
	assert_int_equal(t.frames[1].method, SPROBE_FRAME_FP);
	assert_int_equal(t.frames[3].pc, 0x404000);

	/* A loop: the record points at itself. */
	fake_sample(&t, 64);
	t.fp = FAKE_ADDR(4);
	fake_stack[4] = FAKE_ADDR(4); fake_stack[5] = 0x402000;
	assert_int_equal(sprobe_unwind_fp(&t), 2);
	/* A cycle of two. */
	fake_sample(&t, 64);
	t.fp = FAKE_ADDR(4);
	fake_stack[4] = FAKE_ADDR(8); fake_stack[5] = 0x402000;
	fake_stack[8] = FAKE_ADDR(4); fake_stack[9] = 0x403000;
	assert_int_equal(sprobe_unwind_fp(&t), 3);
	/* Frame pointer outside the copy, below SP, misaligned, or whose
	 * record straddles the end: IP only. */
	uint64_t bad[] = { 0, 0x1234, FAKE_ADDR(64), FAKE_ADDR(63), FAKE_ADDR(4) + 3,
			   0x7f0000000000ull - 16, ~0ull - 7 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fake_sample(&t, 64);
		t.fp = bad[i];
		assert_int_equal(sprobe_unwind_fp(&t), 1);
	}
	/* A garbage return address ends the walk. */
	fake_sample(&t, 64);
	t.fp = FAKE_ADDR(4);
	fake_stack[4] = FAKE_ADDR(10); fake_stack[5] = 0x10;
	assert_int_equal(sprobe_unwind_fp(&t), 1);
	/* A long, well-formed chain stops at SPROBE_MAX_FRAMES. */
	fake_sample(&t, 1024);
	t.fp = FAKE_ADDR(0);
	for (int i = 0; i < 500; i++) {
		fake_stack[2 * i] = FAKE_ADDR(2 * i + 2);
		fake_stack[2 * i + 1] = 0x500000 + (uint64_t)i;
	}
	assert_int_equal(sprobe_unwind_fp(&t), SPROBE_MAX_FRAMES);
	/* LR: taken when the first record does not hold it (a leaf)... */
	fake_sample(&t, 64);
	t.fp = FAKE_ADDR(4);
	fake_stack[4] = 0; fake_stack[5] = 0x402000;
	t.has_lr = true;
	t.lr = 0x405000;
	assert_int_equal(sprobe_unwind_fp(&t), 3);
	assert_int_equal(t.frames[1].pc, 0x405000);
	assert_int_equal(t.frames[1].method, SPROBE_FRAME_LR);
	assert_int_equal(t.frames[2].pc, 0x402000);
	/* ...and not duplicated when the function already saved it. */
	t.lr = 0x402000;
	assert_int_equal(sprobe_unwind_fp(&t), 2);
	/* Not captured: refused. */
	fake_sample(&t, 64);
	t.stage = SPROBE_STAGE_EMPTY;
	assert_int_equal(sprobe_unwind_fp(&t), -ENODATA);
}

/* Reuse: the same snapshot through several captures with a changing
 * thread set; samples never describe a thread that is gone. */
static void test_snapshot_reuse(void **state)
{
	struct worker w[4];
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);

	assert_non_null(c);
	for (int round = 0; round < 4; round++) {
		assert_int_equal(fx_worker_start(&w[round], PARK_PIPE, 0), 0);
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
		for (int i = 0; i <= round; i++)
			assert_non_null(fx_find(s, atomic_load(&w[i].tid)));
		sprobe_snapshot__unwind_fp(s);
		assert_true(sprobe_snapshot__frames_resolved(s));
	}
	for (int i = 0; i < 4; i++)
		fx_worker_stop(&w[i]);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_false(sprobe_snapshot__frames_resolved(s));
	/* pthread_join() returns when the thread cleared its tid, which is
	 * before the kernel removes it from /proc/self/task: a joined thread
	 * may still be listed, but never captured. */
	for (int i = 0; i < 4; i++) {
		struct sprobe_thread_sample *t = fx_find(s, w[i].tid);

		assert_true(t == NULL || (t->stage == SPROBE_STAGE_EMPTY &&
					  t->drop_reason != SPROBE_DROP_NONE));
	}
	sprobe_snapshot__free(s);
	untrack(c);
}

/* More threads than slots: the rest are counted as NO_SLOT. */
static void test_more_threads_than_slots(void **state)
{
	struct worker w[5];
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(2, 4096);
	const struct sprobe_snapshot_stats *st;

	assert_non_null(c);
	for (int i = 0; i < 5; i++)
		assert_int_equal(fx_worker_start(&w[i], PARK_PIPE, 0), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	st = sprobe_snapshot__stats(s);
	assert_int_equal(sprobe_snapshot__nthreads(s), 2);
	assert_true(st->threads_total >= 5);
	assert_int_equal(st->dropped[SPROBE_DROP_NO_SLOT], st->threads_total - 2);
	assert_true(fx_stats_consistent(st));
	assert_null(sprobe_snapshot__thread(s, 2));
	assert_int_equal(errno, ERANGE);
	for (int i = 0; i < 5; i++)
		fx_worker_stop(&w[i]);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* A forked child must not signal its parent's threads. */
static void test_fork_child_refused(void **state)
{
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(8, 4096);
	int st = 0;
	pid_t pid;

	assert_non_null(c);
	assert_non_null(s);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(sprobe_capturer__capture(c, s) == -ECHILD ? 0 : 1);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* The parent's capturer is unaffected. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* ------------------------------------------------------------------ */
/* Excluded threads (stackprobe's own)                                 */
/* ------------------------------------------------------------------ */

struct excl_hook {
	pid_t watch;
	_Atomic int signalled; /* before_signal calls for `watch` */
	_Atomic int calls;     /* before_signal calls in all */
};

static void excl_before_signal(void *arg, pid_t tid)
{
	struct excl_hook *h = arg;

	atomic_fetch_add(&h->calls, 1);
	if (tid == h->watch)
		atomic_fetch_add(&h->signalled, 1);
}

static void test_excluded_thread(void **state)
{
	struct worker ex, other;
	struct excl_hook h = { 0 };
	struct sprobe_capture_opts o = {
		.sz = sizeof(o),
		.timeout_ns = fx_timeout_ns(),
		.before_signal = excl_before_signal,
		.hook_ctx = &h,
	};
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	const struct sprobe_snapshot_stats *st;
	uint32_t total_before;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(fx_worker_start(&ex, PARK_SPIN, 0), 0);
	assert_int_equal(fx_worker_start(&other, PARK_PIPE, 0), 0);
	h.watch = atomic_load(&ex.tid);

	/* Before: the thread is there and counted. */
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_non_null(fx_find(s, h.watch));
	assert_int_equal(atomic_load(&h.signalled), 1);
	total_before = sprobe_snapshot__stats(s)->threads_total;

	assert_int_equal(sprobe_capturer__exclude_tid(c, h.watch), 0);
	assert_int_equal(sprobe_capturer__exclude_tid(c, h.watch), -EEXIST);
	assert_int_equal(sprobe_capturer__exclude_tid(c, 0), -EINVAL);
	assert_int_equal(sprobe_capturer__exclude_tid(NULL, h.watch), -EINVAL);
	atomic_store(&h.signalled, 0);
	for (int r = 0; r < 5; r++) {
		atomic_store(&h.calls, 0);
		assert_int_equal(sprobe_capturer__capture(c, s), 0);
		st = sprobe_snapshot__stats(s);
		assert_true(fx_stats_consistent(st));
		assert_null(fx_find(s, h.watch));
		/* Every other thread is still signalled. */
		assert_non_null(fx_find(s, atomic_load(&other.tid)));
		assert_true(atomic_load(&h.calls) >= 1);
		assert_int_equal(st->threads_total, sprobe_snapshot__nthreads(s));
		assert_int_equal(st->threads_total, total_before - 1);
	}
	assert_int_equal(atomic_load(&h.signalled), 0);

	/* Include it again: back in the captures. */
	assert_int_equal(sprobe_capturer__include_tid(c, h.watch), 0);
	assert_int_equal(sprobe_capturer__include_tid(c, h.watch), -ENOENT);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_non_null(fx_find(s, h.watch));
	assert_int_equal(atomic_load(&h.signalled), 1);
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));

	/* The table is bounded. */
	for (uint32_t i = 0; i < SPROBE_MAX_EXCLUDED; i++)
		assert_int_equal(sprobe_capturer__exclude_tid(c, 0x7ffff000 + (pid_t)i), 0);
	assert_int_equal(sprobe_capturer__exclude_tid(c, 0x7fffff00), -ENOSPC);

	fx_worker_stop(&ex);
	fx_worker_stop(&other);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* ------------------------------------------------------------------ */
/* CPU-timer capture                                                   */
/* ------------------------------------------------------------------ */

/* voluntary_ctxt_switches of a thread: a thread blocked in read(2) adds one
 * each time something (a signal) wakes it. -1 if unreadable. */
static long vol_switches(pid_t tid)
{
	char path[64], buf[4096];
	FILE *f;
	long v = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "voluntary_ctxt_switches: %ld", &v) == 1)
			break;
	fclose(f);
	return v;
}

/* Bounded wait until tid sleeps (State: S). True if it does. */
static bool wait_sleeping(pid_t tid)
{
	uint64_t end = fx_now_ns() + fx_timeout_ns();

	while (fx_now_ns() < end) {
		char path[64], buf[4096];
		bool sleeping = false;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
		f = fopen(path, "r");
		if (!f)
			return false;
		while (fgets(buf, sizeof(buf), f))
			if (strncmp(buf, "State:", 6) == 0) {
				sleeping = strchr(buf, 'S') != NULL;
				break;
			}
		fclose(f);
		if (sleeping)
			return true;
		sched_yield();
	}
	return false;
}

static void test_cpu_timer_blocked_not_signalled(void **state)
{
	struct worker spin, blocked;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	unsigned spin_samples = 0, spin_weight = 0, rounds = 0;
	pid_t spin_tid, blk_tid;
	long sw0, sw1;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	assert_int_equal(fx_worker_start(&blocked, PARK_PIPE, 0), 0);
	spin_tid = atomic_load(&spin.tid);
	blk_tid = atomic_load(&blocked.tid);
	/* Wait until the blocked worker sleeps in read (its count settles). */
	assert_true(wait_sleeping(blk_tid));
	sw0 = vol_switches(blk_tid);
	assert_true(sw0 >= 0);

	/* Starts the timers: nothing to collect yet. */
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
	assert_int_equal(sprobe_snapshot__nthreads(s), 0);
	/* A wall capture is refused while the timers own the slots. */
	assert_int_equal(sprobe_capturer__capture(c, s), -EBUSY);

	uint64_t end = fx_now_ns() + fx_timeout_ns();
	while (spin_samples < 10 && fx_now_ns() < end) {
		struct timespec ts = { 0, 5000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
		rounds++;
		assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
		assert_null(fx_find(s, blk_tid));
		struct sprobe_thread_sample *t = fx_find(s, spin_tid);
		if (t && t->stage == SPROBE_STAGE_RAW) {
			assert_int_equal(t->method, SPROBE_METHOD_SIGNAL);
			assert_true(t->weight >= 1);
			assert_true(t->entry_ns > 0 && t->entry_ns <= t->exit_ns);
			assert_true(t->stack_addr <= t->sp && t->sp < t->stack_addr + t->stack_len);
			spin_samples++;
			spin_weight += t->weight;
		}
	}
	print_message("cpu timers: %u rounds, spinner %u samples (weight %u)\n", rounds,
		      spin_samples, spin_weight);
	assert_true(spin_samples >= 10);
	sw1 = vol_switches(blk_tid);
	/* Never woken: no timer signal reached the blocked thread. */
	assert_int_equal(sw1, sw0);

	/* The measure can fail: after stopping, one wall capture signals the
	 * blocked thread and wakes it. */
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), 0);
	assert_non_null(fx_find(s, blk_tid));
	/* It counts the switch when it sleeps again, after the handler:
	 * bounded wait for that. */
	end = fx_now_ns() + fx_timeout_ns();
	while (vol_switches(blk_tid) <= sw1 && fx_now_ns() < end)
		sched_yield();
	assert_true(vol_switches(blk_tid) > sw1);

	/* Bad arguments. */
	assert_int_equal(sprobe_capturer__cpu_collect(NULL, s, 1000000), -EINVAL);
	assert_int_equal(sprobe_capturer__cpu_collect(c, NULL, 1000000), -EINVAL);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 0), -EINVAL);
	assert_int_equal(sprobe_capturer__cpu_stop(NULL), -EINVAL);

	fx_worker_stop(&spin);
	fx_worker_stop(&blocked);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* Collect (cpu mode, 2 ms) until every tid in want[0..n) had a sample;
 * false at the deadline. */
static bool cpu_sampled_all(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			    const pid_t *want, int n)
{
	bool seen[4] = { false };
	int left = n;
	uint64_t end = fx_now_ns() + fx_timeout_ns();

	while (left > 0 && fx_now_ns() < end) {
		struct timespec ts = { 0, 5000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
		for (int k = 0; k < n; k++) {
			struct sprobe_thread_sample *t = fx_find(s, want[k]);

			if (!seen[k] && t && t->stage == SPROBE_STAGE_RAW) {
				seen[k] = true;
				left--;
			}
		}
	}
	return left == 0;
}

/* cpu mode keeps tracked threads' slots packed low and walks them only up
 * to the highest in use (backends/linux/cputime.c, cpu_hi): threads that
 * start after others exited reuse the freed slots, and a thread left in
 * a low slot after the higher ones exited is still sampled. Each wave's
 * threads must get samples (timer engine: any kernel has it). */
static void test_cpu_slots_reused_after_exits(void **state)
{
	struct worker a, b, d;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	pid_t w[2];

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_TIMER, NULL, 0),
			 SPROBE_CPU_ENGINE_TIMER);
	assert_int_equal(fx_worker_start(&a, PARK_SPIN, 0), 0);
	assert_int_equal(fx_worker_start(&b, PARK_SPIN, 0), 0);
	w[0] = atomic_load(&a.tid);
	w[1] = atomic_load(&b.tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0); /* timers start */
	assert_true(cpu_sampled_all(c, s, w, 2));
	/* a exits (its slot is freed at the next collect), d starts: d takes
	 * the lowest free slot. */
	fx_worker_stop(&a);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 2000000), 0);
	assert_int_equal(fx_worker_start(&d, PARK_SPIN, 0), 0);
	w[0] = atomic_load(&d.tid);
	assert_true(cpu_sampled_all(c, s, w, 2));
	/* b exits: the highest slots empty out; d is still sampled. */
	fx_worker_stop(&b);
	assert_true(cpu_sampled_all(c, s, w, 1));
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	fx_worker_stop(&d);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* ns of CPU thread tid has used (first field of its schedstat). */
static uint64_t cpu_ns(pid_t tid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu", &ns), 1);
	fclose(f);
	return ns;
}

/* At a rate above the kernel's tick (HZ is 100-1000; this asks for 2000
 * Hz) one timer signal stands for several expirations, the rest come as
 * si_overrun: the weights must add up to the CPU time the thread used,
 * not to the signals. Without counting overruns the sum is the tick rate's
 * share (1/2 at HZ=1000, 1/8 at HZ=250). */
static void test_cpu_timer_overruns_weighted(void **state)
{
	struct worker spin;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	const uint64_t period = 500000; /* 2000 Hz of CPU time */
	uint64_t weight = 0, samples = 0, cpu0, cpu1;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	pid_t tid = atomic_load(&spin.tid);

	/* The timer engine's overruns: force it (the default is the perf
	 * engine where allowed, test_cpu_perf_weights_and_descriptors). */
	assert_int_equal(sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_TIMER, NULL, 0),
			 SPROBE_CPU_ENGINE_TIMER);
	cpu0 = cpu_ns(tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0); /* timers start */
	uint64_t end = fx_now_ns() + fx_timeout_ns();
	/* Until the spinner used 300 ms of CPU (or the deadline). */
	while (cpu_ns(tid) - cpu0 < 300000000ull && fx_now_ns() < end) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0);
		struct sprobe_thread_sample *t = fx_find(s, tid);
		if (t && t->stage == SPROBE_STAGE_RAW) {
			samples++;
			weight += t->weight;
		}
	}
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	cpu1 = cpu_ns(tid);
	fx_worker_stop(&spin);
	double periods = (double)(cpu1 - cpu0) / (double)period;
	print_message("cpu timers at 2000 Hz: %.0f periods of CPU, %llu samples, weight %llu\n",
		      periods, (unsigned long long)samples, (unsigned long long)weight);
	assert_true(periods >= 200);
	/* Expirations after the last collect are not counted: a little below
	 * 1; the CPU clock and the timer count the same thing, so not above. */
	assert_true(weight >= 0.8 * periods);
	assert_true(weight <= 1.02 * periods + 2);
	assert_true(samples <= weight);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* The perf-event engine (backends/linux/perfclock.c): one signal per
 * period of CPU, so at 2000 Hz the weights add up to the CPU time with no
 * overruns to count; each event is a registry descriptor in the top
 * region (never one of the program's low numbers), and closed at stop. */
static int count_perf_fds(int *lowest)
{
	char link[256], path[64];
	int n = 0;

	*lowest = -1;
	for (int fd = 0; fd < 65536; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t l = readlink(path, link, sizeof(link) - 1);

		if (l <= 0)
			continue;
		link[l] = '\0';
		if (strcmp(link, "anon_inode:[perf_event]"))
			continue;
		if (*lowest < 0)
			*lowest = fd;
		n++;
	}
	return n;
}

static void test_cpu_perf_weights_and_descriptors(void **state)
{
	struct worker spin;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	const uint64_t period = 500000;
	uint64_t weight = 0, cpu0, cpu1;
	char why[256];
	struct rlimit rl;
	int lowest, e;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	e = sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_PERF, why, sizeof(why));
	if (e == -EACCES || e == -EPERM || e == -ENOENT || e == -ENOSYS) {
		sprobe_snapshot__free(s);
		untrack(c);
		SPROBE_SKIP("%s\n", why);
	}
	assert_int_equal(e, SPROBE_CPU_ENGINE_PERF);
	assert_non_null(strstr(why, "cpu engine: perf-event"));
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	pid_t tid = atomic_load(&spin.tid);

	cpu0 = cpu_ns(tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0); /* events open */
	/* One event per thread, all above the program's numbers: the top
	 * region lies below min(soft limit, 4096) (userspace/common/fds.h). */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rlim_t top = rl.rlim_cur < 4096 ? rl.rlim_cur : 4096;
	assert_true(count_perf_fds(&lowest) >= 1);
	print_message("perf event fds from %d up (top %lu)\n", lowest, (unsigned long)top);
	assert_true((rlim_t)lowest >= top - 8 - top / 4);
	assert_true(sprobe_fd__owned(lowest));
	uint64_t end = fx_now_ns() + fx_timeout_ns();
	while (cpu_ns(tid) - cpu0 < 300000000ull && fx_now_ns() < end) {
		struct timespec ts = { 0, 10000000 };

		nanosleep(&ts, NULL); /* pacing the collector, not sync */
		assert_int_equal(sprobe_capturer__cpu_collect(c, s, period), 0);
		struct sprobe_thread_sample *t = fx_find(s, tid);
		if (t && t->stage == SPROBE_STAGE_RAW)
			weight += t->weight;
	}
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	cpu1 = cpu_ns(tid);
	assert_int_equal(count_perf_fds(&lowest), 0); /* closed at stop */
	fx_worker_stop(&spin);
	double periods = (double)(cpu1 - cpu0) / (double)period;
	print_message("perf events at 2000 Hz: %.0f periods of CPU, weight %llu\n", periods,
		      (unsigned long long)weight);
	assert_true(periods >= 200);
	assert_true(weight >= 0.8 * periods);
	assert_true(weight <= 1.02 * periods + 2);
	sprobe_snapshot__free(s);
	untrack(c);
}

/* A child forked without exec holds the perf events' files, which keeps
 * the events alive after the parent closes them: once CPU capture stops,
 * no event may go on signalling the parent's threads (after the capturer
 * is freed the signal's action is the default: the process would end). */
static _Atomic int late_signals;

static void count_late(int sig)
{
	(void)sig;
	atomic_fetch_add(&late_signals, 1);
}

static void test_cpu_perf_stop_with_forked_child(void **state)
{
	struct worker spin;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	int e, signo, status;
	pid_t child;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	e = sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_PERF, NULL, 0);
	if (e == -EACCES || e == -EPERM || e == -ENOENT || e == -ENOSYS) {
		sprobe_snapshot__free(s);
		untrack(c);
		SPROBE_SKIP("perf events not allowed here\n");
	}
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	pid_t tid = atomic_load(&spin.tid);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 1000000), 0); /* events open */
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* Holds the inherited descriptors until killed, and never
		 * outlives the test (nor keeps its output pipe open). */
		struct timespec ts = { (time_t)(fx_timeout_ns() / 1000000000ull) + 1, 0 };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(1);
		close(2);
		nanosleep(&ts, NULL);
		_exit(0);
	}
	signo = sprobe_capturer__signo(c);
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	sprobe_snapshot__free(s);
	untrack(c);
	struct sigaction sa = { .sa_handler = count_late };
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(signo, &sa, NULL), 0);
	/* 100 periods of the spinner's CPU: an event left running signals it. */
	uint64_t cpu0 = cpu_ns(tid), end = fx_now_ns() + fx_timeout_ns();
	while (cpu_ns(tid) - cpu0 < 100000000ull && fx_now_ns() < end) {
		struct timespec ts = { 0, 5000000 };

		nanosleep(&ts, NULL); /* pacing the reads, not sync */
	}
	print_message("after stop: %d signals in %.0f ms of the spinner's CPU\n",
		      atomic_load(&late_signals), (double)(cpu_ns(tid) - cpu0) / 1e6);
	assert_true(cpu_ns(tid) - cpu0 >= 100000000ull);
	assert_int_equal(atomic_load(&late_signals), 0);
	fx_worker_stop(&spin);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, &status, 0), child);
	signal(signo, SIG_DFL);
}

/* Past the registry's descriptor budget (a quarter of the soft
 * RLIMIT_NOFILE, fds.h) a thread gets a CPU timer instead of a perf event:
 * counted, never an event below the top region, never a thread left out. */
static void test_cpu_perf_budget_spills_to_timers(void **state)
{
	enum { N = 72 }; /* budget 64 at a soft limit of 256 */
	static struct worker w[N];
	struct sprobe_capturer *c;
	struct sprobe_snapshot *s;
	struct rlimit old, rl;
	int lowest, e, nfd;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	c = new_capturer(0, 0);
	s = sprobe_snapshot__new(128, 4096);
	assert_non_null(c);
	assert_non_null(s);
	e = sprobe_capturer__cpu_engine(c, SPROBE_CPU_ENGINE_PERF, NULL, 0);
	if (e == -EACCES || e == -EPERM || e == -ENOENT || e == -ENOSYS) {
		sprobe_snapshot__free(s);
		untrack(c);
		setrlimit(RLIMIT_NOFILE, &old);
		SPROBE_SKIP("perf events not allowed here\n");
	}
	assert_int_equal(e, SPROBE_CPU_ENGINE_PERF);
	for (int i = 0; i < N; i++)
		assert_int_equal(fx_worker_start(&w[i], PARK_PIPE, 0), 0);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 10000000), 0);
	nfd = count_perf_fds(&lowest);
	print_message("%d perf events (lowest fd %d), %u threads on timers, budget %u\n", nfd, lowest,
		      sprobe_capturer__cpu_on_timer(c), sprobe_fd__budget());
	assert_true(nfd >= 1 && (unsigned)nfd <= sprobe_fd__budget());
	assert_true(lowest >= 256 - 8 - 64);
	/* Every thread has a source: events, and timers for the rest. */
	assert_true((unsigned)nfd + sprobe_capturer__cpu_on_timer(c) >= N);
	assert_int_equal(sprobe_capturer__cpu_stop(c), 0);
	assert_int_equal(count_perf_fds(&lowest), 0);
	for (int i = 0; i < N; i++)
		fx_worker_stop(&w[i]);
	sprobe_snapshot__free(s);
	untrack(c);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

/* sprobe_capturer__capture_start() + __finish() give what __capture()
 * gives; between the two every other capture call is refused, and only
 * the started snapshot can be finished. */
static void test_capture_start_finish(void **state)
{
	struct worker spin, blocked;
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct sprobe_snapshot *s2 = sprobe_snapshot__new(64, 0);
	uint32_t idx = 0;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	assert_non_null(s2);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	assert_int_equal(fx_worker_start(&blocked, PARK_PIPE, 0), 0);
	pid_t ts = atomic_load(&spin.tid), tb = atomic_load(&blocked.tid);

	assert_int_equal(sprobe_capturer__capture_start(NULL, s), -EINVAL);
	assert_int_equal(sprobe_capturer__capture_start(c, NULL), -EINVAL);
	assert_int_equal(sprobe_capturer__capture_finish(c, s), -EINVAL); /* none started */
	for (int round = 0; round < 3; round++) {
		assert_int_equal(sprobe_capturer__capture_start(c, s), 0);
		/* In flight: everything else on c is refused. */
		assert_int_equal(sprobe_capturer__capture_start(c, s2), -EBUSY);
		assert_int_equal(sprobe_capturer__capture(c, s2), -EBUSY);
		assert_int_equal(sprobe_capturer__recapture(c, s2, &idx, 1), -EBUSY);
		assert_int_equal(sprobe_capturer__cpu_collect(c, s2, 1000000), -EBUSY);
		assert_int_equal(sprobe_capturer__capture_finish(c, s2), -EINVAL);
		assert_int_equal(sprobe_capturer__capture_finish(NULL, s), -EINVAL);
		assert_int_equal(sprobe_capturer__capture_finish(c, s), 0);
		assert_int_equal(sprobe_capturer__capture_finish(c, s), -EINVAL); /* once */

		const struct sprobe_snapshot_stats *st = sprobe_snapshot__stats(s);
		assert_true(fx_stats_consistent(st));
		assert_true(st->capture_ns > 0);
		for (int k = 0; k < 2; k++) {
			struct sprobe_thread_sample *t = fx_find(s, k ? tb : ts);

			assert_non_null(t);
			assert_int_equal(t->stage, SPROBE_STAGE_RAW);
			assert_int_equal(t->drop_reason, SPROBE_DROP_NONE);
			assert_true(t->entry_ns > 0 && t->entry_ns <= t->exit_ns);
			assert_true(t->stack_len > 0);
			assert_true(t->stack_addr <= t->sp && t->sp < t->stack_addr + t->stack_len);
		}
	}
	/* And the capturer works as before afterwards. */
	assert_int_equal(sprobe_capturer__capture(c, s2), 0);
	assert_non_null(fx_find(s2, ts));
	assert_non_null(fx_find(s2, tb));
	fx_worker_stop(&spin);
	fx_worker_stop(&blocked);
	sprobe_snapshot__free(s);
	sprobe_snapshot__free(s2);
	untrack(c);
}

/* A thread that holds the capture signal blocked, then lets it in on
 * command: its handler runs the moment it unblocks. */
struct late {
	int signo;
	_Atomic pid_t tid;
	_Atomic int go, unblocked, stop;
};

static void *late_main(void *arg)
{
	struct late *l = arg;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, l->signo);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	atomic_store(&l->tid, (pid_t)syscall(SYS_gettid));
	while (!atomic_load(&l->go))
		sched_yield();
	pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* the pending signal runs here */
	atomic_store(&l->unblocked, 1);
	while (!atomic_load(&l->stop))
		sched_yield();
	return NULL;
}

/* A started capture is finished long after its deadline: a thread that
 * answered after the deadline is dropped as TIMEOUT, as a capture that
 * waited would have (its stack is from when it answered, not from when it
 * was asked); one that answered in time is kept. */
static void test_capture_finish_late_answer_dropped(void **state)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o), .timeout_ns = 50000000 };
	struct sprobe_capturer *c = track(sprobe_capturer__new(&o));
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	struct late l = { 0 };
	struct worker spin;
	pthread_t th;

	(void)state;
	assert_non_null(c);
	assert_non_null(s);
	l.signo = sprobe_capturer__signo(c);
	assert_int_equal(pthread_create(&th, NULL, late_main, &l), 0);
	assert_int_equal(fx_worker_start(&spin, PARK_SPIN, 0), 0);
	uint64_t end = fx_now_ns() + fx_timeout_ns();
	while (!atomic_load(&l.tid))
		assert_true(fx_now_ns() < end);

	assert_int_equal(sprobe_capturer__capture_start(c, s), 0);
	/* Past the deadline (the subject of the test, not a synchronisation):
	 * then let the signal in and wait until its handler ran. */
	uint64_t past = fx_now_ns() + 2 * o.timeout_ns;
	while (fx_now_ns() < past)
		sched_yield();
	atomic_store(&l.go, 1);
	while (!atomic_load(&l.unblocked))
		assert_true(fx_now_ns() < end + fx_timeout_ns());
	assert_int_equal(sprobe_capturer__capture_finish(c, s), 0);

	struct sprobe_thread_sample *t = fx_find(s, atomic_load(&l.tid));
	assert_non_null(t);
	assert_int_equal(t->stage, SPROBE_STAGE_EMPTY);
	assert_int_equal(t->drop_reason, SPROBE_DROP_TIMEOUT);
	t = fx_find(s, atomic_load(&spin.tid));
	assert_non_null(t);
	if (!under_qemu()) /* qemu can take 0.5 s to deliver (fx_timeout_ns) */
		assert_int_equal(t->stage, SPROBE_STAGE_RAW);
	assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
	assert_true(sprobe_snapshot__stats(s)->dropped[SPROBE_DROP_TIMEOUT] >= 1);

	/* The started snapshot cannot be captured into or reset meanwhile. */
	assert_int_equal(sprobe_capturer__capture_start(c, s), 0);
	assert_int_equal(sprobe_capturer__capture(c, s), -EBUSY);
	assert_int_equal(sprobe_capturer__capture_finish(c, s), 0);
	assert_true(sprobe_snapshot__nthreads(s) >= 2);

	atomic_store(&l.stop, 1);
	pthread_join(th, NULL);
	fx_worker_stop(&spin);
	sprobe_snapshot__free(s);
	untrack(c);
}

static uint64_t thread_cpu_ns(pthread_t th)
{
	clockid_t id;
	struct timespec ts;

	assert_int_equal(pthread_getcpuclockid(th, &id), 0);
	assert_int_equal(clock_gettime(id, &ts), 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wait (bounded) until each of the n spinners has run ns more of CPU time:
 * their CPU timers count CPU, not wall time, so on busy CPUs a fixed sleep
 * may give them none. */
static void wait_cpu(const struct worker *w, int n, uint64_t ns)
{
	uint64_t base[3], deadline = fx_now_ns() + 10000000000ull;

	assert_true(n <= 3);
	for (int i = 0; i < n; i++)
		base[i] = thread_cpu_ns(w[i].th);
	for (int i = 0; i < n; i++) {
		while (thread_cpu_ns(w[i].th) - base[i] < ns) {
			assert_true(fx_now_ns() < deadline);
			sched_yield();
		}
	}
}

/* Threads come and go under CPU timers: a new thread's slot may be one an
 * exited thread used; a sample never carries another thread's tid, and
 * stats stay consistent. */
static void test_cpu_timer_thread_churn(void **state)
{
	struct sprobe_capturer *c = new_capturer(0, 0);
	struct sprobe_snapshot *s = sprobe_snapshot__new(64, 0);
	unsigned seen = 0;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(sprobe_capturer__cpu_collect(c, s, 1000000), 0);
	pid_t prev[3] = { 0, 0, 0 };

	for (int gen = 0; gen < 6; gen++) {
		struct worker w[3];
		pid_t tids[3];

		for (int i = 0; i < 3; i++) {
			assert_int_equal(fx_worker_start(&w[i], PARK_SPIN, 0), 0);
			tids[i] = atomic_load(&w[i].tid);
		}
		unsigned gen_seen = 0;

		/* Four collects, and more (bounded) until this generation has
		 * a sample: between collects each spinner runs 3 periods of
		 * CPU, so the timers the first collect armed must have fired. */
		for (int r = 0; r < 4 || (!gen_seen && r < 40); r++) {
			wait_cpu(w, 3, 3000000);
			assert_int_equal(sprobe_capturer__cpu_collect(c, s, 1000000), 0);
			assert_true(fx_stats_consistent(sprobe_snapshot__stats(s)));
			for (uint32_t k = 0; k < sprobe_snapshot__nthreads(s); k++) {
				struct sprobe_thread_sample *t = sprobe_snapshot__thread(s, k);
				bool mine = false;

				bool old = false;

				for (int i = 0; i < 3; i++) {
					mine |= t->tid == tids[i];
					old |= t->tid == prev[i];
				}
				/* This generation's threads, the test's other
				 * live threads, or (first collect of this
				 * generation only) a sample the previous one
				 * finished before it exited. Anything else
				 * would come from a stale slot. */
				assert_true(mine || (old && r == 0) ||
					    syscall(SYS_tgkill, getpid(), t->tid, 0) == 0);
				gen_seen += mine && t->stage == SPROBE_STAGE_RAW;
			}
		}
		seen += gen_seen;
		for (int i = 0; i < 3; i++) {
			fx_worker_stop(&w[i]);
			prev[i] = tids[i];
		}
	}
	print_message("cpu timers under churn: %u samples of short-lived threads\n", seen);
	assert_true(seen > 0);
	sprobe_snapshot__free(s);
	untrack(c); /* frees with timers running: must not crash */
}

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_cpu_timer_blocked_not_signalled, teardown),
	cmocka_unit_test_teardown(test_cpu_slots_reused_after_exits, teardown),
	cmocka_unit_test_teardown(test_cpu_timer_thread_churn, teardown),
	cmocka_unit_test_teardown(test_cpu_timer_overruns_weighted, teardown),
	cmocka_unit_test_teardown(test_cpu_perf_weights_and_descriptors, teardown),
	cmocka_unit_test_teardown(test_cpu_perf_budget_spills_to_timers, teardown),
	cmocka_unit_test_teardown(test_cpu_perf_stop_with_forked_child, teardown),
	cmocka_unit_test_teardown(test_capture_start_finish, teardown),
	cmocka_unit_test_teardown(test_capture_finish_late_answer_dropped, teardown),
	cmocka_unit_test_teardown(test_excluded_thread, teardown),
	cmocka_unit_test_teardown(test_known_stack, teardown),
	cmocka_unit_test_teardown(test_known_stack_sequential, teardown),
	cmocka_unit_test_teardown(test_all_siblings_not_caller, teardown),
	cmocka_unit_test_teardown(test_blocking_thread_dropped, teardown),
	cmocka_unit_test_teardown(test_thread_exits_before_signal, teardown),
	cmocka_unit_test_teardown(test_thread_blocks_after_check, teardown),
	cmocka_unit_test_teardown(test_app_handler_refused, teardown),
	cmocka_unit_test_teardown(test_handler_replaced, teardown),
	cmocka_unit_test_teardown(test_bad_options, teardown),
	cmocka_unit_test_teardown(test_copy_bytes_match, teardown),
	cmocka_unit_test_teardown(test_truncated_at_cap, teardown),
	cmocka_unit_test_teardown(test_sigaltstack, teardown),
	cmocka_unit_test_teardown(test_foreign_signals_forwarded, teardown),
	cmocka_unit_test_teardown(test_forward_loop_broken, teardown),
	cmocka_unit_test_teardown(test_no_alloc_in_window, teardown),
	cmocka_unit_test_teardown(test_warm_capture_many_threads, teardown),
	cmocka_unit_test_teardown(test_vm_readv_method, teardown),
	cmocka_unit_test_teardown(test_unwind_fp_hostile, teardown),
	cmocka_unit_test_teardown(test_snapshot_reuse, teardown),
	cmocka_unit_test_teardown(test_more_threads_than_slots, teardown),
	cmocka_unit_test_teardown(test_fork_child_refused, teardown),
};

SPROBE_TEST_MAIN(tests)
