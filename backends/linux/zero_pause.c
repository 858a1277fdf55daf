/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Zero-pause capture of blocked threads (docs/capture.md "Zero-pause"):
 * read from outside, without a signal, the stack of a thread the kernel
 * shows blocked; and the self-test that decides whether this kernel's view
 * can be trusted.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "backends/linux/linux.h"
#include "userspace/common/fds.h"

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
 *      goes away meanwhile; stopped at the thread's TCB where one is
 *      recognised (zp_tcb_guess(): the thread pointer that bounds the
 *      handler's copy is not read from outside the thread, it is found).
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
		v[n++] = sprobe_lx_parse_hex(&p);
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

/* "run_ns wait_ns switches\n": /proc/self/task/T/schedstat, as the
 * kernel prints it. False for anything else, which is then never taken
 * for an unchanged thread. */
static bool zp_parse_schedstat(const char *p, uint64_t v[3])
{
	for (int k = 0; k < 3; k++) {
		const char *q = p;

		v[k] = 0;
		for (; *p >= '0' && *p <= '9'; p++)
			v[k] = v[k] * 10 + (uint64_t)(*p - '0');
		if (p == q || p - q > 19 || *p != (k < 2 ? ' ' : '\n'))
			return false;
		p++;
	}
	return *p == '\0';
}

/* Probe-side stack bounds: the rw mapping that holds sp, [lo, hi). No
 * thread pointer cap (it belongs to the target, not to us): the copy goes
 * to the mapping's end (capped), with process_vm_readv, so a neighbouring
 * mapping merged into the same line and unmapped meanwhile shortens the
 * copy instead of faulting the probe. */
static bool zp_bounds(const struct sprobe_capturer *c, uint64_t sp, uint64_t *lo, uint64_t *hi,
		      bool *growsdown)
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
	else if (r->growsdown && r->lo - sp <= sprobe_lx_g.growsdown_max)
		*lo = redzone_floor(sp, sp & ~(uint64_t)4095);
	else
		return false;
	*hi = r->hi;
	*growsdown = r->growsdown != 0;
	return true;
}

/*
 * Where the copy of a glibc thread's stack may stop. The top of the
 * mapping glibc allocated for a thread holds its static TLS and, above
 * it, its thread control block (struct pthread, 2.3 KiB here): no frame
 * lives there, the thread's first frame is below its TLS. In an idle
 * thread's copy (~7 KiB) that is a third of the bytes, and the copies are
 * kept from one capture to the next (docs/PERFORMANCE.md, "What the agent
 * costs its target"), so the copy stops at the TCB when it finds one, as
 * the handler's stops at its thread pointer (handler.c stack_bounds()).
 * glibc puts the TCB at one distance below the top of every stack it
 * allocates (allocate_stack(): the top minus the TCB's size, aligned):
 * zp_tcb_learn() reads it off the capturing thread's own stack, and every
 * copy checks the TCB it assumes (zp_is_tcb()): x86_64's tcbhead_t starts
 * with tcb and, two words on, self, both the block's own address. A stack
 * where the check fails (the main thread's, one the program allocated,
 * another libc) is copied to its mapping's end as before, by a second
 * read. x86_64 only: elsewhere the TCB has no such words (aarch64 keeps
 * struct pthread below the thread pointer) and the copy is as before.
 */
#if defined(__x86_64__) && defined(__GLIBC__)
static bool zp_is_tcb(const uint8_t *p, uint64_t addr)
{
	uint64_t w[3];

	memcpy(w, p, sizeof(w));
	return w[0] == addr && w[2] == addr;
}

static void zp_tcb_learn(struct sprobe_capturer *c)
{
	uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0), lo, hi;
	uint64_t self = (uint64_t)pthread_self();
	bool gd;

	/* Not from the main thread (its TCB is not on its stack) nor from a
	 * thread on a stack of its own making: nothing learnt, tried again
	 * at the next capture. */
	if (!zp_bounds(c, sp, &lo, &hi, &gd) || gd || self <= sp || self >= hi ||
	    hi - self > 65536 || (self & 7) ||
	    !zp_is_tcb((const uint8_t *)(uintptr_t)self, self))
		return;
	c->zp_tcb_off = hi - self;
}

/* The TCB a copy of [sp, hi) may stop at, or 0 (copy to hi). */
static uint64_t zp_tcb_guess(struct sprobe_capturer *c, uint64_t sp, uint64_t hi, bool gd)
{
	if (!c->zp_tcb_off)
		zp_tcb_learn(c);
	if (!c->zp_tcb_off || gd || hi - sp <= c->zp_tcb_off)
		return 0;
	return hi - c->zp_tcb_off;
}
#else
static bool zp_is_tcb(const uint8_t *p, uint64_t addr)
{
	(void)p;
	(void)addr;
	return false;
}

static uint64_t zp_tcb_guess(struct sprobe_capturer *c, uint64_t sp, uint64_t hi, bool gd)
{
	(void)c;
	(void)sp;
	(void)hi;
	(void)gd;
	return 0;
}
#endif

void sprobe_lx_zp_close(struct sprobe_capturer *c, struct zp_ent *e)
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
 * by sprobe_lx_new_threads()): entries of threads gone are closed, new threads get
 * an entry with no files yet. A merge of two sorted lists: O(threads).
 * Allocates only when the thread count grows past what was seen.
 */
int sprobe_lx_zp_sync(struct sprobe_capturer *c)
{
	uint32_t a = 0, b = 0, n = 0;

	if (c->nprev > c->zp_cap) {
		size_t cap = c->zp_cap, cap2 = c->zp_cap;
		int err = sprobe_lx_grow((void **)&c->zp, &cap, c->nprev, sizeof(*c->zp));

		if (!err)
			err = sprobe_lx_grow((void **)&c->zp_tmp, &cap2, c->nprev, sizeof(*c->zp));
		if (err)
			return err;
		c->zp_cap = (uint32_t)(cap < cap2 ? cap : cap2);
	}
	while (a < c->nzp || b < c->nprev) {
		if (b == c->nprev || (a < c->nzp && c->zp[a].tid < c->prev_tids[b])) {
			sprobe_lx_zp_close(c, &c->zp[a++]); /* exited */
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

struct zp_ent *sprobe_lx_zp_find(struct sprobe_capturer *c, pid_t tid)
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
static int zp_open1(const struct sprobe_capturer *c, pid_t tid, const char *file,
		    enum sprobe_fd_kind kind)
{
	char path[64];
	int h;

	/* Under the task directory held open: two components to walk, not
	 * five (/proc/self is a link). */
	snprintf(path, sizeof(path), "%d/%s", (int)tid, file);
	h = sprobe_fd__openat(c->task_fd, path, O_RDONLY, kind);
	if (h != -EBADF)
		return h;
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

/* Thread tid's CPU clock (its run time, sum_exec_runtime): one system
 * call, no file. false when it is gone. */
static bool zp_cpu_ns(pid_t tid, uint64_t *ns)
{
	struct timespec ts;

	/* The kernel's per-thread CPUCLOCK_SCHED clock id for tid. */
	if (clock_gettime((clockid_t)((~(unsigned)tid) << 3) | 6, &ts) < 0)
		return false;
	*ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	return true;
}

/* t becomes prev again: the thread has not run since prev's copy was
 * read, so its stack and registers are those. If that copy was unwound,
 * the slot's frame storage (which sample_init() leaves alone) still holds
 * its walk: the same bytes give the same frames, so it stays UNWOUND and
 * is not walked again, and the copy itself is not needed (a sprobe_snapshot__trim() may
 * have given it back: stack_len 0). A copy not unwound is reused only if
 * it is still in its slot. */
static void zp_keep(struct sprobe_snapshot *s, uint32_t i, struct sprobe_thread_sample *t,
		    const struct sprobe_thread_sample *prev, uint64_t entry)
{
	const uint8_t *buf = t->stack;

	memcpy(t, prev, offsetof(struct sprobe_thread_sample, frames));
	t->stack = buf;
	if (prev->stage != SPROBE_STAGE_UNWOUND) {
		t->nframes = 0;
		t->stage = SPROBE_STAGE_RAW;
	}
	t->entry_ns = entry;
	t->exit_ns = sprobe_now_ns();
	s->zp_kept[i] = 1; /* sprobe_snapshot__trim() may give the copy back */
	s->stats.zp_unchanged++;
}

/*
 * Try to capture thread t (sample i of s) without a signal. Returns true
 * when t now holds a zero-pause sample; false when the thread runs (not
 * counted) or its copy could not be trusted (stats.zp_fallback++): either
 * way t is untouched and takes the signal path.
 */
bool sprobe_lx_zp_try(struct sprobe_capturer *c, struct sprobe_snapshot *s, uint32_t i,
		      struct sprobe_thread_sample *t, const struct sprobe_thread_sample *prev)
{
	struct zp_ent tmp = { .tid = t->tid, .sys_fd = -1, .sched_fd = -1 }, *e = sprobe_lx_zp_find(c, t->tid);
	char a[128], b[128], sc[256];
	uint64_t args[6], sp, pc, lo, hi, entry, done, now3[3];
	ssize_t na, nb;
	long nr;
	bool ok = false, blocked = false, cached = true, gd = false;

	if (!e) {
		e = &tmp;
		cached = false;
	}
	bool reusable = prev && e != &tmp && e->last_ok && e->slot == i &&
			(prev->stage == SPROBE_STAGE_UNWOUND || prev->stack_len > 0);
	uint64_t cpu0 = 0;
	bool cpu_ok;

	/* Its CPU clock read before the copy's first schedstat read has
	 * not moved: it has not run since, so that copy stands. One system
	 * call and no file (opening a proc file costs more than reading it).
	 * Only while carrying (carry_max > 1): the clock alone is the weaker
	 * test, taken for the many-threads cost; without carrying the full
	 * check below stays the rule. */
	entry = sprobe_now_ns();
	cpu_ok = zp_cpu_ns(t->tid, &cpu0);
	if (reusable && c->carry_max > 1 && e->cpu_ok && cpu_ok && cpu0 == e->last_cpu) {
		zp_keep(s, i, t, prev, entry);
		return true;
	}
	if (e->sched_fd < 0) {
		/* Held between captures while the descriptor budget allows
		 * (userspace/fds.h), else opened for this use only: then the
		 * syscall file only when the thread changed (below), so an
		 * unchanged thread costs three system calls, not eight. */
		enum sprobe_fd_kind kind = cached ? SPROBE_FD_CACHE : SPROBE_FD_TRANSIENT;

		e->sys_fd = cached ? zp_open1(c, t->tid, "syscall", kind) : -1;
		e->sched_fd = !cached || e->sys_fd >= 0 ? zp_open1(c, t->tid, "schedstat", kind) : -1;
		if (cached && (e->sys_fd == -EDQUOT || e->sched_fd == -EDQUOT)) {
			sprobe_fd__close(e->sys_fd);
			sprobe_fd__close(e->sched_fd);
			cached = false;
			e->sys_fd = -1;
			e->sched_fd = zp_open1(c, t->tid, "schedstat", SPROBE_FD_TRANSIENT);
		}
		if (e->sched_fd < 0 || (cached && e->sys_fd < 0)) {
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
	na = zp_read(e->sched_fd, a, sizeof(a));
	if (na <= 0)
		goto out;
	if (reusable && zp_parse_schedstat(a, now3) && memcmp(now3, e->last, sizeof(now3)) == 0) {
		/* Not switched in since the schedstat read that closed its
		 * previous copy: one read instead of four. */
		zp_keep(s, i, t, prev, entry);
		ok = true;
		goto out; /* files opened for this use only are closed there */
	}
	e->last_ok = false;
	if (e->sys_fd < 0)
		e->sys_fd = zp_open1(c, t->tid, "syscall", SPROBE_FD_TRANSIENT);
	sc[0] = '\0';
	if (e->sys_fd < 0 || zp_read(e->sys_fd, sc, sizeof(sc)) <= 0 ||
	    !zp_parse_syscall(sc, &nr, args, &sp, &pc)) {
		e->was_running = cached && strncmp(sc, "running", 7) == 0;
		goto out; /* running (or gone): the signal path decides */
	}
	blocked = true;
	if (!pc || !zp_bounds(c, sp, &lo, &hi, &gd))
		goto out;
	if (c->before_zp_copy)
		c->before_zp_copy(c->hook_ctx, t->tid);
	{
		size_t above = hi > sp ? (size_t)(hi - sp) : 0, len;
		bool trunc = false;

		if (above > sprobe_lx_g.cap) {
			above = sprobe_lx_g.cap;
			trunc = true;
		}
		len = (size_t)(sp - lo) + above;
		/* First up to the TCB's first three words when there may be
		 * one (zp_tcb_guess()), then the rest only if it is not. */
		uint8_t *buf = sprobe_snapshot__buffer(s, i);
		uint64_t tcb = zp_tcb_guess(c, sp, hi, gd);
		size_t plen = tcb && tcb + 24 <= lo + len ? (size_t)(tcb + 24 - lo) : len;
		struct iovec local = { buf, plen };
		struct iovec remote = { (void *)(uintptr_t)lo, plen };
		ssize_t got = process_vm_readv(c->pid, &local, 1, &remote, 1, 0);

		if (plen < len && got == (ssize_t)plen) {
			if (zp_is_tcb(buf + (tcb - lo), tcb)) {
				len = (size_t)(tcb - lo);
				above = (size_t)(tcb - sp);
				got = (ssize_t)len;
				trunc = false; /* the stack ends below the TCB */
			} else {
				struct iovec l2 = { buf + plen, len - plen };
				struct iovec r2 = { (void *)(uintptr_t)(lo + plen), len - plen };
				ssize_t g2 = process_vm_readv(c->pid, &l2, 1, &r2, 1, 0);

				if (g2 > 0)
					got += g2;
			}
		}
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
	/* Remembered in the thread's entry even when its files are not
	 * held: the next check is then one read of schedstat. */
	if (e != &tmp && zp_parse_schedstat(b, e->last)) {
		e->slot = i;
		e->last_ok = true;
		/* Read before the first schedstat read: if it ran between
		 * the two, the copy was refused; if it runs later, the clock
		 * moves past it. */
		e->last_cpu = cpu0;
		e->cpu_ok = cpu_ok;
	}
out:
	if (!ok && blocked)
		s->stats.zp_fallback++;
	if (!ok && na <= 0 && cached) {
		/* Unreadable (the thread exited; its tid may come back as
		 * another thread): reopen next time. */
		sprobe_lx_zp_close(c, e);
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
	_Atomic pid_t tid;	/* release; pairs with the acquire in sprobe_lx_zp_selftest */
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
	atomic_store_explicit(&p->tid, sprobe_lx_gettid(), memory_order_release);
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
bool sprobe_lx_zp_selftest(struct sprobe_capturer *c)
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
		int sfd = zp_open1(c, tid, "syscall", SPROBE_FD_TRANSIENT);
		int tfd = zp_open1(c, tid, "schedstat", SPROBE_FD_TRANSIENT);
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
