/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * macOS capture backend: Mach thread suspension, x86_64 and arm64.
 *
 * STATUS: written to the documented Mach API and reviewed line by line, but
 * never compiled against the real SDK nor run on these machines (no macOS
 * host or SDK exists here). `make check-macos` only syntax-checks it against
 * tests/macos_sdk_standin.h; .github/workflows/ci.yml builds and tests it on
 * real macOS runners. See docs/MACOS.md.
 *
 * The suspend-window rule (backends/linux/linux.h states it in full): a suspended
 * thread may hold any lock, malloc's and dyld's included, so between
 * thread_suspend() and thread_resume() this file does only this:
 * thread_get_state() into a stack variable, bounds arithmetic, one
 * mach_vm_read_overwrite() into the snapshot's preallocated buffer, and
 * mach_absolute_time(). Everything
 * that can lock or allocate happens before the first window or after the
 * last: task_threads() (its port array is allocated by MIG), stack bounds
 * from libpthread (which takes its list lock), thread ids, the port and
 * array deallocation, clock conversion, filling the sample.
 *
 * Why mach_vm_read_overwrite and not memcpy: suspension only stops a thread
 * at its next return to user space. A thread suspended inside
 * __bsdthread_terminate keeps running in the kernel, which unmaps its stack
 * before the thread dies; a memcpy from that stack would crash the process.
 * The kernel copy fails with an error instead (Crashpad and PLCrashReporter
 * read memory the same way for the same reason).
 *
 * Lazy binding: an image built for macOS 11 binds imported functions on
 * their first call, and dyld's binder takes dyld's lock. A call made for the
 * first time inside a window could block forever on a lock held by the
 * suspended thread. bind_window_calls() therefore calls every function the
 * window uses once, before any thread is suspended (Chromium's
 * SuspendableThreadDelegateMac does the same with thread_get_state).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <mach/mach.h>
#include <mach/mach_time.h>
#include <mach/mach_vm.h>

#include "backends/backend.h"

#if defined(__x86_64__)
typedef x86_thread_state64_t macos_state_t;
#define MACOS_STATE_FLAVOR x86_THREAD_STATE64
#define MACOS_STATE_COUNT x86_THREAD_STATE64_COUNT
#define MACOS_SP(st) ((uint64_t)(st).__rsp)
#elif defined(__aarch64__) || defined(__arm64__)
typedef arm_thread_state64_t macos_state_t;
#define MACOS_STATE_FLAVOR ARM_THREAD_STATE64
#define MACOS_STATE_COUNT ARM_THREAD_STATE64_COUNT
/* The SDK's accessors: on arm64e they strip pointer authentication. */
#define MACOS_SP(st) ((uint64_t)arm_thread_state64_get_sp(st))
/* Signed return addresses (arm64e system code) carry a signature above
 * the 47-bit user address space; drop it. An unsigned value is unchanged. */
#define MACOS_STRIP_PAC(v) ((uint64_t)(v) & 0x00007fffffffffffull)
#else
#error "backends/macos/capture.c supports x86_64 and arm64 only"
#endif

/* What the probe learns about a sibling before its window. */
struct macos_target {
	thread_act_t port;	/* send right from task_threads() */
	uint64_t lo, hi;	/* stack bounds [lo, hi); hi is the top */
};

struct sprobe_capturer {
	size_t max_stack_bytes;
	uint32_t max_threads;		/* length of targets[] */
	mach_timebase_info_data_t timebase;
	pthread_mutex_t lock;		/* serialises captures on this capturer */
	struct macos_target *targets;	/* preallocated: captures allocate nothing */
};

static int kern_errno(kern_return_t kr)
{
	switch (kr) {
	case KERN_SUCCESS:
		return 0;
	case KERN_INVALID_ARGUMENT:
		return -EINVAL;
	case KERN_RESOURCE_SHORTAGE:
		return -ENOMEM;
	case KERN_NO_ACCESS:
		return -EPERM;
	default:
		return -EIO;
	}
}

/* A thread port that no longer names a live thread. */
static bool kern_thread_gone(kern_return_t kr)
{
	return kr == KERN_TERMINATED || kr == KERN_INVALID_ARGUMENT ||
	       kr == MACH_SEND_INVALID_DEST;
}

static uint64_t ticks_to_ns(const struct sprobe_capturer *c, uint64_t ticks)
{
	uint64_t numer = c->timebase.numer, denom = c->timebase.denom;

	/* Split so ticks * numer cannot overflow (numer is 125 on arm64). */
	return ticks / denom * numer + ticks % denom * numer / denom;
}

struct sprobe_capturer *sprobe_capturer__new(const struct sprobe_capture_opts *opts)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o) };
	struct sprobe_capturer *c;

	if (opts) {
		if (opts->sz < offsetof(struct sprobe_capture_opts, method) + sizeof(opts->method)) {
			errno = EINVAL;
			return NULL;
		}
		memcpy(&o, opts, opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	}
	/* Mach suspension is the only method here; a signal number or the
	 * seed's process_vm_readv strategy cannot be honoured. */
	if (o.signo != 0 || (o.method != SPROBE_METHOD_NONE && o.method != SPROBE_METHOD_SIGNAL &&
			     o.method != SPROBE_METHOD_SUSPEND) ||
	    o.max_stack_bytes > SPROBE_MAX_STACK_BYTES || o.max_threads > SPROBE_MAX_THREADS_LIMIT) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->max_stack_bytes = o.max_stack_bytes ? o.max_stack_bytes : SPROBE_MAX_STACK_BYTES;
	c->max_threads = o.max_threads ? o.max_threads : SPROBE_DEFAULT_MAX_THREADS;
	c->targets = calloc(c->max_threads, sizeof(*c->targets));
	if (!c->targets || mach_timebase_info(&c->timebase) != KERN_SUCCESS ||
	    c->timebase.denom == 0 || pthread_mutex_init(&c->lock, NULL) != 0) {
		free(c->targets);
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

void sprobe_capturer__zp_key(char *buf, size_t len)
{
	if (len)
		buf[0] = '\0'; /* no zero-pause here */
}

int sprobe_capturer__forget(struct sprobe_capturer *c)
{
	(void)c;
	return -ENOTSUP; /* the agent follows fork() children on Linux only */
}

void sprobe_capturer__free(struct sprobe_capturer *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c->targets);
	free(c);
}

/* No signal is used on macOS: 0. */
int sprobe_capturer__signo(const struct sprobe_capturer *c)
{
	return c ? 0 : -EINVAL;
}

/* The thread's system-wide id (what pthread_threadid_np() returns),
 * truncated to the pid_t of struct sprobe_thread_sample; 0 if unknown. */
static pid_t thread_id_of(thread_act_t port)
{
	thread_identifier_info_data_t info;
	mach_msg_type_number_t count = THREAD_IDENTIFIER_INFO_COUNT;

	if (thread_info(port, THREAD_IDENTIFIER_INFO, (thread_info_t)&info, &count) != KERN_SUCCESS)
		return 0;
	return (pid_t)info.thread_id;
}

/*
 * Stack bounds from libpthread, outside any window. pthread_get_stackaddr_np
 * and _stacksize_np validate the pthread_t against the thread list under
 * its lock, so a thread that exits meanwhile yields a bogus small value
 * (they return ESRCH cast to a pointer), never a read of freed memory; that
 * is what the "hi > size" test rejects.
 * Returns 0, or -ESRCH (no pthread for this port, or it exited).
 */
static int stack_bounds(thread_act_t port, uint64_t *lo, uint64_t *hi)
{
	pthread_t p = pthread_from_mach_thread_np(port);
	uint64_t top, size;

	if (!p)
		return -ESRCH;
	top = (uint64_t)(uintptr_t)pthread_get_stackaddr_np(p);
	size = (uint64_t)pthread_get_stacksize_np(p);
	if (size < 4096 || top <= size)
		return -ESRCH;
	*lo = top - size;
	*hi = top;
	return 0;
}

/*
 * Call everything the window calls once, before the first suspension, so
 * lazy binding (and MIG's per-thread reply port) is settled while no thread
 * is stopped. Harmless calls only, all on the probe's own thread: reading
 * our own state, resuming ourselves (fails: our suspend count is 0, and
 * changes nothing), copying one byte of our own stack.
 * thread_suspend binds on its first call, before that call suspends.
 */
static void bind_window_calls(thread_act_t self, uint8_t *scratch)
{
	macos_state_t st;
	mach_msg_type_number_t count = MACOS_STATE_COUNT;
	mach_vm_size_t got = 0;
	uint8_t byte = 0;

	(void)thread_get_state(self, MACOS_STATE_FLAVOR, (thread_state_t)&st, &count);
	(void)thread_resume(self);
	(void)mach_absolute_time();
	(void)mach_vm_read_overwrite(mach_task_self(), (mach_vm_address_t)(uintptr_t)&byte, 1,
				     (mach_vm_address_t)(uintptr_t)scratch, &got);
}

/*
 * The window for one thread. ASYNC-SIGNAL-SAFE: no malloc, locks or stdio;
 * only Mach calls into the kernel and arithmetic. @buf is the slot's
 * preallocated buffer (cap + SPROBE_REDZONE bytes at least).
 * Returns SPROBE_DROP_NONE with *st, *addr, *len, *truncated filled, or the
 * reason the thread is dropped. *t_in and *t_out are always set.
 */
static uint32_t window(task_t task, const struct macos_target *tg, size_t cap, uint8_t *buf,
		       macos_state_t *st, uint64_t *addr, size_t *len, bool *truncated,
		       uint64_t *t_in, uint64_t *t_out)
{
	mach_msg_type_number_t count = MACOS_STATE_COUNT;
	uint32_t drop = SPROBE_DROP_NONE;
	mach_vm_size_t got = 0;
	kern_return_t kr;
	uint64_t sp, from, want;

	*t_in = mach_absolute_time();
	kr = thread_suspend(tg->port);
	if (kr != KERN_SUCCESS) {
		*t_out = mach_absolute_time();
		return kern_thread_gone(kr) ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	}
	/* thread_suspend() returns once the thread is off-CPU; its user
	 * registers are the ones it will resume with. */
	kr = thread_get_state(tg->port, MACOS_STATE_FLAVOR, (thread_state_t)st, &count);
	if (kr != KERN_SUCCESS) {
		drop = kern_thread_gone(kr) ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	} else {
		sp = MACOS_SP(*st);
		if (sp < tg->lo || sp > tg->hi) {
			/* sigaltstack, a coroutine stack, or stale bounds:
			 * never read outside the stack we were told of. */
			drop = SPROBE_DROP_NO_STACK;
		} else {
			/* Include the x86_64 red zone (0 on arm64). */
			from = sp - tg->lo >= SPROBE_REDZONE ? sp - SPROBE_REDZONE : tg->lo;
			want = tg->hi - from;
			if (want > cap + (sp - from))
				want = cap + (sp - from);
			*truncated = tg->hi - sp > cap;
			kr = mach_vm_read_overwrite(task, (mach_vm_address_t)from, want,
						    (mach_vm_address_t)(uintptr_t)buf, &got);
			if (kr != KERN_SUCCESS || got != want)
				drop = SPROBE_DROP_NO_STACK;	/* unmapped: exiting thread */
			*addr = from;
			*len = (size_t)got;
		}
	}
	kr = thread_resume(tg->port);
	*t_out = mach_absolute_time();
	if (kr != KERN_SUCCESS && drop == SPROBE_DROP_NONE)
		drop = kern_thread_gone(kr) ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	return drop;
}

/* Registers into the DWARF-numbered regs[] (see SPROBE_NREGS). */
static void fill_registers(struct sprobe_thread_sample *t, const macos_state_t *st)
{
#if defined(__x86_64__)
	const uint64_t r[17] = {
		st->__rax, st->__rdx, st->__rcx, st->__rbx, st->__rsi, st->__rdi,
		st->__rbp, st->__rsp, st->__r8, st->__r9, st->__r10, st->__r11,
		st->__r12, st->__r13, st->__r14, st->__r15, st->__rip,
	};

	memcpy(t->regs, r, sizeof(r));
	t->ip = st->__rip;
	t->sp = st->__rsp;
	t->fp = st->__rbp;
	t->has_lr = false;
#else
	for (int i = 0; i < 29; i++)
		t->regs[i] = st->__x[i];
	t->fp = (uint64_t)arm_thread_state64_get_fp(*st);
	t->lr = MACOS_STRIP_PAC(arm_thread_state64_get_lr(*st));
	t->sp = (uint64_t)arm_thread_state64_get_sp(*st);
	t->ip = (uint64_t)arm_thread_state64_get_pc(*st);
	t->has_lr = true;
	t->regs[29] = t->fp;
	t->regs[30] = t->lr;
	t->regs[31] = t->sp;
	t->regs[32] = t->ip;
#endif
}

int sprobe_backend__capture(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	mach_port_t task = mach_task_self();
	thread_act_t self, *list = NULL;
	mach_msg_type_number_t nlist = 0;
	uint32_t ntargets = 0, slots;
	size_t cap;
	kern_return_t kr;

	if (!c || !s)
		return -EINVAL;
	cap = c->max_stack_bytes < s->max_stack_bytes ? c->max_stack_bytes : s->max_stack_bytes;
	slots = c->max_threads < s->max_threads ? c->max_threads : s->max_threads;

	pthread_mutex_lock(&c->lock);
	self = mach_thread_self();	/* a send right of our own: released below */
	kr = task_threads(task, &list, &nlist);
	if (kr != KERN_SUCCESS) {
		mach_port_deallocate(task, self);
		pthread_mutex_unlock(&c->lock);
		return kern_errno(kr);
	}

	/* Before any window: slots, ids and stack bounds for every sibling. */
	for (mach_msg_type_number_t i = 0; i < nlist; i++) {
		struct sprobe_thread_sample *t;
		struct macos_target *tg;

		if (list[i] == self)	/* one name per port in our space */
			continue;
		s->stats.threads_total++;
		if (ntargets >= slots) {
			sprobe_snapshot__drop(s, NULL, SPROBE_DROP_NO_SLOT);
			continue;
		}
		t = sprobe_snapshot__sample_init(s, ntargets, thread_id_of(list[i]));
		t->method = SPROBE_METHOD_SUSPEND;
		tg = &c->targets[ntargets];
		tg->port = list[i];
		ntargets++;
		if (stack_bounds(list[i], &tg->lo, &tg->hi) < 0) {
			tg->port = MACH_PORT_NULL;	/* no window for it */
			sprobe_snapshot__drop(s, t, SPROBE_DROP_NO_STACK);
		}
	}

	if (ntargets > 0)
		bind_window_calls(self, sprobe_snapshot__buffer(s, 0));

	/* One window at a time: a thread is stopped only while it is copied. */
	for (uint32_t j = 0; j < ntargets; j++) {
		const struct macos_target *tg = &c->targets[j];
		struct sprobe_thread_sample *t = &s->samples[j];
		macos_state_t st;
		uint64_t addr = 0, t_in, t_out;
		size_t len = 0;
		bool truncated = false;
		uint32_t drop;

		if (tg->port == MACH_PORT_NULL)
			continue;
		drop = window(task, tg, cap, sprobe_snapshot__buffer(s, j), &st, &addr, &len,
			      &truncated, &t_in, &t_out);
		/* Every thread runs again from here on. */
		if (drop != SPROBE_DROP_NONE) {
			sprobe_snapshot__drop(s, t, drop);
			continue;
		}
		fill_registers(t, &st);
		t->stack_addr = addr;
		t->stack_len = len;
		t->stack_top = tg->hi;
		t->truncated = truncated;
		t->entry_ns = ticks_to_ns(c, t_in);
		t->exit_ns = ticks_to_ns(c, t_out);
		t->stage = SPROBE_STAGE_RAW;
	}

	/* After the last window: release every right and the array. */
	for (mach_msg_type_number_t i = 0; i < nlist; i++)
		mach_port_deallocate(task, list[i]);
	vm_deallocate(task, (vm_address_t)list, (vm_size_t)nlist * sizeof(*list));
	mach_port_deallocate(task, self);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int sprobe_backend__task_dir(const struct sprobe_capturer *c)
{
	(void)c;
	return -ENOTSUP;
}
