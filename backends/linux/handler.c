/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The capture signal handler and everything it calls: the code that runs in
 * the suspend window, and nothing else (a reviewer reads the
 * async-signal-safe surface here alone). Every function is
 * ASYNC-SIGNAL-SAFE under the rule stated in linux.h; the calls this object
 * makes are checked against handler.allow by `make test-handler-nm`.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <ucontext.h>

#include "backends/linux/linux.h"

/* The delivery forward() is handing to the program's handler on this
 * thread, and how deep in the stack: a handler that passes it straight
 * back to us (another chaining profiler whose "previous handler" is ours)
 * would otherwise recurse for ever. Initial-exec: a thread-pointer
 * relative access, no __tls_get_addr. */
static __thread struct {
	const siginfo_t *si;
	uintptr_t depth;
} fwd_tls __attribute__((tls_model("initial-exec")));

/* ASYNC-SIGNAL-SAFE: reads a register. The thread pointer of the
 * interrupted thread (the handler runs on it). */
static inline uint64_t thread_pointer(void)
{
	uint64_t tp;
#if defined(__x86_64__)
	/* The x86_64 TLS ABI keeps the thread pointer itself at %fs:0. */
	__asm__ volatile("mov %%fs:0, %0" : "=r"(tp));
#else
	__asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
#endif
	return tp;
}

/* ASYNC-SIGNAL-SAFE: reads the ucontext only. */
static void read_regs(struct sprobe_thread_sample *t, const ucontext_t *uc)
{
#if defined(__x86_64__)
	const greg_t *gr = uc->uc_mcontext.gregs;
	static const int map[17] = {
		REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
		REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
		REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP,
	};

	for (int i = 0; i < 17; i++)
		t->regs[i] = (uint64_t)gr[map[i]];
	t->ip = (uint64_t)gr[REG_RIP];
	t->sp = (uint64_t)gr[REG_RSP];
	t->fp = (uint64_t)gr[REG_RBP];
	t->lr = 0;
	t->has_lr = false;
#else
	const mcontext_t *mc = &uc->uc_mcontext;

	for (int i = 0; i < 31; i++)
		t->regs[i] = mc->regs[i];
	t->regs[31] = mc->sp;
	t->regs[32] = mc->pc;
	t->ip = mc->pc;
	t->sp = mc->sp;
	t->fp = mc->regs[29];
	t->lr = mc->regs[30];
	t->has_lr = true;
#endif
}

/* ASYNC-SIGNAL-SAFE: reads the range array. The known rw range holding
 * [a, a + len), or NULL. */
static const struct range *range_of(uint64_t a, uint64_t len)
{
	uint32_t lo = 0, hi = sprobe_lx_g.nranges;

	while (lo < hi) {
		uint32_t m = lo + (hi - lo) / 2;

		if (sprobe_lx_g.ranges[m].hi <= a)
			lo = m + 1;
		else
			hi = m;
	}
	if (lo == sprobe_lx_g.nranges)
		return NULL;
	const struct range *r = &sprobe_lx_g.ranges[lo];
	return a >= r->lo && a + len <= r->hi ? r : NULL;
}

/*
 * ASYNC-SIGNAL-SAFE: reads the ucontext, the range array and 16 bytes of
 * a known rw range.
 * A Go program's goroutine runs on a stack carved out of the Go heap (one
 * rw mapping of many megabytes, no guard page, no thread pointer inside):
 * its bounds are in its g, which Go code keeps in a register (R14 on
 * x86_64, R28 on arm64; ABIInternal, Go >= 1.17), and g starts with
 * stack.lo, stack.hi. Taken only if that register points into a known rw
 * range (the Go heap is never unmapped) and the pair is a sane stack
 * around sp inside sp's own range; else *hi stays the range's end (the
 * copy is then capped at the maximum and flagged truncated). Outside Go
 * code the register is anything: the checks reject it, or it happens to
 * be g, whose stack is then the right one anyway.
 */
static void goroutine_bounds(const ucontext_t *uc, uint64_t sp, const struct range *r,
			     uint64_t *hi)
{
#if defined(__x86_64__)
	uint64_t g = (uint64_t)uc->uc_mcontext.gregs[REG_R14];
#else
	uint64_t g = uc->uc_mcontext.regs[28];
#endif
	const uint64_t *gs = (const uint64_t *)(uintptr_t)g;

	if ((g & 7) || !range_of(g, 16))
		return;
	uint64_t lo = gs[0], top = gs[1];
	if (lo <= sp && sp < top && top <= r->hi && lo >= r->lo && top - lo <= (1ull << 30))
		*hi = top;
}

/*
 * ASYNC-SIGNAL-SAFE: reads only the preallocated range array and the
 * ucontext (and, in a Go program, the goroutine's g: goroutine_bounds()).
 *
 * Where the interrupted stack lives, as [*lo, *hi), such that every byte in
 * it is mapped for as long as the thread runs the handler:
 *  - on the sigaltstack the thread declared (the kernel saves it in
 *    uc_stack): that altstack;
 *  - else the rw mapping that contains SP, from /proc/self/maps read by the
 *    probe before the window. Adjacent anonymous mappings can be merged into
 *    one line, so for a glibc/musl thread the top is capped at the thread
 *    pointer, which sits inside the thread's own stack block, above its
 *    stack: no byte of a neighbouring mapping (that could be unmapped under
 *    us) is read. The main thread's "[stack]" may have grown below the
 *    recorded start: the kernel extends it on access, so it is accepted
 *    within RLIMIT_STACK.
 * The guard page is never inside: it is not an rw mapping.
 * Returns false when SP is in no known range (the thread is dropped).
 */
static bool stack_bounds(uint64_t sp, const ucontext_t *uc, uint64_t *lo, uint64_t *hi)
{
	uint64_t ss = (uint64_t)(uintptr_t)uc->uc_stack.ss_sp;
	uint64_t tp;
	uint32_t a = 0, b = sprobe_lx_g.nranges;

	/* The kernel saves the thread's sigaltstack settings in uc_stack (not
	 * whether SP is on it: recent kernels store sas_ss_flags only). */
	if (!(uc->uc_stack.ss_flags & SS_DISABLE) && uc->uc_stack.ss_size && sp >= ss &&
	    sp - ss < uc->uc_stack.ss_size) {
		*lo = redzone_floor(sp, ss);
		*hi = ss + uc->uc_stack.ss_size;
		return true;
	}
	/* First range with hi > sp. */
	while (a < b) {
		uint32_t m = a + (b - a) / 2;

		if (sprobe_lx_g.ranges[m].hi <= sp)
			a = m + 1;
		else
			b = m;
	}
	if (a == sprobe_lx_g.nranges)
		return false;
	const struct range *r = &sprobe_lx_g.ranges[a];
	if (sp >= r->lo) {
		*lo = redzone_floor(sp, r->lo);
	} else if (r->growsdown && r->lo - sp <= sprobe_lx_g.growsdown_max) {
		/* Only SP's own page is known to be there below lo. */
		uint64_t page = sp & ~(uint64_t)4095;

		*lo = redzone_floor(sp, page);
	} else {
		return false;
	}
	*hi = r->hi;
	tp = thread_pointer();
	if (tp > sp && tp < *hi)
		*hi = tp;
	else if (sprobe_lx_g.go && !r->growsdown)
		goroutine_bounds(uc, sp, r, hi);
	return true;
}

/*
 * ASYNC-SIGNAL-SAFE: futex syscalls and atomics only.
 * VM_READV method (the seed's strategy, kept for the benchmark): publish
 * the registers, then wait until the probe has copied the stack with
 * process_vm_readv, at most sprobe_lx_g.vm_wait_ns.
 */
static void vm_handshake(struct slot *sl, uint64_t entry)
{
	uint32_t v;

	/* Release; pairs with the probe's acquire load in sprobe_lx_vm_service(). */
	atomic_store_explicit(&sl->vm, VM_REGS, memory_order_release);
	atomic_fetch_add(&sprobe_lx_g.completed, 1);
	futex_wake(&sprobe_lx_g.completed, 1);
	while ((v = atomic_load_explicit(&sl->vm, memory_order_acquire)) == VM_REGS) {
		uint64_t now = sprobe_now_ns();
		uint32_t expect = VM_REGS;

		if (now - entry >= sprobe_lx_g.vm_wait_ns) {
			/* acq_rel; pairs with the probe's CAS REGS -> COPIED. */
			if (atomic_compare_exchange_strong(&sl->vm, &expect, VM_ABANDONED))
				break;
			continue;
		}
		futex_wait(&sl->vm, VM_REGS, sprobe_lx_g.vm_wait_ns - (now - entry));
	}
}

/* ASYNC-SIGNAL-SAFE: reads the siginfo. Is this delivery one of the
 * probe's captures (linux.h, "THE CAPTURE SIGNAL IS SHARED")? */
static bool is_capture(const siginfo_t *si)
{
	uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
	uint64_t key = sprobe_lx_g.key;

	if (si->si_code != SI_TIMER && !(si->si_code == SI_QUEUE && si->si_pid == sprobe_lx_g.pid))
		return false;
	return key && v >> CAPTURE_KEY_SHIFT == key;
}

/* ASYNC-SIGNAL-SAFE: raw syscalls. The default action of a real-time
 * signal (terminate), as the kernel would have taken it: the disposition
 * becomes SIG_DFL, the signal is sent again to this thread (blocked while
 * the handler runs, so it waits) and unblocked: the process ends by
 * signal sig, its status says so. If it survives (the disposition was
 * changed again meanwhile), ours is put back. */
static void default_action(int sig)
{
	struct sprobe_ksigaction dfl = { 0 }, prev;
	uint64_t bit = 1ull << (sig - 1);

	if (ksigaction(sig, &dfl, &prev) != 0)
		return;
	syscall(SYS_tgkill, syscall(SYS_getpid), syscall(SYS_gettid), sig);
	syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &bit, NULL, sizeof(bit));
	ksigaction(sig, &prev, NULL);
}

/*
 * ASYNC-SIGNAL-SAFE: atomics, raw syscalls, then the program's handler.
 * A delivery that is not a capture, given to the program's disposition
 * with its semantics: SIG_IGN drops it, SIG_DFL terminates (as above), a
 * handler runs with the mask the kernel would have set (the interrupted
 * mask, plus its sa_mask, plus the signal unless SA_NODEFER), called with
 * one argument or three (SA_SIGINFO), and SA_RESETHAND resets the
 * program's disposition to SIG_DFL first. The handler is called in our
 * frame, on the stack the kernel chose for ours (SA_ONSTACK: the
 * sigaltstack if the thread has one); what it does to the ucontext
 * (Go's handler rewrites it for its own purposes) is what sigreturn
 * restores. It may not return (siglongjmp): nothing of ours is held.
 */
static void forward(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	const ucontext_t *uc = ucv;
	struct sprobe_ksigaction d;
	uint64_t mask;
	int idx = chain_read(&d);
	uintptr_t here = (uintptr_t)&d;

	if (idx < 0 || (fwd_tls.si == si && here < fwd_tls.depth))
		goto out; /* no disposition to read, or our own delivery handed back */
	atomic_fetch_add_explicit(&sprobe_lx_ch.forwarded, 1, memory_order_relaxed);
	if (d.handler == (uint64_t)(uintptr_t)SIG_IGN)
		goto out;
	if (d.handler == (uint64_t)(uintptr_t)SIG_DFL) {
		default_action(sig);
		goto out;
	}
	if (d.flags & SA_RESETHAND) {
		struct sprobe_ksigaction r = d;
		uint32_t expect = (uint32_t)idx;

		r.handler = (uint64_t)(uintptr_t)SIG_DFL; /* the kernel keeps the flags */
		/* Release; pairs with chain_read()'s acquire. Only if no install
		 * replaced the record meanwhile: then that one stands. */
		atomic_compare_exchange_strong_explicit(&sprobe_lx_ch.cur, &expect, chain_fill(&r),
							memory_order_release, memory_order_relaxed);
	}
	memcpy(&mask, &uc->uc_sigmask, sizeof(mask));
	mask |= d.mask;
	if (!(d.flags & SA_NODEFER))
		mask |= 1ull << (sig - 1);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, sizeof(mask));
	fwd_tls.si = si;
	fwd_tls.depth = here;
	errno = saved_errno;
	if (d.flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))(uintptr_t)d.handler)(sig, si, ucv);
	else
		((void (*)(int))(uintptr_t)d.handler)(sig);
	fwd_tls.si = NULL;
	return;
out:
	errno = saved_errno;
}

/*
 * ASYNC-SIGNAL-SAFE: atomics, one raw syscall (gettid).
 * A perf-event delivery (perfclock.c): si_code POLL_IN, si_fd the event's
 * number. Returns 1 when the event is live and belongs to this very
 * thread (*v gets its gen << 16 | slot from perf_map), -1 when the number
 * was ours but the delivery is stale (the event stopped or closed, or the
 * number now another thread's: swallow it), 0 when it never was ours.
 */
static int perf_delivery(const siginfo_t *si, uint64_t *v)
{
	uint32_t fd = (uint32_t)si->si_fd;
	/* Acquire; pairs with the release store in cpu_engine_locked(). */
	_Atomic uint64_t *map = atomic_load_explicit(&sprobe_lx_g.perf_map, memory_order_acquire);

	if (si->si_code != POLL_IN || !map || fd >= sprobe_lx_g.perf_nmap)
		return 0;
	/* Acquire; pairs with the release stores in perfclock.c. */
	*v = atomic_load_explicit(&map[fd], memory_order_acquire);
	if (!*v)
		return 0;
	if (*v == SPROBE_LX_PERF_STALE ||
	    atomic_load_explicit(&sprobe_lx_g.perf_tid[fd], memory_order_relaxed) !=
		    (pid_t)syscall(SYS_gettid))
		return -1;
	return 1;
}

/*
 * The capture signal handler.
 * ASYNC-SIGNAL-SAFE: see the suspend-window rule in linux.h. Reads the
 * ucontext, copies the stack into the preallocated buffer, publishes with
 * a release store and a futex wake, restores errno. A delivery that is
 * not a capture goes to the program's disposition (forward()).
 */
void sprobe_lx_capture_handler(int sig, siginfo_t *si, void *ucv)
{
	uint64_t entry, v, gen, st, lo, hi;
	int saved_errno;
	const ucontext_t *uc = ucv;
	struct sprobe_thread_sample *t;
	struct slot *sl;
	uint32_t idx, n, overrun = 0;
	bool timer, perf;
	int pd;

	/* A perf-event overflow of this thread's own event (cpu engine
	 * PERF), else a capture by its key; anything else is the program's. */
	pd = perf_delivery(si, &v);
	if (pd < 0)
		return; /* a stale overflow of ours: errno untouched */
	perf = pd > 0;
	if (!perf && !is_capture(si)) {
		forward(sig, si, ucv);
		return;
	}
	entry = sprobe_now_ns();
	saved_errno = errno;
	timer = perf || si->si_code == SI_TIMER;
	/* seq_cst; pairs with the store of sprobe_lx_g.active in __free(). */
	atomic_fetch_add(&sprobe_lx_g.in_handler, 1);
	if (!atomic_load(&sprobe_lx_g.active))
		goto out; /* a late capture of a capturer that is gone */
	if (!perf)
		v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
	/* One perf-event overflow is one period, no overruns; a CPU timer
	 * reports the expirations the kernel folded into this signal. */
	if (si->si_code == SI_TIMER)
		overrun = si->si_overrun > 0 ? (uint32_t)si->si_overrun : 0;
	idx = (uint32_t)(v & 0xffff);
	gen = (v >> 16) & 0xffffffffull;
	if (idx >= sprobe_lx_g.nslots)
		goto out;
	sl = &sprobe_lx_g.slots[idx];
	/* The value carries the generation mod 2^32: the slot's full one is
	 * taken from the slot when its low half matches. */
	st = atomic_load_explicit(&sl->state, memory_order_relaxed);
	if (((st >> 2) & 0xffffffffull) != gen)
		goto out; /* a late or repeated signal of an old generation */
	gen = st >> 2;
	st = gen << 2 | SLOT_ARMED;
	/* Acquire; pairs with the probe's release store of ARMED in
	 * sprobe_lx_arm_slot(): the sample pointer, ranges and sprobe_lx_g
	 * fields are visible. */
	if (!atomic_compare_exchange_strong_explicit(&sl->state, &st, gen << 2 | SLOT_BUSY,
						     memory_order_acquire, memory_order_relaxed)) {
		/* Our timer fired again before the probe collected the
		 * sample: count the CPU period (and the ones the kernel
		 * folded into this signal), the sample stands for them. */
		if (timer && st == (gen << 2 | SLOT_DONE))
			atomic_fetch_add_explicit(&sl->extra, 1 + overrun, memory_order_relaxed);
		goto out;
	}
	/* The kernel checks thread CPU timers at its tick (run_posix_cpu_timers),
	 * so at rates above HZ one signal stands for several expirations: it
	 * reports the rest as overruns. Relaxed: the probe reads extra only
	 * after it saw DONE (release below / acquire in sprobe_lx_slot_phase). */
	if (overrun)
		atomic_fetch_add_explicit(&sl->extra, overrun, memory_order_relaxed);

	t = sl->sample;
	if (timer) {
		/* What sprobe_snapshot__sample_init() does for a wall slot
		 * before it is armed (see struct slot's tid). */
		memset(t, 0, offsetof(struct sprobe_thread_sample, frames));
		t->tid = sl->tid;
		t->stage = SPROBE_STAGE_EMPTY;
		t->stack = sl->buf;
	}
	read_regs(t, uc);
	if (!stack_bounds(t->sp, uc, &lo, &hi)) {
		t->drop_reason = SPROBE_DROP_NO_STACK;
	} else {
		size_t above = hi > t->sp ? (size_t)(hi - t->sp) : 0;

		t->stack_top = hi;
		if (above > sprobe_lx_g.cap) {
			above = sprobe_lx_g.cap;
			t->truncated = true;
		}
		t->stack_addr = lo;
		t->stack_len = (size_t)(t->sp - lo) + above;
		if (sprobe_lx_g.method == SPROBE_METHOD_VM_READV)
			vm_handshake(sl, entry);
		else
			memcpy(sl->buf, (const void *)(uintptr_t)lo, t->stack_len);
		t->stage = SPROBE_STAGE_RAW;
	}
	t->entry_ns = entry;
	t->exit_ns = sprobe_now_ns();
	/* Release; pairs with the probe's acquire load in sprobe_lx_slot_phase(). */
	atomic_store_explicit(&sl->state, gen << 2 | SLOT_DONE, memory_order_release);
	/* CPU mode: tell the probe which slot is ready, so a collect looks
	 * at the slots that produced a sample, not at every thread's. After
	 * DONE: a bit always stands for a DONE slot or a stale one the probe
	 * skips. Release; pairs with the probe's acquire exchange. */
	if (timer && sprobe_lx_g.cpu_ready)
		atomic_fetch_or_explicit(&sprobe_lx_g.cpu_ready[idx >> 6], 1ull << (idx & 63),
					 memory_order_release);
	/* seq_cst RMW then load of target: see sprobe_lx_g.completed. */
	n = atomic_fetch_add(&sprobe_lx_g.completed, 1) + 1;
	if (n >= atomic_load(&sprobe_lx_g.target))
		futex_wake(&sprobe_lx_g.completed, 1);
out:
	errno = saved_errno;
	/* Last: the capturer's free waits for this. */
	atomic_fetch_sub(&sprobe_lx_g.in_handler, 1);
}
