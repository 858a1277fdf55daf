/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Capture backend: the seed's known-stack acceptance test, the contract of
 * the signal protocol (drops with reasons, refusing a taken signal, stale
 * signals) and the no-allocation claim checked by a malloc interposer. The
 * copy, signals the probe did not send and the frame-pointer unwinder are in
 * test_capture_copy.c; CPU-timer capture and start/finish in
 * test_capture_cpu.c.
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
#include "capture_case_fixture.h"


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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_known_stack, teardown),
	cmocka_unit_test_teardown(test_known_stack_sequential, teardown),
	cmocka_unit_test_teardown(test_all_siblings_not_caller, teardown),
	cmocka_unit_test_teardown(test_blocking_thread_dropped, teardown),
	cmocka_unit_test_teardown(test_thread_exits_before_signal, teardown),
	cmocka_unit_test_teardown(test_thread_blocks_after_check, teardown),
	cmocka_unit_test_teardown(test_app_handler_refused, teardown),
	cmocka_unit_test_teardown(test_handler_replaced, teardown),
	cmocka_unit_test_teardown(test_bad_options, teardown),
	cmocka_unit_test_teardown(test_no_alloc_in_window, teardown),
	cmocka_unit_test_teardown(test_warm_capture_many_threads, teardown),
};

SPROBE_TEST_MAIN(tests)
