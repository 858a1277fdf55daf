/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Linux capture backend (x86_64, aarch64): a real-time signal per thread.
 * The internal header its files share; one mechanism per file:
 *   handler.c     the signal handler and all it calls: the suspend window
 *   proc.c        /proc readers: maps -> ranges, the thread set, SigBlk
 *   batch.c       slot arm/cancel, batch send/wait, the blocked-thread memo
 *   vmreadv.c     the VM_READV method's probe half (process_vm_readv)
 *   zero_pause.c  zero-pause capture of blocked threads, and its self-test
 *   cputime.c     CPU mode's collect loop, per-thread CPU-clock timers
 *   cpuusage.c    CPU coverage (sprobe_capturer__cpu_usage())
 *   perfclock.c   CPU mode's perf-event engine (per-thread task-clock events)
 *   capturer.c    wall-capture entry points and the capturer's life cycle
 *   chain.c       the capture signal shared with the program's disposition
 *   state.c       sprobe_lx_g and sprobe_lx_ch, the global state (a leaf)
 *   carry.c       which slots a wall capture visits; stable slots while
 *                 blocked threads are carried forward
 *
 * THE SUSPEND-WINDOW RULE (stated once; handler.c holds the handler path and
 * nothing else, every function there and the helpers below tagged
 * ASYNC-SIGNAL-SAFE rely on it, and `make test-handler-nm` (mk/capture.mk)
 * fails when handler.o calls anything outside backends/linux/handler.allow):
 *   The capture handler runs on a thread that may have been interrupted
 *   while holding any lock in the process (malloc's arenas, the loader's,
 *   stdio's). So the handler may only: read the ucontext, read the thread
 *   pointer, read clock_gettime (vDSO), memcpy from the interrupted stack into
 *   a buffer allocated before the window, make raw syscalls (futex), and do
 *   lock-free atomics on memory that outlives the handler. No malloc/free, no
 *   locks, no stdio, no TLS that could be lazily allocated, no dl* calls, no
 *   symbolisation. It restores errno. The copy never faults: its bounds come
 *   from data the probe prepared before the window (see stack_bounds()).
 * Protocol (probe thread P, target thread T, slot i of the snapshot):
 *   P, outside any window: enumerates /proc/self/task (getdents64 into a
 *   preallocated buffer), reads each thread's SigBlk, (re)reads
 *   /proc/self/maps into a sorted range array when the thread set changed.
 *   P arms slot i: writes the sample pointer, then stores
 *   state = gen << 2 | ARMED (release). P sends rt_tgsigqueueinfo(T) with
 *   si_code SI_QUEUE, si_pid = our pid and si_value = the capture key,
 *   gen mod 2^32 and i (sprobe_lx_value()).
 *   T's handler checks si_code/si_pid, then CASes state ARMED -> BUSY with
 *   the generation from si_value: a stale or foreign signal fails the CAS
 *   and touches nothing. BUSY owns the sample until the handler stores
 *   DONE (release) and bumps `completed`, waking P when it reaches `target`.
 *   At the deadline P CASes ARMED -> IDLE (cancelled): after that no
 *   handler can take the slot. A slot that is BUSY is waited for (its
 *   handler is already running and does bounded work), so when a capture
 *   returns no handler writes into its snapshot any more.
 *
 * One capturer per process: the handler finds its state through
 * `sprobe_lx_g` (below, defined in state.c with the chain's records), the
 * one piece of global mutable state the project allows.
 *
 * Functions shared between these files carry the sprobe_lx_ prefix; the
 * library is compiled -fvisibility=hidden, so none of them leaves the
 * shared library (mk/exports.mk checks).
 */
#ifndef SPROBE_BACKENDS_LINUX_LINUX_H
#define SPROBE_BACKENDS_LINUX_LINUX_H

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "backends/backend.h"

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
	/* CPU-timer slots: the thread, written before ARMED. Their sample is
	 * initialised by the handler when the timer fires, not by the probe
	 * at every re-arm, so an idle thread's sample is never touched (its
	 * header stays unpaged: docs/PERFORMANCE.md, "What the agent costs
	 * its target"). Wall slots' samples are initialised by the probe. */
	pid_t tid;
	uint32_t _pad1;
	uint64_t _pad2[2];
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
	bool last_ok;
	/* The syscall file said "running" last time: ask it first (a thread
	 * that computes stays running; one read instead of two). */
	bool was_running;
	/* Its CPU clock read before that copy's first schedstat read
	 * (cpu_ok: read), the cheaper check of the two. */
	bool cpu_ok;
	uint64_t last_cpu;
	/* That schedstat line's three counters (run time, run-queue wait,
	 * switch-ins): the same information as its text in 24 bytes, not 96
	 * (two entries per thread: docs/PERFORMANCE.md "Memory, per
	 * thread"). */
	uint64_t last[3];
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

struct sprobe_lx_state {
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
	/* A Go program: a goroutine's stack is bounded by its g (handler.c
	 * stack_bounds()). Set once by __new. */
	bool go;
	/* The capture key (see "THE CAPTURE SIGNAL IS SHARED" below), 0
	 * until the first install; never changes after. */
	uint64_t key;
	/* Handlers running right now (see `active`). Own cache line: every
	 * handler touches it. */
	_Atomic uint32_t in_handler __attribute__((aligned(CACHELINE)));
	/* Handlers finished in the current batch; the probe's futex word.
	 * seq_cst RMW by the handler, then a load of target; the probe stores
	 * target then loads completed (Dekker): either the probe sees the
	 * count reached, or the handler sees target and wakes it. */
	_Atomic uint32_t completed __attribute__((aligned(CACHELINE)));
	_Atomic uint32_t target;
	/* Perf-event engine (perfclock.c): a delivery carries si_code
	 * POLL_IN and the event's descriptor in si_fd (no si_value), so the
	 * handler finds its slot here: perf_map[fd] = gen << 16 | slot (0:
	 * never one of ours; SPROBE_LX_PERF_STALE: ours, stopped or closed)
	 * and perf_tid[fd] = the thread the event belongs to. The probe
	 * stores perf_tid then perf_map (release) when it opens an event,
	 * perf_map = STALE before it stops or closes one; the handler loads
	 * perf_map (acquire) then perf_tid, takes the slot only on its own
	 * thread, and swallows every other delivery on a number that was
	 * ours (a signal queued before the stop, delivered once its thread
	 * unblocks, or after the number went to another thread's event):
	 * the program's disposition of the shared signal (SIG_DFL: the
	 * process would end) never sees one. The arrays live as long as the
	 * capturer (perf_nmap entries; NULL: engine never used); the
	 * pointer is published with a release store after perf_nmap and
	 * the zeroed arrays, read with an acquire load, and cleared only
	 * once no handler runs (capturer free). */
	_Atomic uint64_t *_Atomic perf_map;
	_Atomic pid_t *perf_tid;	/* relaxed: ordered by perf_map[fd] */
	uint32_t perf_nmap;
	/* CPU mode: the capturer's ready bitmap (struct sprobe_capturer
	 * cpu_ready). Written by the probe before it arms a CPU slot (so
	 * published by that release store), set to NULL only once no handler
	 * runs; the handler sets slot i's bit (release) after storing DONE. */
	_Atomic uint64_t *cpu_ready;
};

extern struct sprobe_lx_state sprobe_lx_g;

/* perf_map value of a number whose event was stopped or closed: never a
 * gen << 16 | slot (those fit in 48 bits). */
#define SPROBE_LX_PERF_STALE (1ull << 63)

/*
 * THE CAPTURE SIGNAL IS SHARED (chain.c, and forward() in handler.c).
 *
 * Which deliveries are captures: si_code SI_QUEUE with si_pid = our pid
 * (the probe's rt_tgsigqueueinfo), or SI_TIMER (our CPU timers), and in
 * both cases a value whose top 16 bits are the process's capture key
 * (sprobe_lx_g.key: random, top bit set, drawn once per process before the
 * first install and never changed, so a late signal of an earlier
 * capturer is still recognised). The value is
 *   key << 48 | (gen mod 2^32) << 16 | slot index.
 * A user pointer or a small integer never has the top bit set; a program's
 * sigqueue() of a value with the same 16 top bits (1 in 32768 for random
 * garbage in the upper half of a sival_int) is taken for a stale capture
 * and dropped. Every other delivery is the program's: forward() gives it
 * the program's disposition as if the capture handler were not there.
 *
 * The program's disposition lives in a small ring of records; the handler
 * reads the current one lock-free (a per-record sequence count, retried;
 * writers never write the current record, so a reader never waits on a
 * writer it interrupted). Writers (the agent's sigaction wrappers, the
 * probe's check that absorbs a raw rt_sigaction, forward() on
 * SA_RESETHAND) claim a record with a fetch-add, fill it, publish it with
 * a store (or a CAS) of `cur`. Two racing writers: one wins, as two
 * sigaction() calls race without the agent.
 */
#define SPROBE_SA_RESTORER 0x04000000ul /* the kernel's; glibc does not define it */
#define CAPTURE_KEY_SHIFT 48
#define CHAIN_RECS 8

/* The kernel's struct sigaction (x86_64 and aarch64 alike), for the raw
 * rt_sigaction calls: what libc would add (SA_RESTORER, its restorer) is
 * explicit here. */
struct sprobe_ksigaction {
	uint64_t handler; /* SIG_DFL, SIG_IGN or a function */
	uint64_t flags;
	uint64_t restorer;
	uint64_t mask; /* signal n is bit n - 1 */
};

struct chain_rec {
	_Atomic uint32_t seq; /* odd while written */
	uint32_t _pad;
	_Atomic uint64_t handler, flags, restorer, mask;
};

struct sprobe_lx_chain {
	/* The signal our handler fronts (0: none). Relaxed: the wrappers
	 * only route by it; the records are published with release. */
	_Atomic int signo;
	_Atomic uint32_t cur;  /* the current record; release/acquire */
	_Atomic uint32_t next; /* writers' claim counter */
	/* Our handler as the kernel holds it (libc's restorer and
	 * SA_RESTORER included), for raw re-installs. Written before signo. */
	struct sprobe_ksigaction ours;
	/* Deliveries given to the program, and raw installs absorbed (the
	 * program's own rt_sigaction calls the probe found and moved behind
	 * our handler). Relaxed counters. */
	_Atomic uint64_t forwarded, absorbed;
	struct chain_rec rec[CHAIN_RECS];
};

extern struct sprobe_lx_chain sprobe_lx_ch;

/* ASYNC-SIGNAL-SAFE: atomics only. The program's current disposition into
 * *out; returns the record's index (for a CAS publish), or -1 after too
 * many retries (only if writers lap the ring for that long). */
static inline int chain_read(struct sprobe_ksigaction *out)
{
	for (int tries = 0; tries < 1000; tries++) {
		/* Acquire; pairs with the release store/CAS of cur in chain_publish(). */
		uint32_t i = atomic_load_explicit(&sprobe_lx_ch.cur, memory_order_acquire) % CHAIN_RECS;
		struct chain_rec *r = &sprobe_lx_ch.rec[i];
		/* Acquire; pairs with the writer's release store of the even seq. */
		uint32_t s = atomic_load_explicit(&r->seq, memory_order_acquire);

		if (s & 1)
			continue;
		out->handler = atomic_load_explicit(&r->handler, memory_order_relaxed);
		out->flags = atomic_load_explicit(&r->flags, memory_order_relaxed);
		out->restorer = atomic_load_explicit(&r->restorer, memory_order_relaxed);
		out->mask = atomic_load_explicit(&r->mask, memory_order_relaxed);
		/* Acquire fence; pairs with the writer's release fence after its
		 * odd seq: a torn read sees the seq changed. */
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&r->seq, memory_order_relaxed) == s)
			return (int)i;
	}
	return -1;
}

/* ASYNC-SIGNAL-SAFE: atomics only. Fill a record that is not the current
 * one with k; returns its index, to publish. */
static inline uint32_t chain_fill(const struct sprobe_ksigaction *k)
{
	uint32_t i;
	struct chain_rec *r;

	do
		i = atomic_fetch_add_explicit(&sprobe_lx_ch.next, 1, memory_order_relaxed) % CHAIN_RECS;
	while (i == atomic_load_explicit(&sprobe_lx_ch.cur, memory_order_relaxed) % CHAIN_RECS);
	r = &sprobe_lx_ch.rec[i];
	uint32_t s = atomic_load_explicit(&r->seq, memory_order_relaxed);
	atomic_store_explicit(&r->seq, s + 1, memory_order_relaxed);
	/* Release fence; pairs with the reader's acquire fence. */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&r->handler, k->handler, memory_order_relaxed);
	atomic_store_explicit(&r->flags, k->flags, memory_order_relaxed);
	atomic_store_explicit(&r->restorer, k->restorer, memory_order_relaxed);
	atomic_store_explicit(&r->mask, k->mask, memory_order_relaxed);
	/* Release; pairs with the reader's acquire load of seq. */
	atomic_store_explicit(&r->seq, s + 2, memory_order_release);
	return i;
}

/* ASYNC-SIGNAL-SAFE: the raw rt_sigaction system call (no libc wrapper,
 * no agent wrapper: the truth of the kernel). 0 or -errno. */
static inline int ksigaction(int sig, const struct sprobe_ksigaction *act,
			     struct sprobe_ksigaction *old)
{
	return syscall(SYS_rt_sigaction, sig, act, old, sizeof(uint64_t)) ? -errno : 0;
}

struct sprobe_lx_tidslot {
	pid_t tid;
	uint32_t slot;
};

/* One wall capture's walk over its slots (carry.c). */
struct sprobe_lx_visit {
	struct sprobe_snapshot *s;
	const pid_t *tids;	/* slot -> tid: c->stable, or the list */
	uint32_t rounds, turn, nslots, nsent, nlive;
	uint64_t seq;
	bool relist, closing, zp_reuse, now, stable;
	uint32_t *out;		/* this capture's visited slots */
	uint32_t nout;
};

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
	void *slots_raw;      /* what sprobe__zcalloc() gave for them */
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
	pid_t blk[BLK_MAX];	/* see sprobe_lx_known_blocked() */
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
	/* Slots of tracked threads are packed low: every slot below cpu_free
	 * is in use (a new thread takes the lowest free one) and none from
	 * cpu_hi on, so the per-collect walks stop at cpu_hi, not at
	 * max_threads (1024 cache lines a collect, ~1/8 of the probe's CPU
	 * at 999 Hz: docs/PERFORMANCE.md "What the agent costs"). */
	uint32_t cpu_free;		  /* lowest slot that may be free */
	uint32_t cpu_hi;		  /* 1 + highest slot in use, 0 when none */
	/* The engine (enum sprobe_cpu_engine, never AUTO once chosen) and,
	 * for PERF, per slot: the registry handle of its event (-1: the slot
	 * has a timer in cpu_timer[i] instead) and the number it was
	 * registered under in the handler's map (perf_fd[i]). */
	uint32_t cpu_engine;
	bool perf_user_only;		  /* exclude_kernel: paranoid forbids the kernel side */
	int *perf_h;
	int *perf_fd;
	_Atomic uint32_t cpu_on_timer;	  /* see sprobe_capturer__cpu_on_timer() */
	/* CPU coverage (sprobe_capturer__cpu_usage()), per slot: CPU clock
	 * at the last usage call, the last value reported, periods delivered
	 * since the last usage call (cpu_take() adds the weights), blocked
	 * (capture signal blocked: event disabled), and whether the next
	 * collect lists it as dropped BLOCKED. */
	uint64_t *cpu_ns, *cpu_reported;
	uint64_t *cpu_open;		  /* CPU clock when its source was made */
	/* What its coverage counts from: cpu_open for a thread that existed
	 * when CPU capture started (its CPU before could not be sampled), 0
	 * for one born later (all its CPU could; a late first sight is the
	 * agent's miss, and shows as unsampled). */
	uint64_t *cpu_base;
	bool cpu_primed;		  /* the first collect has tracked the threads */
	uint64_t cpu_enum_ns;		  /* when a collect last followed the thread set */
	uint32_t *cpu_hits;
	uint8_t *cpu_blocked, *cpu_blk_drop;
	/* Threads gone since the last usage call, with their last CPU time. */
	struct sprobe_cpu_usage *cpu_gone;
	uint32_t ncpu_gone;
	/* What keeps a collect and a usage call proportional to the threads
	 * that ran, not to those that exist (cputime.c, "Cost"):
	 * cpu_ready, one bit a slot, set by the handler after it stored
	 * DONE (sprobe_lx_g.cpu_ready points here); cpu_want, probe only,
	 * the slots the next usage call reads whatever its rotation
	 * (samples taken since the last one, threads flagged BLOCKED);
	 * cpu_blk_list, the slots whose cpu_blk_drop went to 1 since the
	 * last collect (cpu_nblk_list of them). */
	_Atomic uint64_t *cpu_ready;
	uint64_t *cpu_want, *cpu_want_next; /* swapped by each usage call */
	uint32_t *cpu_blk_list;
	uint32_t cpu_nblk_list;
	uint32_t cpu_usage_next;	  /* the usage rotation's next slot */
	uint64_t cpu_usage_ns;		  /* when the last usage call ran (0: never) */
	uint64_t cpu_enum_gap;		  /* least time between two follows of the thread set */
	bool cpu_set_moved;		  /* the thread count moved since the last follow */
	/* Per slot: tracked without a signal source (the kernel refused
	 * one: cputime.c source_new()); its CPU is reported all the same. */
	uint8_t *cpu_nosrc;
	int64_t cpu_timer_room;		  /* see cputime.c timer_room() */
	/* See sprobe_capturer__cpu_unsourced(): written by the probe at each
	 * follow, read by anyone (relaxed). */
	_Atomic uint32_t cpu_unsourced;
	_Atomic int cpu_nosrc_err;
	/* Work counters (tests read them: the per-collect and per-usage
	 * work must not grow with idle threads). Probe only, under lock. */
	struct {
		uint64_t fast, full;	  /* collects without / with the walk of every slot */
		uint64_t fast_slots;	  /* slots a fast collect looked at */
		uint64_t usage_calls, clock_reads;
	} cpu_work;
	/* Zero-pause (zero_pause.c). zp[0..nzp) holds one
	 * entry per current thread, sorted by tid, with its proc files once
	 * opened; zp_tmp is the merge scratch. Probe only, under lock. */
	bool zp_on;
	char zp_why[160];		/* why zero-pause is off */
	struct zp_ent *zp, *zp_tmp;
	uint32_t nzp, zp_cap;
	uint32_t zp_fds;	/* proc fds held (within userspace/fds.h's budget) */
	/* Carrying blocked threads forward (sprobe_capturer__zp_carry()):
	 * the knobs, how many slots the last capture filled (a slot beyond
	 * it holds an older capture's sample: never carried), and the thread
	 * list's freshness: the task directory's link count (2 + threads)
	 * when last listed, captures since, and whether the excluded set
	 * changed. Probe only, under lock. */
	uint32_t carry_min, carry_max;
	uint32_t carry_prev_n;
	/* Captures counted, and per slot the count at its last check: a
	 * slot is carried only while fewer than R captures passed since, so
	 * the bound holds however the turn, the list or R moved meanwhile. */
	uint64_t carry_seq;
	uint64_t *carry_checked;
	uint64_t task_nlink;
	uint32_t list_age;
	bool list_stale;
	bool carry_closing;	/* this capture closed the spells: list next */
	/* The slots a capture visited (s->touched, ascending), two lists
	 * used in turn: the last capture's (visit[visit_prev], nvisit_prev
	 * long, valid if visit_ok) tells the next one which slots are not
	 * carried on and must be looked at again. max_threads each, paged
	 * in by use. Probe only, under lock. */
	uint32_t *visit[2];
	uint32_t nvisit_prev, visit_prev;
	bool visit_ok;
	/* Stable slots while carrying (carry.c): slot -> tid (0: free),
	 * the threads with a slot sorted by tid, free slots, slots whose
	 * thread left (closed by this capture, freed by the next), and the
	 * snapshot they index. max_threads entries each, paged in by use. */
	pid_t *stable;
	struct sprobe_lx_tidslot *bytid, *bytid_tmp;
	uint32_t *free_slots, *gone;
	uint8_t *slot_gone;
	uint32_t nbytid, nfree, ngone, nstable, stable_hi, stable_noslot;
	/* The R in effect with stable slots, and the one the next capture
	 * takes (0: none); see capture_prepare(). */
	uint32_t carry_r, carry_r_next;
	const struct sprobe_snapshot *stable_snap;
	/* Top of a glibc thread stack's mapping minus its TCB, 0 while
	 * unknown: where a zero-pause copy may stop (zero_pause.c,
	 * zp_tcb_guess()). Probe only, under lock. */
	uint64_t zp_tcb_off;
	/* The snapshot and epoch of the last wall capture: an unchanged
	 * thread's previous copy is still in that snapshot's slot only if
	 * nothing else was captured into it since (see sprobe_lx_zp_try()). */
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

/* sprobe_lx_thread_sigcheck() with strict set could not decide (see its end). */
#define SIGCHECK_UNSURE UINT32_MAX

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

/* ASYNC-SIGNAL-SAFE: arithmetic. SP minus the red zone, but not below
 * floor (floor <= sp). */
static inline uint64_t redzone_floor(uint64_t sp, uint64_t floor)
{
	uint64_t rz = SPROBE_REDZONE;

	return sp - floor > rz ? sp - rz : floor;
}

/* handler.c: the capture signal handler (wall and CPU-timer signals alike).
 * ASYNC-SIGNAL-SAFE. */
void sprobe_lx_capture_handler(int sig, siginfo_t *si, void *ucv);

/* proc.c: /proc readers and the thread set (probe side, outside any
 * window). */
pid_t sprobe_lx_gettid(void);
int sprobe_lx_grow(void **p, size_t *cap, size_t need, size_t elem);
uint64_t sprobe_lx_parse_hex(const char **pp);
int sprobe_lx_refresh_ranges(struct sprobe_capturer *c);
bool sprobe_lx_is_go_program(void);
bool sprobe_lx_is_excluded(const struct sprobe_capturer *c, pid_t tid);
int sprobe_lx_enumerate_threads(struct sprobe_capturer *c, pid_t self);
uint32_t sprobe_lx_thread_sigcheck(const struct sprobe_capturer *c, pid_t tid, bool strict);
int sprobe_lx_cmp_tid(const void *a, const void *b);
void sprobe_lx_sort_tids(pid_t *v, uint32_t n);
bool sprobe_lx_new_threads(struct sprobe_capturer *c);
/* Has the thread count changed since the last call (the task directory's
 * link count, one fstat)? true when it cannot tell. */
bool sprobe_lx_thread_count_changed(struct sprobe_capturer *c);

/* batch.c: slots, the signal batch, the blocked-thread memo. */
void sprobe_lx_arm_slot(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i,
			uint64_t gen);
bool sprobe_lx_cancel_slot(struct slot *sl, uint64_t gen);
uint32_t sprobe_lx_slot_phase(struct slot *sl);
bool sprobe_lx_known_blocked(const struct sprobe_capturer *c, pid_t tid);
void sprobe_lx_forget_blocked(struct sprobe_capturer *c, pid_t tid);
void sprobe_lx_batch_begin(struct sprobe_capturer *c);
bool sprobe_lx_batch_send_one(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i);
void sprobe_lx_batch_end(struct sprobe_capturer *c, uint32_t live, bool wake);
uint32_t sprobe_lx_batch_send(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			      uint32_t *sent, uint32_t nsent, bool wake);
void sprobe_lx_batch_wait(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			  uint32_t *sent, uint32_t nsent);
void sprobe_lx_run_batch(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			 uint32_t *sent, uint32_t nsent);

/* chain.c: the capture signal shared with the program's disposition. */
void sprobe_lx_chain_prepare(void);
int sprobe_lx_chain_start(struct sprobe_capturer *c);
bool sprobe_lx_chain_front(struct sprobe_capturer *c);
void sprobe_lx_chain_stop(struct sprobe_capturer *c);
uint64_t sprobe_lx_value(uint64_t gen, uint32_t idx);
/* perfclock.c: the perf-event engine's probe side (outside any window;
 * under c->lock). */
int sprobe_lx_perf_probe(struct sprobe_capturer *c, char *why, size_t len);
int sprobe_lx_perf_open(struct sprobe_capturer *c, pid_t tid, uint32_t i, uint64_t gen);
void sprobe_lx_perf_close(struct sprobe_capturer *c, uint32_t i);
int sprobe_lx_perf_period(struct sprobe_capturer *c, uint32_t i, uint64_t interval_ns);
int sprobe_lx_perf_enable(struct sprobe_capturer *c, uint32_t i, bool on, uint64_t gen);
/* cputime.c: frees the CPU engine's per-slot arrays (capturer free). */
void sprobe_lx_cpu_free(struct sprobe_capturer *c);
/* cpuusage.c: the CPU clock of thread tid of this process, ns (false if
 * it is gone); slot i's CPU for the coverage, live (clock: its clock read
 * now) or after its thread is gone. */
bool sprobe_lx_thread_cpu_ns(pid_t tid, uint64_t *ns);
/* cpuusage.c: SPROBE_CPU_USAGE_TIMER / _NOSOURCE as slot i's source says. */
uint32_t sprobe_lx_cpu_src_flags(const struct sprobe_capturer *c, uint32_t i);
uint64_t sprobe_lx_cpu_live(struct sprobe_capturer *c, uint32_t i, uint64_t clock);
uint64_t sprobe_lx_cpu_final(struct sprobe_capturer *c, uint32_t i);

/* vmreadv.c: the probe half of the VM_READV method. */
uint32_t sprobe_lx_vm_service(struct sprobe_capturer *c, const uint32_t *sent, uint32_t nsent);

/* zero_pause.c */
int sprobe_lx_zp_sync(struct sprobe_capturer *c);

/* carry.c: which slots a wall capture visits, and stable slots. */
uint32_t sprobe_lx_carry_rounds(const struct sprobe_capturer *c);
bool sprobe_lx_stable_on(const struct sprobe_capturer *c);
void sprobe_lx_stable_reset(struct sprobe_capturer *c);
void sprobe_lx_stable_free(struct sprobe_capturer *c);
void sprobe_lx_stable_free_gone(struct sprobe_capturer *c, struct sprobe_snapshot *s);
void sprobe_lx_stable_remap(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t nslots);
void sprobe_lx_visit_slot(struct sprobe_capturer *c, struct sprobe_lx_visit *v, uint32_t i);
void sprobe_lx_visit_due(struct sprobe_capturer *c, struct sprobe_lx_visit *v);
struct zp_ent *sprobe_lx_zp_find(struct sprobe_capturer *c, pid_t tid);
bool sprobe_lx_zp_try(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i,
		      struct sprobe_thread_sample *t, const struct sprobe_thread_sample *prev);
void sprobe_lx_zp_close(struct sprobe_capturer *c, struct zp_ent *e);
bool sprobe_lx_zp_selftest(struct sprobe_capturer *c);

#endif /* SPROBE_BACKENDS_LINUX_LINUX_H */
