/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Shared between bpf/pause.bpf.c and userspace/pause.c: fixed-width structs
 * only, so the BPF object and the loader agree on every byte whatever the
 * compiler. Timestamps are bpf_ktime_get_ns(), i.e. CLOCK_MONOTONIC ns, the
 * clock the capture backend's handler reads; the two can be compared
 * directly (see docs/PAUSE.md for the bound).
 *
 * One *window* of one thread, as the kernel sees it:
 *
 *   generate ── signal queued for the thread (signal_generate)
 *   deliver  ── the thread dequeues it to run the handler (signal_deliver)
 *   sigreturn── the handler is done: the thread enters rt_sigreturn
 *               (sys_enter, id == __NR_rt_sigreturn)
 *   offcpu   ── sum of the time the thread was switched out between
 *               deliver and sigreturn (sched_switch)
 */
#ifndef SPROBE_BPF_PAUSE_H
#define SPROBE_BPF_PAUSE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Which signal generations open a window (pause_cfg.mode). */
enum sprobe_pause_bpf_mode {
	/* Wall mode: the probe thread, inside the target process, sends the
	 * capture signal to one thread (tgkill / rt_tgsigqueueinfo). Only
	 * thread-directed signals sent from inside the target count, so a
	 * stray `kill -RTMIN+n` from outside does not fake a window. */
	SPROBE_PAUSE_BPF_MODE_PROBE = 0,
	/* CPU mode: a timer generates the signal (from the tick, an hrtimer or
	 * posix-cpu-timer task work: any context). Process-directed signals
	 * are accepted; the thread that takes one is only known at delivery,
	 * so their generation time waits in the per-process slot. */
	SPROBE_PAUSE_BPF_MODE_TIMER = 1,
};

/* Bits of sprobe_pause_event.flags. */
#define SPROBE_PAUSE_F_NO_GENERATE  (1u << 0) /* deliver seen, generate not */
#define SPROBE_PAUSE_F_GROUP	    (1u << 1) /* generate was process-directed */
#define SPROBE_PAUSE_F_INCOMPLETE   (1u << 2) /* no sigreturn (exit/longjmp) */
#define SPROBE_PAUSE_F_NESTED	    (1u << 3) /* another handler ran inside */
#define SPROBE_PAUSE_F_QUEUED	    (1u << 4) /* more generations waiting */
#define SPROBE_PAUSE_F_SWITCH_IN_UNSEEN (1u << 5) /* switched out, no switch-in
						   * event before sigreturn */

/* One closed (or abandoned) window. Ring-buffer record. */
struct sprobe_pause_event {
	__u32 tid;
	__u32 tgid;
	__s32 signo;
	__s32 si_code;		/* of the generating siginfo; 0 if unknown */
	__u64 generate_ns;	/* 0 if SPROBE_PAUSE_F_NO_GENERATE */
	__u64 deliver_ns;
	__u64 sigreturn_ns;	/* 0 if SPROBE_PAUSE_F_INCOMPLETE */
	__u64 offcpu_ns;	/* switched out inside [deliver, sigreturn] */
	__u64 runq_ns;		/* runnable but waiting for a CPU, inside the
				 * window: the kernel's own sched_info.run_delay
				 * delta (0 without CONFIG_SCHED_INFO) */
	__u32 nswitches;	/* times switched out inside the window */
	__u32 npreempt;		/* ... of which involuntary (preempted) */
	__u32 nruns;		/* times given a CPU inside the window:
				 * sched_info.pcount delta */
	__u32 flags;		/* SPROBE_PAUSE_F_* */
};

/* Indexes into the `counters` array (global in .bss, atomically added). */
enum sprobe_pause_counter {
	SPROBE_PAUSE_C_GENERATED = 0, /* matching generations seen */
	SPROBE_PAUSE_C_NOT_QUEUED,    /* generation result != delivered */
	SPROBE_PAUSE_C_DELIVERED,     /* matching deliveries seen */
	SPROBE_PAUSE_C_EMITTED,	      /* events written to the ring buffer */
	SPROBE_PAUSE_C_LOST,	      /* ring buffer full: event dropped */
	SPROBE_PAUSE_C_NO_STATE,      /* per-tid map full: window not tracked */
	SPROBE_PAUSE_C_GEN_RING_FULL, /* generation dropped: ring full */
	SPROBE_PAUSE_C_NESTED,	      /* handler delivered inside a window */
	SPROBE_PAUSE_C_ABANDONED,     /* window open at thread exit */
	SPROBE_PAUSE_C_GROUP_OVERWRITTEN, /* group generation never taken */
	SPROBE_PAUSE_C_FOLLOWED,      /* processes added to `procs` at fork */
	SPROBE_PAUSE_C_PROCS_FULL,    /* forks not followed: `procs` full */
	SPROBE_PAUSE_C_EXITS,	      /* exit records written */
	SPROBE_PAUSE_C_EXITS_LOST,    /* exit records dropped: ring full */
	SPROBE_PAUSE_C__COUNT
};

enum sprobe_pause_tstate {
	SPROBE_PAUSE_T_IDLE = 0,    /* no handler running */
	SPROBE_PAUSE_T_IN_WINDOW,   /* our handler running */
};

/* Generations not yet delivered, oldest first. Real-time signals queue,
 * so more than one may wait; the ring is small because the probe waits for
 * each window before the next. */
#define SPROBE_PAUSE_GEN_RING 4

struct sprobe_pause_gen_ring {
	__u32 head;		/* next slot to fill (generate) */
	__u32 tail;		/* next slot to take (deliver) */
	__u64 ns[SPROBE_PAUSE_GEN_RING];
	__s32 si_code[SPROBE_PAUSE_GEN_RING];
};

/*
 * Per-tid state in the `tids` hash map. Two owners, no locks needed:
 *  - gen: written by signal_generate and read by signal_deliver. Both run
 *    with the target's sighand->siglock held (__send_signal_locked and
 *    get_signal), so they are serialised by that lock and plain loads and
 *    stores suffice.
 *  - everything else: written only on behalf of the thread itself
 *    (signal_deliver and sys_enter run in its context; sched_switch as its
 *    prev/next, which the scheduler orders with its own barriers).
 */
struct sprobe_pause_tid_state {
	struct sprobe_pause_gen_ring gen;
	__u32 state;		/* enum sprobe_pause_tstate */
	__u32 flags;		/* SPROBE_PAUSE_F_* for the current window */
	__s32 si_code;
	__u32 nest;		/* other handlers running inside this window */
	__u64 generate_ns;	/* of the current window, 0 if unknown */
	__u64 deliver_ns;
	__u64 offcpu_start_ns;	/* 0 while on CPU */
	__u64 offcpu_ns;
	__u64 run_delay0;	/* sched_info.run_delay at deliver */
	__u64 pcount0;		/* sched_info.pcount at deliver */
	__u32 nswitches;
	__u32 npreempt;
};

/*
 * Per-process state in the `procs` hash map, keyed by tgid: a process is
 * followed exactly while it has an entry. The loader inserts the target
 * before attaching; with targ_follow, sched_process_fork inserts every
 * process forked by a followed one (before the child first runs), and the
 * exit of its last thread removes it.
 *  - group_gen: process-directed generations (timer mode), under the
 *    process's sighand->siglock like the per-tid ring.
 *  - ppid, fork_ns: written once at insert, read at exit.
 */
struct sprobe_pause_proc {
	struct sprobe_pause_gen_ring group_gen;
	__u32 ppid;		/* tgid that forked it; 0 for the target */
	__u32 _pad;
	__u64 fork_ns;		/* 0 for the target */
};

/* The end of a followed process (its last thread's sched_process_exit).
 * Ring-buffer record, told apart from sprobe_pause_event by its size. */
struct sprobe_pause_exit_event {
	__u32 tgid;
	__u32 ppid;		/* as in sprobe_pause_proc */
	__u32 tid;		/* the last thread */
	__s32 exit_code;	/* wait(2) status: signal in bits 0-6, core 0x80,
				 * exit status << 8 */
	__u64 fork_ns;
	__u64 exit_ns;
	char comm[16];		/* at exit (after any exec) */
};

#endif /* SPROBE_BPF_PAUSE_H */
