/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The parked-thread workload (see chain.h). Built with -DZP_SUFFIX=_fp and
 * -fno-omit-frame-pointer, and with -DZP_SUFFIX=_nofp and
 * -fomit-frame-pointer (mk/zeropause.mk). Each chain function keeps a
 * frame of its own (a volatile buffer) and does work after its call, so
 * neither inlining nor a tail call removes it from the stack.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"

#ifndef ZP_SUFFIX
#error "build with -DZP_SUFFIX=_fp or _nofp"
#endif
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define NAME(x) CAT(x, ZP_SUFFIX)
#define STR2(x) #x
#define STR(x) STR2(x)

const char *const NAME(zp_chain_names)[3] = {
	"zp_chain_a" STR(ZP_SUFFIX), "zp_chain_b" STR(ZP_SUFFIX), "zp_chain_c" STR(ZP_SUFFIX),
};

/* One blocking call of the park's kind; returns when it returns. */
static __attribute__((noinline)) void block_once(struct zp_park *p)
{
	long r = 0;

	switch (p->kind) {
	case ZP_READ: {
		char ch;
		r = read(p->rfd, &ch, 1);
		break;
	}
	case ZP_FUTEX:
		r = syscall(SYS_futex, &p->word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
		if (r < 0 && errno == EAGAIN)
			r = 0;
		break;
	case ZP_POLL: {
		struct pollfd pfd = { .fd = p->rfd, .events = POLLIN };
		r = poll(&pfd, 1, 10000);
		break;
	}
	case ZP_NANOSLEEP: {
		struct timespec ts = { 10, 0 };
		r = nanosleep(&ts, NULL);
		break;
	}
	case ZP_SELECT: {
		fd_set rd;
		struct timeval tv = { 10, 0 };
		FD_ZERO(&rd);
		FD_SET(p->rfd, &rd);
		r = select(p->rfd + 1, &rd, NULL, NULL, &tv);
		break;
	}
	}
	if (r < 0 && errno == EINTR)
		atomic_fetch_add(&p->eintr, 1);
	atomic_fetch_add(&p->wakes, 1);
}

static __attribute__((noinline)) void blocker(struct zp_park *p)
{
	while (!atomic_load(&p->stop))
		block_once(p);
}

/* A fixed-size frame: a variable-length one would make the compiler keep
 * a frame pointer even in the _nofp build. */
#define FRAME(p)                                                         \
	volatile char pad[256];                                          \
	(void)(p);                                                       \
	memset((char *)pad, 0x5a, sizeof(pad))

__attribute__((noinline)) void NAME(zp_chain_c)(struct zp_park *p);
__attribute__((noinline)) void NAME(zp_chain_b)(struct zp_park *p);
__attribute__((noinline)) void NAME(zp_chain_a)(struct zp_park *p);

__attribute__((noinline)) void NAME(zp_chain_c)(struct zp_park *p)
{
	FRAME(p);
	blocker(p);
	__asm__ volatile("" ::"r"(pad) : "memory");
}

__attribute__((noinline)) void NAME(zp_chain_b)(struct zp_park *p)
{
	FRAME(p);
	NAME(zp_chain_c)(p);
	__asm__ volatile("" ::"r"(pad) : "memory");
}

__attribute__((noinline)) void NAME(zp_chain_a)(struct zp_park *p)
{
	FRAME(p);
	NAME(zp_chain_b)(p);
	__asm__ volatile("" ::"r"(pad) : "memory");
}

void *NAME(zp_park_main)(void *arg)
{
	struct zp_park *p = arg;

	/* Release; pairs with the acquire load of the starter. */
	atomic_store_explicit(&p->tid, (pid_t)syscall(SYS_gettid), memory_order_release);
	NAME(zp_chain_a)(p);
	return NULL;
}
