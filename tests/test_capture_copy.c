/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Capture backend: the copy itself (bytes, bounds, truncation, sigaltstack),
 * signals the probe did not send, the VM_READV method, the frame-pointer
 * unwinder on hostile input, snapshot reuse, slots, fork and excluded
 * threads.
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

static struct sprobe_frame fake_frames[SPROBE_MAX_FRAMES];

/* A sample of the caller's, with frame storage of its own. */
static void fake_sample(struct sprobe_thread_sample *t, size_t words)
{
	memset(t, 0, sizeof(*t));
	t->frames = fake_frames;
	t->frames_cap = SPROBE_MAX_FRAMES;
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
	/* A shorter array of the caller's bounds the walk. */
	fake_sample(&t, 1024);
	t.fp = FAKE_ADDR(0);
	for (int i = 0; i < 500; i++) {
		fake_stack[2 * i] = FAKE_ADDR(2 * i + 2);
		fake_stack[2 * i + 1] = 0x500000 + (uint64_t)i;
	}
	t.frames_cap = 5;
	assert_int_equal(sprobe_unwind_fp(&t), 5);
	/* No storage of its own (a zeroed struct): refused, nothing written. */
	fake_sample(&t, 64);
	t.frames = NULL;
	t.frames_cap = 0;
	assert_int_equal(sprobe_unwind_fp(&t), -ENOBUFS);
	assert_null(t.frames);
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

static const struct CMUnitTest tests[] = {
	cmocka_unit_test_teardown(test_excluded_thread, teardown),
	cmocka_unit_test_teardown(test_copy_bytes_match, teardown),
	cmocka_unit_test_teardown(test_truncated_at_cap, teardown),
	cmocka_unit_test_teardown(test_sigaltstack, teardown),
	cmocka_unit_test_teardown(test_foreign_signals_forwarded, teardown),
	cmocka_unit_test_teardown(test_forward_loop_broken, teardown),
	cmocka_unit_test_teardown(test_vm_readv_method, teardown),
	cmocka_unit_test_teardown(test_unwind_fp_hostile, teardown),
	cmocka_unit_test_teardown(test_snapshot_reuse, teardown),
	cmocka_unit_test_teardown(test_more_threads_than_slots, teardown),
	cmocka_unit_test_teardown(test_fork_child_refused, teardown),
};

SPROBE_TEST_MAIN(tests)
