// SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0
/*
 * stackprobe eBPF companion: the kernel's view of every suspend window.
 *
 * The capture backend measures a window from inside its own signal handler
 * (entry .. exit). That misses what the kernel does around it: queueing and
 * delivering the signal, building the signal frame, rt_sigreturn, and any
 * time the thread is switched out in the middle. These programs timestamp
 * those steps for one target process (or, with targ_follow, the target
 * and every process it forks, recursively) and one signal number:
 *
 *   raw_tp/signal_generate  signal queued for a thread      -> generate
 *   raw_tp/signal_deliver   thread dequeues it for a handler -> deliver
 *   raw_tp/sys_enter        id == rt_sigreturn: handler done -> sigreturn
 *   raw_tp/sched_switch     switched out/in inside a window  -> offcpu
 *   raw_tp/sched_process_exit  thread gone: flush, forget its state;
 *                           last thread: the process's exit record
 *   raw_tp/sched_process_fork  child of a followed process: follow it
 *
 * Only raw tracepoints: they need no tracefs, and fentry/kprobes are not
 * available on the kernels we target (docs/PAUSE.md). raw_tp arguments are
 * untyped, so pointers are read with BPF_CORE_READ (bpf_probe_read_kernel
 * with CO-RE relocations against the running kernel's BTF).
 *
 * Ownership of the per-tid state (struct sprobe_pause_tid_state in
 * bpf/pause.h): the generation ring is shared by signal_generate and
 * signal_deliver, which both run under the target's sighand->siglock; the
 * window fields are touched only on behalf of the thread itself. No BPF lock
 * is needed (and tracing programs cannot take bpf_spin_lock).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "pause.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load (rodata: the verifier sees constants). */
const volatile __u32 targ_tgid = 0;
const volatile __s32 targ_signo = 0;
const volatile __u32 targ_mode = SPROBE_PAUSE_BPF_MODE_PROBE;
/* __NR_rt_sigreturn of the running kernel: 15 on x86_64, 139 on aarch64.
 * The loader sets it from its own <asm/unistd.h>, so one object serves
 * both architectures. */
const volatile __s64 nr_rt_sigreturn = 15;
/* Follow the target's descendants (the `procs` map decides who is
 * followed); false: targ_tgid alone, tested by one compare. */
const volatile bool targ_follow = false;
/* The running kernel's sched_process_exit passes group_dead (6.16+; the
 * loader reads the tracepoint's prototype from kernel BTF). Without it the
 * program reads signal->live, which a thread exiting at the same moment may
 * also see at 0: the `procs` delete then decides who writes the record. */
const volatile bool exit_has_group_dead = false;

/* Statistics, read by the loader through the skeleton's bss. Only ever
 * incremented with atomic adds; readers tolerate torn snapshots across
 * counters (each counter on its own is exact). */
__u64 counters[SPROBE_PAUSE_C__COUNT] = {};

/* Windows of the target open right now. Lets sched_switch, which runs for
 * every context switch of the machine, return at once when none is open.
 * Atomic add at open (signal_deliver) and at close (window_close); a thread
 * can only be switched out inside its window after its own open, so a zero
 * read means no thread of the target has off-CPU time to account. */
__s64 open_windows = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);	/* loader may resize before load */
	__type(key, __u32);
	__type(value, struct sprobe_pause_tid_state);
} tids SEC(".maps");

/* Followed processes (struct sprobe_pause_proc in pause.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);	/* loader sets it before load */
	__type(key, __u32);
	__type(value, struct sprobe_pause_proc);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);	/* loader may resize before load */
} events SEC(".maps");

/* trace_signal_generate's result codes (include/trace/events/signal.h;
 * an anonymous enum, so not in vmlinux.h). */
#define TRACE_SIGNAL_DELIVERED 0
#define TRACE_SIGNAL_LOSE_INFO 4

#define SIG_IGN_VAL 1UL		/* sa_handler values that run no handler */

/* include/linux/sched/signal.h (a #define, not in BTF); unchanged since
 * 2.6. Set with group_exit_code by exit_group(2) of a multi-threaded
 * process and by a fatal signal. */
#define SIGNAL_GROUP_EXIT_VAL 0x00000004

static __always_inline void count(enum sprobe_pause_counter c)
{
	__sync_fetch_and_add(&counters[c], 1);
}

static __always_inline void gen_push(struct sprobe_pause_gen_ring *r, __u64 ns,
				     __s32 code)
{
	if (r->head - r->tail >= SPROBE_PAUSE_GEN_RING) {
		/* Oldest waiting generation is overwritten: the window that
		 * eventually takes it would get a wrong start. Drop the new
		 * one instead and say so. */
		count(SPROBE_PAUSE_C_GEN_RING_FULL);
		return;
	}
	__u32 i = r->head & (SPROBE_PAUSE_GEN_RING - 1);
	r->ns[i] = ns;
	r->si_code[i] = code;
	r->head++;
}

static __always_inline bool gen_pop(struct sprobe_pause_gen_ring *r, __u64 *ns,
				    __s32 *code)
{
	if (r->head == r->tail)
		return false;
	__u32 i = r->tail & (SPROBE_PAUSE_GEN_RING - 1);
	*ns = r->ns[i];
	*code = r->si_code[i];
	r->tail++;
	return true;
}

/* Is tgid possibly followed? Exact without targ_follow; with it, a cheap
 * pre-filter only: the caller's lookup in `tids` (which holds threads of
 * followed processes only) or in `procs` decides. */
static __always_inline bool maybe_followed(__u32 tgid)
{
	return targ_follow || tgid == targ_tgid;
}

static __always_inline struct sprobe_pause_proc *proc_get(__u32 tgid)
{
	if (!maybe_followed(tgid))
		return NULL;
	return bpf_map_lookup_elem(&procs, &tgid);
}

static __always_inline struct sprobe_pause_tid_state *state_get(__u32 tid, bool create)
{
	struct sprobe_pause_tid_state *st = bpf_map_lookup_elem(&tids, &tid);

	if (st || !create)
		return st;
	struct sprobe_pause_tid_state zero = {};
	/* NOEXIST: if another CPU created it meanwhile, keep theirs (the
	 * update then fails with EEXIST and the lookup finds theirs). */
	bpf_map_update_elem(&tids, &tid, &zero, BPF_NOEXIST);
	st = bpf_map_lookup_elem(&tids, &tid);
	if (!st)
		count(SPROBE_PAUSE_C_NO_STATE);
	return st;
}

/* The kernel's own per-task scheduling accounting (CONFIG_SCHED_INFO):
 * run_delay sums the time the task waited on a runqueue, pcount counts the
 * times it got a CPU; both are updated at every switch-in by the scheduler
 * itself, so, unlike our sched_switch pairs, no event can be missed. */
static __always_inline void sched_info_now(__u64 *run_delay, __u64 *pcount)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();

	if (bpf_core_field_exists(t->sched_info)) {
		*run_delay = BPF_CORE_READ(t, sched_info.run_delay);
		*pcount = BPF_CORE_READ(t, sched_info.pcount);
	} else {
		*run_delay = 0;
		*pcount = 0;
	}
}

/* Emit the window in st and reset the window fields (not the gen ring).
 * Runs in the thread's own context (sigreturn, deliver, exit). */
static __always_inline void window_close(struct sprobe_pause_tid_state *st,
					 __u32 tid, __u64 sigreturn_ns, __u32 extra_flags)
{
	struct sprobe_pause_event *e;
	__u64 rd = 0, pc = 0;

	sched_info_now(&rd, &pc);
	if (st->offcpu_start_ns) {
		/* We run, so we were switched back in, but no sched_switch
		 * event said so (observed rarely on 6.18 under load). Close
		 * the segment here: an upper bound, flagged. */
		__u64 now = bpf_ktime_get_ns();
		if (now > st->offcpu_start_ns)
			st->offcpu_ns += now - st->offcpu_start_ns;
		st->offcpu_start_ns = 0;
		extra_flags |= SPROBE_PAUSE_F_SWITCH_IN_UNSEEN;
	}

	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(SPROBE_PAUSE_C_LOST);
	} else {
		/* Always the thread's own context (deliver, sigreturn,
		 * exit), so current's tgid is the window's process. */
		e->tid = tid;
		e->tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
		e->signo = targ_signo;
		e->si_code = st->si_code;
		e->generate_ns = st->generate_ns;
		e->deliver_ns = st->deliver_ns;
		e->sigreturn_ns = sigreturn_ns;
		e->offcpu_ns = st->offcpu_ns;
		e->runq_ns = rd >= st->run_delay0 ? rd - st->run_delay0 : 0;
		e->nswitches = st->nswitches;
		e->npreempt = st->npreempt;
		e->nruns = pc >= st->pcount0 ? (__u32)(pc - st->pcount0) : 0;
		e->flags = st->flags | extra_flags;
		/* Wake the reader only when the buffer is half full: a wakeup
		 * per event would add an irq_work to every window we measure.
		 * The loader drains on a timer as well. */
		__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
		__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);
		bpf_ringbuf_submit(e, avail > size / 2 ? BPF_RB_FORCE_WAKEUP
						       : BPF_RB_NO_WAKEUP);
		count(SPROBE_PAUSE_C_EMITTED);
	}
	__sync_fetch_and_add(&open_windows, -1);
	st->state = SPROBE_PAUSE_T_IDLE;
	st->flags = 0;
	st->si_code = 0;
	st->nest = 0;
	st->generate_ns = 0;
	st->deliver_ns = 0;
	st->offcpu_start_ns = 0;
	st->offcpu_ns = 0;
	st->run_delay0 = 0;
	st->pcount0 = 0;
	st->nswitches = 0;
	st->npreempt = 0;
}

/* TP_PROTO(int sig, struct kernel_siginfo *info, struct task_struct *task,
 *          int group, int result). Runs in the sender's context with
 * task->sighand->siglock held, after the signal is queued. */
SEC("raw_tp/signal_generate")
int BPF_PROG(handle_generate, int sig, struct kernel_siginfo *info,
	     struct task_struct *task, int group, int result)
{
	__u64 now = bpf_ktime_get_ns();

	if (sig != targ_signo)
		return 0;
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct sprobe_pause_proc *pr = proc_get(tgid);
	if (!pr)
		return 0;
	if (targ_mode == SPROBE_PAUSE_BPF_MODE_PROBE &&
	    (group || (bpf_get_current_pid_tgid() >> 32) != tgid))
		return 0;
	if (result != TRACE_SIGNAL_DELIVERED && result != TRACE_SIGNAL_LOSE_INFO) {
		/* Ignored, already pending or queue overflow: no handler
		 * will run for this generation. */
		count(SPROBE_PAUSE_C_NOT_QUEUED);
		return 0;
	}
	count(SPROBE_PAUSE_C_GENERATED);

	/* SEND_SIG_NOINFO (0) and SEND_SIG_PRIV (1) are not pointers. */
	__s32 code = (unsigned long)info > 1 ? BPF_CORE_READ(info, si_code) : 0;

	if (group) {
		gen_push(&pr->group_gen, now, code);
		return 0;
	}
	struct sprobe_pause_tid_state *st = state_get(BPF_CORE_READ(task, pid), true);
	if (st)
		gen_push(&st->gen, now, code);
	return 0;
}

/* TP_PROTO(int sig, struct kernel_siginfo *info, struct k_sigaction *ka).
 * Runs in the receiving thread, in get_signal() with siglock held, when a
 * signal has been dequeued and before the signal frame is built. */
SEC("raw_tp/signal_deliver")
int BPF_PROG(handle_deliver, int sig, struct kernel_siginfo *info,
	     struct k_sigaction *ka)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 now;

	if (!maybe_followed(id >> 32))
		return 0;
	now = bpf_ktime_get_ns();
	unsigned long handler = (unsigned long)BPF_CORE_READ(ka, sa.sa_handler);
	bool runs_handler = handler > SIG_IGN_VAL;

	if (sig != targ_signo) {
		/* Another handler inside our window: its rt_sigreturn must not
		 * close our window. */
		struct sprobe_pause_tid_state *st = state_get(tid, false);
		if (st && runs_handler && st->state == SPROBE_PAUSE_T_IN_WINDOW) {
			st->nest++;
			st->flags |= SPROBE_PAUSE_F_NESTED;
			count(SPROBE_PAUSE_C_NESTED);
		}
		return 0;
	}

	struct sprobe_pause_proc *pr = proc_get(id >> 32);
	if (!pr)
		return 0;
	struct sprobe_pause_tid_state *st = state_get(tid, true);
	if (!st)
		return 0;
	__u64 gen_ns = 0;
	__s32 code = 0;
	__u32 flags = 0;
	if (!gen_pop(&st->gen, &gen_ns, &code)) {
		if (gen_pop(&pr->group_gen, &gen_ns, &code))
			flags |= SPROBE_PAUSE_F_GROUP;
		else
			flags |= SPROBE_PAUSE_F_NO_GENERATE;
	}
	if (!runs_handler)
		return 0;	/* generation consumed, no window */
	count(SPROBE_PAUSE_C_DELIVERED);
	if (st->state == SPROBE_PAUSE_T_IN_WINDOW) {
		/* Our signal is blocked inside its own handler, so the last
		 * window never reached rt_sigreturn (siglongjmp, or
		 * SA_NODEFER). Report it as incomplete. */
		count(SPROBE_PAUSE_C_ABANDONED);
		window_close(st, tid, 0, SPROBE_PAUSE_F_INCOMPLETE);
	}
	if (st->gen.head != st->gen.tail)
		flags |= SPROBE_PAUSE_F_QUEUED;
	__sync_fetch_and_add(&open_windows, 1);
	st->state = SPROBE_PAUSE_T_IN_WINDOW;
	st->flags = flags;
	st->si_code = code;
	st->generate_ns = gen_ns;
	st->deliver_ns = now;
	sched_info_now(&st->run_delay0, &st->pcount0);
	return 0;
}

/* TP_PROTO(struct pt_regs *regs, long id): every syscall of every task, so
 * the cheapest test comes first. */
SEC("raw_tp/sys_enter")
int BPF_PROG(handle_sys_enter, struct pt_regs *regs, long nr)
{
	if (nr != nr_rt_sigreturn)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	if (!maybe_followed(id >> 32))
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)id;
	struct sprobe_pause_tid_state *st = state_get(tid, false);
	if (!st || st->state != SPROBE_PAUSE_T_IN_WINDOW)
		return 0;
	if (st->nest) {
		st->nest--;	/* a nested handler returned, not ours */
		return 0;
	}
	window_close(st, tid, now, 0);
	return 0;
}

/* TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next,
 *          unsigned int prev_state). Every context switch on every CPU. */
SEC("raw_tp/sched_switch")
int BPF_PROG(handle_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next, unsigned int prev_state)
{
	struct sprobe_pause_tid_state *st;
	__u64 now = 0;

	if (!open_windows)
		return 0;
	/* prev is still `current` here: no probe read needed. */
	__u64 id = bpf_get_current_pid_tgid();
	if (maybe_followed(id >> 32)) {
		st = state_get((__u32)id, false);
		if (st && st->state == SPROBE_PAUSE_T_IN_WINDOW) {
			now = bpf_ktime_get_ns();
			st->offcpu_start_ns = now;
			st->nswitches++;
			/* Involuntary: preempted in kernel, or switched out
			 * still runnable (tick preemption on the way back to
			 * user space comes through schedule() with
			 * preempt == false but prev_state == TASK_RUNNING). */
			if (preempt || prev_state == 0)
				st->npreempt++;
		}
	}
	if (maybe_followed(BPF_CORE_READ(next, tgid))) {
		st = state_get(BPF_CORE_READ(next, pid), false);
		if (st && st->offcpu_start_ns) {
			if (!now)
				now = bpf_ktime_get_ns();
			st->offcpu_ns += now - st->offcpu_start_ns;
			st->offcpu_start_ns = 0;
		}
	}
	return 0;
}

/* The wait(2) status the process's parent will get (wait_task_zombie):
 * the group's exit code once SIGNAL_GROUP_EXIT is set (exit_group(2) of a
 * multi-threaded process, a fatal signal, and since 5.19 the exit of the
 * last thread: synchronize_group_exit()), else the leader's own (exit(2)
 * of a single-threaded process; before 5.19 also threads all leaving with
 * SYS_exit). do_exit() sets both before this tracepoint. */
static __always_inline __s32 exit_status(struct task_struct *p)
{
	if (BPF_CORE_READ(p, signal, flags) & SIGNAL_GROUP_EXIT_VAL)
		return BPF_CORE_READ(p, signal, group_exit_code);
	return BPF_CORE_READ(p, group_leader, exit_code);
}

/* TP_PROTO(struct task_struct *p[, bool group_dead]): the exiting thread
 * itself, after do_exit() has set p->exit_code. A window still open will
 * never see rt_sigreturn. The process's last thread also writes its exit
 * record and stops following it. */
SEC("raw_tp/sched_process_exit")
int handle_exit(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, tgid = id >> 32;

	if (!maybe_followed(tgid))
		return 0;
	struct sprobe_pause_tid_state *st = state_get(tid, false);
	if (st) {
		if (st->state == SPROBE_PAUSE_T_IN_WINDOW) {
			count(SPROBE_PAUSE_C_ABANDONED);
			window_close(st, tid, 0, SPROBE_PAUSE_F_INCOMPLETE);
		}
		bpf_map_delete_elem(&tids, &tid);
	}

	bool group_dead;
	if (exit_has_group_dead)
		group_dead = (__u8)ctx[1] != 0;
	else
		group_dead = BPF_CORE_READ(p, signal, live.counter) == 0;
	if (!group_dead)
		return 0;
	struct sprobe_pause_proc *pr = bpf_map_lookup_elem(&procs, &tgid);
	if (!pr)
		return 0;
	__u32 ppid = pr->ppid;
	__u64 fork_ns = pr->fork_ns;
	/* One record per process: only the delete that succeeds writes it
	 * (two threads can both see live == 0 without group_dead). */
	if (bpf_map_delete_elem(&procs, &tgid) != 0)
		return 0;

	struct sprobe_pause_exit_event *x = bpf_ringbuf_reserve(&events, sizeof(*x), 0);
	if (!x) {
		count(SPROBE_PAUSE_C_EXITS_LOST);
		return 0;
	}
	x->tgid = tgid;
	x->ppid = ppid;
	x->tid = tid;
	x->exit_code = exit_status(p);
	x->fork_ns = fork_ns;
	x->exit_ns = bpf_ktime_get_ns();
	bpf_get_current_comm(x->comm, sizeof(x->comm));
	/* Same wakeup policy as window_close(): the reader polls anyway. */
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);
	bpf_ringbuf_submit(x, avail > size / 2 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	count(SPROBE_PAUSE_C_EXITS);
	return 0;
}

/* TP_PROTO(struct task_struct *parent, struct task_struct *child): in
 * kernel_clone(), in the parent's context, after copy_process() and before
 * wake_up_new_task(): the child has not run an instruction yet, so none of
 * its windows can be missed. Attached only with targ_follow. */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 ctgid = BPF_CORE_READ(child, tgid);

	if (!targ_follow || ptgid == ctgid)
		return 0;	/* not following, or a thread (CLONE_THREAD) */
	if (!bpf_map_lookup_elem(&procs, &ptgid))
		return 0;
	struct sprobe_pause_proc v = {
		.ppid = ptgid,
		.fork_ns = bpf_ktime_get_ns(),
	};
	/* BPF_ANY: an entry left by an exit the kernel skipped (a recursion
	 * miss) must not keep the new process out. Fails only when full. */
	if (bpf_map_update_elem(&procs, &ctgid, &v, BPF_ANY) != 0)
		count(SPROBE_PAUSE_C_PROCS_FULL);
	else
		count(SPROBE_PAUSE_C_FOLLOWED);
	return 0;
}
