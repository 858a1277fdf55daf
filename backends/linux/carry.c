/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Carrying blocked threads forward (docs/capture.md "Many threads"): which
 * slots a wall capture visits, and, while carrying is on, the slots
 * themselves -- one per thread for as long as it lives.
 *
 * A thread whose last zero-pause sample is still in its slot, walked, is
 * checked only at its slot's turn (one capture of R) and carried forward
 * unread in the others. A capture then visits only the slots that need
 * it (sprobe_lx_visit_due()): those the last capture did not leave
 * carried on, this turn's and the next turn's. The thread list is re-read
 * when the count moves or once a turn; a new list keeps every thread in
 * its slot (sprobe_lx_stable_remap()): a thread that left has its slot
 * closed in that capture (its carried spell ends, LAST, or it is dropped
 * EXITED) and freed at the next; a new thread takes a free slot. So thread
 * churn costs the threads that came and went, not a re-read and re-walk
 * of every thread whose place in a sorted list moved.
 *
 * Probe thread only, under the capturer's lock, outside any window.
 */
#include <string.h>

#include "backends/linux/linux.h"
#include "userspace/common/fds.h"
#include "userspace/common/zalloc.h"

uint32_t sprobe_lx_carry_rounds(const struct sprobe_capturer *c)
{
	uint32_t r;

	if (!c->zp_on || c->carry_max <= 1 || !c->carry_min)
		return 1;
	r = (uint32_t)(((uint64_t)c->ntids + c->carry_min - 1) / c->carry_min);
	return r < 1 ? 1 : r > c->carry_max ? c->carry_max : r;
}

bool sprobe_lx_stable_on(const struct sprobe_capturer *c)
{
	return c->zp_on && c->carry_max > 1 && c->carry_min && c->stable;
}

void sprobe_lx_stable_free(struct sprobe_capturer *c)
{
	sprobe__zfree(c->stable);
	sprobe__zfree(c->bytid);
	sprobe__zfree(c->bytid_tmp);
	sprobe__zfree(c->free_slots);
	sprobe__zfree(c->gone);
	sprobe__zfree(c->slot_gone);
	c->stable = NULL;
}

/* Forget every slot (another snapshot, or carrying just turned on): the
 * next list gives each thread a slot anew. */
void sprobe_lx_stable_reset(struct sprobe_capturer *c)
{
	if (c->stable_hi) {
		memset(c->stable, 0, c->stable_hi * sizeof(*c->stable));
		memset(c->slot_gone, 0, c->stable_hi);
	}
	c->stable_hi = c->nbytid = c->nfree = c->ngone = c->nstable = 0;
}

/* The slots closed by the last capture (their threads left) become free:
 * empty samples, not carried, available to a new thread. */
void sprobe_lx_stable_free_gone(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	for (uint32_t k = 0; k < c->ngone; k++) {
		uint32_t i = c->gone[k];
		struct sprobe_thread_sample *t = &s->samples[i];

		c->stable[i] = 0;
		c->slot_gone[i] = 0;
		s->zp_kept[i] = 0;
		t->tid = 0;
		t->stage = SPROBE_STAGE_EMPTY;
		t->drop_reason = SPROBE_DROP_NONE;
		t->nframes = 0;
		t->stack_len = 0;
		c->free_slots[c->nfree++] = i;
	}
	c->ngone = 0;
}

/*
 * After a new list (c->prev_tids, sorted by sprobe_lx_new_threads()): a
 * merge of the threads that have slots (c->bytid, sorted by tid) with the
 * list. Kept: same slot. Left: slot_gone, closed by this capture's visit,
 * freed at the next (its sample is the sampler's until then). New: a free
 * slot, or a new one, or none (NO_SLOT, and the list is re-read next time
 * to try again). O(threads), no allocation.
 */
void sprobe_lx_stable_remap(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t nslots)
{
	uint32_t a = 0, b = 0, n = 0;

	c->stable_noslot = 0;
	while (a < c->nbytid || b < c->nprev) {
		if (b == c->nprev || (a < c->nbytid && c->bytid[a].tid < c->prev_tids[b])) {
			uint32_t i = c->bytid[a++].slot;

			c->slot_gone[i] = 1;
			c->gone[c->ngone++] = i;
			continue;
		}
		if (a < c->nbytid && c->bytid[a].tid == c->prev_tids[b]) {
			c->bytid_tmp[n++] = c->bytid[a++];
			b++;
			continue;
		}
		pid_t tid = c->prev_tids[b++];
		uint32_t i;

		if (c->nfree) {
			i = c->free_slots[--c->nfree];
		} else if (c->stable_hi < nslots) {
			i = c->stable_hi++;
		} else {
			sprobe_snapshot__drop(s, NULL, SPROBE_DROP_NO_SLOT);
			c->stable_noslot++;
			c->list_stale = true;
			continue;
		}
		c->stable[i] = tid;
		c->bytid_tmp[n++] = (struct sprobe_lx_tidslot){ .tid = tid, .slot = i };
	}
	struct sprobe_lx_tidslot *x = c->bytid;

	c->bytid = c->bytid_tmp;
	c->bytid_tmp = x;
	c->nbytid = n;
	c->nstable = n;
}

/*
 * Slot i of this capture: carried forward (not its turn, still the same
 * blocked thread's walked zero-pause sample) or checked: read without a
 * signal if blocked, else given the signal path. Appends i to the visited
 * list unless it was carried on unchanged (was carried, still is, not the
 * last capture of its spell). A free slot is skipped; a slot whose thread
 * left is closed.
 */
void sprobe_lx_visit_slot(struct sprobe_capturer *c, struct sprobe_lx_visit *v, uint32_t i)
{
	struct sprobe_snapshot *s = v->s;
	struct sprobe_thread_sample *t;
	uint32_t why, rounds = v->rounds;
	uint64_t seq = v->seq;

	if (i >= v->nslots) {
		sprobe_snapshot__drop(s, NULL, SPROBE_DROP_NO_SLOT);
		return;
	}
	pid_t tid = v->tids[i];
	uint8_t kv = s->zp_kept[i];

	if (!tid)
		return; /* a free slot */
	v->nlive++;
	if (i >= s->nthreads)
		s->nthreads = i + 1;
	if (v->stable && c->slot_gone[i]) {
		/* Its thread left. Carried on until now: its spell ends here
		 * (LAST), written with the stack it was carried with, as at
		 * a turn's check. Else it is simply gone. */
		v->out[v->nout++] = i;
		if ((kv & (SPROBE_ZP_HELD - 1)) == SPROBE_ZP_CARRIED && s->samples[i].tid == tid) {
			s->zp_kept[i] = SPROBE_ZP_CARRIED_LAST | (kv & SPROBE_ZP_HELD);
			s->stats.zp_carried++;
			return;
		}
		t = sprobe_snapshot__sample_init(s, i, tid);
		sprobe_snapshot__drop(s, t, SPROBE_DROP_EXITED);
		return;
	}
	const struct sprobe_thread_sample *prev = NULL;
	/* Carried last time and the slot kept its thread: the slot holds
	 * the same thread's walked zero-pause sample, known without
	 * reading it (a cold line per thread). Else read it. */
	bool was_carried = (kv & (SPROBE_ZP_HELD - 1)) > 1 && (v->stable || !v->relist);

	if (v->zp_reuse && rounds > 1 && i < c->carry_prev_n && i % rounds != v->turn &&
	    seq - c->carry_checked[i] < rounds &&
	    (was_carried || (s->samples[i].tid == tid &&
			     s->samples[i].method == SPROBE_METHOD_ZERO_PAUSE &&
			     s->samples[i].stage == SPROBE_STAGE_UNWOUND))) {
		/* Not its turn: the slot stays as the last capture
		 * left it (a blocked thread's stack, walked), no
		 * system call. Its check comes within `rounds`. LAST
		 * when the next capture checks it (or, without stable
		 * slots, lists threads): its weight is written now, with
		 * the stack it was carried with, so a check that drops it
		 * (gone, masked) loses that one capture, not the turn. */
		bool last = v->closing || (seq + 1) % rounds == i % rounds ||
			    seq + 1 - c->carry_checked[i] >= rounds;

		s->zp_kept[i] = (last ? SPROBE_ZP_CARRIED_LAST : SPROBE_ZP_CARRIED) |
				(was_carried ? kv & SPROBE_ZP_HELD
					     : s->samples[i].stack_len ? SPROBE_ZP_HELD : 0);
		s->stats.zp_carried++;
		/* Its spell begins. When the descriptor budget cannot hold
		 * every thread's two proc files, a carried thread gives its
		 * own back: its check is mostly its CPU clock (no file), and
		 * the threads that run, checked every capture, keep theirs
		 * instead of opening two files each time. */
		if (!was_carried && 2 * c->ntids > sprobe_fd__budget()) {
			struct zp_ent *e = sprobe_lx_zp_find(c, tid);

			if (e && e->sched_fd >= 0)
				sprobe_lx_zp_close(c, e);
		}
		if (last || !was_carried || (kv & (SPROBE_ZP_HELD - 1)) != SPROBE_ZP_CARRIED)
			v->out[v->nout++] = i;
		return;
	}
	v->out[v->nout++] = i;
	c->carry_checked[i] = seq;
	if (v->zp_reuse && s->samples[i].tid == tid &&
	    s->samples[i].method == SPROBE_METHOD_ZERO_PAUSE &&
	    s->samples[i].stage != SPROBE_STAGE_EMPTY) {
		/* sample_init() clears the header: keep it. */
		memcpy(&c->zp_prev, &s->samples[i], offsetof(struct sprobe_thread_sample, frames));
		prev = &c->zp_prev;
	}
	t = sprobe_snapshot__sample_init(s, i, tid);
	if (c->zp_on && sprobe_lx_zp_try(c, s, i, t, prev))
		return; /* read while blocked: no signal */
	why = 0;
	if (c->nblk > BLK_MAX || sprobe_lx_known_blocked(c, t->tid))
		why = sprobe_lx_thread_sigcheck(c, t->tid, false);
	if (!why)
		sprobe_lx_forget_blocked(c, t->tid);
	if (why) {
		sprobe_snapshot__drop(s, t, why);
	} else if (c->strategy == SPROBE_STRATEGY_SEQUENTIAL) {
		c->sent[0] = i;
		sprobe_lx_run_batch(c, s, c->sent, 1);
	} else if (!v->now || sprobe_lx_batch_send_one(c, s, i)) {
		c->sent[v->nsent++] = i;
	}
}

/*
 * A capture that re-reads nothing (same list, same snapshot, carrying on):
 * visit only the slots that need it, in ascending order -- those the last
 * capture visited and did not leave carried on (threads that ran, were
 * dropped, or whose spell ended), the slots whose turn this is (checked)
 * and those whose turn is next (their spell's LAST). Every other slot is
 * carried on unchanged: its zp_kept stays CARRIED from the capture that
 * began its spell. So a round costs the threads that ran plus about
 * threads / R, not every thread.
 */
void sprobe_lx_visit_due(struct sprobe_capturer *c, struct sprobe_lx_visit *v)
{
	struct sprobe_snapshot *s = v->s;
	const uint32_t *prev = c->visit[c->visit_prev];
	uint32_t n = c->carry_prev_n, np = c->nvisit_prev, a = 0;
	uint32_t r = v->rounds, b = v->turn, d = (uint32_t)((v->seq + 1) % r);

	s->nthreads = n;
	for (;;) {
		/* Skip the last list's slots that stayed carried on. */
		/* (One of this turn's or the next one's is met by b or d.) */
		while (a < np && (s->zp_kept[prev[a]] & (SPROBE_ZP_HELD - 1)) == SPROBE_ZP_CARRIED)
			a++;
		uint32_t i = a < np ? prev[a] : UINT32_MAX;

		if (b < n && b < i)
			i = b;
		if (d < n && d < i)
			i = d;
		if (i >= n)
			break;
		if (a < np && prev[a] == i)
			a++;
		if (b == i)
			b += r;
		if (d == i)
			d += r;
		sprobe_lx_visit_slot(c, v, i);
	}
}
