/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The capture signal, shared with the program (docs/AGENT.md "The capture
 * signal is shared"): our handler stays in front in the kernel, the
 * program's disposition is kept in sprobe_lx_ch (linux.h) and every
 * delivery that is not a capture is given to it (forward() in handler.c).
 *
 * The program's disposition changes in two ways:
 *  - through libc (the agent's sigaction/signal wrappers call
 *    sprobe_lx_chain_sigaction()): recorded here, the kernel keeps ours;
 *  - with a raw rt_sigaction system call (the Go runtime installs its
 *    handler on every signal that way at start): no wrapper sees it, so
 *    the probe looks before each capture round (sprobe_lx_chain_front())
 *    and, when the kernel holds someone else's handler, swaps ours back in
 *    (one atomic rt_sigaction: the old action it returns is exactly what
 *    was replaced) and records that one as the program's. Deliveries
 *    between the raw install and the swap went straight to the program's
 *    handler, which is what it asked for; captures sent in that time reach
 *    that handler too (at most one round's: the probe looks before each).
 *
 * Every call on the kernel's disposition here is the raw system call: the
 * libc sigaction of this library is the agent's wrapper, which answers
 * with the program's view.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "backends/linux/linux.h"
#include "backends/linux/chain.h"

static bool is_ours(const struct sprobe_ksigaction *k)
{
	return k->handler == (uint64_t)(uintptr_t)sprobe_lx_capture_handler;
}

static bool is_handler(uint64_t h)
{
	return h != (uint64_t)(uintptr_t)SIG_DFL && h != (uint64_t)(uintptr_t)SIG_IGN;
}

uint64_t sprobe_lx_value(uint64_t gen, uint32_t idx)
{
	return sprobe_lx_g.key << CAPTURE_KEY_SHIFT | (gen & 0xffffffffull) << 16 | (idx & 0xffff);
}

/* The key, once per process (linux.h): random, top bit set. */
static void key_init(void)
{
	uint16_t k = 0;

	if (sprobe_lx_g.key)
		return;
	if (getrandom(&k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		k = (uint16_t)(ts.tv_nsec ^ (ts.tv_nsec >> 16) ^ getpid());
	}
	sprobe_lx_g.key = (uint64_t)(k | 0x8000);
}

static void publish(const struct sprobe_ksigaction *k)
{
	/* Release; pairs with the acquire load of cur in chain_read(). */
	atomic_store_explicit(&sprobe_lx_ch.cur, chain_fill(k), memory_order_release);
}

/* Our action as the kernel should hold it for the program's disposition
 * d: SA_RESTART follows the program's handler (a system call its handler
 * interrupts fails with EINTR or restarts as it asked; the kernel decides
 * that from the flags of the handler it runs, ours), and is set for
 * SIG_DFL and SIG_IGN (captures restart what they interrupt). */
static struct sprobe_ksigaction ours_for(const struct sprobe_ksigaction *d)
{
	struct sprobe_ksigaction k = sprobe_lx_ch.ours;

	if (is_handler(d->handler) && !(d->flags & SA_RESTART))
		k.flags &= ~(uint64_t)SA_RESTART;
	else
		k.flags |= SA_RESTART;
	return k;
}

/* Put ours in front with the flags d calls for. A foreign action the swap
 * returns becomes the program's disposition (*d updated). 0 or -errno. */
static int front(struct sprobe_ksigaction *d)
{
	int sig = atomic_load_explicit(&sprobe_lx_ch.signo, memory_order_relaxed);
	struct sprobe_ksigaction cur, want;
	int err;

	if (!sig)
		return -ENOENT;
	err = ksigaction(sig, NULL, &cur);
	if (err)
		return err;
	want = ours_for(d);
	if (is_ours(&cur) && (cur.flags & SA_RESTART) == (want.flags & SA_RESTART))
		return 0;
	err = ksigaction(sig, &want, &cur);
	if (err)
		return err;
	if (!is_ours(&cur)) {
		/* A raw install since we last looked: that is the program's now. */
		*d = cur;
		publish(d);
		atomic_fetch_add_explicit(&sprobe_lx_ch.absorbed, 1, memory_order_relaxed);
		want = ours_for(d);
		if ((cur.flags & SA_RESTART) != (want.flags & SA_RESTART))
			ksigaction(sig, &want, NULL);
	}
	return 0;
}

int sprobe_lx_chain_start(struct sprobe_capturer *c)
{
	struct sprobe_ksigaction k;
	int err;

	err = ksigaction(c->signo, NULL, &k);
	if (err)
		return err;
	if (!is_ours(&k))
		return -EBUSY; /* replaced between the install and here */
	sprobe_lx_ch.ours = k;
	/* Written before the handler was installed (try_install()): the
	 * record says SIG_DFL. Now the wrappers may route to us. */
	atomic_store_explicit(&sprobe_lx_ch.signo, c->signo, memory_order_release);
	return 0;
}

/* Before the install: the key, and the program's disposition as found
 * (SIG_DFL: try_install() takes only a default signal). */
void sprobe_lx_chain_prepare(void)
{
	struct sprobe_ksigaction dfl = { 0 };

	key_init();
	publish(&dfl);
}

bool sprobe_lx_chain_front(struct sprobe_capturer *c)
{
	struct sprobe_ksigaction d;

	(void)c;
	if (chain_read(&d) < 0)
		return false;
	return front(&d) == 0;
}

/*
 * At the capturer's end: the kernel gets the program's disposition back.
 * SIG_IGN first (POSIX: it discards the signals pending on threads that
 * block it: captures that could otherwise reach the program's handler or
 * a sigwait later), wait for handlers still running, then the program's
 * latest disposition (a raw install since the last look included, taken
 * from the swap). A wrapper call racing with this is re-read: the loop
 * ends when the record did not move while it was installed.
 */
void sprobe_lx_chain_stop(struct sprobe_capturer *c)
{
	struct sprobe_ksigaction ign = { .handler = (uint64_t)(uintptr_t)SIG_IGN }, prev, d;
	int sig = c->signo;

	ign.flags = sprobe_lx_ch.ours.flags & SPROBE_SA_RESTORER;
	ign.restorer = sprobe_lx_ch.ours.restorer;
	if (ksigaction(sig, &ign, &prev) != 0)
		prev = sprobe_lx_ch.ours;
	/* Nothing routes to the record any more: wrappers call libc now. */
	atomic_store_explicit(&sprobe_lx_ch.signo, 0, memory_order_relaxed);
	if (!is_ours(&prev)) {
		publish(&prev);
		atomic_fetch_add_explicit(&sprobe_lx_ch.absorbed, 1, memory_order_relaxed);
	}
	/* seq_cst; pairs with the handler's increment of in_handler. */
	atomic_store(&sprobe_lx_g.active, 0);
	while (atomic_load(&sprobe_lx_g.in_handler))
		sched_yield();
	for (int tries = 0; tries < 100; tries++) {
		uint32_t before = atomic_load(&sprobe_lx_ch.cur);

		if (chain_read(&d) < 0)
			break;
		ksigaction(sig, &d, NULL);
		if (atomic_load(&sprobe_lx_ch.cur) == before)
			break;
	}
}

/* libc's struct sigaction <-> the kernel's, as glibc converts them (it
 * adds SA_RESTORER and its restorer on x86_64; ours carries the same). */
static void to_kernel(const struct sigaction *a, struct sprobe_ksigaction *k)
{
	k->handler = (uint64_t)(uintptr_t)a->sa_handler;
	k->flags = (uint64_t)(unsigned)a->sa_flags | (sprobe_lx_ch.ours.flags & SPROBE_SA_RESTORER);
	k->restorer = sprobe_lx_ch.ours.restorer;
	memcpy(&k->mask, &a->sa_mask, sizeof(k->mask));
	k->mask &= ~((1ull << (SIGKILL - 1)) | (1ull << (SIGSTOP - 1)));
}

static void to_libc(const struct sprobe_ksigaction *k, struct sigaction *a)
{
	memset(a, 0, sizeof(*a));
	a->sa_handler = (sighandler_t)(uintptr_t)k->handler;
	a->sa_flags = (int)(unsigned)k->flags;
	a->sa_restorer = (void (*)(void))(uintptr_t)k->restorer;
	memcpy(&a->sa_mask, &k->mask, sizeof(k->mask));
}

int sprobe_lx_chain_owns(int sig)
{
	return sig > 0 && sig == atomic_load_explicit(&sprobe_lx_ch.signo, memory_order_relaxed);
}

int sprobe_lx_chain_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sprobe_ksigaction d, k;

	if (!sprobe_lx_chain_owns(sig))
		return -ENOENT;
	if (chain_read(&d) < 0)
		return -EAGAIN;
	/* A raw install not seen yet is the program's current one. */
	front(&d);
	if (old)
		to_libc(&d, old);
	if (!act)
		return 0;
	to_kernel(act, &k);
	publish(&k);
	front(&k);
	return 0;
}

void sprobe_lx_chain_stats(uint64_t *forwarded, uint64_t *absorbed)
{
	if (forwarded)
		*forwarded = atomic_load_explicit(&sprobe_lx_ch.forwarded, memory_order_relaxed);
	if (absorbed)
		*absorbed = atomic_load_explicit(&sprobe_lx_ch.absorbed, memory_order_relaxed);
}
