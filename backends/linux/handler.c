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

/* The handler's state (linux.h): written by the probe before it arms a
 * slot, read by the handler after its CAS on that slot. */
struct sprobe_lx_state sprobe_lx_g;

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

/*
 * ASYNC-SIGNAL-SAFE: reads only the preallocated range array and the
 * ucontext.
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

/*
 * ASYNC-SIGNAL-SAFE: atomics, one raw syscall (gettid).
 * A perf-event delivery (perfclock.c): si_code POLL_IN, si_fd the event's
 * number. *v gets its gen << 16 | slot from perf_map, and true only if
 * the event belongs to this very thread.
 */
static bool perf_delivery(const siginfo_t *si, uint64_t *v)
{
	uint32_t fd = (uint32_t)si->si_fd;
	/* Acquire; pairs with the release store in cpu_engine_locked(). */
	_Atomic uint64_t *map = atomic_load_explicit(&sprobe_lx_g.perf_map, memory_order_acquire);

	if (si->si_code != POLL_IN || !map || fd >= sprobe_lx_g.perf_nmap)
		return false;
	/* Acquire; pairs with the release store in sprobe_lx_perf_open(). */
	*v = atomic_load_explicit(&map[fd], memory_order_acquire);
	return *v && atomic_load_explicit(&sprobe_lx_g.perf_tid[fd], memory_order_relaxed) ==
			     (pid_t)syscall(SYS_gettid);
}

/*
 * The capture signal handler.
 * ASYNC-SIGNAL-SAFE: see the suspend-window rule in linux.h. Reads the
 * ucontext, copies the stack into the preallocated buffer, publishes with
 * a release store and a futex wake, restores errno.
 */
void sprobe_lx_capture_handler(int sig, siginfo_t *si, void *ucv)
{
	uint64_t entry = sprobe_now_ns();
	int saved_errno = errno;
	const ucontext_t *uc = ucv;
	struct sprobe_thread_sample *t;
	struct slot *sl;
	uint64_t v, gen, expect, lo, hi;
	uint32_t idx, n, overrun = 0;
	bool timer = false;

	(void)sig;
	/* seq_cst; pairs with the store of sprobe_lx_g.active in __free(). */
	atomic_fetch_add(&sprobe_lx_g.in_handler, 1);
	if (!atomic_load(&sprobe_lx_g.active))
		goto out;
	/* Only signals the probe sent: a kill(1) from outside, or a capture
	 * signal from another process, carries another code or pid. */
	if (si->si_code == SI_TIMER) {
		timer = true; /* one of our per-thread CPU timers (or stale) */
		v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
		overrun = si->si_overrun > 0 ? (uint32_t)si->si_overrun : 0;
	} else if (perf_delivery(si, &v)) {
		timer = true; /* one overflow of its perf event: one period, no overruns */
	} else if (si->si_code != SI_QUEUE || si->si_pid != sprobe_lx_g.pid) {
		goto out;
	} else {
		v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
	}
	idx = (uint32_t)(v & 0xffff);
	gen = v >> 16;
	if (idx >= sprobe_lx_g.nslots)
		goto out;
	sl = &sprobe_lx_g.slots[idx];
	expect = gen << 2 | SLOT_ARMED;
	/* Acquire; pairs with the probe's release store of ARMED in
	 * sprobe_lx_arm_slot(): the sample pointer, ranges and sprobe_lx_g
	 * fields are visible. A late or repeated signal carries an old
	 * generation and fails here. */
	if (!atomic_compare_exchange_strong_explicit(&sl->state, &expect, gen << 2 | SLOT_BUSY,
						     memory_order_acquire, memory_order_relaxed)) {
		/* Our timer fired again before the probe collected the
		 * sample: count the CPU period (and the ones the kernel
		 * folded into this signal), the sample stands for them. */
		if (timer && expect == (gen << 2 | SLOT_DONE))
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
	/* seq_cst RMW then load of target: see sprobe_lx_g.completed. */
	n = atomic_fetch_add(&sprobe_lx_g.completed, 1) + 1;
	if (n >= atomic_load(&sprobe_lx_g.target))
		futex_wake(&sprobe_lx_g.completed, 1);
out:
	errno = saved_errno;
	/* Last: the capturer's free waits for this. */
	atomic_fetch_sub(&sprobe_lx_g.in_handler, 1);
}
