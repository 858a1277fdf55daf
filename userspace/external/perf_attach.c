/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier's way into a process already running (record -p,
 * contract in external.h: sprobe_ext__attach): one event per thread and
 * CPU, the threads listed twice so that none made meanwhile is missed or
 * counted twice.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "userspace/external/ext_state.h"

#define PF_KTHREAD_FLAG 0x00200000u /* include/linux/sched.h */

/* /proc/PID/stat's state, parent and flags (the fields after the comm,
 * which may itself hold ") "). */
static int proc_stat(pid_t pid, char *state, int *ppid, unsigned long *flags)
{
	char path[64], buf[1024];
	int fd, e;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	e = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -e : -ESRCH;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %c %d %*d %*d %*d %*d %lu", state, ppid, flags) != 3)
		return -EIO;
	return 0;
}

/* The threads of pid now, malloc'd into *out (the caller frees). */
static int list_tasks(pid_t pid, uint32_t **out, size_t *n)
{
	char path[64];
	struct dirent *de;
	size_t cap = 0;
	DIR *d;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return errno == ENOENT ? -ESRCH : -errno;
	while ((de = readdir(d))) {
		char *end;
		unsigned long tid = strtoul(de->d_name, &end, 10);

		if (de->d_name[0] < '0' || de->d_name[0] > '9' || *end)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			uint32_t *v = realloc(*out, cap * sizeof(*v));
			if (!v) {
				closedir(d);
				free(*out);
				*out = NULL;
				return -ENOMEM;
			}
			*out = v;
		}
		(*out)[(*n)++] = (uint32_t)tid;
	}
	closedir(d);
	return 0;
}

static bool has_own_events(const struct sprobe_ext *x, uint32_t tid)
{
	for (size_t i = 0; i < x->ntids; i++)
		if (x->tids[i] == tid)
			return true;
	return false;
}

static int push_u32(uint32_t **v, size_t *n, size_t *cap, uint32_t val)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		uint32_t *nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = val;
	return 0;
}

/* One event per CPU on tid, each writing into that CPU's ring. -ESRCH:
 * the thread has gone (nothing to follow). */
static int attach_thread(struct sprobe_ext *x, uint32_t tid)
{
	struct perf_event_attr a = x->attr;

	a.disabled = 0;
	a.enable_on_exec = 0;
	for (int c = 0; c < x->ncpu; c++) {
		if (x->fd[c] < 0)
			continue; /* an offline CPU */
		if (x->ntfd == x->captfd) {
			size_t nc = x->captfd ? x->captfd * 2 : 64;
			int *v = realloc(x->tfd, nc * sizeof(*v));
			if (!v)
				return -ENOMEM;
			x->tfd = v;
			x->captfd = nc;
		}
		int fd = (int)syscall(SYS_perf_event_open, &a, (pid_t)tid, c, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, x->fd[c]) != 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		x->tfd[x->ntfd++] = fd;
	}
	return push_u32(&x->tids, &x->ntids, &x->captids, tid);
}

/* Has tid been on a CPU yet? Its clone has then finished, and with it the
 * FORK record an attached parent's events write (perf_event_fork() runs
 * at the end of copy_process(), before the new task is first woken).
 * Without schedstat (CONFIG_SCHED_INFO) this cannot be known: true. */
static bool has_run(uint32_t pid, uint32_t tid)
{
	char path[80], line[128];
	unsigned long long run, wait, slices;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/schedstat", pid, tid);
	sprobe_ext__proc_line(path, line, sizeof(line));
	return sscanf(line, "%llu %llu %llu", &run, &wait, &slices) != 3 || slices > 0;
}

/* Does a ring hold, unread, the FORK record of tid (its parent's events
 * were inherited)? Reads without consuming: sprobe_ext__poll() takes
 * them later. */
static bool ring_has_fork(const struct sprobe_ext *x, uint32_t tid)
{
	for (int c = 0; c < x->ncpu; c++) {
		if (!x->ring[c] || x->ring[c] == MAP_FAILED)
			continue;
		const struct perf_event_mmap_page *mp = x->ring[c];
		const uint8_t *data = (const uint8_t *)x->ring[c] + mp->data_offset;
		uint64_t size = mp->data_size, tail = mp->data_tail;
		uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);

		while (tail + sizeof(struct perf_event_header) <= head) {
			struct perf_event_header h;
			uint32_t u32[4];

			for (size_t i = 0; i < sizeof(h); i++)
				((uint8_t *)&h)[i] = data[(tail + i) % size];
			if (h.size < sizeof(h) || tail + h.size > head)
				break;
			if (h.type == PERF_RECORD_FORK && h.size >= sizeof(h) + sizeof(u32)) {
				for (size_t i = 0; i < sizeof(u32); i++)
					((uint8_t *)u32)[i] = data[(tail + sizeof(h) + i) % size];
				if (u32[2] == tid) /* pid, ppid, tid, ptid */
					return true;
			}
			tail += h.size;
		}
	}
	return false;
}

/* Threads of the second scan that no attached parent's event covers. */
static int attach_rescan(struct sprobe_ext *x, pid_t pid)
{
	uint32_t *tids;
	size_t n;
	int err = list_tasks(pid, &tids, &n);

	if (err)
		return err == -ESRCH ? 0 : err;
	for (size_t i = 0; i < n && !err; i++) {
		if (has_own_events(x, tids[i]))
			continue;
		/* A thread not yet run may still be inside its clone, before
		 * its FORK record: give it a moment (bounded). */
		for (int ms = 0; ms < 200 && !has_run((uint32_t)pid, tids[i]); ms++)
			poll(NULL, 0, 1);
		if (ring_has_fork(x, tids[i]))
			continue; /* inherited: counting it twice would double it */
		err = attach_thread(x, tids[i]);
		if (err == -ESRCH)
			err = 0;
	}
	free(tids);
	return err;
}

static void raise_nofile(size_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want + 64 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = want + 64 < rl.rlim_max ? want + 64 : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

struct sprobe_ext *sprobe_ext__attach(pid_t pid, double freq_hz, const char *dir, char *why,
				      size_t len)
{
	char state = '?', path[64], line[256];
	unsigned long flags = 0;
	int ppid = 0, err;
	uint32_t *tids = NULL;
	size_t n = 0;
	struct sprobe_ext *x;

	err = proc_stat(pid, &state, &ppid, &flags);
	if (err == -ESRCH) {
		snprintf(why, len, "no process %d", (int)pid);
		errno = ESRCH;
		return NULL;
	}
	if (!err && (flags & PF_KTHREAD_FLAG)) {
		snprintf(why, len, "process %d is a kernel thread: it runs no user code to sample",
			 (int)pid);
		errno = EINVAL;
		return NULL;
	}
	if (!err && (state == 'Z' || state == 'X')) {
		snprintf(why, len, "process %d has exited (a zombie its parent has not reaped yet)",
			 (int)pid);
		errno = ESRCH;
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	int tgid = (int)pid;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1)
			break;
	if (f)
		fclose(f);
	if (tgid != (int)pid) {
		snprintf(why, len, "%d is a thread of process %d: give the process id", (int)pid, tgid);
		errno = EINVAL;
		return NULL;
	}
	/* The first scan comes before any event exists, so none of these
	 * threads inherited one: each gets its own. */
	if ((err = list_tasks(pid, &tids, &n)) != 0) {
		snprintf(why, len, err == -ESRCH ? "no process %d" : "/proc/%d/task: %s", (int)pid,
			 strerror(-err));
		errno = -err;
		return NULL;
	}
	raise_nofile((n + 16) * (size_t)sysconf(_SC_NPROCESSORS_CONF));
	if (!(x = sprobe_ext__open(pid, freq_hz, dir, why, len))) {
		err = errno;
		free(tids);
		if (err == ESRCH)
			snprintf(why, len, "no process %d", (int)pid);
		errno = err;
		return NULL;
	}
	/* Opened disabled for an exec that will not come: start now. Threads
	 * the first one makes from here on inherit its events. */
	for (int c = 0; c < x->ncpu; c++)
		if (x->fd[c] >= 0)
			ioctl(x->fd[c], PERF_EVENT_IOC_ENABLE, 0);
	err = push_u32(&x->tids, &x->ntids, &x->captids, (uint32_t)pid);
	for (size_t i = 0; i < n && !err; i++) {
		if (tids[i] == (uint32_t)pid)
			continue;
		err = attach_thread(x, tids[i]);
		if (err == -ESRCH)
			err = 0; /* it exited meanwhile */
	}
	free(tids);
	/* Threads made during the scan by a thread not yet attached. */
	if (!err)
		err = attach_rescan(x, pid);
	if (err) {
		if (err == -EMFILE || err == -ENFILE)
			snprintf(why, len, "too many threads: one perf event per thread and CPU (%zu "
					   "threads, %d CPUs) exceeds the open-file limit (ulimit -n)",
				 x->ntids, x->ncpu);
		else
			sprobe_ext__explain(-err, pid, why, len);
		sprobe_ext__free(x);
		errno = -err;
		return NULL;
	}
	/* The process as it is now: name, parent, modules, thread names. */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	struct ximage *im = sprobe_ext__image_new(x, (uint32_t)pid, (uint32_t)ppid,
				      (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	if (im) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		sprobe_ext__proc_line(path, im->comm, sizeof(im->comm));
		sprobe_ext__image_mods(im);
	}
	sprobe_ext__refresh(x);
	return x;
}

int sprobe_ext__refresh(struct sprobe_ext *x)
{
	uint32_t *tids;
	size_t n;
	char comm[16];
	int err = list_tasks(x->root, &tids, &n);

	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		bool known = false;

		for (size_t k = 0; k < x->nthr && !known; k++)
			known = x->thr[k].pid == (uint32_t)x->root && x->thr[k].tid == tids[i];
		if (known)
			continue;
		sprobe_ext__proc_comm((uint32_t)x->root, tids[i], comm, sizeof(comm));
		if (comm[0])
			sprobe_ext__thread_comm(x, (uint32_t)x->root, tids[i], comm);
	}
	free(tids);
	return (int)n;
}
