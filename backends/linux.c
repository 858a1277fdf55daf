/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Linux capture backend (x86_64, aarch64): a real-time signal per thread.
 *
 * THE SUSPEND-WINDOW RULE (stated once; every function on the handler path
 * below is tagged ASYNC-SIGNAL-SAFE and relies on it):
 *   The capture handler runs on a thread that may have been interrupted
 *   while holding any lock in the process (malloc's arenas, the loader's,
 *   stdio's). So the handler may only: read the ucontext, read the thread
 *   pointer, read clock_gettime (vDSO), memcpy from the interrupted stack into
 *   a buffer allocated before the window, make raw syscalls (futex), and do
 *   lock-free atomics on memory that outlives the handler. No malloc/free, no
 *   locks, no stdio, no TLS that could be lazily allocated, no dl* calls, no
 *   symbolisation. It restores errno. The copy never faults: its bounds come
 *   from data the probe prepared before the window (see stack_bounds()).
 *
 * Protocol (probe thread P, target thread T, slot i of the snapshot):
 *   P, outside any window: enumerates /proc/self/task (getdents64 into a
 *   preallocated buffer), reads each thread's SigBlk, (re)reads
 *   /proc/self/maps into a sorted range array when the thread set changed.
 *   P arms slot i: writes the sample pointer, then stores
 *   state = gen << 2 | ARMED (release). P sends rt_tgsigqueueinfo(T) with
 *   si_code SI_QUEUE, si_pid = our pid and si_value = gen << 16 | i.
 *   T's handler checks si_code/si_pid, then CASes state ARMED -> BUSY with
 *   the generation from si_value: a stale or foreign signal fails the CAS
 *   and touches nothing. BUSY owns the sample until the handler stores
 *   DONE (release) and bumps `completed`, waking P when it reaches `target`.
 *   At the deadline P CASes ARMED -> IDLE (cancelled): after that no
 *   handler can take the slot. A slot that is BUSY is waited for (its
 *   handler is already running and does bounded work), so when a capture
 *   returns no handler writes into its snapshot any more.
 *
 * One capturer per process: the handler finds its state through the static
 * `g` below, the one piece of global mutable state the project allows.
 */
#if defined(__linux__) && !defined(SPROBE_BACKEND_UNSUPPORTED)

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "backend.h"
#include "userspace/common/fds.h"

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the Linux capture backend supports x86_64 and aarch64"
#endif

/* Slot phases, in the low 2 bits of slot.state; the generation is above. */
enum {
	SLOT_IDLE = 0,	/* not armed, or cancelled by the probe */
	SLOT_ARMED = 1, /* signal sent, handler not started */
	SLOT_BUSY = 2,	/* handler owns the sample */
	SLOT_DONE = 3,	/* handler finished; the sample is the probe's */
};

/* VM_READV handshake phases (slot.vm, a futex word). */
enum {
	VM_NONE = 0,
	VM_REGS = 1,	  /* handler published registers and waits */
	VM_COPIED = 2,	  /* probe copied the stack; handler may leave */
	VM_ABANDONED = 3, /* handler gave up waiting; probe must not copy */
};

#define CACHELINE 64
#define BLK_MAX 64
#define EXCL_MAX SPROBE_MAX_EXCLUDED

struct slot {
	_Atomic uint64_t state;		     /* gen << 2 | SLOT_* */
	_Atomic uint32_t vm;		     /* VM_*: VM_READV handshake */
	/* CPU-timer mode: expirations of this slot's timer that found the
	 * sample already DONE (the probe had not collected it yet). Handler
	 * increments, probe exchanges with 0; relaxed: a count only. */
	_Atomic uint32_t extra;
	struct sprobe_thread_sample *sample; /* written before ARMED */
	uint8_t *buf;			     /* the sample's stack buffer */
	uint64_t checked;		     /* probe only: gen whose status was read */
	uint64_t _pad2[3];
} __attribute__((aligned(CACHELINE)));

/* Zero-pause: one thread's proc files, kept open between captures and
 * re-read with pread (-1: not opened yet, or not cached: over the
 * descriptor budget, userspace/fds.h). Handles of the fd registry. */
struct zp_ent {
	pid_t tid;
	int sys_fd;	/* /proc/self/task/<tid>/syscall */
	int sched_fd;	/* /proc/self/task/<tid>/schedstat */
	/* Its last zero-pause copy: snapshot index, and the schedstat line
	 * read after it (last_ok: that copy is still in the slot). */
	uint32_t slot;
	uint32_t last_len;
	bool last_ok;
	/* The syscall file said "running" last time: ask it first (a thread
	 * that computes stays running; one read instead of two). */
	bool was_running;
	char last[96];
};

/* A readable and writable mapping of the process, from /proc/self/maps. */
struct range {
	uint64_t lo, hi;
	uint32_t growsdown; /* "[stack]": may have grown below lo */
	uint32_t _pad;
};

/*
 * Handler-visible state. Fields are written by the probe before it arms a
 * slot (release store of slot.state) and read by the handler after its CAS
 * on that slot (acquire), so they need no atomics of their own. `active`,
 * `in_handler`, `completed` and `target` are the exceptions, see their
 * comments.
 */
static struct {
	/* Set by __new (after the handler state is ready) and cleared by
	 * __free; seq_cst, pairs with the handler's increment of in_handler
	 * then load of active: __free stores active = 0 then waits for
	 * in_handler == 0, so a handler either sees 0 or is waited for. */
	_Atomic int active;
	int signo;
	pid_t pid;
	uint32_t method;
	uint32_t nslots;
	struct slot *slots;
	const struct range *ranges;
	uint32_t nranges;
	size_t cap;		/* bytes copied above SP at most */
	uint64_t growsdown_max; /* RLIMIT_STACK, for "[stack]" growth */
	uint64_t vm_wait_ns;	/* VM_READV: how long a handler waits */
	/* Handlers running right now (see `active`). Own cache line: every
	 * handler touches it. */
	_Atomic uint32_t in_handler __attribute__((aligned(CACHELINE)));
	/* Handlers finished in the current batch; the probe's futex word.
	 * seq_cst RMW by the handler, then a load of target; the probe stores
	 * target then loads completed (Dekker): either the probe sees the
	 * count reached, or the handler sees target and wakes it. */
	_Atomic uint32_t completed __attribute__((aligned(CACHELINE)));
	_Atomic uint32_t target;
} g;

struct sprobe_capturer {
	int signo;
	uint32_t method, strategy;
	uint64_t timeout_ns;
	size_t max_stack_bytes;
	uint32_t max_threads;
	pid_t pid;
	uid_t uid;
	void (*before_signal)(void *ctx, pid_t tid);
	void (*before_zp_copy)(void *ctx, pid_t tid);
	void *hook_ctx;
	uint64_t handler_mask; /* signals blocked while our handler runs */
	struct sigaction old_sa;
	pthread_mutex_t lock; /* serialises captures */
	uint64_t gen;	      /* last generation handed out */
	struct slot *slots;   /* max_threads, cache-line aligned */
	/* Thread enumeration. */
	int task_fd;	/* /proc/self/task: a handle of userspace/fds.h */
	char *dents;
	size_t dents_len;
	pid_t *tids, *prev_tids;
	uint32_t ntids, nprev, tids_cap;
	uint32_t *sent; /* indices of slots signalled in this batch */
	/* Stack ranges. */
	char *maps;
	size_t maps_cap;
	struct range *ranges;
	uint32_t nranges, ranges_cap;
	bool maps_stale;
	pid_t blk[BLK_MAX];	/* see known_blocked() */
	uint32_t nblk;
	/* Threads left out of every capture (stackprobe's own: see
	 * sprobe_capturer__exclude_tid()). Under lock. */
	pid_t excl[EXCL_MAX];
	uint32_t nexcl;
	/* CPU-timer mode (sprobe_capturer__cpu_collect()). Slot i belongs to
	 * thread cpu_tid[i] (0: free) whose timer cpu_timer[i] carries
	 * sigev_value cpu_gen[i] << 16 | i. Probe only, under lock. */
	bool cpu_on;
	uint64_t cpu_interval_ns;
	struct sprobe_snapshot *cpu_snap; /* where the handlers write */
	pid_t *cpu_tid;
	timer_t *cpu_timer;
	uint64_t *cpu_gen;
	pid_t *cpu_sorted;		  /* scratch: tracked tids, sorted */
	uint32_t cpu_free;		  /* next slot to try for a new thread */
	/* Zero-pause (see the section of that name). zp[0..nzp) holds one
	 * entry per current thread, sorted by tid, with its proc files once
	 * opened; zp_tmp is the merge scratch. Probe only, under lock. */
	bool zp_on;
	char zp_why[160];		/* why zero-pause is off */
	struct zp_ent *zp, *zp_tmp;
	uint32_t nzp, zp_cap;
	uint32_t zp_fds;	/* proc fds held (within userspace/fds.h's budget) */
	/* The snapshot and epoch of the last wall capture: an unchanged
	 * thread's previous copy is still in that snapshot's slot only if
	 * nothing else was captured into it since (see zp_try()). */
	const struct sprobe_snapshot *zp_snap;
	uint64_t zp_epoch;
	struct sprobe_thread_sample zp_prev; /* scratch: a slot's header */
	/* A capture started by sprobe_capturer__capture_start() and not yet
	 * finished: its snapshot, the slots signalled (sent[0..inflight_n)),
	 * when the signals went out, and the probe CPU spent so far. Under
	 * lock; while set, every other capture call returns -EBUSY. */
	struct sprobe_snapshot *inflight;
	uint32_t inflight_n;
	uint64_t batch_sent_ns;
	uint64_t inflight_ns;
};

static pthread_mutex_t g_owner_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sprobe_capturer *g_owner;
/* Generations keep counting across capturers (guarded by g_owner_lock), so
 * a signal from an earlier capturer can never match a later one's slot. */
static uint64_t g_last_gen;

/* ---------------------------------------------------------------- */
/* Handler path                                                      */
/* ---------------------------------------------------------------- */

/* ASYNC-SIGNAL-SAFE: one raw syscall, no errno use by the caller. */
static inline long futex_wake(_Atomic uint32_t *addr, int n)
{
	return syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* ASYNC-SIGNAL-SAFE: one raw syscall. Waits while *addr == val, at most
 * rel_ns (0: forever). */
static inline long futex_wait(_Atomic uint32_t *addr, uint32_t val, uint64_t rel_ns)
{
	struct timespec ts, *tsp = NULL;

	if (rel_ns) {
		ts.tv_sec = (time_t)(rel_ns / 1000000000ull);
		ts.tv_nsec = (long)(rel_ns % 1000000000ull);
		tsp = &ts;
	}
	return syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, tsp, NULL, 0);
}

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

/* ASYNC-SIGNAL-SAFE: arithmetic. SP minus the red zone, but not below
 * floor (floor <= sp). */
static inline uint64_t redzone_floor(uint64_t sp, uint64_t floor)
{
	uint64_t rz = SPROBE_REDZONE;

	return sp - floor > rz ? sp - rz : floor;
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
	uint32_t a = 0, b = g.nranges;

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

		if (g.ranges[m].hi <= sp)
			a = m + 1;
		else
			b = m;
	}
	if (a == g.nranges)
		return false;
	const struct range *r = &g.ranges[a];
	if (sp >= r->lo) {
		*lo = redzone_floor(sp, r->lo);
	} else if (r->growsdown && r->lo - sp <= g.growsdown_max) {
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
 * process_vm_readv, at most g.vm_wait_ns.
 */
static void vm_handshake(struct slot *sl, uint64_t entry)
{
	uint32_t v;

	/* Release; pairs with the probe's acquire load in vm_service(). */
	atomic_store_explicit(&sl->vm, VM_REGS, memory_order_release);
	atomic_fetch_add(&g.completed, 1);
	futex_wake(&g.completed, 1);
	while ((v = atomic_load_explicit(&sl->vm, memory_order_acquire)) == VM_REGS) {
		uint64_t now = sprobe_now_ns();
		uint32_t expect = VM_REGS;

		if (now - entry >= g.vm_wait_ns) {
			/* acq_rel; pairs with the probe's CAS REGS -> COPIED. */
			if (atomic_compare_exchange_strong(&sl->vm, &expect, VM_ABANDONED))
				break;
			continue;
		}
		futex_wait(&sl->vm, VM_REGS, g.vm_wait_ns - (now - entry));
	}
}

/*
 * The capture signal handler.
 * ASYNC-SIGNAL-SAFE: see the rule at the top of this file. Reads the
 * ucontext, copies the stack into the preallocated buffer, publishes with
 * a release store and a futex wake, restores errno.
 */
static void capture_handler(int sig, siginfo_t *si, void *ucv)
{
	uint64_t entry = sprobe_now_ns();
	int saved_errno = errno;
	const ucontext_t *uc = ucv;
	struct sprobe_thread_sample *t;
	struct slot *sl;
	uint64_t v, gen, expect, lo, hi;
	uint32_t idx, n;
	bool timer = false;

	(void)sig;
	/* seq_cst; pairs with the store of g.active in __free(). */
	atomic_fetch_add(&g.in_handler, 1);
	if (!atomic_load(&g.active))
		goto out;
	/* Only signals the probe sent: a kill(1) from outside, or a capture
	 * signal from another process, carries another code or pid. */
	if (si->si_code == SI_TIMER)
		timer = true; /* one of our per-thread CPU timers (or stale) */
	else if (si->si_code != SI_QUEUE || si->si_pid != g.pid)
		goto out;
	v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
	idx = (uint32_t)(v & 0xffff);
	gen = v >> 16;
	if (idx >= g.nslots)
		goto out;
	sl = &g.slots[idx];
	expect = gen << 2 | SLOT_ARMED;
	/* Acquire; pairs with the probe's release store of ARMED in
	 * arm_slot(): the sample pointer, ranges and g fields are visible. A
	 * late or repeated signal carries an old generation and fails here. */
	if (!atomic_compare_exchange_strong_explicit(&sl->state, &expect, gen << 2 | SLOT_BUSY,
						     memory_order_acquire, memory_order_relaxed)) {
		/* Our timer fired again before the probe collected the
		 * sample: count the CPU period (and the ones the kernel
		 * folded into this signal), the sample stands for them. */
		if (timer && expect == (gen << 2 | SLOT_DONE))
			atomic_fetch_add_explicit(&sl->extra, 1 + (uint32_t)si->si_overrun,
						  memory_order_relaxed);
		goto out;
	}
	/* The kernel checks thread CPU timers at its tick (run_posix_cpu_timers),
	 * so at rates above HZ one signal stands for several expirations: it
	 * reports the rest as overruns. Relaxed: the probe reads extra only
	 * after it saw DONE (release below / acquire in slot_phase). */
	if (timer && si->si_overrun > 0)
		atomic_fetch_add_explicit(&sl->extra, (uint32_t)si->si_overrun,
					  memory_order_relaxed);

	t = sl->sample;
	read_regs(t, uc);
	if (!stack_bounds(t->sp, uc, &lo, &hi)) {
		t->drop_reason = SPROBE_DROP_NO_STACK;
	} else {
		size_t above = hi > t->sp ? (size_t)(hi - t->sp) : 0;

		t->stack_top = hi;
		if (above > g.cap) {
			above = g.cap;
			t->truncated = true;
		}
		t->stack_addr = lo;
		t->stack_len = (size_t)(t->sp - lo) + above;
		if (g.method == SPROBE_METHOD_VM_READV)
			vm_handshake(sl, entry);
		else
			memcpy(sl->buf, (const void *)(uintptr_t)lo, t->stack_len);
		t->stage = SPROBE_STAGE_RAW;
	}
	t->entry_ns = entry;
	t->exit_ns = sprobe_now_ns();
	/* Release; pairs with the probe's acquire load in slot_phase(). */
	atomic_store_explicit(&sl->state, gen << 2 | SLOT_DONE, memory_order_release);
	/* seq_cst RMW then load of target: see g.completed. */
	n = atomic_fetch_add(&g.completed, 1) + 1;
	if (n >= atomic_load(&g.target))
		futex_wake(&g.completed, 1);
out:
	errno = saved_errno;
	/* Last: the capturer's free waits for this. */
	atomic_fetch_sub(&g.in_handler, 1);
}

/* ---------------------------------------------------------------- */
/* Probe side (ordinary code, never inside a window)                 */
/* ---------------------------------------------------------------- */

static pid_t sys_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* Read a whole /proc file into c->maps (grown as needed). */
static int read_maps(struct sprobe_capturer *c, size_t *len)
{
	int h = sprobe_fd__open("/proc/self/maps", O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	int fd = h >= 0 ? sprobe_fd__get(h) : h;
	size_t off = 0;
	ssize_t n;

	if (fd < 0) {
		sprobe_fd__close(h);
		return fd;
	}
	for (;;) {
		if (off + 4096 > c->maps_cap) {
			size_t cap = c->maps_cap;
			int err = grow((void **)&c->maps, &cap, off + 4096 + 1, 1);

			if (err) {
				sprobe_fd__done(h);
				return err;
			}
			c->maps_cap = cap;
		}
		n = read(fd, c->maps + off, c->maps_cap - off - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			n = -errno;
			sprobe_fd__done(h);
			return (int)n;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	sprobe_fd__done(h);
	c->maps[off] = '\0';
	*len = off;
	return 0;
}

static uint64_t parse_hex(const char **pp)
{
	const char *p = *pp;
	uint64_t v = 0;

	for (;; p++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else
			break;
		v = v << 4 | d;
	}
	*pp = p;
	return v;
}

/* Re-read /proc/self/maps into c->ranges: rw mappings, ascending. */
static int refresh_ranges_once(struct sprobe_capturer *c)
{
	size_t len = 0, cap = c->ranges_cap;
	const char *p, *end;
	uint32_t n = 0;
	int err = read_maps(c, &len);

	if (err)
		return err;
	p = c->maps;
	end = c->maps + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		uint64_t lo, hi;

		if (!eol)
			eol = end;
		lo = parse_hex(&p);
		if (*p == '-') {
			p++;
			hi = parse_hex(&p);
			if (*p == ' ' && p + 3 < eol && p[1] == 'r' && p[2] == 'w' && hi > lo) {
				if (n == cap) {
					err = grow((void **)&c->ranges, &cap, n + 1, sizeof(*c->ranges));
					if (err)
						return err;
					c->ranges_cap = (uint32_t)cap;
				}
				c->ranges[n].lo = lo;
				c->ranges[n].hi = hi;
				c->ranges[n].growsdown =
					eol - p >= 7 && memcmp(eol - 7, "[stack]", 7) == 0;
				/* The kernel lists mappings in ascending order;
				 * the handler's binary search relies on it. */
				if (n && c->ranges[n - 1].hi > lo)
					return -EPROTO;
				n++;
			}
		}
		p = eol + 1;
	}
	c->nranges = n;
	c->maps_stale = false;
	return 0;
}

/*
 * The kernel makes each read(2) of /proc/self/maps consistent, not the
 * whole file: a mapping created or removed between two reads (an
 * allocator's mmap, a thread's stack) can show ranges out of order. Such a
 * parse is refused (-EPROTO: the handler's binary search needs the order)
 * and the file read again, a bounded number of times.
 */
static int refresh_ranges(struct sprobe_capturer *c)
{
	int err = -EPROTO;

	for (int attempt = 0; attempt < 16 && err == -EPROTO; attempt++)
		err = refresh_ranges_once(c);
	return err;
}

static bool is_excluded(const struct sprobe_capturer *c, pid_t tid)
{
	for (uint32_t i = 0; i < c->nexcl; i++)
		if (c->excl[i] == tid)
			return true;
	return false;
}

/* Enumerate /proc/self/task into c->tids, excluding self and the excluded
 * threads (they are neither signalled nor counted). */
static int enumerate_threads(struct sprobe_capturer *c, pid_t self)
{
	uint32_t n = 0;

	int fd = sprobe_fd__get(c->task_fd);

	if (fd < 0)
		return fd;
	if (lseek(fd, 0, SEEK_SET) < 0) {
		sprobe_fd__put(c->task_fd);
		return -errno;
	}
	for (;;) {
		long got = syscall(SYS_getdents64, fd, c->dents, c->dents_len);
		long off = 0;

		if (got < 0) {
			int e = -errno;

			sprobe_fd__put(c->task_fd);
			return e;
		}
		if (got == 0)
			break;
		while (off < got) {
			struct dirent64 *d = (struct dirent64 *)(c->dents + off);
			const char *s = d->d_name;
			long tid = 0;

			off += d->d_reclen;
			if (*s < '0' || *s > '9')
				continue;
			for (; *s >= '0' && *s <= '9'; s++)
				tid = tid * 10 + (*s - '0');
			if ((pid_t)tid == self || is_excluded(c, (pid_t)tid))
				continue;
			if (n == c->tids_cap) {
				size_t cap = c->tids_cap;
				size_t cap2 = c->tids_cap;
				int err = grow((void **)&c->tids, &cap, n + 1, sizeof(pid_t));

				if (!err)
					err = grow((void **)&c->prev_tids, &cap2, n + 1, sizeof(pid_t));
				if (!err) {
					size_t cap3 = c->tids_cap;

					err = grow((void **)&c->sent, &cap3, n + 1, sizeof(uint32_t));
				}
				if (err) {
					sprobe_fd__put(c->task_fd);
					return err;
				}
				c->tids_cap = (uint32_t)cap;
			}
			c->tids[n++] = (pid_t)tid;
		}
	}
	sprobe_fd__put(c->task_fd);
	c->ntids = n;
	return 0;
}

static bool status_mask(const char *buf, const char *key, uint64_t *mask)
{
	const char *p = strstr(buf, key), *q;

	if (!p)
		return false;
	p += strlen(key);
	while (*p == ' ' || *p == '\t')
		p++;
	q = p;
	*mask = parse_hex(&q);
	/* 16 hex digits, most significant first; signal n is bit n-1. */
	return q - p == 16;
}

/*
 * Should the capture signal be sent to tid? From SigBlk and SigPnd in
 * /proc/self/task/<tid>/status, read outside any window.
 * Returns 0 (send), or the drop reason: EXITED if the thread is gone,
 * BLOCKED if it blocks the signal, ERROR if status is unreadable.
 *
 * A thread that is still returning from one of our handlers (the previous
 * capture returned as soon as the handler published DONE; often the
 * probe's wake-up preempts the handler right there) has every signal in
 * the handler's sa_mask blocked until its sigreturn. Such a thread is
 * signalled anyway: the signal is delivered right after the sigreturn. A
 * thread that really blocks that whole set is found out while waiting
 * (strict = true: only blocked with our signal pending counts; blocked
 * without it means the signal was just delivered) and from then on keeps
 * exactly one stale signal pending, which makes later checks drop it
 * without queueing more.
 */
/* Is capture_handler still installed for signo? Someone (the program, or
 * a raw rt_sigaction) may have replaced it since the capturer was made. */
static bool handler_is_ours(int signo)
{
	struct sigaction cur;

	return sigaction(signo, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
	       cur.sa_sigaction == capture_handler;
}

/* thread_sigcheck() with strict set could not decide (see its end). */
#define SIGCHECK_UNSURE UINT32_MAX

static uint32_t thread_sigcheck(const struct sprobe_capturer *c, pid_t tid, bool strict)
{
	char path[64], buf[2048];
	uint64_t blk, pnd, bit = 1ull << (c->signo - 1);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	int h = sprobe_fd__open(path, O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	if (h < 0)
		return h == -ENOENT ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	fd = sprobe_fd__get(h);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	int e = errno;
	sprobe_fd__done(h);
	errno = e;
	if (n <= 0)
		return n == 0 || errno == ESRCH ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	buf[n] = '\0';
	if (!status_mask(buf, "SigBlk:", &blk) || !status_mask(buf, "SigPnd:", &pnd))
		return SPROBE_DROP_ERROR;
	if (!(blk & bit))
		return 0;
	/* Inside one of our handlers a thread blocks at least the handler's
	 * whole mask: anything less is the application's doing. */
	if ((blk & c->handler_mask) != c->handler_mask)
		return SPROBE_DROP_BLOCKED;
	if (!(pnd & bit))
		return 0; /* in our handler, or just delivered: see above */
	/* Pending behind a full mask while some handler of ours runs: most
	 * likely this thread, preempted before its sigreturn. Undecided: the
	 * caller asks again once no handler runs. */
	if (strict && atomic_load(&g.in_handler))
		return SIGCHECK_UNSURE;
	return SPROBE_DROP_BLOCKED;
}

static int send_signal(struct sprobe_capturer *c, pid_t tid, uint32_t idx, uint64_t gen)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = c->signo;
	si.si_code = SI_QUEUE;
	si.si_pid = c->pid;
	si.si_uid = c->uid;
	si.si_value.sival_ptr = (void *)(uintptr_t)(gen << 16 | idx);
	if (syscall(SYS_rt_tgsigqueueinfo, c->pid, tid, c->signo, &si) < 0)
		return -errno;
	return 0;
}

static void arm_slot(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i,
		     uint64_t gen)
{
	struct slot *sl = &c->slots[i];

	sl->sample = &s->samples[i];
	sl->buf = sprobe_snapshot__buffer(s, i);
	atomic_store_explicit(&sl->vm, VM_NONE, memory_order_relaxed);
	/* Release; pairs with the handler's acquire CAS ARMED -> BUSY. */
	atomic_store_explicit(&sl->state, gen << 2 | SLOT_ARMED, memory_order_release);
}

/* Take back an ARMED slot. True if no handler will ever touch it. */
static bool cancel_slot(struct slot *sl, uint64_t gen)
{
	uint64_t expect = gen << 2 | SLOT_ARMED;

	/* acq_rel; pairs with the handler's CAS ARMED -> BUSY: exactly one of
	 * the two succeeds. */
	return atomic_compare_exchange_strong(&sl->state, &expect, gen << 2 | SLOT_IDLE);
}

static uint32_t slot_phase(struct slot *sl)
{
	/* Acquire; pairs with the handler's release store of DONE. */
	return (uint32_t)(atomic_load_explicit(&sl->state, memory_order_acquire) & 3);
}

/*
 * Threads known to block the signal. Everyone else is signalled without
 * reading its status first (one /proc read per thread per capture is what
 * made captures slow under CPU contention); a thread that turns out to
 * block is found while waiting, lands here and is checked before each
 * capture from then on. nblk > BLK_MAX means the list overflowed: check
 * everyone.
 */
static bool known_blocked(const struct sprobe_capturer *c, pid_t tid)
{
	for (uint32_t i = 0; i < c->nblk && i < BLK_MAX; i++)
		if (c->blk[i] == tid)
			return true;
	return false;
}

static void note_blocked(struct sprobe_capturer *c, pid_t tid)
{
	if (known_blocked(c, tid))
		return;
	if (c->nblk < BLK_MAX)
		c->blk[c->nblk++] = tid;
	else
		c->nblk = BLK_MAX + 1;
}

static void forget_blocked(struct sprobe_capturer *c, pid_t tid)
{
	/* Overflowed (nblk == BLK_MAX + 1): the list is incomplete and stays
	 * so; removing from it would read blk[BLK_MAX] (found by UBSan). */
	if (c->nblk > BLK_MAX)
		return;
	for (uint32_t i = 0; i < c->nblk; i++) {
		if (c->blk[i] == tid) {
			c->blk[i] = c->blk[--c->nblk];
			return;
		}
	}
}

/*
 * VM_READV: copy the stack of every slot whose handler published its
 * registers, then let the handler go. Returns how many were served.
 */
static uint32_t vm_service(struct sprobe_capturer *c, const uint32_t *sent, uint32_t nsent)
{
	uint32_t served = 0;

	for (uint32_t k = 0; k < nsent; k++) {
		struct slot *sl = &c->slots[sent[k]];
		struct sprobe_thread_sample *t = sl->sample;
		uint32_t expect = VM_REGS;

		/* Acquire; pairs with the release store of VM_REGS in
		 * vm_handshake(): sp, stack_addr, stack_len are set. */
		if (atomic_load_explicit(&sl->vm, memory_order_acquire) != VM_REGS)
			continue;
		struct iovec local = { sl->buf, t->stack_len };
		struct iovec remote = { (void *)(uintptr_t)t->stack_addr, t->stack_len };
		ssize_t n = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);

		/* A short or failed copy leaves what was read; the drop is
		 * decided after the handler is done (stack_len 0 = error). */
		t->stack_len = n > 0 ? (size_t)n : 0;
		if (atomic_compare_exchange_strong(&sl->vm, &expect, VM_COPIED))
			futex_wake(&sl->vm, 1);
		served++;
	}
	return served;
}

/* A thread that has not run its handler this long after its signal is
 * asked (its /proc status) whether it blocks the signal. Two scheduler
 * ticks at HZ=250: longer than a runnable thread's usual wait for a CPU. */
#define LATE_CHECK_NS 8000000ull

/*
 * First half of a batch: arm and signal the prepared slots in
 * sent[0..nsent); a slot whose signal could not be sent is dropped and
 * taken out of sent[]. Returns how many were sent (sent[] compacted).
 * wake: the last handler wakes the probe (it is about to wait); without
 * it no handler makes the futex system call (the probe comes back later,
 * see sprobe_capturer__capture_start()).
 */
static void batch_begin(struct sprobe_capturer *c)
{
	atomic_store(&g.completed, 0);
	/* No wake until the count is final: sends are still going out. */
	atomic_store(&g.target, c->method == SPROBE_METHOD_VM_READV ? 0 : UINT32_MAX);
}

/* Arm slot i and signal its thread. False when the signal could not be
 * sent (the sample is dropped: exited, or error). */
static bool batch_send_one(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i)
{
	struct sprobe_thread_sample *t = &s->samples[i];
	uint64_t gen = ++c->gen;
	int err;

	if (c->before_signal)
		c->before_signal(c->hook_ctx, t->tid);
	arm_slot(c, s, i, gen);
	t->method = c->method;
	t->signal_ns = sprobe_now_ns();
	err = send_signal(c, t->tid, i, gen);
	if (err) {
		/* Never delivered: the CAS cannot fail. */
		cancel_slot(&c->slots[i], gen);
		sprobe_snapshot__drop(s, t, err == -ESRCH ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR);
		return false;
	}
	return true;
}

/* The sends of a batch are done: live of them went out. */
static void batch_end(struct sprobe_capturer *c, uint32_t live, bool wake)
{
	c->batch_sent_ns = sprobe_now_ns();
	/* seq_cst store, then load of completed: see g.completed. */
	if (live && wake)
		atomic_store(&g.target, c->method == SPROBE_METHOD_VM_READV ? 0 : live);
}

static uint32_t batch_send(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			   uint32_t *sent, uint32_t nsent, bool wake)
{
	uint32_t live = 0;

	batch_begin(c);
	for (uint32_t k = 0; k < nsent; k++)
		if (batch_send_one(c, s, sent[k]))
			sent[live++] = sent[k];
	batch_end(c, live, wake);
	return live;
}

/*
 * Second half: wait for every slot of sent[0..nsent) (sent by
 * batch_send()) with one deadline counted from the sends, cancel the
 * stragglers, wait for any handler that is still running. On return no
 * handler will touch these samples.
 */
static void batch_wait(struct sprobe_capturer *c, struct sprobe_snapshot *s,
		       uint32_t *sent, uint32_t nsent)
{
	uint64_t deadline, slice = 1000000; /* 1 ms, doubling */
	uint32_t ncancelled = 0, k;
	bool vm = c->method == SPROBE_METHOD_VM_READV;

	if (!nsent)
		return;
	/* seq_cst store, then load of completed: see g.completed. (Again
	 * after batch_send(): a pipelined batch left it at UINT32_MAX.) */
	atomic_store(&g.target, vm ? 0 : nsent);
	deadline = c->batch_sent_ns + c->timeout_ns;
	uint32_t ndone = 0;
	for (;;) {
		uint32_t seen = atomic_load(&g.completed);
		uint64_t now;

		if (vm) {
			vm_service(c, sent, nsent);
			ndone = 0;
			for (k = 0; k < nsent; k++)
				ndone += slot_phase(&c->slots[sent[k]]) == SLOT_DONE;
			if (ndone == nsent)
				break;
		} else if (seen >= nsent) {
			break;
		}
		now = sprobe_now_ns();
		if (now >= deadline)
			break;
		if (slice > deadline - now)
			slice = deadline - now;
		if (futex_wait(&g.completed, seen, slice) < 0 && errno == ETIMEDOUT) {
			/* Slow path: drop early the threads that exited or
			 * started blocking the signal after we looked. */
			for (k = 0; k < nsent; k++) {
				uint32_t i = sent[k];
				struct slot *sl = &c->slots[i];
				uint64_t st = atomic_load(&sl->state);
				pid_t tid = s->samples[i].tid;
				uint32_t why = 0;

				if ((st & 3) != SLOT_ARMED)
					continue;
				/* tgkill(0) is cheap; a status read is not (an
				 * open, a 1.4 KB read and a close: ~9 us here),
				 * and under CPU contention every syscall of the
				 * probe costs a time slice: read it once per
				 * thread and capture, and only after
				 * LATE_CHECK_NS (most late threads are merely
				 * waiting for a CPU: a few ms when the CPUs are
				 * oversubscribed, which made 2 ms pay this on a
				 * quarter of the rounds of a 4-threads-on-2-CPUs
				 * workload). */
				if (syscall(SYS_tgkill, c->pid, tid, 0) < 0 && errno == ESRCH) {
					why = SPROBE_DROP_EXITED;
				} else if (sl->checked != st >> 2 &&
					   sprobe_now_ns() - s->samples[i].signal_ns >= LATE_CHECK_NS) {
					uint32_t r = thread_sigcheck(c, tid, true);

					/* Once per thread and capture, unless undecided:
					 * a check made while another thread's handler was
					 * preempted (under load) must not leave a thread
					 * that blocks the signal waiting out the deadline. */
					if (r != SIGCHECK_UNSURE)
						sl->checked = st >> 2;
					if (r == SPROBE_DROP_BLOCKED)
						why = SPROBE_DROP_BLOCKED;
				}
				if (why && cancel_slot(sl, st >> 2)) {
					sprobe_snapshot__drop(s, &s->samples[i], why);
					if (why == SPROBE_DROP_BLOCKED)
						note_blocked(c, tid);
					ncancelled++;
				}
			}
			/* seq_cst; same pairing as the first store of target. */
			if (!vm)
				atomic_store(&g.target, nsent - ncancelled);
			if (slice < 64000000)
				slice *= 2;
		}
		/* Are all slots settled (DONE or cancelled)? */
		uint32_t open = 0;
		for (k = 0; k < nsent; k++) {
			uint32_t ph = slot_phase(&c->slots[sent[k]]);

			open += ph == SLOT_ARMED || ph == SLOT_BUSY;
		}
		if (!open)
			break;
	}

	/* Deadline: take back every slot whose handler has not started. */
	uint32_t busy = 0;
	for (k = 0; k < nsent; k++) {
		uint32_t i = sent[k];
		struct slot *sl = &c->slots[i];
		uint64_t st = atomic_load(&sl->state);

		if ((st & 3) == SLOT_ARMED) {
			if (cancel_slot(sl, st >> 2)) {
				uint32_t why = thread_sigcheck(c, s->samples[i].tid, true);

				if (why == SPROBE_DROP_BLOCKED)
					note_blocked(c, s->samples[i].tid);

				sprobe_snapshot__drop(s, &s->samples[i],
						      why == SPROBE_DROP_BLOCKED ||
								      why == SPROBE_DROP_EXITED
							      ? why
							      : SPROBE_DROP_TIMEOUT);
				continue;
			}
			st = atomic_load(&sl->state);
		}
		if ((st & 3) == SLOT_BUSY)
			busy++;
	}
	/* Handlers already running finish in bounded time (a memcpy, or a
	 * VM_READV wait capped by g.vm_wait_ns): wait for them so that
	 * nothing writes into s after we return. */
	while (busy) {
		uint32_t seen = atomic_load(&g.completed);

		busy = 0;
		if (vm)
			vm_service(c, sent, nsent);
		for (k = 0; k < nsent; k++)
			busy += slot_phase(&c->slots[sent[k]]) == SLOT_BUSY;
		if (busy)
			futex_wait(&g.completed, seen, 1000000);
	}

	/* Collect. */
	for (k = 0; k < nsent; k++) {
		uint32_t i = sent[k];
		struct sprobe_thread_sample *t = &s->samples[i];

		if (slot_phase(&c->slots[i]) != SLOT_DONE)
			continue; /* cancelled, reason already set */
		if (t->stage == SPROBE_STAGE_RAW && t->entry_ns > t->signal_ns + c->timeout_ns) {
			/* Answered after the deadline (a pipelined capture is
			 * only looked at later, and a handler may start just
			 * before its slot is cancelled): the same rule as a
			 * capture that waited, a stack from that late is not
			 * the one asked for. */
			sprobe_snapshot__drop(s, t, SPROBE_DROP_TIMEOUT);
			continue;
		}
		if (t->stage != SPROBE_STAGE_RAW) {
			if (t->drop_reason == SPROBE_DROP_NONE)
				t->drop_reason = SPROBE_DROP_ERROR;
			sprobe_snapshot__drop(s, t, t->drop_reason);
		} else if (vm && (t->stack_len == 0 ||
				  atomic_load(&c->slots[i].vm) == VM_ABANDONED)) {
			sprobe_snapshot__drop(s, t, t->stack_len ? SPROBE_DROP_TIMEOUT
								 : SPROBE_DROP_ERROR);
		}
	}
}

/* One batch, start to end (the probe waits). */
static void run_batch(struct sprobe_capturer *c, struct sprobe_snapshot *s,
		      uint32_t *sent, uint32_t nsent)
{
	batch_wait(c, s, sent, batch_send(c, s, sent, nsent, true));
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return x < y ? -1 : x > y;
}

/* In place (glibc's qsort may malloc a merge buffer: a warm capture must
 * not allocate). Shell sort, Ciura's gaps. */
static void sort_tids(pid_t *v, uint32_t n)
{
	static const uint32_t gaps[] = { 701, 301, 132, 57, 23, 10, 4, 1 };

	for (size_t k = 0; k < sizeof(gaps) / sizeof(gaps[0]); k++) {
		uint32_t gap = gaps[k];

		for (uint32_t i = gap; i < n; i++) {
			pid_t x = v[i];
			uint32_t j = i;

			for (; j >= gap && v[j - gap] > x; j -= gap)
				v[j] = v[j - gap];
			v[j] = x;
		}
	}
}

/*
 * Did a thread appear since the maps were last read? Only new threads can
 * run on stacks the range array does not know; exits make no range wrong
 * (a thread's stack is never unmapped while it runs). prev_tids is kept
 * sorted; updated here.
 */
static bool new_threads(struct sprobe_capturer *c)
{
	bool fresh = false;

	for (uint32_t i = 0; i < c->ntids && !fresh; i++)
		fresh = !bsearch(&c->tids[i], c->prev_tids, c->nprev, sizeof(pid_t), cmp_tid);
	if (c->ntids)
		memcpy(c->prev_tids, c->tids, c->ntids * sizeof(pid_t));
	c->nprev = c->ntids;
	sort_tids(c->prev_tids, c->nprev);
	return fresh;
}


/* ---------------------------------------------------------------- */
/* Zero-pause capture of blocked threads                             */
/* ---------------------------------------------------------------- */

/*
 * A thread blocked in the kernel (in a system call, or stopped) cannot
 * change its user stack until it runs again, so the probe can read it
 * without stopping it. For each thread, outside any window and without
 * any signal:
 *   1. pread schedstat  -> A (run time, run-queue wait, times switched in)
 *   2. pread syscall    -> "running" (take the signal path), or the
 *      syscall number, its arguments, SP and PC. The kernel fills this from
 *      the saved user registers only after wait_task_inactive() saw the
 *      thread off every CPU, twice (lib/syscall.c), so SP/PC are the ones
 *      the thread will resume with.
 *   3. process_vm_readv [SP - red zone, top of SP's mapping), capped: it
 *      returns a short count instead of faulting if a neighbouring mapping
 *      goes away meanwhile (the thread pointer that bounds the handler's
 *      copy is not known from outside the thread).
 *   4. pread schedstat  -> B.
 * A == B (byte for byte) means the thread was not switched in between 1
 * and 4 (the third field counts switch-ins and moves at the switch, before
 * any user instruction runs), so the copy made between 2 and 4 is the
 * stack the thread blocked with: a consistent capture, zero pause, no
 * signal. A != B, any read failing, or SP outside every known stack: the
 * thread takes the signal path in the same capture (stats.zp_fallback).
 * Per-thread proc fds are opened once and kept (at most a quarter of
 * RLIMIT_NOFILE; beyond that they are opened per capture).
 * What the file does not give: any other register. See docs/capture.md
 * ("Zero-pause") for what that costs the unwinder and how it is closed.
 */

/* "nr a0 .. a5 sp pc" or "-1 sp pc" (not in a syscall), or "running".
 * Returns false for "running" or anything else unexpected. */
static bool zp_parse_syscall(const char *p, long *nr, uint64_t args[6], uint64_t *sp,
			     uint64_t *pc)
{
	uint64_t v[9];
	int n = 0;
	bool neg = false;
	long x = 0;

	if (*p == '-') {
		neg = true;
		p++;
	}
	if (*p < '0' || *p > '9')
		return false; /* "running" */
	for (; *p >= '0' && *p <= '9'; p++)
		x = x * 10 + (*p - '0');
	*nr = neg ? -x : x;
	while (*p == ' ' && n < 9) {
		const char *q;

		p++;
		if (p[0] != '0' || p[1] != 'x')
			return false;
		p += 2;
		q = p;
		v[n++] = parse_hex(&p);
		if (p == q)
			return false;
	}
	if (*p != '\n' && *p != '\0')
		return false;
	if (*nr == -1 && n == 2) {
		memset(args, 0, 6 * sizeof(uint64_t));
		*sp = v[0];
		*pc = v[1];
		return true;
	}
	if (*nr < 0 || n != 8)
		return false;
	memcpy(args, v, 6 * sizeof(uint64_t));
	*sp = v[6];
	*pc = v[7];
	return true;
}

/* Probe-side stack bounds: the rw mapping that holds sp, [lo, hi). No
 * thread pointer cap (it belongs to the target, not to us): the copy goes
 * to the mapping's end (capped), with process_vm_readv, so a neighbouring
 * mapping merged into the same line and unmapped meanwhile shortens the
 * copy instead of faulting the probe. */
static bool zp_bounds(const struct sprobe_capturer *c, uint64_t sp, uint64_t *lo, uint64_t *hi)
{
	uint32_t a = 0, b = c->nranges;

	while (a < b) {
		uint32_t m = a + (b - a) / 2;

		if (c->ranges[m].hi <= sp)
			a = m + 1;
		else
			b = m;
	}
	if (a == c->nranges)
		return false;
	const struct range *r = &c->ranges[a];
	if (sp >= r->lo)
		*lo = redzone_floor(sp, r->lo);
	else if (r->growsdown && r->lo - sp <= g.growsdown_max)
		*lo = redzone_floor(sp, sp & ~(uint64_t)4095);
	else
		return false;
	*hi = r->hi;
	return true;
}

static void zp_close(struct sprobe_capturer *c, struct zp_ent *e)
{
	if (e->sys_fd >= 0) {
		sprobe_fd__close(e->sys_fd);
		c->zp_fds--;
	}
	if (e->sched_fd >= 0) {
		sprobe_fd__close(e->sched_fd);
		c->zp_fds--;
	}
	e->sys_fd = e->sched_fd = -1;
	e->was_running = false;
}

/*
 * Make zp[] follow the current thread set (c->prev_tids, sorted, as left
 * by new_threads()): entries of threads gone are closed, new threads get
 * an entry with no files yet. A merge of two sorted lists: O(threads).
 * Allocates only when the thread count grows past what was seen.
 */
static int zp_sync(struct sprobe_capturer *c)
{
	uint32_t a = 0, b = 0, n = 0;

	if (c->nprev > c->zp_cap) {
		size_t cap = c->zp_cap, cap2 = c->zp_cap;
		int err = grow((void **)&c->zp, &cap, c->nprev, sizeof(*c->zp));

		if (!err)
			err = grow((void **)&c->zp_tmp, &cap2, c->nprev, sizeof(*c->zp));
		if (err)
			return err;
		c->zp_cap = (uint32_t)(cap < cap2 ? cap : cap2);
	}
	while (a < c->nzp || b < c->nprev) {
		if (b == c->nprev || (a < c->nzp && c->zp[a].tid < c->prev_tids[b])) {
			zp_close(c, &c->zp[a++]); /* exited */
		} else if (a == c->nzp || c->zp[a].tid > c->prev_tids[b]) {
			c->zp_tmp[n++] = (struct zp_ent){ .tid = c->prev_tids[b++], .sys_fd = -1,
							  .sched_fd = -1 };
		} else {
			c->zp_tmp[n++] = c->zp[a++];
			b++;
		}
	}
	struct zp_ent *t = c->zp;
	c->zp = c->zp_tmp;
	c->zp_tmp = t;
	c->nzp = n;
	return 0;
}

static struct zp_ent *zp_find(struct sprobe_capturer *c, pid_t tid)
{
	uint32_t a = 0, b = c->nzp;

	while (a < b) {
		uint32_t m = a + (b - a) / 2;

		if (c->zp[m].tid < tid)
			a = m + 1;
		else
			b = m;
	}
	return a < c->nzp && c->zp[a].tid == tid ? &c->zp[a] : NULL;
}

/* A registry handle (userspace/fds.h) for one of tid's proc files, or
 * -errno: -EDQUOT when a CACHE one would pass the descriptor budget. */
static int zp_open1(pid_t tid, const char *file, enum sprobe_fd_kind kind)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, file);
	return sprobe_fd__open(path, O_RDONLY, 0, kind);
}

/* pread the whole (short) file of handle h at offset 0; NUL-terminated. */
static ssize_t zp_read(int h, char *buf, size_t len)
{
	int fd = sprobe_fd__get(h);
	ssize_t n = -1;

	if (fd >= 0) {
		do
			n = pread(fd, buf, len - 1, 0);
		while (n < 0 && errno == EINTR);
		sprobe_fd__put(h);
	}
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/*
 * Try to capture thread t (sample i of s) without a signal. Returns true
 * when t now holds a zero-pause sample; false when the thread runs (not
 * counted) or its copy could not be trusted (stats.zp_fallback++): either
 * way t is untouched and takes the signal path.
 */
static bool zp_try(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i,
		   struct sprobe_thread_sample *t, const struct sprobe_thread_sample *prev)
{
	struct zp_ent tmp = { .tid = t->tid, .sys_fd = -1, .sched_fd = -1 }, *e = zp_find(c, t->tid);
	char a[128], b[128], sc[256];
	uint64_t args[6], sp, pc, lo, hi, entry, done;
	ssize_t na, nb;
	long nr;
	bool ok = false, blocked = false, cached = true;

	if (!e) {
		e = &tmp;
		cached = false;
	}
	if (e->sys_fd < 0) {
		/* Held between captures while the descriptor budget allows
		 * (userspace/fds.h), else opened for this use only. */
		enum sprobe_fd_kind kind = cached ? SPROBE_FD_CACHE : SPROBE_FD_TRANSIENT;

		e->sys_fd = zp_open1(t->tid, "syscall", kind);
		e->sched_fd = e->sys_fd >= 0 ? zp_open1(t->tid, "schedstat", kind) : -1;
		if (kind == SPROBE_FD_CACHE && (e->sys_fd == -EDQUOT || e->sched_fd == -EDQUOT)) {
			sprobe_fd__close(e->sys_fd);
			kind = SPROBE_FD_TRANSIENT;
			cached = false;
			e->sys_fd = zp_open1(t->tid, "syscall", kind);
			e->sched_fd = e->sys_fd >= 0 ? zp_open1(t->tid, "schedstat", kind) : -1;
		}
		if (e->sys_fd < 0 || e->sched_fd < 0) {
			sprobe_fd__close(e->sys_fd);
			sprobe_fd__close(e->sched_fd);
			e->sys_fd = e->sched_fd = -1;
			return false; /* exited, or out of fds: signal path */
		}
		if (cached)
			c->zp_fds += 2;
	}
	if (cached && e->was_running) {
		/* Still running: signal path, without the schedstat read. Not
		 * running any more: the full protocol below (its SP and PC
		 * must be read after the first schedstat read, so this read
		 * only decides). */
		ssize_t ns = zp_read(e->sys_fd, sc, sizeof(sc));

		if (ns > 0 && strncmp(sc, "running", 7) == 0)
			return false;
		e->was_running = false;
	}
	entry = sprobe_now_ns();
	na = zp_read(e->sched_fd, a, sizeof(a));
	if (na <= 0)
		goto out;
	if (prev && e->last_ok && e->slot == i && (size_t)na == e->last_len &&
	    memcmp(a, e->last, (size_t)na) == 0) {
		/* Not switched in since the schedstat read that closed its
		 * previous copy, which is still in this slot: its stack and
		 * registers are those. One read instead of four. If that copy
		 * was unwound, frames[] (which sample_init() leaves alone)
		 * still holds its walk: the same bytes give the same frames,
		 * so it stays UNWOUND and is not walked again. */
		const uint8_t *buf = t->stack;

		memcpy(t, prev, offsetof(struct sprobe_thread_sample, frames));
		t->stack = buf;
		if (prev->stage != SPROBE_STAGE_UNWOUND) {
			t->nframes = 0;
			t->stage = SPROBE_STAGE_RAW;
		}
		t->entry_ns = entry;
		t->exit_ns = sprobe_now_ns();
		s->stats.zp_unchanged++;
		return true;
	}
	e->last_ok = false;
	if (zp_read(e->sys_fd, sc, sizeof(sc)) <= 0 || !zp_parse_syscall(sc, &nr, args, &sp, &pc)) {
		e->was_running = cached && strncmp(sc, "running", 7) == 0;
		goto out; /* running (or gone): the signal path decides */
	}
	blocked = true;
	if (!pc || !zp_bounds(c, sp, &lo, &hi))
		goto out;
	if (c->before_zp_copy)
		c->before_zp_copy(c->hook_ctx, t->tid);
	{
		size_t above = hi > sp ? (size_t)(hi - sp) : 0, len;
		bool trunc = false;

		if (above > g.cap) {
			above = g.cap;
			trunc = true;
		}
		len = (size_t)(sp - lo) + above;
		struct iovec local = { sprobe_snapshot__buffer(s, i), len };
		struct iovec remote = { (void *)(uintptr_t)lo, len };
		ssize_t got = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);

		nb = zp_read(e->sched_fd, b, sizeof(b));
		done = sprobe_now_ns();
		if (got <= (ssize_t)(sp - lo) || nb != na || memcmp(a, b, (size_t)na) != 0)
			goto out;
		if ((size_t)got < len) {
			len = (size_t)got;
			trunc = true;
		}
		t->stack_addr = lo;
		t->stack_len = len;
		t->stack_top = sp + above;
		t->truncated = trunc;
	}
	memset(t->regs, 0, sizeof(t->regs));
#if defined(__x86_64__)
	t->regs[7] = sp;
	t->regs[16] = pc;
#else
	t->regs[31] = sp;
	t->regs[32] = pc;
#endif
	t->ip = pc;
	t->sp = sp;
	t->fp = 0;	/* unknown: the file gives SP and PC only */
	t->lr = 0;
	t->has_lr = false;
	t->method = SPROBE_METHOD_ZERO_PAUSE;
	t->signal_ns = 0;
	t->entry_ns = entry;
	t->exit_ns = done;
	t->drop_reason = SPROBE_DROP_NONE;
	t->stage = SPROBE_STAGE_RAW;
	ok = true;
	if (cached && (size_t)nb <= sizeof(e->last)) {
		memcpy(e->last, b, (size_t)nb);
		e->last_len = (uint32_t)nb;
		e->slot = i;
		e->last_ok = true;
	}
out:
	if (!ok && blocked)
		s->stats.zp_fallback++;
	if (!ok && na <= 0 && cached) {
		/* Unreadable (the thread exited; its tid may come back as
		 * another thread): reopen next time. */
		zp_close(c, e);
	} else if (!cached) {
		sprobe_fd__close(e->sys_fd);
		sprobe_fd__close(e->sched_fd);
		if (e != &tmp)
			e->sys_fd = e->sched_fd = -1;
	}
	return ok;
}

/* The self-test's helper thread: publishes its stack, blocks in read(). */
struct zp_probe {
	int rfd;
	_Atomic pid_t tid;	/* release; pairs with the acquire in zp_selftest */
	uint64_t stk_lo, stk_hi;
};

static void *zp_probe_main(void *arg)
{
	struct zp_probe *p = arg;
	pthread_attr_t at;
	void *lo = NULL;
	size_t sz = 0;
	char ch;

	if (pthread_getattr_np(pthread_self(), &at) == 0) {
		pthread_attr_getstack(&at, &lo, &sz);
		pthread_attr_destroy(&at);
	}
	p->stk_lo = (uint64_t)(uintptr_t)lo;
	p->stk_hi = p->stk_lo + sz;
	atomic_store_explicit(&p->tid, sys_gettid(), memory_order_release);
	while (read(p->rfd, &ch, 1) < 0 && errno == EINTR)
		;
	return NULL;
}

/*
 * Can the kernel's view be trusted here? A helper thread blocks in read()
 * on a pipe; its syscall file must show __NR_read of THIS architecture,
 * the pipe's fd and an SP inside its own stack, its schedstat must parse,
 * and process_vm_readv must work. Under qemu-user the file describes the
 * emulator's host thread (host syscall numbers, host registers) and
 * process_vm_readv is ENOSYS: zero-pause stays off and says why.
 */
static bool zp_selftest(struct sprobe_capturer *c)
{
	struct zp_probe p = { .rfd = -1 };
	int fds[2], hr, hw;
	pthread_t th;
	bool ok = false;
	pid_t tid = 0;

	/* Registered (userspace/fds.h) and pinned for the whole test. */
	sprobe_fd__alloc_begin();
	if (pipe2(fds, O_CLOEXEC) < 0) {
		sprobe_fd__alloc_end();
		snprintf(c->zp_why, sizeof(c->zp_why), "self-test: pipe: %s", strerror(errno));
		return false;
	}
	hr = sprobe_fd__adopt(fds[0], SPROBE_FD_TRANSIENT);
	hw = sprobe_fd__adopt(fds[1], SPROBE_FD_TRANSIENT);
	sprobe_fd__alloc_end();
	fds[0] = sprobe_fd__get(hr);
	fds[1] = sprobe_fd__get(hw);
	if (fds[0] < 0 || fds[1] < 0) {
		snprintf(c->zp_why, sizeof(c->zp_why), "self-test: pipe: %s", strerror(ENFILE));
		goto out;
	}
	p.rfd = fds[0];
	if (pthread_create(&th, NULL, zp_probe_main, &p) != 0) {
		snprintf(c->zp_why, sizeof(c->zp_why), "self-test: cannot start a thread");
		goto out;
	}
	uint64_t deadline = sprobe_now_ns() + 2000000000ull;
	while (!(tid = atomic_load_explicit(&p.tid, memory_order_acquire)) &&
	       sprobe_now_ns() < deadline)
		sched_yield();
	snprintf(c->zp_why, sizeof(c->zp_why),
		 "self-test: the helper thread never showed as blocked in read()");
	while (tid && sprobe_now_ns() < deadline) {
		char sc[256], st[128];
		uint64_t args[6], sp, pc, word;
		long nr;
		int sfd = zp_open1(tid, "syscall", SPROBE_FD_TRANSIENT);
		int tfd = zp_open1(tid, "schedstat", SPROBE_FD_TRANSIENT);
		ssize_t n = sfd >= 0 ? zp_read(sfd, sc, sizeof(sc)) : -1;
		ssize_t m = tfd >= 0 ? zp_read(tfd, st, sizeof(st)) : -1;

		sprobe_fd__close(sfd);
		sprobe_fd__close(tfd);
		if (n <= 0 || m <= 0) {
			snprintf(c->zp_why, sizeof(c->zp_why),
				 "/proc/self/task/T/syscall or schedstat unreadable (kernel "
				 "without CONFIG_HAVE_ARCH_TRACEHOOK or CONFIG_SCHED_INFO?)");
			break;
		}
		if (!zp_parse_syscall(sc, &nr, args, &sp, &pc)) {
			sched_yield(); /* still running towards read() */
			continue;
		}
		if (nr != SYS_read || args[0] != (uint64_t)fds[0] || sp < p.stk_lo ||
		    sp >= p.stk_hi) {
			snprintf(c->zp_why, sizeof(c->zp_why),
				 "/proc/self/task/T/syscall does not describe this process's "
				 "threads (emulated, e.g. qemu-user: it shows syscall %ld)",
				 nr);
			break;
		}
		struct iovec l = { &word, sizeof(word) }, r = { (void *)(uintptr_t)sp, sizeof(word) };
		if (process_vm_readv(c->pid, &l, 1, &r, 1, 0) != (ssize_t)sizeof(word)) {
			snprintf(c->zp_why, sizeof(c->zp_why), "process_vm_readv: %s",
				 strerror(errno));
			break;
		}
		ok = true;
		c->zp_why[0] = '\0';
		break;
	}
	while (write(fds[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(th, NULL);
out:
	if (fds[0] >= 0)
		sprobe_fd__put(hr);
	if (fds[1] >= 0)
		sprobe_fd__put(hw);
	sprobe_fd__close(hr);
	sprobe_fd__close(hw);
	return ok;
}

int sprobe_capturer__zero_pause(const struct sprobe_capturer *c, char *why, size_t len)
{
	if (!c)
		return -EINVAL;
	if (why && len)
		snprintf(why, len, "%s", c->zp_on ? "" : c->zp_why);
	return c->zp_on ? 1 : 0;
}

/* ---------------------------------------------------------------- */
/* CPU-timer mode                                                    */
/* ---------------------------------------------------------------- */

/*
 * Protocol (probe P, thread T owning slot i):
 *   P, when it first sees T: gen = ++c->gen; a POSIX timer on T's CPU
 *   clock (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)) that sends the
 *   capture signal to T itself (SIGEV_THREAD_ID) with sigev_value
 *   gen << 16 | i, every interval of T's CPU time. P arms slot i with that
 *   gen (the same store as a wall capture). T only runs the handler when
 *   T consumed CPU: a blocked thread's CPU clock does not advance.
 *   The handler takes si_code SI_TIMER like SI_QUEUE and does the same
 *   CAS ARMED -> BUSY -> DONE with the gen from si_value; a second expiry
 *   that finds DONE (same gen) only bumps slot.extra.
 *   P collects at its own rate: it cancels every ARMED slot (CAS ->
 *   IDLE), waits for BUSY ones, copies DONE samples out, then (no handler
 *   can touch a slot now) deletes the timers of threads gone, creates
 *   timers for new ones, re-reads the maps if needed, and re-arms every
 *   slot with its thread's gen. A slot reused by a new thread gets a new
 *   gen, so a late signal of the old timer fails the CAS: it can never
 *   write into the new thread's sample.
 */

/* Cancel every ARMED CPU slot and wait for running handlers. After this no
 * handler touches any CPU slot until it is armed again. */
static void cpu_quiesce(struct sprobe_capturer *c)
{
	for (uint32_t i = 0; i < c->max_threads; i++) {
		struct slot *sl = &c->slots[i];
		uint64_t st = atomic_load(&sl->state);

		if (!c->cpu_tid[i])
			continue;
		if ((st & 3) == SLOT_ARMED)
			cancel_slot(sl, st >> 2); /* may lose to a handler: fine */
		/* BUSY: the handler does bounded work (a memcpy). */
		while (slot_phase(sl) == SLOT_BUSY) {
			uint32_t seen = atomic_load(&g.completed);

			if (slot_phase(sl) == SLOT_BUSY)
				futex_wait(&g.completed, seen, 1000000);
		}
	}
}

/* Copy the finished sample of slot i into s (next free index). */
static void cpu_take(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i)
{
	const struct sprobe_thread_sample *src = &c->cpu_snap->samples[i];
	struct sprobe_thread_sample *t;
	uint32_t j = s->nthreads;
	uint8_t *buf;

	uint32_t extra = atomic_exchange_explicit(&c->slots[i].extra, 0, memory_order_relaxed);

	if (j >= s->max_threads) {
		sprobe_snapshot__drop(s, NULL, SPROBE_DROP_NO_SLOT);
		s->stats.threads_total++;
		return;
	}
	t = sprobe_snapshot__sample_init(s, j, src->tid);
	buf = (uint8_t *)t->stack;
	memcpy(t, src, offsetof(struct sprobe_thread_sample, frames));
	t->stack = buf;
	t->nframes = 0;
	t->method = SPROBE_METHOD_SIGNAL;
	t->weight = 1 + extra;
	if (t->stage == SPROBE_STAGE_RAW) {
		/* s may hold less than the CPU snapshot: keep the bottom (SP
		 * side) of the copy, as the handler's cap would. */
		if (t->stack_len > s->slot_bytes) {
			t->stack_len = s->slot_bytes;
			t->truncated = true;
		}
		memcpy(buf, src->stack, t->stack_len);
	} else {
		if (t->drop_reason == SPROBE_DROP_NONE)
			t->drop_reason = SPROBE_DROP_ERROR;
		if (t->drop_reason == SPROBE_DROP_NO_STACK)
			c->maps_stale = true;
		sprobe_snapshot__drop(s, t, t->drop_reason);
	}
	s->stats.threads_total++;
}

static int cpu_alloc(struct sprobe_capturer *c, const struct sprobe_snapshot *s)
{
	uint32_t n = c->max_threads;

	if (c->cpu_tid)
		return 0;
	c->cpu_snap = sprobe_snapshot__new(n, s->max_stack_bytes);
	c->cpu_tid = calloc(n, sizeof(*c->cpu_tid));
	c->cpu_timer = calloc(n, sizeof(*c->cpu_timer));
	c->cpu_gen = calloc(n, sizeof(*c->cpu_gen));
	c->cpu_sorted = calloc(n, sizeof(*c->cpu_sorted));
	if (!c->cpu_snap || !c->cpu_tid || !c->cpu_timer || !c->cpu_gen || !c->cpu_sorted) {
		sprobe_snapshot__free(c->cpu_snap);
		free(c->cpu_tid);
		free(c->cpu_timer);
		free(c->cpu_gen);
		free(c->cpu_sorted);
		c->cpu_snap = NULL;
		c->cpu_tid = NULL;
		c->cpu_timer = NULL;
		c->cpu_gen = NULL;
		c->cpu_sorted = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int cpu_settime(timer_t tm, uint64_t interval_ns)
{
	struct itimerspec its;

	its.it_interval.tv_sec = (time_t)(interval_ns / 1000000000ull);
	its.it_interval.tv_nsec = (long)(interval_ns % 1000000000ull);
	its.it_value = its.it_interval;
	return timer_settime(tm, 0, &its, NULL) < 0 ? -errno : 0;
}

/* A CPU-clock timer for thread tid that signals tid with value. */
static int cpu_timer_new(struct sprobe_capturer *c, pid_t tid, uint64_t value, timer_t *out)
{
	/* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): the clock of another
	 * thread of this process (pthread_getcpuclockid needs a pthread_t). */
	clockid_t clk = (clockid_t)((~(unsigned)tid) << 3) | 6;
	struct sigevent sev;
	int err;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = c->signo;
	sev.sigev_value.sival_ptr = (void *)(uintptr_t)value;
	sev._sigev_un._tid = tid;
	if (timer_create(clk, &sev, out) < 0)
		return -errno;
	err = cpu_settime(*out, c->cpu_interval_ns);
	if (err)
		timer_delete(*out);
	return err;
}

int sprobe_capturer__cpu_collect(struct sprobe_capturer *c, struct sprobe_snapshot *s,
				 uint64_t interval_ns)
{
	uint32_t ntracked = 0;
	pid_t self;
	bool fresh;
	int err;

	if (!c || !s || interval_ns < 10000 || interval_ns > 3600ull * 1000000000ull)
		return -EINVAL;
	/* VM_READV handlers wait for the probe, which is not there in this
	 * mode: a timer signal would park the thread until the deadline. */
	if (c->method != SPROBE_METHOD_SIGNAL)
		return -EINVAL;
	if (getpid() != c->pid)
		return -ECHILD;
	if (atomic_load(&s->inflight))
		return -EBUSY; /* a started wall capture owns it */
	sprobe_snapshot__reset(s);
	s->zp_epoch = 0; /* its slots get CPU samples: no zero-pause reuse */
	uint64_t t0 = sprobe_now_ns();
	pthread_mutex_lock(&c->lock);
	if (c->inflight || !handler_is_ours(c->signo)) {
		err = -EBUSY;
		goto out;
	}
	err = cpu_alloc(c, s);
	if (err)
		goto out;
	if (!c->cpu_on) {
		c->cpu_on = true;
		c->cpu_interval_ns = interval_ns;
		/* The handlers' DONE count wakes nobody in this mode. */
		atomic_store(&g.target, UINT32_MAX);
	}

	/* 1. Nobody writes a CPU slot from here until it is re-armed. */
	cpu_quiesce(c);
	/* 2. Take what the timers produced since the last collect. */
	for (uint32_t i = 0; i < c->max_threads; i++) {
		if (!c->cpu_tid[i])
			continue;
		if (slot_phase(&c->slots[i]) == SLOT_DONE)
			cpu_take(c, s, i);
	}
	s->stats.capture_ns = sprobe_now_ns() - t0;

	/* 3. Follow the thread set: delete timers of threads gone, create
	 * timers for new threads. */
	self = sys_gettid();
	err = enumerate_threads(c, self);
	if (err)
		goto rearm;
	fresh = new_threads(c); /* prev_tids: the current set, sorted */
	for (uint32_t i = 0; i < c->max_threads; i++) {
		pid_t tid = c->cpu_tid[i];

		if (!tid)
			continue;
		if (!bsearch(&tid, c->prev_tids, c->nprev, sizeof(pid_t), cmp_tid)) {
			timer_delete(c->cpu_timer[i]);
			c->cpu_tid[i] = 0;
			continue;
		}
		c->cpu_sorted[ntracked++] = tid;
	}
	sort_tids(c->cpu_sorted, ntracked);
	if (interval_ns != c->cpu_interval_ns) {
		c->cpu_interval_ns = interval_ns;
		for (uint32_t i = 0; i < c->max_threads; i++)
			if (c->cpu_tid[i])
				cpu_settime(c->cpu_timer[i], interval_ns);
	}
	for (uint32_t k = 0; k < c->ntids; k++) {
		pid_t tid = c->tids[k];
		uint32_t i, tries;
		uint64_t gen;

		if (bsearch(&tid, c->cpu_sorted, ntracked, sizeof(pid_t), cmp_tid))
			continue;
		for (tries = 0, i = c->cpu_free; tries < c->max_threads; tries++) {
			if (i >= c->max_threads)
				i = 0;
			if (!c->cpu_tid[i])
				break;
			i++;
		}
		if (tries == c->max_threads)
			break; /* every slot taken: the rest waits for exits */
		gen = ++c->gen;
		if (cpu_timer_new(c, tid, gen << 16 | i, &c->cpu_timer[i]) < 0)
			continue; /* exited since enumeration, or out of timers */
		c->cpu_tid[i] = tid;
		c->cpu_gen[i] = gen;
		c->cpu_free = i + 1;
		/* The old gen's state says IDLE: stale signals fail. */
		atomic_store(&c->slots[i].state, gen << 2 | SLOT_IDLE);
		atomic_store_explicit(&c->slots[i].extra, 0, memory_order_relaxed);
	}
	if (fresh || c->maps_stale) {
		err = refresh_ranges(c);
		if (err)
			c->nprev = 0;
	}

rearm:
	/* 4. Re-arm every tracked slot (handler parameters first). */
	g.ranges = c->ranges;
	g.nranges = c->nranges;
	g.cap = c->max_stack_bytes < c->cpu_snap->max_stack_bytes ? c->max_stack_bytes
								   : c->cpu_snap->max_stack_bytes;
	for (uint32_t i = 0; i < c->max_threads; i++) {
		if (!c->cpu_tid[i])
			continue;
		sprobe_snapshot__sample_init(c->cpu_snap, i, c->cpu_tid[i]);
		arm_slot(c, c->cpu_snap, i, c->cpu_gen[i]);
	}
out:
	pthread_mutex_unlock(&c->lock);
	if (err)
		return err;
	return sprobe_snapshot__finish(s);
}

int sprobe_capturer__cpu_stop(struct sprobe_capturer *c)
{
	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (c->cpu_on) {
		/* Delete first: no new expiry; then no handler is left. */
		for (uint32_t i = 0; i < c->max_threads; i++)
			if (c->cpu_tid[i])
				timer_delete(c->cpu_timer[i]);
		cpu_quiesce(c);
		for (uint32_t i = 0; i < c->max_threads; i++) {
			if (c->cpu_tid[i])
				atomic_store(&c->slots[i].state, c->cpu_gen[i] << 2 | SLOT_IDLE);
			c->cpu_tid[i] = 0;
		}
		c->cpu_on = false;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/*
 * Everything of a wall capture up to the waiting: enumerate, refresh the
 * ranges, zero-pause what is blocked, decide who gets a signal (their
 * slot indices in c->sent[0..*nsent)). With the parallel strategy and the
 * SIGNAL method the signals also go out here, each right after its
 * thread's zero-pause check found it running (*sent true; batch_end() is
 * the caller's): a thread that enters a blocking call between that check
 * and its signal would see EINTR, so the gap is one check, not all of
 * them. Under c->lock; 0 or -errno.
 */
static int capture_prepare(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t *nsent_out,
			   bool *sent)
{
	pid_t self;
	uint32_t nslots, nsent = 0;
	int err;
	bool now = c->strategy != SPROBE_STRATEGY_SEQUENTIAL && c->method == SPROBE_METHOD_SIGNAL;

	*nsent_out = 0;
	*sent = false;
	if (c->cpu_on || c->inflight) {
		/* The slots belong to the CPU timers, or to a started capture. */
		return -EBUSY;
	}
	/* Someone may have replaced our handler since: every signal would
	 * then go to them (or kill the process). Say so instead. */
	if (!handler_is_ours(c->signo))
		return -EBUSY;
	self = sys_gettid();
	err = enumerate_threads(c, self);
	if (err)
		return err;
	if (new_threads(c) || c->maps_stale) {
		err = refresh_ranges(c);
		if (err) {
			c->nprev = 0; /* read them again next time */
			return err;
		}
	}
	bool zp_reuse = false;
	if (c->zp_on) {
		err = zp_sync(c);
		if (err)
			return err;
		/* Slots still hold the last capture's copies only if that
		 * capture, by this capturer, was the last one into s. */
		zp_reuse = c->zp_snap == s && c->zp_epoch && s->zp_epoch == c->zp_epoch;
		s->zp_epoch = ++c->zp_epoch;
		c->zp_snap = s;
	}
	nslots = c->max_threads < s->max_threads ? c->max_threads : s->max_threads;
	s->stats.threads_total = c->ntids;

	/* Handler parameters for this capture; published by arm_slot(). */
	g.ranges = c->ranges;
	g.nranges = c->nranges;
	g.cap = c->max_stack_bytes < s->max_stack_bytes ? c->max_stack_bytes : s->max_stack_bytes;

	if (now)
		batch_begin(c);
	for (uint32_t i = 0; i < c->ntids; i++) {
		struct sprobe_thread_sample *t;
		uint32_t why;

		if (i >= nslots) {
			sprobe_snapshot__drop(s, NULL, SPROBE_DROP_NO_SLOT);
			continue;
		}
		const struct sprobe_thread_sample *prev = NULL;
		if (zp_reuse && s->samples[i].tid == c->tids[i] &&
		    s->samples[i].method == SPROBE_METHOD_ZERO_PAUSE &&
		    s->samples[i].stage != SPROBE_STAGE_EMPTY) {
			/* sample_init() clears the header: keep it. */
			memcpy(&c->zp_prev, &s->samples[i], offsetof(struct sprobe_thread_sample, frames));
			prev = &c->zp_prev;
		}
		t = sprobe_snapshot__sample_init(s, i, c->tids[i]);
		if (c->zp_on && zp_try(c, s, i, t, prev))
			continue; /* read while blocked: no signal */
		why = 0;
		if (c->nblk > BLK_MAX || known_blocked(c, t->tid))
			why = thread_sigcheck(c, t->tid, false);
		if (!why)
			forget_blocked(c, t->tid);
		if (why) {
			sprobe_snapshot__drop(s, t, why);
		} else if (c->strategy == SPROBE_STRATEGY_SEQUENTIAL) {
			c->sent[0] = i;
			run_batch(c, s, c->sent, 1);
		} else if (!now || batch_send_one(c, s, i)) {
			c->sent[nsent++] = i;
		}
	}
	*nsent_out = nsent;
	*sent = now;
	return 0;
}

/* A stack outside every known range: read the maps before the next one. */
static void capture_done(struct sprobe_capturer *c, const struct sprobe_snapshot *s)
{
	for (uint32_t i = 0; i < s->nthreads; i++)
		if (s->samples[i].drop_reason == SPROBE_DROP_NO_STACK)
			c->maps_stale = true;
}

/* The checks every wall capture call starts with; on 0 c->lock is held. */
static int capture_enter(struct sprobe_capturer *c, const struct sprobe_snapshot *s)
{
	if (!c || !s)
		return -EINVAL;
	/* After fork() the capturer still names the parent: signalling its
	 * threads from the child would be wrong in every way. */
	if (getpid() != c->pid)
		return -ECHILD;
	pthread_mutex_lock(&c->lock);
	return 0;
}

int sprobe_backend__capture(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	uint32_t nsent;
	bool sent;
	int err = capture_enter(c, s);

	if (err)
		return err;
	err = capture_prepare(c, s, &nsent, &sent);
	if (!err) {
		if (sent) {
			batch_end(c, nsent, true);
			batch_wait(c, s, c->sent, nsent);
		} else if (nsent) {
			run_batch(c, s, c->sent, nsent);
		}
		capture_done(c, s);
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int sprobe_capturer__capture_start(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	uint64_t t0 = sprobe_now_ns();
	uint32_t nsent;
	bool sent;
	int err = capture_enter(c, s);

	if (err)
		return err;
	if (c->inflight || atomic_load(&s->inflight)) {
		err = -EBUSY;
		goto out;
	}
	sprobe_snapshot__reset(s);
	err = capture_prepare(c, s, &nsent, &sent);
	if (err)
		goto out;
	if (sent) {
		batch_end(c, nsent, false);
	} else if (c->method == SPROBE_METHOD_VM_READV) {
		/* Its handlers wait for the probe to copy: never leave them. */
		if (nsent)
			run_batch(c, s, c->sent, nsent);
		nsent = 0;
	} else if (nsent) {
		nsent = batch_send(c, s, c->sent, nsent, false);
	}
	c->inflight = s;
	atomic_store(&s->inflight, true);
	c->inflight_n = nsent;
	c->inflight_ns = sprobe_now_ns() - t0;
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

int sprobe_capturer__capture_finish(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	uint64_t t0 = sprobe_now_ns();
	int err = 0;

	if (!c || !s)
		return -EINVAL;
	/* In a forked child the batch names the parent's threads (and the
	 * lock may have been held by a thread that does not exist here). */
	if (getpid() != c->pid)
		return -ECHILD;
	pthread_mutex_lock(&c->lock);
	if (c->inflight != s) {
		err = -EINVAL;
		goto out;
	}
	batch_wait(c, s, c->sent, c->inflight_n);
	capture_done(c, s);
	c->inflight = NULL;
	atomic_store(&s->inflight, false);
	s->stats.capture_ns = c->inflight_ns + (sprobe_now_ns() - t0);
out:
	pthread_mutex_unlock(&c->lock);
	return err ? err : sprobe_snapshot__finish(s);
}


int sprobe_capturer__recapture(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			       const uint32_t *idx, uint32_t n)
{
	uint64_t t0 = sprobe_now_ns();
	uint32_t nsent = 0;
	int err = 0;

	if (!c || !s || (n && !idx))
		return -EINVAL;
	if (getpid() != c->pid)
		return -ECHILD;
	if (!n)
		return 0;
	pthread_mutex_lock(&c->lock);
	/* Whatever happens next, these samples' zero-pause copies and walks
	 * are not to be kept by a later capture (zp_try()): they were found
	 * short. */
	for (uint32_t k = 0; k < n && c->zp_on && !c->cpu_on; k++) {
		if (idx[k] < s->nthreads && s->samples[idx[k]].tid > 0) {
			struct zp_ent *e = zp_find(c, s->samples[idx[k]].tid);

			if (e)
				e->last_ok = false;
		}
	}
	if (c->cpu_on || c->inflight || !handler_is_ours(c->signo)) {
		err = -EBUSY;
		goto out;
	}
	for (uint32_t k = 0; k < n; k++) {
		if (idx[k] >= s->nthreads || idx[k] >= c->max_threads || idx[k] >= c->tids_cap ||
		    s->samples[idx[k]].tid <= 0) {
			err = -EINVAL;
			goto out;
		}
	}
	g.ranges = c->ranges;
	g.nranges = c->nranges;
	g.cap = c->max_stack_bytes < s->max_stack_bytes ? c->max_stack_bytes : s->max_stack_bytes;
	for (uint32_t k = 0; k < n && nsent < c->tids_cap; k++) {
		struct sprobe_thread_sample *t = &s->samples[idx[k]];
		struct zp_ent *e = c->zp_on ? zp_find(c, t->tid) : NULL;

		if (e)
			e->last_ok = false; /* its slot gets a signal copy */
		sprobe_snapshot__sample_init(s, idx[k], t->tid);
		if (c->strategy == SPROBE_STRATEGY_SEQUENTIAL) {
			c->sent[0] = idx[k];
			run_batch(c, s, c->sent, 1);
		} else {
			c->sent[nsent++] = idx[k];
		}
	}
	if (nsent)
		run_batch(c, s, c->sent, nsent);
	for (uint32_t k = 0; k < n; k++)
		if (s->samples[idx[k]].drop_reason == SPROBE_DROP_NO_STACK)
			c->maps_stale = true;
	s->stats.zp_recaptured += n;
	s->stats.capture_ns += sprobe_now_ns() - t0;
	err = sprobe_snapshot__refinish(s);
out:
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* ---------------------------------------------------------------- */
/* Capturer life cycle                                               */
/* ---------------------------------------------------------------- */

static bool is_default(const struct sigaction *sa)
{
	return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

/* Install the handler on signo if nobody handles it. 0, -EBUSY, -errno. */
static int try_install(struct sprobe_capturer *c, int signo)
{
	struct sigaction sa, old;

	if (sigaction(signo, NULL, &old) < 0)
		return -errno;
	if (!is_default(&old))
		return -EBUSY;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = capture_handler;
	/* SA_ONSTACK: a thread with a sigaltstack and a nearly full stack
	 * takes the handler there. All signals are blocked while the
	 * handler runs so that no other handler nests inside the window. */
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigfillset(&sa.sa_mask);
	if (sigaction(signo, &sa, &old) < 0)
		return -errno;
	if (!is_default(&old)) {
		/* Someone installed one between our two calls: give it back. */
		sigaction(signo, &old, NULL);
		return -EBUSY;
	}
	c->old_sa = old;
	c->signo = signo;
	c->handler_mask = 0;
	for (int i = 1; i <= 64; i++)
		if ((sigismember(&sa.sa_mask, i) == 1 && i != SIGKILL && i != SIGSTOP) || i == signo)
			c->handler_mask |= 1ull << (i - 1);
	return 0;
}

/* Resolve, outside any window, every libc symbol the handler calls, so the
 * handler never runs the lazy-binding resolver. */
static void warm_up(void)
{
	_Atomic uint32_t word = 0;
	char a[16] = { 0 }, b[16];

	(void)sprobe_now_ns();
	memcpy(b, a, sizeof(b));
	futex_wake(&word, 1);
	(void)b;
}

struct sprobe_capturer *sprobe_capturer__new(const struct sprobe_capture_opts *opts)
{
	struct sprobe_capture_opts o;
	struct sprobe_capturer *c;
	struct rlimit rl;
	int err = 0;

	memset(&o, 0, sizeof(o));
	if (opts) {
		if (opts->sz < offsetof(struct sprobe_capture_opts, signo) + sizeof(int)) {
			errno = EINVAL;
			return NULL;
		}
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	}
	if (o.method == SPROBE_METHOD_NONE)
		o.method = SPROBE_METHOD_SIGNAL;
	if (o.max_stack_bytes == 0)
		o.max_stack_bytes = SPROBE_MAX_STACK_BYTES;
	if (o.timeout_ns == 0)
		o.timeout_ns = SPROBE_DEFAULT_TIMEOUT_NS;
	if (o.max_threads == 0)
		o.max_threads = SPROBE_DEFAULT_MAX_THREADS;
	if ((o.signo && (o.signo < SIGRTMIN || o.signo > SIGRTMAX)) ||
	    o.signo == SIGURG || o.signo == SIGPROF ||
	    o.max_stack_bytes > SPROBE_MAX_STACK_BYTES ||
	    o.max_threads > SPROBE_MAX_THREADS_LIMIT ||
	    o.strategy > SPROBE_STRATEGY_SEQUENTIAL ||
	    (o.method != SPROBE_METHOD_SIGNAL && o.method != SPROBE_METHOD_VM_READV)) {
		errno = EINVAL;
		return NULL;
	}

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->task_fd = -1;
	c->method = o.method;
	c->strategy = o.strategy;
	c->timeout_ns = o.timeout_ns;
	c->max_stack_bytes = o.max_stack_bytes;
	c->max_threads = o.max_threads;
	c->before_signal = o.before_signal;
	c->before_zp_copy = o.before_zp_copy;
	c->hook_ctx = o.hook_ctx;
	c->pid = getpid();
	c->uid = getuid();
	c->maps_stale = true;
	if (o.zero_pause && o.method != SPROBE_METHOD_SIGNAL) {
		snprintf(c->zp_why, sizeof(c->zp_why),
			 "method VM_READV parks every thread: zero-pause applies to SIGNAL");
	} else if (o.zero_pause && zp_selftest(c)) {
		c->zp_on = true;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->dents_len = 32768;
	c->dents = malloc(c->dents_len);
	c->slots = aligned_alloc(CACHELINE, sizeof(struct slot) * o.max_threads);
	if (!c->dents || !c->slots) {
		err = -ENOMEM;
		goto fail;
	}
	memset(c->slots, 0, sizeof(struct slot) * o.max_threads);
	c->task_fd = sprobe_fd__open("/proc/self/task", O_RDONLY | O_DIRECTORY, 0, SPROBE_FD_KEEP);
	if (c->task_fd < 0) {
		err = c->task_fd;
		goto fail;
	}
	err = refresh_ranges(c);
	if (err)
		goto fail;
	warm_up();

	pthread_mutex_lock(&g_owner_lock);
	if (g_owner) {
		pthread_mutex_unlock(&g_owner_lock);
		err = -EBUSY;
		goto fail;
	}
	/* Handler state first, then the handler. A stale signal from an
	 * earlier capturer finds active == 0 or a slot it cannot CAS. */
	g.pid = c->pid;
	g.method = c->method;
	g.slots = c->slots;
	g.nslots = c->max_threads;
	g.ranges = c->ranges;
	g.nranges = c->nranges;
	g.cap = c->max_stack_bytes;
	g.vm_wait_ns = c->timeout_ns;
	g.growsdown_max = 8u << 20;
	if (getrlimit(RLIMIT_STACK, &rl) == 0)
		g.growsdown_max = rl.rlim_cur == RLIM_INFINITY ? 1ull << 32 : rl.rlim_cur;
	if (o.signo) {
		err = try_install(c, o.signo);
	} else {
		err = -EBUSY;
		for (int sig = SIGRTMIN; sig <= SIGRTMAX && err == -EBUSY; sig++)
			err = try_install(c, sig);
	}
	if (err) {
		pthread_mutex_unlock(&g_owner_lock);
		goto fail;
	}
	g.signo = c->signo;
	c->gen = g_last_gen;
	/* seq_cst; pairs with the handler's load of active. */
	atomic_store(&g.active, 1);
	g_owner = c;
	pthread_mutex_unlock(&g_owner_lock);
	return c;
fail:
	sprobe_fd__close(c->task_fd);
	free(c->zp);
	free(c->zp_tmp);
	free(c->dents);
	free(c->slots);
	free(c->maps);
	free(c->ranges);
	pthread_mutex_destroy(&c->lock);
	free(c);
	errno = -err;
	return NULL;
}

void sprobe_capturer__free(struct sprobe_capturer *c)
{
	struct sigaction ign;

	if (!c)
		return;
	sprobe_capturer__cpu_stop(c);
	pthread_mutex_lock(&g_owner_lock);
	/* SIG_IGN discards capture signals still queued to threads that
	 * block it (POSIX), so none can later hit the default action, which
	 * would terminate the process. Then the original disposition. */
	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	sigaction(c->signo, &ign, NULL);
	/* seq_cst; pairs with the handler's increment of in_handler. */
	atomic_store(&g.active, 0);
	while (atomic_load(&g.in_handler))
		sched_yield();
	sigaction(c->signo, &c->old_sa, NULL);
	g.slots = NULL;
	g.nslots = 0;
	g.ranges = NULL;
	g.nranges = 0;
	g_owner = NULL;
	g_last_gen = c->gen;
	pthread_mutex_unlock(&g_owner_lock);

	sprobe_fd__close(c->task_fd);
	for (uint32_t i = 0; i < c->nzp; i++)
		zp_close(c, &c->zp[i]);
	free(c->zp);
	free(c->zp_tmp);
	free(c->dents);
	free(c->tids);
	free(c->prev_tids);
	free(c->sent);
	free(c->slots);
	free(c->maps);
	free(c->ranges);
	sprobe_snapshot__free(c->cpu_snap);
	free(c->cpu_tid);
	free(c->cpu_timer);
	free(c->cpu_gen);
	free(c->cpu_sorted);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int sprobe_capturer__signo(const struct sprobe_capturer *c)
{
	return c ? c->signo : -EINVAL;
}

int sprobe_capturer__exclude_tid(struct sprobe_capturer *c, pid_t tid)
{
	int err = 0;

	if (!c || tid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (is_excluded(c, tid))
		err = -EEXIST;
	else if (c->nexcl == EXCL_MAX)
		err = -ENOSPC;
	else
		c->excl[c->nexcl++] = tid;
	pthread_mutex_unlock(&c->lock);
	return err;
}

int sprobe_capturer__include_tid(struct sprobe_capturer *c, pid_t tid)
{
	int err = -ENOENT;

	if (!c || tid <= 0)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < c->nexcl; i++) {
		if (c->excl[i] == tid) {
			c->excl[i] = c->excl[--c->nexcl];
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

#endif /* __linux__ */
