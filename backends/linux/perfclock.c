/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * CPU mode's perf-event engine (SPROBE_CPU_ENGINE_PERF): one software
 * task-clock event per thread, whose overflow the kernel sends as the
 * capture signal to that thread. The collect loop that drives it is
 * cputime.c's; this file opens, re-times, enables and closes the events.
 *
 * Why not the CPU timers: Linux checks POSIX CPU timers at its scheduler
 * tick only (run_posix_cpu_timers()), so every sample lands on a tick and
 * a workload whose phases line up with the tick is always seen at the same
 * phase (a 3:1 ms split came out 594:1). A task-clock event is driven
 * by an hrtimer that counts the thread's own runtime and is carried across
 * context switches: it overflows after exactly one period of CPU,
 * wherever that falls.
 *
 * Delivery: O_ASYNC + F_SETSIG(capture signal) + F_SETOWN_EX(F_OWNER_TID)
 * make every overflow queue one real-time signal (si_code POLL_IN, si_fd =
 * the event's number) to the thread itself; the handler finds its slot
 * through sprobe_lx_g.perf_map (linux.h). No ring buffer is mapped and
 * PERF_EVENT_IOC_REFRESH is never used (it hangs on some 6.16/6.17
 * kernels, async-profiler's notes): the event stays enabled and signals
 * each period. A queue overflow (RLIMIT_SIGPENDING, a thread that blocks
 * the signal for long) would make the kernel send a plain SIGIO instead,
 * so a thread found blocking the signal has its event disabled
 * (sprobe_capturer__cpu_usage(), cputime.c).
 *
 * Descriptors: each event is a CACHE descriptor of the registry
 * (userspace/common/fds.h), in the top region and within its budget
 * (sprobe_fd__adopt_cache()); a thread whose event does not fit gets a CPU
 * timer (cputime.c) and is counted, never silently left out.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "backends/linux/linux.h"
#include "userspace/common/fds.h"

static void attr_init(struct perf_event_attr *a, uint64_t period_ns, bool user_only)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_TASK_CLOCK; /* ns of the thread's runtime */
	a->sample_period = period_ns;
	a->disabled = 1;
	a->exclude_kernel = user_only;
	a->exclude_hv = user_only;
}

/* perf_event_open for thread tid (0: the caller) inside an allocation
 * section (fds.h): the caller registers the number before any wrapper of
 * a program thread can act on it. A descriptor or -errno. */
static int open_event(const struct perf_event_attr *a, pid_t tid)
{
	long fd = syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

/* Route fd's overflows to thread tid as signal signo. 0 or -errno. */
static int route(int fd, pid_t tid, int signo)
{
	struct f_owner_ex ex = { .type = F_OWNER_TID, .pid = tid };
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_ASYNC) < 0 || fcntl(fd, F_SETSIG, signo) < 0 ||
	    fcntl(fd, F_SETOWN_EX, &ex) < 0)
		return -errno;
	return 0;
}

static int read_paranoid(void)
{
	char *buf;
	size_t len;
	int v = -100;

	if (sprobe_fd__read_file("/proc/sys/kernel/perf_event_paranoid", &buf, &len) == 0) {
		v = atoi(buf);
		free(buf);
	}
	return v;
}

/*
 * Can this process have a task-clock event on its own threads, routed as
 * a signal? Opens one on the calling thread (kernel and user time; user
 * time only if that is refused) and routes it, then closes it. 0 (with
 * c->perf_user_only set), or -errno with why filled.
 */
int sprobe_lx_perf_probe(struct sprobe_capturer *c, char *why, size_t len)
{
	struct perf_event_attr a;
	int fd, h, err, par = read_paranoid();

	attr_init(&a, 10000000, false);
	sprobe_fd__alloc_begin();
	fd = open_event(&a, 0);
	c->perf_user_only = false;
	if (fd == -EACCES || fd == -EPERM) {
		attr_init(&a, 10000000, true);
		fd = open_event(&a, 0);
		c->perf_user_only = true;
	}
	h = fd >= 0 ? sprobe_fd__adopt(fd, SPROBE_FD_TRANSIENT) : fd;
	sprobe_fd__alloc_end();
	if (h < 0) {
		err = h;
		if (err == -EACCES || err == -EPERM)
			snprintf(why, len,
				 "perf events not allowed (%s; perf_event_paranoid=%d; "
				 "kernel.perf_event_paranoid<=2 or CAP_PERFMON allows them, "
				 "unless a seccomp profile forbids perf_event_open)",
				 strerror(-err), par);
		else
			snprintf(why, len, "no software perf events here (perf_event_open: %s)",
				 strerror(-err));
		return err;
	}
	fd = sprobe_fd__get(h);
	err = fd < 0 ? fd : route(fd, sprobe_lx_gettid(), c->signo);
	if (fd >= 0)
		sprobe_fd__put(h);
	sprobe_fd__close(h);
	if (err)
		snprintf(why, len, "perf events cannot signal a thread (fcntl: %s)", strerror(-err));
	return err;
}

/*
 * Give slot i (thread tid, generation gen) its event, enabled. 0, or
 * -errno: -EDQUOT/-EMFILE (no descriptor in the registry's budget or top
 * region: the caller uses a timer), -ESRCH (exited), others.
 */
int sprobe_lx_perf_open(struct sprobe_capturer *c, pid_t tid, uint32_t i, uint64_t gen)
{
	struct perf_event_attr a;
	int fd, h, num, err;

	_Atomic uint64_t *map = atomic_load(&sprobe_lx_g.perf_map);

	if (!map)
		return -ENOMEM;
	attr_init(&a, c->cpu_interval_ns, c->perf_user_only);
	sprobe_fd__alloc_begin();
	fd = open_event(&a, tid);
	h = fd >= 0 ? sprobe_fd__adopt_cache(fd) : fd;
	sprobe_fd__alloc_end();
	if (h < 0)
		return h;
	num = sprobe_fd__get(h);
	if (num < 0 || (uint32_t)num >= sprobe_lx_g.perf_nmap) {
		err = num < 0 ? num : -EMFILE;
		goto fail;
	}
	err = route(num, tid, c->signo);
	if (err)
		goto fail;
	atomic_store_explicit(&sprobe_lx_g.perf_tid[num], tid, memory_order_relaxed);
	/* Release; pairs with the handler's acquire load of perf_map[fd]. */
	atomic_store_explicit(&map[num], gen << 16 | i, memory_order_release);
	if (ioctl(num, PERF_EVENT_IOC_ENABLE, 0) < 0) {
		err = -errno;
		atomic_store(&map[num], SPROBE_LX_PERF_STALE);
		goto fail;
	}
	sprobe_fd__put(h);
	c->perf_h[i] = h;
	c->perf_fd[i] = num;
	return 0;
fail:
	if (num >= 0)
		sprobe_fd__put(h);
	sprobe_fd__close(h);
	return err;
}

/* Close slot i's event (signals still queued find perf_map STALE or
 * another thread's entry, and the handler swallows them: linux.h). A child the program forked without
 * exec holds the same open file, which keeps the event alive after our
 * close: so first stop it and take O_ASYNC off that shared file, or it
 * would go on signalling the thread after the capture handler is gone
 * (a real-time signal's default action ends the process). */
void sprobe_lx_perf_close(struct sprobe_capturer *c, uint32_t i)
{
	int num = c->perf_fd[i], fd = sprobe_fd__get(c->perf_h[i]);
	_Atomic uint64_t *map = atomic_load(&sprobe_lx_g.perf_map);

	if (fd >= 0) {
		int fl = fcntl(fd, F_GETFL);

		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		if (fl >= 0)
			fcntl(fd, F_SETFL, fl & ~O_ASYNC);
		sprobe_fd__put(c->perf_h[i]);
	}
	if (map && num >= 0 && (uint32_t)num < sprobe_lx_g.perf_nmap)
		atomic_store(&map[num], SPROBE_LX_PERF_STALE);
	sprobe_fd__close(c->perf_h[i]);
	c->perf_h[i] = -1;
	c->perf_fd[i] = -1;
}

/* A new period for slot i's event. 0 or -errno. */
int sprobe_lx_perf_period(struct sprobe_capturer *c, uint32_t i, uint64_t interval_ns)
{
	int fd = sprobe_fd__get(c->perf_h[i]), err = 0;

	if (fd < 0)
		return fd;
	if (ioctl(fd, PERF_EVENT_IOC_PERIOD, &interval_ns) < 0)
		err = -errno;
	sprobe_fd__put(c->perf_h[i]);
	return err;
}

/* Stop (on false) or restart slot i's signals. The handler takes the
 * slot from perf_map at delivery, so a stop unmaps it first: the signals a
 * blocked thread has queued, delivered once it unblocks, find STALE and
 * are swallowed, instead of all crediting the stack of that moment or,
 * taken for the program's, ending it by the signal's default action. A
 * restart maps gen again. The event itself keeps counting (only O_ASYNC
 * goes, so no signal is queued): the thread's CPU until it exits comes
 * from its count (cputime.c live_cpu()), where a stopped count left the
 * last clock read, up to 100 ms old, against the fallback's samples up to
 * the exit (coverage over 100 %). */
int sprobe_lx_perf_enable(struct sprobe_capturer *c, uint32_t i, bool on, uint64_t gen)
{
	int fd = sprobe_fd__get(c->perf_h[i]), err = 0;

	if (fd < 0)
		return fd;
	_Atomic uint64_t *map = atomic_load(&sprobe_lx_g.perf_map);

	if (map && c->perf_fd[i] >= 0)
		atomic_store_explicit(&map[c->perf_fd[i]], on ? gen << 16 | i : SPROBE_LX_PERF_STALE,
				      memory_order_release);
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, on ? fl | O_ASYNC : fl & ~O_ASYNC) < 0)
		err = -errno;
	sprobe_fd__put(c->perf_h[i]);
	return err;
}
