/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The signal batch, probe side: arm a slot and signal its thread, wait for
 * the batch with one deadline, cancel the stragglers, collect; and the
 * memo of threads known to block the signal.
 */
#include <errno.h>
#include <string.h>

#include "backends/linux/linux.h"

static int send_signal(struct sprobe_capturer *c, pid_t tid, uint32_t idx, uint64_t gen)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = c->signo;
	si.si_code = SI_QUEUE;
	si.si_pid = c->pid;
	si.si_uid = c->uid;
	si.si_value.sival_ptr = (void *)(uintptr_t)sprobe_lx_value(gen, idx);
	if (syscall(SYS_rt_tgsigqueueinfo, c->pid, tid, c->signo, &si) < 0)
		return -errno;
	return 0;
}

void sprobe_lx_arm_slot(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i,
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
bool sprobe_lx_cancel_slot(struct slot *sl, uint64_t gen)
{
	uint64_t expect = gen << 2 | SLOT_ARMED;

	/* acq_rel; pairs with the handler's CAS ARMED -> BUSY: exactly one of
	 * the two succeeds. */
	return atomic_compare_exchange_strong(&sl->state, &expect, gen << 2 | SLOT_IDLE);
}

uint32_t sprobe_lx_slot_phase(struct slot *sl)
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
bool sprobe_lx_known_blocked(const struct sprobe_capturer *c, pid_t tid)
{
	for (uint32_t i = 0; i < c->nblk && i < BLK_MAX; i++)
		if (c->blk[i] == tid)
			return true;
	return false;
}

static void note_blocked(struct sprobe_capturer *c, pid_t tid)
{
	if (sprobe_lx_known_blocked(c, tid))
		return;
	if (c->nblk < BLK_MAX)
		c->blk[c->nblk++] = tid;
	else
		c->nblk = BLK_MAX + 1;
}

void sprobe_lx_forget_blocked(struct sprobe_capturer *c, pid_t tid)
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
void sprobe_lx_batch_begin(struct sprobe_capturer *c)
{
	atomic_store(&sprobe_lx_g.completed, 0);
	/* No wake until the count is final: sends are still going out. */
	atomic_store(&sprobe_lx_g.target, c->method == SPROBE_METHOD_VM_READV ? 0 : UINT32_MAX);
}

/* Arm slot i and signal its thread. False when the signal could not be
 * sent (the sample is dropped: exited, or error). */
bool sprobe_lx_batch_send_one(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i)
{
	struct sprobe_thread_sample *t = &s->samples[i];
	uint64_t gen = ++c->gen;
	int err;

	if (c->before_signal)
		c->before_signal(c->hook_ctx, t->tid);
	sprobe_lx_arm_slot(c, s, i, gen);
	t->method = c->method;
	t->signal_ns = sprobe_now_ns();
	err = send_signal(c, t->tid, i, gen);
	if (err) {
		/* Never delivered: the CAS cannot fail. */
		sprobe_lx_cancel_slot(&c->slots[i], gen);
		sprobe_snapshot__drop(s, t, err == -ESRCH ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR);
		return false;
	}
	return true;
}

/* The sends of a batch are done: live of them went out. */
void sprobe_lx_batch_end(struct sprobe_capturer *c, uint32_t live, bool wake)
{
	c->batch_sent_ns = sprobe_now_ns();
	/* seq_cst store, then load of completed: see sprobe_lx_g.completed. */
	if (live && wake)
		atomic_store(&sprobe_lx_g.target, c->method == SPROBE_METHOD_VM_READV ? 0 : live);
}

uint32_t sprobe_lx_batch_send(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			      uint32_t *sent, uint32_t nsent, bool wake)
{
	uint32_t live = 0;

	sprobe_lx_batch_begin(c);
	for (uint32_t k = 0; k < nsent; k++)
		if (sprobe_lx_batch_send_one(c, s, sent[k]))
			sent[live++] = sent[k];
	sprobe_lx_batch_end(c, live, wake);
	return live;
}

/*
 * Second half: wait for every slot of sent[0..nsent) (sent by
 * sprobe_lx_batch_send()) with one deadline counted from the sends, cancel the
 * stragglers, wait for any handler that is still running. On return no
 * handler will touch these samples.
 */
void sprobe_lx_batch_wait(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			  uint32_t *sent, uint32_t nsent)
{
	uint64_t deadline, slice = 1000000; /* 1 ms, doubling */
	uint32_t ncancelled = 0, k;
	bool vm = c->method == SPROBE_METHOD_VM_READV;

	if (!nsent)
		return;
	/* seq_cst store, then load of completed: see sprobe_lx_g.completed. (Again
	 * after sprobe_lx_batch_send(): a pipelined batch left it at UINT32_MAX.) */
	atomic_store(&sprobe_lx_g.target, vm ? 0 : nsent);
	deadline = c->batch_sent_ns + c->timeout_ns;
	uint32_t ndone = 0;
	for (;;) {
		uint32_t seen = atomic_load(&sprobe_lx_g.completed);
		uint64_t now;

		if (vm) {
			sprobe_lx_vm_service(c, sent, nsent);
			ndone = 0;
			for (k = 0; k < nsent; k++)
				ndone += sprobe_lx_slot_phase(&c->slots[sent[k]]) == SLOT_DONE;
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
		if (futex_wait(&sprobe_lx_g.completed, seen, slice) < 0 && errno == ETIMEDOUT) {
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
				 * open, a 1.4 KB read and a close; its cost is
				 * in docs/PERFORMANCE.md "Record"),
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
					uint32_t r = sprobe_lx_thread_sigcheck(c, tid, true);

					/* Once per thread and capture, unless undecided:
					 * a check made while another thread's handler was
					 * preempted (under load) must not leave a thread
					 * that blocks the signal waiting out the deadline. */
					if (r != SIGCHECK_UNSURE)
						sl->checked = st >> 2;
					if (r == SPROBE_DROP_BLOCKED)
						why = SPROBE_DROP_BLOCKED;
				}
				if (why && sprobe_lx_cancel_slot(sl, st >> 2)) {
					sprobe_snapshot__drop(s, &s->samples[i], why);
					if (why == SPROBE_DROP_BLOCKED)
						note_blocked(c, tid);
					ncancelled++;
				}
			}
			/* seq_cst; same pairing as the first store of target. */
			if (!vm)
				atomic_store(&sprobe_lx_g.target, nsent - ncancelled);
			if (slice < 64000000)
				slice *= 2;
		}
		/* Are all slots settled (DONE or cancelled)? */
		uint32_t open = 0;
		for (k = 0; k < nsent; k++) {
			uint32_t ph = sprobe_lx_slot_phase(&c->slots[sent[k]]);

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
			if (sprobe_lx_cancel_slot(sl, st >> 2)) {
				uint32_t why = sprobe_lx_thread_sigcheck(c, s->samples[i].tid, true);

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
	 * VM_READV wait capped by sprobe_lx_g.vm_wait_ns): wait for them so that
	 * nothing writes into s after we return. */
	while (busy) {
		uint32_t seen = atomic_load(&sprobe_lx_g.completed);

		busy = 0;
		if (vm)
			sprobe_lx_vm_service(c, sent, nsent);
		for (k = 0; k < nsent; k++)
			busy += sprobe_lx_slot_phase(&c->slots[sent[k]]) == SLOT_BUSY;
		if (busy)
			futex_wait(&sprobe_lx_g.completed, seen, 1000000);
	}

	/* Collect. */
	for (k = 0; k < nsent; k++) {
		uint32_t i = sent[k];
		struct sprobe_thread_sample *t = &s->samples[i];

		if (sprobe_lx_slot_phase(&c->slots[i]) != SLOT_DONE)
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
void sprobe_lx_run_batch(struct sprobe_capturer *c, struct sprobe_snapshot *s,
			 uint32_t *sent, uint32_t nsent)
{
	sprobe_lx_batch_wait(c, s, sent, sprobe_lx_batch_send(c, s, sent, nsent, true));
}
