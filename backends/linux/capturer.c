/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The wall-capture entry points (capture, capture_start/finish, recapture)
 * and the capturer's life cycle (new/free, handler installation, excluded
 * threads).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "backends/linux/linux.h"
#include "userspace/common/fds.h"
#include "userspace/common/zalloc.h"

static pthread_mutex_t g_owner_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sprobe_capturer *g_owner;
/* Generations keep counting across capturers (guarded by g_owner_lock), so
 * a signal from an earlier capturer can never match a later one's slot. */
static uint64_t g_last_gen;

/*
 * Everything of a wall capture up to the waiting: enumerate, refresh the
 * ranges, zero-pause what is blocked, decide who gets a signal (their
 * slot indices in c->sent[0..*nsent)). With the parallel strategy and the
 * SIGNAL method the signals also go out here, each right after its
 * thread's zero-pause check found it running (*sent true; sprobe_lx_batch_end() is
 * the caller's): a thread that enters a blocking call between that check
 * and its signal would see EINTR, so the gap is one check, not all of
 * them. Under c->lock; 0 or -errno.
 */
static int capture_prepare(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t *nsent_out,
			   bool *sent)
{
	pid_t self;
	int err;
	bool now = c->strategy != SPROBE_STRATEGY_SEQUENTIAL && c->method == SPROBE_METHOD_SIGNAL;

	*nsent_out = 0;
	*sent = false;
	if (c->cpu_on || c->inflight) {
		/* The slots belong to the CPU timers, or to a started capture. */
		return -EBUSY;
	}
	/* The program may have replaced our handler since with a raw
	 * rt_sigaction (the Go runtime does, on every signal): put ours back
	 * in front of it (chain.c). */
	if (!sprobe_lx_chain_front(c))
		return -EBUSY;
	self = sprobe_lx_gettid();
	uint32_t rounds = sprobe_lx_carry_rounds(c);
	uint32_t nslots = c->max_threads < s->max_threads ? c->max_threads : s->max_threads;
	/* Carrying keeps each thread in its slot while it lives (carry.c):
	 * in this snapshot only; another one starts the slots over. When R
	 * falls to 1 (few threads, or carrying turned off), the slots stay
	 * for one more capture, which closes every spell under the old R
	 * (below); the captures after it fill the slots in list order, so
	 * the slots start over when R rises again. */
	bool stable = rounds > 1 ? sprobe_lx_stable_on(c)
				 : c->zp_on && c->carry_r > 1 && c->stable_snap == s;

	if (stable && (c->stable_snap != s || c->zp_snap != s || s->zp_epoch != c->zp_epoch)) {
		sprobe_lx_stable_reset(c);
		c->carry_r = c->carry_r_next = 0;
		c->stable_snap = s;
		c->list_stale = true;
		c->carry_prev_n = 0;
		if (rounds <= 1) {
			/* Nothing of this snapshot to close. */
			stable = false;
			c->stable_snap = NULL;
		}
	} else if (stable) {
		sprobe_lx_stable_free_gone(c, s);
	} else if (c->stable_snap) {
		/* Slots in list order from here on: forget the slots kept per
		 * thread (their spells were closed, or cannot be). */
		sprobe_lx_stable_reset(c);
		c->stable_snap = NULL;
		c->carry_r = c->carry_r_next = 0;
	}
	/* With carrying on, the list is what costs O(threads) a capture
	 * (getdents64, a sort): re-read it when the count moved, else once
	 * every `rounds` (an exit and a birth in one round keep the count).
	 * Without stable slots a new list moves threads between slots, which
	 * ends their carried spells: the capture before it closes them
	 * (CARRY_LAST: their weight is written with the stack they were
	 * carried with) and the next one lists. With them, it lists at once. */
	bool count_moved = sprobe_lx_thread_count_changed(c);
	bool relist = rounds <= 1 || !c->ntids || c->carry_closing;
	bool closing = false;

	if (!relist && (c->list_stale || count_moved || ++c->list_age >= rounds)) {
		closing = !stable && c->carry_prev_n > 0;
		relist = !closing;
	}
	/* Stable slots: the turn a slot belongs to is its index modulo R, so
	 * a new R would check some carried slots before the capture that
	 * writes their weight (LAST). R follows the thread count loosely
	 * (within a quarter), and when it moves, this capture closes every
	 * spell under the old R and the next takes the new one. */
	if (stable && c->carry_r && rounds != c->carry_r) {
		if (!closing && c->carry_prev_n > 0 &&
		    (rounds * 4 > c->carry_r * 5 || rounds * 4 < c->carry_r * 3)) {
			closing = true;
			c->carry_r_next = rounds;
		}
		rounds = c->carry_r;
	} else if (stable && !c->carry_r) {
		c->carry_r = rounds;
	}
	c->carry_closing = closing && !stable;
	if (relist) {
		c->list_age = 0;
		c->list_stale = false;
		err = sprobe_lx_enumerate_threads(c, self);
		if (err)
			return err;
	}
	if ((relist && sprobe_lx_new_threads(c)) || c->maps_stale) {
		err = sprobe_lx_refresh_ranges(c);
		if (err) {
			c->nprev = 0; /* read them again next time */
			c->list_stale = true;
			/* The list moved but the slots did not: none may be
			 * carried without the tid check of a fresh list. */
			if (relist)
				c->carry_prev_n = 0;
			return err;
		}
	}
	bool zp_reuse = false;
	if (c->zp_on) {
		err = relist ? sprobe_lx_zp_sync(c) : 0;
		if (err) {
			c->carry_prev_n = 0; /* as above */
			c->list_stale = true;
			return err;
		}
		/* Slots still hold the last capture's copies only if that
		 * capture, by this capturer, was the last one into s. */
		zp_reuse = c->zp_snap == s && c->zp_epoch && s->zp_epoch == c->zp_epoch;
		s->zp_epoch = ++c->zp_epoch;
		c->zp_snap = s;
	}
	if (stable && relist)
		sprobe_lx_stable_remap(c, s, nslots);
	/* Every capture counts, closing ones too: a turn that stood still
	 * while the list was re-read would stretch the wait of the slots
	 * behind it. A slot is checked at its turn or, whatever the turn,
	 * R captures after its last check (R may have moved since). */
	uint64_t seq = ++c->carry_seq;
	struct sprobe_lx_visit v = {
		.s = s,
		.tids = stable ? c->stable : c->tids,
		.rounds = rounds,
		.turn = rounds > 1 ? (uint32_t)(seq % rounds) : 0,
		.nslots = nslots,
		.seq = seq,
		.relist = relist,
		.closing = closing,
		.zp_reuse = zp_reuse,
		.now = now,
		.stable = stable,
		.out = c->visit[c->visit_prev ^ 1],
	};
	/* Only the due slots when nothing moved since the last capture into
	 * s: same list, same slots, its visited list at hand. A closing
	 * capture marks every carried slot LAST: all of them. */
	bool due = zp_reuse && rounds > 1 && !relist && !closing && c->visit_ok &&
		   (stable || c->carry_prev_n == (c->ntids < nslots ? c->ntids : nslots));

	/* Stable slots: the threads left (closed here) and those without a
	 * slot count too. */
	s->stats.threads_total = c->ntids + (stable ? c->ngone : 0);

	/* Handler parameters for this capture; published by sprobe_lx_arm_slot(). */
	sprobe_lx_g.ranges = c->ranges;
	sprobe_lx_g.nranges = c->nranges;
	sprobe_lx_g.cap = c->max_stack_bytes < s->max_stack_bytes ? c->max_stack_bytes : s->max_stack_bytes;

	if (now)
		sprobe_lx_batch_begin(c);
	/* Threads listed without a slot: the list's remap counted them when
	 * it ran; every capture after it on the same list counts them again
	 * (the full loop below counts its own past nslots). */
	if (stable && !relist)
		s->stats.dropped[SPROBE_DROP_NO_SLOT] += c->stable_noslot;
	else if (!stable && due && c->ntids > nslots)
		s->stats.dropped[SPROBE_DROP_NO_SLOT] += c->ntids - nslots;
	if (due) {
		sprobe_lx_visit_due(c, &v);
	} else {
		uint32_t n = stable ? c->stable_hi : c->ntids;

		for (uint32_t i = 0; i < n; i++)
			sprobe_lx_visit_slot(c, &v, i);
	}
	/* Slots not visited (or visited and carried on unchanged): every
	 * one with a thread that is not listed. */
	s->touched = v.out;
	s->ntouched = v.nout;
	s->untouched = (due ? c->nstable : v.nlive) - v.nout;
	if (!stable && due)
		s->untouched = s->nthreads - v.nout;
	s->stats.zp_carried += due ? s->untouched : 0;
	s->has_touched = true;
	c->visit_prev ^= 1;
	c->nvisit_prev = v.nout;
	c->visit_ok = true;
	c->carry_prev_n = s->nthreads;
	if (c->carry_r_next) {
		c->carry_r = c->carry_r_next;
		c->carry_r_next = 0;
	}
	*nsent_out = v.nsent;
	*sent = now;
	return 0;
}

/* A stack outside every known range: read the maps before the next one. */
static void capture_done(struct sprobe_capturer *c, const struct sprobe_snapshot *s)
{
	const uint32_t *idx;
	uint32_t n = sprobe_snapshot__touched(s, &idx);

	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = idx ? idx[k] : k;

		if (s->zp_kept[i] <= 1 && s->samples[i].drop_reason == SPROBE_DROP_NO_STACK)
			c->maps_stale = true; /* (a carried slot is not read) */
		/* A check found its thread gone (an exit and a birth kept the
		 * count): list again next time, or the slot is checked, and
		 * counted exited, at every capture until the turn's re-read.
		 * A slot the list already closed is freed anyway. */
		if (s->zp_kept[i] <= 1 && s->samples[i].drop_reason == SPROBE_DROP_EXITED &&
		    !c->slot_gone[i])
			c->list_stale = true;
	}
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
			sprobe_lx_batch_end(c, nsent, true);
			sprobe_lx_batch_wait(c, s, c->sent, nsent);
		} else if (nsent) {
			sprobe_lx_run_batch(c, s, c->sent, nsent);
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
		sprobe_lx_batch_end(c, nsent, false);
	} else if (c->method == SPROBE_METHOD_VM_READV) {
		/* Its handlers wait for the probe to copy: never leave them. */
		if (nsent)
			sprobe_lx_run_batch(c, s, c->sent, nsent);
		nsent = 0;
	} else if (nsent) {
		nsent = sprobe_lx_batch_send(c, s, c->sent, nsent, false);
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
	sprobe_lx_batch_wait(c, s, c->sent, c->inflight_n);
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
	 * are not to be kept by a later capture (sprobe_lx_zp_try()): they were found
	 * short. */
	for (uint32_t k = 0; k < n && c->zp_on && !c->cpu_on; k++) {
		if (idx[k] < s->nthreads && s->samples[idx[k]].tid > 0) {
			struct zp_ent *e = sprobe_lx_zp_find(c, s->samples[idx[k]].tid);

			if (e)
				e->last_ok = false;
		}
	}
	if (c->cpu_on || c->inflight || !sprobe_lx_chain_front(c)) {
		err = -EBUSY;
		goto out;
	}
	/* Indices are slots (below max_threads), not list positions: with
	 * slots kept per thread, a newcomer's may lie past the list's
	 * length. c->sent holds at most tids_cap of them (below). */
	for (uint32_t k = 0; k < n; k++) {
		if (idx[k] >= s->nthreads || idx[k] >= c->max_threads || !c->tids_cap ||
		    s->samples[idx[k]].tid <= 0) {
			err = -EINVAL;
			goto out;
		}
	}
	sprobe_lx_g.ranges = c->ranges;
	sprobe_lx_g.nranges = c->nranges;
	sprobe_lx_g.cap = c->max_stack_bytes < s->max_stack_bytes ? c->max_stack_bytes : s->max_stack_bytes;
	for (uint32_t k = 0; k < n && nsent < c->tids_cap; k++) {
		struct sprobe_thread_sample *t = &s->samples[idx[k]];
		struct zp_ent *e = c->zp_on ? sprobe_lx_zp_find(c, t->tid) : NULL;

		if (e)
			e->last_ok = false; /* its slot gets a signal copy */
		sprobe_snapshot__sample_init(s, idx[k], t->tid);
		if (c->strategy == SPROBE_STRATEGY_SEQUENTIAL) {
			c->sent[0] = idx[k];
			sprobe_lx_run_batch(c, s, c->sent, 1);
		} else {
			c->sent[nsent++] = idx[k];
		}
	}
	if (nsent)
		sprobe_lx_run_batch(c, s, c->sent, nsent);
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
	/* The key and the program's disposition (SIG_DFL) before the
	 * handler: a delivery that is not a capture finds them. */
	sprobe_lx_chain_prepare();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sprobe_lx_capture_handler;
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
	if (sprobe_lx_chain_start(c) != 0) {
		/* Replaced by a raw call already: not ours to share. */
		c->signo = 0;
		return -EBUSY;
	}
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
	} else if (o.zero_pause && (o.zero_pause_pretested || sprobe_lx_zp_selftest(c))) {
		c->zp_on = true;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->dents_len = 32768;
	c->dents = malloc(c->dents_len);
	/* Paged in by use (a slot costs only once used), one spare slot to
	 * align them to a cache line. */
	c->slots_raw = sprobe__zcalloc((size_t)o.max_threads + 1, sizeof(struct slot));
	c->slots = c->slots_raw ? (struct slot *)(((uintptr_t)c->slots_raw + CACHELINE - 1) &
						  ~(uintptr_t)(CACHELINE - 1))
				: NULL;
	c->carry_checked = sprobe__zcalloc(o.max_threads, sizeof(*c->carry_checked));
	c->visit[0] = sprobe__zcalloc(o.max_threads, sizeof(uint32_t));
	c->visit[1] = sprobe__zcalloc(o.max_threads, sizeof(uint32_t));
	c->stable = sprobe__zcalloc(o.max_threads, sizeof(*c->stable));
	c->bytid = sprobe__zcalloc(o.max_threads, sizeof(*c->bytid));
	c->bytid_tmp = sprobe__zcalloc(o.max_threads, sizeof(*c->bytid_tmp));
	c->free_slots = sprobe__zcalloc(o.max_threads, sizeof(*c->free_slots));
	c->gone = sprobe__zcalloc(o.max_threads, sizeof(*c->gone));
	c->slot_gone = sprobe__zcalloc(o.max_threads, 1);
	if (!c->dents || !c->slots || !c->carry_checked || !c->visit[0] || !c->visit[1] ||
	    !c->stable || !c->bytid || !c->bytid_tmp || !c->free_slots || !c->gone ||
	    !c->slot_gone) {
		err = -ENOMEM;
		goto fail;
	}
	c->task_fd = sprobe_fd__open("/proc/self/task", O_RDONLY | O_DIRECTORY, 0, SPROBE_FD_KEEP);
	if (c->task_fd < 0) {
		err = c->task_fd;
		goto fail;
	}
	err = sprobe_lx_refresh_ranges(c);
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
	sprobe_lx_g.pid = c->pid;
	sprobe_lx_g.method = c->method;
	sprobe_lx_g.slots = c->slots;
	sprobe_lx_g.nslots = c->max_threads;
	sprobe_lx_g.ranges = c->ranges;
	sprobe_lx_g.nranges = c->nranges;
	sprobe_lx_g.cap = c->max_stack_bytes;
	sprobe_lx_g.vm_wait_ns = c->timeout_ns;
	sprobe_lx_g.go = sprobe_lx_is_go_program();
	sprobe_lx_g.growsdown_max = 8u << 20;
	if (getrlimit(RLIMIT_STACK, &rl) == 0)
		sprobe_lx_g.growsdown_max = rl.rlim_cur == RLIM_INFINITY ? 1ull << 32 : rl.rlim_cur;
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
	sprobe_lx_g.signo = c->signo;
	c->gen = g_last_gen;
	/* seq_cst; pairs with the handler's load of active. */
	atomic_store(&sprobe_lx_g.active, 1);
	g_owner = c;
	pthread_mutex_unlock(&g_owner_lock);
	return c;
fail:
	sprobe_fd__close(c->task_fd);
	free(c->zp);
	free(c->zp_tmp);
	free(c->dents);
	sprobe__zfree(c->slots_raw);
	sprobe__zfree(c->carry_checked);
	sprobe__zfree(c->visit[0]);
	sprobe__zfree(c->visit[1]);
	sprobe_lx_stable_free(c);
	free(c->maps);
	free(c->ranges);
	pthread_mutex_destroy(&c->lock);
	free(c);
	errno = -err;
	return NULL;
}

void sprobe_capturer__free(struct sprobe_capturer *c)
{
	if (!c)
		return;
	sprobe_capturer__cpu_stop(c);
	pthread_mutex_lock(&g_owner_lock);
	/* SIG_IGN discards capture signals still queued to threads that
	 * block it (POSIX), so none can later reach the program's
	 * disposition; then the program's disposition (chain.c). */
	sprobe_lx_chain_stop(c);
	sprobe_lx_g.slots = NULL;
	sprobe_lx_g.nslots = 0;
	sprobe_lx_g.ranges = NULL;
	sprobe_lx_g.nranges = 0;
	/* No handler runs (in_handler drained above): the perf map goes. */
	sprobe__zfree((void *)atomic_exchange(&sprobe_lx_g.perf_map, NULL));
	sprobe_lx_g.perf_nmap = 0;
	sprobe__zfree((void *)sprobe_lx_g.perf_tid);
	sprobe_lx_g.perf_tid = NULL;
	g_owner = NULL;
	g_last_gen = c->gen;
	pthread_mutex_unlock(&g_owner_lock);

	sprobe_fd__close(c->task_fd);
	for (uint32_t i = 0; i < c->nzp; i++)
		sprobe_lx_zp_close(c, &c->zp[i]);
	free(c->zp);
	free(c->zp_tmp);
	free(c->dents);
	free(c->tids);
	free(c->prev_tids);
	free(c->sent);
	sprobe__zfree(c->slots_raw);
	sprobe__zfree(c->carry_checked);
	sprobe__zfree(c->visit[0]);
	sprobe__zfree(c->visit[1]);
	sprobe_lx_stable_free(c);
	free(c->maps);
	free(c->ranges);
	sprobe_snapshot__free(c->cpu_snap);
	sprobe__zfree(c->cpu_tid);
	sprobe__zfree(c->cpu_timer);
	sprobe__zfree(c->cpu_gen);
	sprobe__zfree(c->cpu_sorted);
	sprobe_lx_cpu_free(c);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void sprobe_capturer__zp_key(char *buf, size_t len)
{
	struct utsname u;

	if (uname(&u) != 0) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, "%s:%s:%s", u.machine, u.release, u.version);
	/* One token: the environment value must not hold spaces' worth of
	 * ambiguity; make them underscores. */
	for (char *p = buf; *p; p++)
		if (*p == ' ')
			*p = '_';
}

int sprobe_capturer__forget(struct sprobe_capturer *c)
{
	if (!c)
		return -EINVAL;
	/* A parent thread may have held the lock at fork(): a fresh one. */
	pthread_mutex_init(&g_owner_lock, NULL);
	atomic_store(&sprobe_lx_g.active, 0);
	atomic_store(&sprobe_lx_g.in_handler, 0);
	/* No capture signal is pending here (fork() clears the child's
	 * pending set), so the disposition can go back at once. */
	sigaction(c->signo, &c->old_sa, NULL);
	sprobe_lx_g.slots = NULL;
	sprobe_lx_g.nslots = 0;
	sprobe_lx_g.ranges = NULL;
	sprobe_lx_g.nranges = 0;
	g_owner = NULL;
	g_last_gen = c->gen;
	return 0;
}

int sprobe_capturer__zp_carry(struct sprobe_capturer *c, uint32_t min_checks, uint32_t max_rounds)
{
	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	c->carry_min = min_checks ? min_checks : 1;
	c->carry_max = max_rounds;
	c->list_stale = true;
	pthread_mutex_unlock(&c->lock);
	return 0;
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
	if (sprobe_lx_is_excluded(c, tid))
		err = -EEXIST;
	else if (c->nexcl == EXCL_MAX)
		err = -ENOSPC;
	else
		c->excl[c->nexcl++] = tid;
	c->list_stale = true;
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
			c->list_stale = true;
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

int sprobe_backend__task_dir(const struct sprobe_capturer *c)
{
	return c && c->task_fd >= 0 ? c->task_fd : -ENOTSUP;
}
