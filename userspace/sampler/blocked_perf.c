/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Per-thread perf events with user registers and stack, for threads that
 * block the capture signal (contract: blocked_perf.h).
 *
 * Ring protocol (perf_event_mmap_page): the kernel writes records at
 * data_head and publishes it with a release; we read data_head with an
 * acquire, consume [data_tail, data_head) and store data_tail with a
 * release, which pairs with the kernel's read of data_tail before it
 * overwrites (perf_output_begin). A record may wrap around the end of the
 * data area: it is copied out linearly first.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "userspace/common/fds.h"
#include "userspace/sampler/blocked_perf.h"

#if defined(__x86_64__)
/* perf's x86 register numbers (asm/perf_regs.h) in the order the kernel
 * writes them (ascending bit), and the DWARF number each goes to. */
enum { PR_AX = 0, PR_BX, PR_CX, PR_DX, PR_SI, PR_DI, PR_BP, PR_SP, PR_IP,
       PR_R8 = 16 };
#define REGS_MASK (((1ull << (PR_IP + 1)) - 1) | (0xffull << PR_R8))
#define NREGS_OUT 17
static const int dwarf_of[NREGS_OUT] = {
	0 /* ax */, 3 /* bx */, 2 /* cx */, 1 /* dx */, 4 /* si */, 5 /* di */,
	6 /* bp */, 7 /* sp */, 16 /* ip */, 8, 9, 10, 11, 12, 13, 14, 15,
};
#define DWARF_SP 7
#define DWARF_IP 16
#define DWARF_FP 6
#elif defined(__aarch64__)
/* arm64: x0..x30, sp, pc are perf registers 0..32, as DWARF numbers. */
#define REGS_MASK ((1ull << 33) - 1)
#define NREGS_OUT 33
#define DWARF_SP 31
#define DWARF_IP 32
#define DWARF_FP 29
#else
#define REGS_MASK 0ull
#define NREGS_OUT 0
#endif

#define DEFAULT_MAX 64u

struct ev {
	pid_t tid;		/* 0: free */
	int h;			/* registry handle */
	struct perf_event_mmap_page *pg;
	uint8_t *data;		/* data area, data_size bytes */
	uint64_t data_size;
	uint64_t last_sample_ns; /* last record, or the open */
	uint64_t lost;		/* lost records not yet added to a weight */
	uint64_t stack_lo, stack_hi; /* mapping that held SP last time */
	bool hup;		/* the task exited: close after the drain */
	bool pinned;		/* drain(): handle pinned, pollfd pidx */
	uint32_t pidx;
};

struct sprobe_blocked_perf {
	uint64_t period_ns;
	size_t stack_bytes;
	size_t map_bytes;	/* 1 + 2^n pages */
	uint32_t max;
	struct ev *ev;
	struct pollfd *pfd;
	bool refused;
	bool user_only;		/* exclude_kernel: the kernel allows no more */
	char why[256];
	uint8_t *rec;		/* one record, linearised */
	size_t rec_cap;
	struct sprobe_thread_sample *ts;
	struct sprobe_blocked_perf_stats st;
};

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static size_t round_pow2(size_t v)
{
	size_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

struct sprobe_blocked_perf *sprobe_blocked_perf__new(const struct sprobe_blocked_perf_opts *o)
{
	struct sprobe_blocked_perf *bp;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), rec;

	if (!o || o->sz < sizeof(size_t) || o->sz > sizeof(*o) || !o->period_ns) {
		errno = EINVAL;
		return NULL;
	}
	bp = calloc(1, sizeof(*bp));
	if (!bp)
		return NULL;
	bp->period_ns = o->period_ns;
	bp->stack_bytes = o->stack_bytes ? o->stack_bytes : SPROBE_BLOCKED_PERF_STACK_DEFAULT;
	if (bp->stack_bytes > SPROBE_BLOCKED_PERF_STACK_MAX)
		bp->stack_bytes = SPROBE_BLOCKED_PERF_STACK_MAX;
	bp->stack_bytes &= ~(size_t)7;
	if (bp->stack_bytes < 512)
		bp->stack_bytes = 512;
	bp->max = o->sz >= offsetof(struct sprobe_blocked_perf_opts, max_threads) + sizeof(uint32_t) &&
			  o->max_threads
		      ? o->max_threads
		      : DEFAULT_MAX;
	/* header, ip, pid/tid, time, abi, regs, size, data, dyn_size */
	rec = 8 + 8 + 8 + 8 + 8 + NREGS_OUT * 8 + 8 + bp->stack_bytes + 8;
	bp->map_bytes = page + round_pow2(SPROBE_BLOCKED_PERF_RING_SAMPLES * rec);
	bp->rec_cap = rec + 64;
	bp->ev = calloc(bp->max, sizeof(*bp->ev));
	bp->pfd = calloc(bp->max, sizeof(*bp->pfd));
	bp->rec = malloc(bp->rec_cap);
	bp->ts = calloc(1, sizeof(*bp->ts));
	if (!bp->ev || !bp->pfd || !bp->rec || !bp->ts) {
		sprobe_blocked_perf__free(bp);
		errno = ENOMEM;
		return NULL;
	}
	if (!REGS_MASK) {
		bp->refused = true;
		snprintf(bp->why, sizeof(bp->why), "no perf user-register layout for this architecture");
	}
	return bp;
}

static void ev_close(struct sprobe_blocked_perf *bp, struct ev *e)
{
	int fd = sprobe_fd__get(e->h);

	/* Stopped first: a child the program forked holds the same open
	 * file until its atfork reset closes it, and the event would go on
	 * copying stacks into a ring nobody reads. */
	if (fd >= 0) {
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		sprobe_fd__put(e->h);
	}
	if (e->pg)
		munmap(e->pg, bp->map_bytes);
	sprobe_fd__close(e->h);
	memset(e, 0, sizeof(*e));
	e->h = -1;
	bp->st.watching--;
	bp->st.closed++;
}

void sprobe_blocked_perf__free(struct sprobe_blocked_perf *bp)
{
	if (!bp)
		return;
	for (uint32_t i = 0; bp->ev && i < bp->max; i++)
		if (bp->ev[i].tid)
			ev_close(bp, &bp->ev[i]);
	free(bp->ev);
	free(bp->pfd);
	free(bp->rec);
	free(bp->ts);
	free(bp);
}

int sprobe_blocked_perf__available(const struct sprobe_blocked_perf *bp, char *why, size_t len)
{
	if (!bp)
		return -EINVAL;
	if (why && len)
		snprintf(why, len, "%s", bp->refused ? bp->why : "");
	return !bp->refused;
}

static struct ev *find(const struct sprobe_blocked_perf *bp, pid_t tid)
{
	for (uint32_t i = 0; i < bp->max; i++)
		if (bp->ev[i].tid == tid)
			return &bp->ev[i];
	return NULL;
}

bool sprobe_blocked_perf__watching(const struct sprobe_blocked_perf *bp, pid_t tid)
{
	return bp && tid > 0 && find(bp, tid);
}

static void attr_init(const struct sprobe_blocked_perf *bp, struct perf_event_attr *a, bool user_only)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_TASK_CLOCK; /* the thread's runtime, hrtimer-driven */
	a->sample_period = bp->period_ns;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
			 PERF_SAMPLE_STACK_USER;
	a->sample_regs_user = REGS_MASK;
	a->sample_stack_user = (uint32_t)bp->stack_bytes;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC; /* sample times on the sampler's clock */
	a->exclude_kernel = user_only;
	a->exclude_hv = 1;
	a->disabled = 1;
	/* No wakeup_events/watermark tuning: nobody polls for data (the probe
	 * drains on its own clock), and no O_ASYNC: no signal, ever. */
}

static int perf_open(const struct perf_event_attr *a, pid_t tid)
{
	long fd = syscall(SYS_perf_event_open, a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : (int)fd;
}

static void refuse(struct sprobe_blocked_perf *bp, int err)
{
	char par[16] = "?";
	char *buf;
	size_t len;

	if (sprobe_fd__read_file("/proc/sys/kernel/perf_event_paranoid", &buf, &len) == 0) {
		snprintf(par, sizeof(par), "%d", atoi(buf));
		free(buf);
	}
	bp->refused = true;
	if (err == -EACCES || err == -EPERM)
		snprintf(bp->why, sizeof(bp->why),
			 "perf events not allowed (perf_event_open: %s; perf_event_paranoid=%s; "
			 "<=2 or CAP_PERFMON allows them, unless a seccomp profile forbids "
			 "perf_event_open)",
			 strerror(-err), par);
	else
		snprintf(bp->why, sizeof(bp->why),
			 "no software perf events with user stacks here (perf_event_open: %s)",
			 strerror(-err));
}

int sprobe_blocked_perf__watch(struct sprobe_blocked_perf *bp, pid_t tid)
{
	struct perf_event_attr a;
	struct ev *e;
	void *m;
	int fd, h, num, err;

	if (!bp || tid <= 0)
		return -EINVAL;
	if (bp->refused)
		return -EACCES;
	if (find(bp, tid))
		return -EEXIST;
	e = find(bp, 0);
	if (!e) {
		bp->st.refused++;
		return -ENOSPC;
	}
	attr_init(bp, &a, bp->user_only);
	sprobe_fd__alloc_begin();
	fd = perf_open(&a, tid);
	if ((fd == -EACCES || fd == -EPERM) && !bp->user_only) {
		/* perf_event_paranoid >= 2 without CAP_PERFMON: user time only. */
		attr_init(bp, &a, true);
		fd = perf_open(&a, tid);
		if (fd >= 0)
			bp->user_only = true;
	}
	h = fd >= 0 ? sprobe_fd__adopt_cache(fd) : fd;
	sprobe_fd__alloc_end();
	if (h < 0) {
		bp->st.refused++;
		if (h == -EACCES || h == -EPERM || h == -ENOENT || h == -ENOSYS || h == -EOPNOTSUPP ||
		    h == -EINVAL)
			refuse(bp, h);
		return h;
	}
	num = sprobe_fd__get(h);
	if (num < 0) {
		err = num;
		goto fail;
	}
	m = mmap(NULL, bp->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, num, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		sprobe_fd__put(h);
		/* The user's locked-memory allowance for perf rings
		 * (perf_event_mlock_kb, RLIMIT_MEMLOCK) is spent: it will not
		 * be back next round; stop opening events every round. */
		if (err == -EPERM || err == -ENOMEM) {
			refuse(bp, err);
			snprintf(bp->why, sizeof(bp->why),
				 "perf ring buffers refused (mmap: %s; kernel.perf_event_mlock_kb or "
				 "RLIMIT_MEMLOCK)", strerror(-err));
		}
		goto fail;
	}
	if (ioctl(num, PERF_EVENT_IOC_ENABLE, 0) < 0) {
		err = -errno;
		munmap(m, bp->map_bytes);
		sprobe_fd__put(h);
		goto fail;
	}
	sprobe_fd__put(h);
	memset(e, 0, sizeof(*e));
	e->tid = tid;
	e->h = h;
	e->pg = m;
	e->data = (uint8_t *)m + e->pg->data_offset;
	e->data_size = e->pg->data_size;
	e->last_sample_ns = mono_ns();
	bp->st.watching++;
	bp->st.opened++;
	return 0;
fail:
	bp->st.refused++;
	sprobe_fd__close(h);
	return err;
}

/* The end of the mapping holding sp (the thread's stack, or its
 * sigaltstack), from /proc/self/maps; cached per event while sp stays in
 * it. 0 if not found. */
static uint64_t stack_end(struct ev *e, uint64_t sp)
{
	char *buf, *line;
	size_t len;

	if (sp >= e->stack_lo && sp < e->stack_hi)
		return e->stack_hi;
	e->stack_lo = e->stack_hi = 0;
	if (sprobe_fd__read_file("/proc/self/maps", &buf, &len) < 0)
		return 0;
	for (line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		unsigned long long lo, hi;

		if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && sp >= lo && sp < hi) {
			e->stack_lo = lo;
			e->stack_hi = hi;
			break;
		}
	}
	free(buf);
	return e->stack_hi;
}

/* One PERF_RECORD_SAMPLE (linear, len bytes) into bp->ts; true if usable. */
static bool parse_sample(struct sprobe_blocked_perf *bp, struct ev *e, const uint8_t *r, size_t len,
			 uint64_t *time_ns)
{
	struct sprobe_thread_sample *t = bp->ts;
	const uint8_t *p = r + sizeof(struct perf_event_header), *end = r + len;
	uint64_t abi, size, dyn, regs[NREGS_OUT > 0 ? NREGS_OUT : 1], top;
	uint32_t pidtid[2];

	if (p + 8 + 8 + 8 + 8 > end)
		return false;
	p += 8; /* ip: where the CPU was, kernel or user; the user regs say the rest */
	memcpy(pidtid, p, 8);
	p += 8;
	memcpy(time_ns, p, 8);
	p += 8;
	memcpy(&abi, p, 8);
	p += 8;
	if (abi == PERF_SAMPLE_REGS_ABI_NONE)
		return false; /* no user context (kernel thread): nothing to unwind */
	if (p + NREGS_OUT * 8 + 8 > end)
		return false;
	memcpy(regs, p, NREGS_OUT * 8);
	p += NREGS_OUT * 8;
	memcpy(&size, p, 8);
	p += 8;
	if (!size || p + size + 8 > end)
		return false;
	memcpy(&dyn, p + size, 8);
	if (dyn > size)
		dyn = size;

	memset(t, 0, offsetof(struct sprobe_thread_sample, frames));
	t->tid = (pid_t)pidtid[1];
	t->stage = SPROBE_STAGE_RAW;
	t->method = SPROBE_METHOD_PERF_EVENT;
	t->drop_reason = SPROBE_DROP_NONE;
	for (int i = 0; i < NREGS_OUT; i++) {
#if defined(__x86_64__)
		t->regs[dwarf_of[i]] = regs[i];
#else
		t->regs[i] = regs[i];
#endif
	}
	t->ip = t->regs[DWARF_IP];
	t->sp = t->regs[DWARF_SP];
	t->fp = t->regs[DWARF_FP];
#if defined(__aarch64__)
	t->lr = t->regs[30];
	t->has_lr = true;
#endif
	/* The kernel dumps from SP up (no red zone below it: frames above SP
	 * are all a walk reads). */
	t->stack = p;
	t->stack_len = (size_t)dyn;
	t->stack_addr = t->sp;
	top = stack_end(e, t->sp);
	t->stack_top = top > t->sp + dyn ? top : t->sp + dyn;
	t->truncated = t->stack_top > t->sp + dyn;
	t->weight = (uint32_t)(1 + (e->lost > UINT32_MAX - 1 ? UINT32_MAX - 1 : e->lost));
	e->lost = 0;
	return true;
}

/* Drain e's ring through cb. Returns the samples delivered. */
static int drain_one(struct sprobe_blocked_perf *bp, struct ev *e, sprobe_blocked_perf_cb cb,
		     void *ctx, uint64_t now)
{
	/* Acquire; pairs with the kernel's release of data_head
	 * (perf_output_put_handle: smp_wmb before the head store). */
	uint64_t head = __atomic_load_n(&e->pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = e->pg->data_tail, mask = e->data_size - 1;
	int n = 0;

	while (tail < head) {
		struct perf_event_header hdr;
		uint64_t off = tail & mask, time_ns;
		size_t first;

		if (head - tail < sizeof(hdr))
			break;
		first = (size_t)(e->data_size - off);
		if (first >= sizeof(hdr)) {
			memcpy(&hdr, e->data + off, sizeof(hdr));
		} else {
			memcpy(&hdr, e->data + off, first);
			memcpy((uint8_t *)&hdr + first, e->data, sizeof(hdr) - first);
		}
		if (hdr.size < sizeof(hdr) || hdr.size > head - tail)
			break; /* torn: cannot happen after the acquire; stop, resync next time */
		if (hdr.size <= bp->rec_cap) {
			if (first >= hdr.size) {
				memcpy(bp->rec, e->data + off, hdr.size);
			} else {
				memcpy(bp->rec, e->data + off, first);
				memcpy(bp->rec + first, e->data, hdr.size - first);
			}
			if (hdr.type == PERF_RECORD_SAMPLE) {
				if (parse_sample(bp, e, bp->rec, hdr.size, &time_ns)) {
					bp->st.samples++;
					e->last_sample_ns = now;
					n++;
					if (cb)
						cb(ctx, bp->ts, time_ns);
				} else {
					bp->st.bad++;
				}
			} else if (hdr.type == PERF_RECORD_LOST && hdr.size >= sizeof(hdr) + 16) {
				uint64_t lost;

				memcpy(&lost, bp->rec + sizeof(hdr) + 8, 8);
				e->lost += lost;
				bp->st.lost += lost;
			}
		}
		tail += hdr.size;
	}
	/* Release; pairs with the kernel's read of data_tail before it
	 * writes over the space (perf_output_begin). */
	__atomic_store_n(&e->pg->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

int sprobe_blocked_perf__unwatch(struct sprobe_blocked_perf *bp, pid_t tid,
				 sprobe_blocked_perf_cb cb, void *ctx)
{
	struct ev *e = bp && tid > 0 ? find(bp, tid) : NULL;

	if (!e)
		return -ENOENT;
	drain_one(bp, e, cb, ctx, mono_ns());
	ev_close(bp, e);
	return 0;
}

int sprobe_blocked_perf__drain(struct sprobe_blocked_perf *bp, uint64_t now_ns,
			       sprobe_blocked_perf_cb cb, void *ctx)
{
	uint32_t np = 0;
	int n = 0;

	if (!bp)
		return -EINVAL;
	if (!bp->st.watching)
		return 0;
	/* Exited threads first (the kernel hangs the event up when its task
	 * exits: POLLHUP), so that their last samples are drained below and
	 * the event closed after. */
	for (uint32_t i = 0; i < bp->max; i++) {
		struct ev *e = &bp->ev[i];
		int fd;

		e->pinned = false;
		if (!e->tid)
			continue;
		fd = sprobe_fd__get(e->h);
		if (fd < 0) {
			e->hup = true; /* lost to the program (raw close + reuse) */
			continue;
		}
		e->pinned = true;
		e->pidx = np;
		bp->pfd[np].fd = fd;
		bp->pfd[np].events = 0;
		bp->pfd[np].revents = 0;
		np++;
	}
	bool any = np && poll(bp->pfd, np, 0) > 0;

	for (uint32_t i = 0; i < bp->max; i++) {
		struct ev *e = &bp->ev[i];

		if (!e->pinned)
			continue;
		if (any && (bp->pfd[e->pidx].revents & (POLLHUP | POLLERR | POLLNVAL)))
			e->hup = true;
		sprobe_fd__put(e->h);
		e->pinned = false;
	}
	for (uint32_t i = 0; i < bp->max; i++) {
		struct ev *e = &bp->ev[i];

		if (!e->tid)
			continue;
		n += drain_one(bp, e, cb, ctx, now_ns);
		if (e->hup || (now_ns > e->last_sample_ns &&
				now_ns - e->last_sample_ns >= SPROBE_BLOCKED_PERF_IDLE_NS))
			ev_close(bp, e);
	}
	return n;
}

void sprobe_blocked_perf__stats(const struct sprobe_blocked_perf *bp,
				struct sprobe_blocked_perf_stats *out)
{
	if (!out)
		return;
	if (!bp)
		memset(out, 0, sizeof(*out));
	else
		*out = bp->st;
}
