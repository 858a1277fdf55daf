/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The registry of the descriptors the library holds in the host process
 * (contract in fds.h; what a program may do to them: docs/AGENT.md).
 *
 * State is static: one registry per process, as there is one capturer
 * and one agent. Entries are claimed and freed with atomics only, so the
 * dup2 wrapper can re-home an entry from any thread, even a program's
 * signal handler, without a lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#endif

#include "userspace/common/fds.h"

#define ENT_MAX 2048

enum { ENT_FREE = -1, ENT_CLAIMED = -2, ENT_LOST = -3 };

struct ent {
	/* The number, ENT_FREE, ENT_CLAIMED (being set up or torn down) or
	 * ENT_LOST (given up: users get -EBADF until it is closed), stored
	 * plus one (ent_fd() and friends) so that the zeroed .bss reads as
	 * ENT_FREE: the 64 KiB table then costs the pages of the entries in
	 * use, not all of them written at start (docs/PERFORMANCE.md, "What
	 * the agent costs its target"). Seq_cst stores and loads; see
	 * sprobe_fd__get() and rehome(). */
	_Atomic int fd1;
	/* Users between get and put. Seq_cst; pairs with rehome()'s wait. */
	_Atomic int pins;
	uint8_t kind;
	uint64_t dev, ino;
};

static struct ent ents[ENT_MAX];
static _Atomic int ents_init; /* 0, 1 initialising, 2 ready */
static _Atomic uint64_t owned_bits[SPROBE_FD_BITMAP_FDS / 64];
static _Atomic uint32_t n_keep, n_cache, n_lost;
static _Atomic uint64_t n_rehomed, n_refused_close;

/* Accessors of ent.fd1 in its own terms (the value minus one); each is
 * the seq_cst atomic operation it names. */
static inline int ent_fd(int h)
{
	return atomic_load(&ents[h].fd1) - 1;
}

static inline void ent_set(int h, int v)
{
	atomic_store(&ents[h].fd1, v + 1);
}

static inline int ent_xchg(int h, int v)
{
	return atomic_exchange(&ents[h].fd1, v + 1) - 1;
}

static inline bool ent_cas(int h, int *expect, int v)
{
	int e = *expect + 1;
	bool ok = atomic_compare_exchange_strong(&ents[h].fd1, &e, v + 1);

	*expect = e - 1;
	return ok;
}

static void ents_setup(void)
{
	int expect = 0;

	if (atomic_load(&ents_init) == 2)
		return;
	if (atomic_compare_exchange_strong(&ents_init, &expect, 1)) {
		/* Every entry is ENT_FREE already (zeroed fd1). */
		atomic_store(&ents_init, 2);
		return;
	}
	while (atomic_load(&ents_init) != 2)
		sched_yield();
}

/* The library's own closes bypass the agent's close wrapper (which would
 * wait for an allocation section this thread may hold). */
static int raw_close(int fd)
{
#ifdef SYS_close
	return (int)syscall(SYS_close, fd);
#else
	return close(fd);
#endif
}

/*
 * Allocation sections and guards. Between open() returning a number and
 * that number being marked in the bitmap, a program thread closing
 * numbers it never opened (a close loop) would close ours, and the
 * number could then go to a file of the program's that we would read and
 * close. So every allocation of a number by the library (open, pipe2,
 * F_DUPFD) runs in an allocation section, and the wrappers' check-then-act
 * (owned? then close/dup2) runs in a guard: a section waits until no
 * guard is active, a guard waits while a section is held. Dekker with
 * seq_cst: the section stores its owner then loads the guard count; a
 * guard increments the count then loads the owner; one of them sees the
 * other. A section is reentrant on its own thread (the pipe2 wrapper adopts
 * inside the libunwind section), and a guard on the section's own thread
 * passes. A section waits for guards at most GUARD_WAIT_NS (a program
 * thread that siglongjmp'd out of a handler that interrupted a wrapper
 * leaves its guard counted forever); past it, it goes on (counted).
 */
#define GUARD_WAIT_NS 10000000ull
static _Atomic uintptr_t alloc_owner;
static int alloc_depth; /* only its owner touches it */
static _Atomic int guards;
static _Atomic uint64_t n_guard_timeouts;

static uint64_t mono_ns_fds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sprobe_fd__alloc_begin(void)
{
	uintptr_t me = (uintptr_t)pthread_self(), z = 0;

	if (atomic_load(&alloc_owner) == me) {
		alloc_depth++;
		return;
	}
	while (!atomic_compare_exchange_weak(&alloc_owner, &z, me)) {
		z = 0;
		sched_yield();
	}
	alloc_depth = 1;
	if (atomic_load(&guards)) {
		uint64_t end = mono_ns_fds() + GUARD_WAIT_NS;

		while (atomic_load(&guards)) {
			if (mono_ns_fds() > end) {
				atomic_fetch_add_explicit(&n_guard_timeouts, 1, memory_order_relaxed);
				break;
			}
			sched_yield();
		}
	}
}

void sprobe_fd__alloc_end(void)
{
	if (--alloc_depth == 0)
		atomic_store(&alloc_owner, 0);
}

void sprobe_fd__guard_enter(void)
{
	uintptr_t me = (uintptr_t)pthread_self();

	for (;;) {
		atomic_fetch_add(&guards, 1);
		uintptr_t o = atomic_load(&alloc_owner);

		if (!o || o == me)
			return;
		atomic_fetch_sub(&guards, 1);
		while (atomic_load(&alloc_owner))
			sched_yield();
	}
}

void sprobe_fd__guard_exit(void)
{
	atomic_fetch_sub(&guards, 1);
}

static void bit_set(int fd, bool on)
{
	if (fd < 0 || fd >= SPROBE_FD_BITMAP_FDS)
		return;
	uint64_t m = 1ull << (fd % 64);
	/* Seq_cst; pairs with the relaxed test in sprobe_fd__owned(): a
	 * wrapper racing a registration may miss it, which is the same as
	 * the program calling close() a moment earlier. */
	if (on)
		atomic_fetch_or(&owned_bits[fd / 64], m);
	else
		atomic_fetch_and(&owned_bits[fd / 64], ~m);
}

bool sprobe_fd__owned(int fd)
{
	if (fd < 0 || fd >= SPROBE_FD_BITMAP_FDS)
		return false;
	return (atomic_load_explicit(&owned_bits[fd / 64], memory_order_relaxed) >> (fd % 64)) & 1;
}

int sprobe_fd__next_owned(unsigned lo, unsigned hi)
{
	if (hi >= SPROBE_FD_BITMAP_FDS)
		hi = SPROBE_FD_BITMAP_FDS - 1;
	for (unsigned fd = lo; fd <= hi; fd++) {
		uint64_t w = atomic_load_explicit(&owned_bits[fd / 64], memory_order_relaxed) >> (fd % 64);

		if (!w) {
			fd |= 63; /* rest of this word is clear */
			continue;
		}
		fd += (unsigned)__builtin_ctzll(w);
		if (fd <= hi)
			return (int)fd;
	}
	return -1;
}

static rlim_t soft_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return SPROBE_FD_TOP;
	return rl.rlim_cur;
}

static unsigned budget_for(rlim_t lim)
{
	rlim_t top = lim < SPROBE_FD_TOP ? lim : SPROBE_FD_TOP;

	return lim < SPROBE_FD_MIN_LIMIT_FOR_CACHE ? 0 : (unsigned)(top / 4);
}

unsigned sprobe_fd__budget(void)
{
	return budget_for(soft_limit());
}

/* The lowest number of the top region: KEEP and CACHE descriptors live in
 * [top - SPROBE_FD_MAX_KEEP - budget, top). */
static int region_base(rlim_t lim)
{
	rlim_t top = lim < SPROBE_FD_TOP ? lim : SPROBE_FD_TOP;
	rlim_t size = SPROBE_FD_MAX_KEEP + budget_for(lim);

	return top > size + 3 ? (int)(top - size) : 3;
}

/* Move fd into the top region (close-on-exec). Returns the new number,
 * or fd itself when the region is full (the program uses those numbers:
 * then ours stays where it is, still registered and close-on-exec). */
static int move_high(int fd)
{
	rlim_t lim = soft_limit();
	int base = region_base(lim), nfd;

	if (fd >= base)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, base);
	if (nfd < 0)
		return fd;
	raw_close(fd);
	return nfd;
}

static int claim(void)
{
	static _Atomic int hint;
	int start = atomic_load_explicit(&hint, memory_order_relaxed);

	ents_setup();
	for (int k = 0; k < ENT_MAX; k++) {
		int i = (start + k) % ENT_MAX, expect = ENT_FREE;

		if (ent_cas(i, &expect, ENT_CLAIMED)) {
			atomic_store_explicit(&hint, (i + 1) % ENT_MAX, memory_order_relaxed);
			return i;
		}
	}
	return -ENOSPC;
}

static int adopt_locked(int fd, enum sprobe_fd_kind kind)
{
	struct stat st;
	int h;

	if (fd < 0)
		return -EBADF;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || fstat(fd, &st) < 0) {
		int e = -errno;

		raw_close(fd);
		return e;
	}
	h = claim();
	if (h < 0) {
		raw_close(fd);
		return h;
	}
	if (kind != SPROBE_FD_TRANSIENT)
		fd = move_high(fd);
	ents[h].kind = (uint8_t)kind;
	ents[h].dev = (uint64_t)st.st_dev;
	ents[h].ino = (uint64_t)st.st_ino;
	bit_set(fd, true);
	if (kind == SPROBE_FD_KEEP)
		atomic_fetch_add(&n_keep, 1);
	else if (kind == SPROBE_FD_CACHE)
		atomic_fetch_add(&n_cache, 1);
	ent_set(h, fd); /* seq_cst: publishes kind, dev, ino */
	return h;
}

int sprobe_fd__adopt(int fd, enum sprobe_fd_kind kind)
{
	sprobe_fd__alloc_begin();
	int h = adopt_locked(fd, kind);
	sprobe_fd__alloc_end();
	return h;
}

int sprobe_fd__adopt_cache(int fd)
{
	int h, base;

	if (fd < 0)
		return -EBADF;
	if (atomic_load(&n_cache) >= sprobe_fd__budget()) {
		raw_close(fd);
		return -EDQUOT;
	}
	sprobe_fd__alloc_begin();
	base = region_base(soft_limit());
	if (fd < base) {
		int nfd = fcntl(fd, F_DUPFD_CLOEXEC, base);

		raw_close(fd);
		if (nfd < 0) {
			sprobe_fd__alloc_end();
			return -EMFILE;
		}
		fd = nfd;
	}
	h = adopt_locked(fd, SPROBE_FD_CACHE);
	sprobe_fd__alloc_end();
	return h;
}

int sprobe_fd__open(const char *path, int flags, mode_t mode, enum sprobe_fd_kind kind)
{
	int fd;

	if (kind == SPROBE_FD_CACHE) {
		/* Only the probe thread opens CACHE descriptors, so the
		 * check and the count cannot race each other. */
		if (atomic_load(&n_cache) >= sprobe_fd__budget())
			return -EDQUOT;
	}
	sprobe_fd__alloc_begin();
	do
		fd = open(path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	int h = fd < 0 ? -errno : adopt_locked(fd, kind);
	sprobe_fd__alloc_end();
	return h;
}

int sprobe_fd__openat(int dirh, const char *path, int flags, enum sprobe_fd_kind kind)
{
	int fd, dfd;

	if (kind == SPROBE_FD_CACHE && atomic_load(&n_cache) >= sprobe_fd__budget())
		return -EDQUOT; /* as sprobe_fd__open() */
	dfd = sprobe_fd__get(dirh);
	if (dfd < 0)
		return -EBADF;
	sprobe_fd__alloc_begin();
	do
		fd = openat(dfd, path, flags | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	int h = fd < 0 ? -errno : adopt_locked(fd, kind);
	sprobe_fd__alloc_end();
	sprobe_fd__put(dirh);
	return h;
}

int sprobe_fd__open_file(const char *path)
{
	int h = sprobe_fd__open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, SPROBE_FD_TRANSIENT);
	int fd = sprobe_fd__get(h);
	struct stat st;

	if (fd < 0)
		return h;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		sprobe_fd__done(h);
		return -EINVAL;
	}
	sprobe_fd__put(h);
	return h;
}

int sprobe_fd__read_file(const char *path, char **buf, size_t *len)
{
	int h = sprobe_fd__open(path, O_RDONLY, 0, SPROBE_FD_TRANSIENT);
	int fd = sprobe_fd__get(h), err = 0;
	size_t cap = 16384, off = 0;
	char *b = NULL;

	if (fd < 0) {
		sprobe_fd__close(h);
		return fd;
	}
	for (;;) {
		if (!b || off + 4096 > cap) {
			char *nb = realloc(b, b ? cap *= 2 : cap);

			if (!nb) {
				err = -ENOMEM;
				break;
			}
			b = nb;
		}
		ssize_t n = read(fd, b + off, cap - off - 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	sprobe_fd__done(h);
	if (err) {
		free(b);
		return err;
	}
	b[off] = '\0';
	*buf = b;
	*len = off;
	return 0;
}

int sprobe_fd__get(int h)
{
	int fd;

	if (h < 0)
		return h < -4095 ? -EBADF : h; /* a failed open's error */
	if (h >= ENT_MAX)
		return -EBADF;
	atomic_fetch_add(&ents[h].pins, 1); /* seq_cst; pairs with rehome()'s wait */
	fd = ent_fd(h);
	if (fd < 0) {
		atomic_fetch_sub(&ents[h].pins, 1);
		return -EBADF;
	}
	return fd;
}

void sprobe_fd__put(int h)
{
	if (h >= 0 && h < ENT_MAX)
		atomic_fetch_sub(&ents[h].pins, 1); /* seq_cst; pairs with rehome()'s wait */
}

static void mark_lost(int h, int fd)
{
	int expect = fd;

	if (ent_cas(h, &expect, ENT_LOST)) {
		bit_set(fd, false);
		atomic_fetch_add(&n_lost, 1);
	}
}

int sprobe_fd__verify(int h)
{
	struct stat st;
	int fd = sprobe_fd__get(h);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		int e = -errno;

		sprobe_fd__put(h);
		if (e == -EBADF)
			mark_lost(h, fd);
		return e;
	}
	sprobe_fd__put(h);
	if ((uint64_t)st.st_dev != ents[h].dev || (uint64_t)st.st_ino != ents[h].ino) {
		mark_lost(h, fd);
		return -ESTALE;
	}
	return 0;
}

void sprobe_fd__close(int h)
{
	struct stat st;
	int fd;

	if (h < 0 || h >= ENT_MAX)
		return;
	fd = ent_xchg(h, ENT_CLAIMED);
	if (fd == ENT_FREE || fd == ENT_CLAIMED) {
		/* not ours to free (double close): leave it as it was */
		if (fd == ENT_FREE)
			ent_set(h, ENT_FREE);
		return;
	}
	/* Nobody may use the number while it goes away. */
	while (atomic_load(&ents[h].pins))
		sched_yield();
	sprobe_fd__alloc_begin(); /* no wrapper acts on the number meanwhile */
	if (fd >= 0) {
		/* Unmark first: once closed, the number may be the program's,
		 * and its own close() must then reach the kernel. */
		bit_set(fd, false);
		/* Close only our file: after a raw close(2) and a reuse the
		 * number is the program's. */
		if (fstat(fd, &st) == 0 && (uint64_t)st.st_dev == ents[h].dev &&
		    (uint64_t)st.st_ino == ents[h].ino)
			raw_close(fd);
	} else {
		atomic_fetch_sub(&n_lost, 1);
	}
	sprobe_fd__alloc_end();
	if (ents[h].kind == SPROBE_FD_KEEP)
		atomic_fetch_sub(&n_keep, 1);
	else if (ents[h].kind == SPROBE_FD_CACHE)
		atomic_fetch_sub(&n_cache, 1);
	ents[h].kind = 0;
	ent_set(h, ENT_FREE);
}

void sprobe_fd__atfork_child(void)
{
	if (atomic_load(&ents_init) != 2)
		return;
	/* Only the forking thread lives on: the sections, guards and pins
	 * other threads held at fork() are nobody's now. */
	atomic_store(&alloc_owner, 0);
	alloc_depth = 0;
	atomic_store(&guards, 0);
	for (int h = 0; h < ENT_MAX; h++) {
		int fd = ent_fd(h);

		atomic_store(&ents[h].pins, 0);
		if (fd == ENT_FREE || ents[h].kind == SPROBE_FD_FOREIGN)
			continue;
		if (fd >= 0) {
			struct stat st;

			bit_set(fd, false);
			if (fstat(fd, &st) == 0 && (uint64_t)st.st_dev == ents[h].dev &&
			    (uint64_t)st.st_ino == ents[h].ino)
				raw_close(fd);
		}
		ents[h].kind = 0;
		ent_set(h, ENT_FREE);
	}
	atomic_store(&n_keep, 0);
	atomic_store(&n_cache, 0);
	atomic_store(&n_lost, 0);
}

/* The thread inside foreign_begin/end (0: none). pthread_self() as an
 * integer: a thread's own value is stable and no live thread shares it. */
static _Atomic uintptr_t foreign_thread;

void sprobe_fd__foreign_begin(void)
{
	sprobe_fd__alloc_begin(); /* what the other library opens is ours from the start */
	atomic_store(&foreign_thread, (uintptr_t)pthread_self());
}

void sprobe_fd__foreign_end(void)
{
	atomic_store(&foreign_thread, 0);
	sprobe_fd__alloc_end();
}

bool sprobe_fd__foreign_active(void)
{
	uintptr_t t = atomic_load_explicit(&foreign_thread, memory_order_relaxed);

	return t && t == (uintptr_t)pthread_self();
}

int sprobe_fd__adopt_foreign(int fd)
{
	int h, nfd;

	if (fd < 0)
		return fd;
	sprobe_fd__alloc_begin();
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, region_base(soft_limit()));
	if (nfd >= 0) {
		raw_close(fd);
		fd = nfd;
	}
	h = adopt_locked(fd, SPROBE_FD_FOREIGN);
	sprobe_fd__alloc_end();
	if (h < 0)
		return -1; /* adopt closed it: fd is gone */
	return ent_fd(h);
}

static int rehome_locked(int fd);

int sprobe_fd__rehome(int fd)
{
	if (!sprobe_fd__owned(fd) || atomic_load(&ents_init) != 2)
		return 0;
	sprobe_fd__alloc_begin(); /* a new number (F_DUPFD) is allocated */
	int r = rehome_locked(fd);
	sprobe_fd__alloc_end();
	return r;
}

static int rehome_locked(int fd)
{
	int h = -1, nfd;

	for (int i = 0; i < ENT_MAX; i++) {
		if (ent_fd(i) == fd) {
			h = i;
			break;
		}
	}
	if (h < 0)
		return 0; /* unregistered meanwhile */
	if (ents[h].kind == SPROBE_FD_FOREIGN) {
		/* The other library keeps using this number: nothing to move.
		 * Give it up; the program's call replaces it. */
		mark_lost(h, fd);
		return 0;
	}
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, region_base(soft_limit()));
	if (nfd < 0)
		nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (nfd < 0) {
		int e = -errno;

		mark_lost(h, fd);
		while (atomic_load(&ents[h].pins))
			sched_yield();
		return e;
	}
	bit_set(nfd, true);
	int expect = fd;
	if (!ent_cas(h, &expect, nfd)) {
		/* closed or lost meanwhile: the copy is nobody's */
		bit_set(nfd, false);
		raw_close(nfd);
		return 0;
	}
	bit_set(fd, false);
	/* Users that loaded the old number are draining; new ones get nfd. */
	while (atomic_load(&ents[h].pins))
		sched_yield();
	atomic_fetch_add_explicit(&n_rehomed, 1, memory_order_relaxed);
	return 0;
}

void sprobe_fd__count_refused_close(void)
{
	atomic_fetch_add_explicit(&n_refused_close, 1, memory_order_relaxed);
}

void sprobe_fd__stats(struct sprobe_fd_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (atomic_load(&ents_init) == 2)
		for (int i = 0; i < ENT_MAX; i++)
			if (atomic_load_explicit(&ents[i].fd1, memory_order_relaxed) - 1 >= 0)
				out->held++;
	out->keep = atomic_load(&n_keep);
	out->cache = atomic_load(&n_cache);
	out->lost = atomic_load(&n_lost);
	out->rehomed = atomic_load(&n_rehomed);
	out->refused_close = atomic_load(&n_refused_close);
}
