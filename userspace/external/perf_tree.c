/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier's sampler: one inherited perf event on a process
 * tree, its ring buffer read by `record`, one data-file part per process
 * image (contract in external.h). The parts are written by perf_part.c,
 * the attach to a running process is perf_attach.c; the state they share
 * is ext_state.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <stackprobe/capture.h>
#include <stackprobe/datafile.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "userspace/external/ext_state.h"
#include "userspace/external/xsample.h"

/* Why the kernel's part of the CPU time is not sampled, into why. */
static void user_only(char *why, size_t len)
{
	char v[16] = "";
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");

	if (f) {
		if (!fgets(v, sizeof(v), f))
			v[0] = '\0';
		fclose(f);
	}
	v[strcspn(v, "\n")] = '\0';
	snprintf(why, len, "user time only: the kernel refused kernel samples "
		 "(kernel.perf_event_paranoid is %s; kernel time needs 1 or less, root or "
		 "CAP_PERFMON)", v[0] ? v : "not known");
}

const char *sprobe_ext__kernel_why(const struct sprobe_ext *x)
{
	return x->kernel_why[0] ? x->kernel_why : NULL;
}

struct sprobe_ext *sprobe_ext__open(pid_t pid, double freq_hz, const char *dir, char *why,
				    size_t len)
{
	struct perf_event_attr a;
	struct sprobe_ext *x = calloc(1, sizeof(*x));
	int e;

	if (!x || !(x->dir = strdup(dir))) {
		free(x);
		errno = ENOMEM;
		return NULL;
	}
	for (int c = 0; c < MAX_CPUS; c++)
		x->fd[c] = -1;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = (uint64_t)(1e9 / freq_hz); /* ns of the task's CPU time */
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
	a.disabled = 1;
	a.enable_on_exec = 1;
	a.inherit = 1;	/* every thread and child, from its first instruction */
	/* Kernel time too where allowed (perf_event_paranoid <= 1, root,
	 * CAP_PERFMON): a service's system calls are often most of its CPU.
	 * Refused, the first open falls back to user time and says why. */
	a.exclude_kernel = 0;
	a.exclude_hv = 1;
	a.exclude_callchain_kernel = 0;
	a.comm = 1;
	a.task = 1;
	a.sample_id_all = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	a.sample_max_stack = SPROBE_MAX_FRAMES - 1;
	sprobe_xsample__attr(&a); /* registers and stack, for the unwinder */
	x->sample_type = a.sample_type;
	x->regs_mask = a.sample_regs_user;
	x->ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
	if (x->ncpu < 1 || x->ncpu > MAX_CPUS)
		x->ncpu = x->ncpu < 1 ? 1 : MAX_CPUS;
	x->ring_len = sprobe_xsample__ring_bytes(freq_hz, (size_t)sysconf(_SC_PAGESIZE));
	for (int c = 0; c < x->ncpu; c++) {
		x->fd[c] = (int)syscall(SYS_perf_event_open, &a, pid, c, -1, PERF_FLAG_FD_CLOEXEC);
		if (x->fd[c] < 0 && errno == EINVAL && a.sample_max_stack) {
			a.sample_max_stack = 0; /* kernels before 4.8 */
			x->fd[c] = (int)syscall(SYS_perf_event_open, &a, pid, c, -1, PERF_FLAG_FD_CLOEXEC);
		}
		if (x->fd[c] < 0 && (errno == EACCES || errno == EPERM) && !a.exclude_kernel) {
			user_only(x->kernel_why, sizeof(x->kernel_why));
			a.exclude_kernel = 1;
			a.exclude_callchain_kernel = 1;
			c--; /* this CPU again, user space only */
			continue;
		}
		if (x->fd[c] < 0 && errno == ENODEV) {
			x->ring[c] = MAP_FAILED; /* an offline CPU */
			continue;
		}
		if (x->fd[c] < 0) {
			e = errno;
			sprobe_ext__explain(e, pid, why, len);
			x->ncpu = c;
			sprobe_ext__free(x);
			errno = e;
			return NULL;
		}
		x->ring_lens[c] = x->ring_len;
		x->ring[c] = sprobe_xsample__map_ring(x->fd[c], &x->ring_lens[c],
						      (size_t)sysconf(_SC_PAGESIZE));
		if (x->ring[c] != MAP_FAILED)
			x->ring_len = x->ring_lens[c]; /* the next CPUs' try */
		if (x->ring[c] == MAP_FAILED) {
			e = errno;
			snprintf(why, len, "perf ring buffer: %s", strerror(e));
			x->ncpu = c + 1;
			sprobe_ext__free(x);
			errno = e;
			return NULL;
		}
	}
	x->root = pid;
	x->freq = freq_hz;
	x->attr = a;
	return x;
}

/* ---- per-process state ------------------------------------------------ */

static struct ximage *image_cur(struct sprobe_ext *x, uint32_t pid)
{
	for (size_t i = x->nimg; i-- > 0;)
		if (x->img[i].pid == pid)
			return &x->img[i];
	return NULL;
}

struct ximage *sprobe_ext__image_new(struct sprobe_ext *x, uint32_t pid, uint32_t ppid, uint64_t t)
{
	struct ximage *prev = image_cur(x, pid);

	if (x->nimg == x->capimg) {
		size_t cap = x->capimg ? x->capimg * 2 : 16;
		struct ximage *v = realloc(x->img, cap * sizeof(*v));

		if (!v)
			return NULL;
		x->img = v;
		x->capimg = cap;
		prev = image_cur(x, pid);
	}
	struct ximage *im = &x->img[x->nimg];

	memset(im, 0, sizeof(*im));
	im->pid = pid;
	im->ppid = prev ? prev->ppid : pid == (uint32_t)x->root && !ppid ? x->root_ppid : ppid;
	im->exec_index = prev ? prev->exec_index + 1 : pid == (uint32_t)x->root ? x->root_exec : 0;
	im->start_ns = t;
	if (prev)
		memcpy(im->comm, prev->comm, sizeof(im->comm));
	x->nimg++;
	return im;
}

/* Open each module's file now, with its symbol table: the inventory of
 * another process reads the files through /proc/PID, gone once it exits,
 * and its samples are unwound (from those files) and the parts written
 * after that. */
static void image_files(struct ximage *im)
{
	for (size_t i = 0; im->mods && i < sprobe_modules__count(im->mods); i++) {
		struct sprobe_symbol sym;

		sprobe_modules__symbolize(im->mods, sprobe_modules__get(im->mods, i)->start, &sym);
	}
}

/* The image's modules, read from /proc once while the process lives, and
 * the unwinder of its samples on them. */
void sprobe_ext__image_mods(struct ximage *im)
{
	struct sprobe_modules_opts o = { .sz = sizeof(o), .pid = (pid_t)im->pid };
	char path[64];
	ssize_t n;

	if (im->mods)
		return;
	im->mods = sprobe_modules__new(&o);
	image_files(im);
	if (im->mods) {
		struct sprobe_unwinder_opts uo = { .sz = sizeof(uo), .modules = im->mods };

		/* NULL (out of memory): its samples keep the kernel's chains. */
		im->unw = sprobe_unwinder__new(&uo);
	}
	snprintf(path, sizeof(path), "/proc/%u/exe", im->pid);
	n = readlink(path, im->exe, sizeof(im->exe) - 1);
	im->exe[n > 0 ? n : 0] = '\0';
}

void sprobe_ext__thread_comm(struct sprobe_ext *x, uint32_t pid, uint32_t tid, const char *comm)
{
	for (size_t i = 0; i < x->nthr; i++)
		if (x->thr[i].pid == pid && x->thr[i].tid == tid) {
			snprintf(x->thr[i].comm, sizeof(x->thr[i].comm), "%s", comm);
			return;
		}
	if (x->nthr == x->capthr) {
		size_t cap = x->capthr ? x->capthr * 2 : 16;
		struct xthread *v = realloc(x->thr, cap * sizeof(*v));

		if (!v)
			return;
		x->thr = v;
		x->capthr = cap;
	}
	x->thr[x->nthr].pid = pid;
	x->thr[x->nthr].tid = tid;
	snprintf(x->thr[x->nthr].comm, sizeof(x->thr[x->nthr].comm), "%s", comm);
	x->nthr++;
}

/* ---- the ring --------------------------------------------------------- */

static void on_record(struct sprobe_ext *x, const struct perf_event_header *h, const uint8_t *p)
{
	const uint8_t *end = (const uint8_t *)h + h->size;
	uint32_t u32[4];
	uint64_t u64;

	switch (h->type) {
	case PERF_RECORD_SAMPLE: {
		struct sprobe_xraw r;

		if (sprobe_xsample__parse(x->sample_type, x->regs_mask, p, end, &r) != 0)
			return;
		struct ximage *im = image_cur(x, r.pid);

		if (!im) {
			if (!(im = sprobe_ext__image_new(x, r.pid, 0, r.time)))
				return;
			im->implicit = true;
		}
		sprobe_ext__image_mods(im);
		/* A pc in no module: something was mapped since the maps were
		 * read (dlopen). Read them again, at most every 250 ms of the
		 * samples' time (a pc in anonymous memory, JIT code, stays
		 * in none). */
		/* In the kernel, r.ip is the kernel's: the user pc is the one
		 * the thread entered it from. */
		uint64_t upc = sprobe_ext__kernel_pc(r.ip) ? (r.has_regs ? sprobe_xsample__user_pc(&r) : 0)
							   : r.ip;
		if (im->mods && upc && !sprobe_modules__find(im->mods, upc) &&
		    r.time - im->refresh_ns > 250000000ull) {
			im->refresh_ns = r.time;
			if (sprobe_modules__refresh(im->mods) == 1)
				image_files(im);
		}
		if (im->n == im->cap) {
			size_t cap = im->cap ? im->cap * 2 : 256;
			struct xsample *v = realloc(im->s, cap * sizeof(*v));

			if (!v)
				return;
			im->s = v;
			im->cap = cap;
		}
		if (im->cappcs - im->npcs < SPROBE_MAX_FRAMES) {
			size_t cap = im->cappcs ? im->cappcs * 2 : 8192;
			uint64_t *v = realloc(im->pcs, cap * sizeof(*v));

			if (!v)
				return;
			im->pcs = v;
			im->cappcs = cap;
		}
		/* Zeroed: no frame storage of its own, so its walks use the
		 * unwinder's buffer (struct sprobe_thread_sample). */
		if (!x->scratch && !(x->scratch = calloc(1, sizeof(*x->scratch))))
			return;
		struct xsample *s = &im->s[im->n];

		s->tid = r.tid;
		s->time_ns = r.time;
		s->pc0 = im->npcs;
		/* Unwound now, from the copied registers and stack: the copy
		 * is 16 KiB, the frames a few hundred bytes. */
		s->nframes = sprobe_xsample__frames(im->unw, x->scratch, &r, im->pcs + im->npcs,
						    SPROBE_MAX_FRAMES);
		im->npcs += s->nframes;
		im->n++;
		x->samples++;
		break;
	}
	case PERF_RECORD_COMM: {
		char comm[16] = "";

		if (p + 8 > end)
			return;
		memcpy(u32, p, 8); /* pid, tid */
		size_t left = (size_t)(end - (p + 8));

		memcpy(comm, p + 8, left < sizeof(comm) - 1 ? left : sizeof(comm) - 1);
		if (h->misc & PERF_RECORD_MISC_COMM_EXEC) {
			struct ximage *im = image_cur(x, u32[0]);
			/* An exec: a new image, unless the one there has no
			 * sample yet (the root's exec, a fork + exec). */
			if (!im || im->n) {
				uint64_t t = 0;

				if (end - 8 >= p + 8)
					memcpy(&t, end - 8, 8); /* sample_id: time last */
				im = sprobe_ext__image_new(x, u32[0], 0, t);
			} else if (im->mods) {
				sprobe_unwinder__free(im->unw);
				im->unw = NULL;
				sprobe_modules__free(im->mods);
				im->mods = NULL;
			}
			if (im) {
				snprintf(im->comm, sizeof(im->comm), "%s", comm);
				sprobe_ext__image_mods(im);
			}
		}
		sprobe_ext__thread_comm(x, u32[0], u32[1], comm);
		break;
	}
	case PERF_RECORD_FORK:
		if (p + 16 + 8 > end)
			return;
		memcpy(u32, p, 16); /* pid, ppid, tid, ptid */
		memcpy(&u64, p + 16, 8);
		if (u32[0] == u32[2] && u32[0] != u32[1]) { /* a new process */
			struct ximage *im = image_cur(x, u32[0]);

			if (im && im->implicit) {
				/* Its samples came first (another CPU's ring). */
				im->implicit = false;
				im->ppid = u32[1];
				im->start_ns = u64;
				break;
			}
			struct ximage *parent = image_cur(x, u32[1]);

			im = sprobe_ext__image_new(x, u32[0], u32[1], u64);
			if (im && parent)
				memcpy(im->comm, parent->comm, sizeof(im->comm));
		}
		break;
	case PERF_RECORD_LOST:
		if (p + 16 <= end) {
			memcpy(&u64, p + 8, 8);
			x->lost += u64;
		}
		break;
	}
}

/* Records of every ring, in time order: a process's records come from
 * the rings of the CPUs it ran on, and its fork, exec and samples must be
 * seen in the order they happened. */
struct xrec {
	uint64_t time;
	uint32_t off, len;
};

static uint64_t rec_time(const uint8_t *r, uint16_t size)
{
	const struct perf_event_header *h = (const void *)r;
	uint64_t t = 0;

	if (h->type == PERF_RECORD_SAMPLE && size >= 8 + 24)
		memcpy(&t, r + 8 + 16, 8); /* ip, pid/tid, time */
	else if (size >= 8 + 8)
		memcpy(&t, r + size - 8, 8); /* sample_id_all: time last */
	return t;
}

static int cmp_xrec(const void *a, const void *b)
{
	const struct xrec *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

int sprobe_ext__poll(struct sprobe_ext *x)
{
	unsigned long long before = x->samples;
	uint8_t *buf = NULL;
	struct xrec *v = NULL;
	size_t len = 0, cap = 0, n = 0, vcap = 0;

	for (int c = 0; c < x->ncpu; c++) {
		if (!x->ring[c] || x->ring[c] == MAP_FAILED)
			continue;
		struct perf_event_mmap_page *mp = x->ring[c];
		uint8_t *data = (uint8_t *)x->ring[c] + mp->data_offset;
		uint64_t size = mp->data_size, tail = mp->data_tail;
		uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);

		while (tail + sizeof(struct perf_event_header) <= head) {
			struct perf_event_header h;

			for (size_t i = 0; i < sizeof(h); i++)
				((uint8_t *)&h)[i] = data[(tail + i) % size];
			if (h.size < sizeof(h) || tail + h.size > head)
				break;
			if (len + h.size > cap) {
				size_t nc = cap ? cap * 2 : 1u << 20;
				while (nc < len + h.size)
					nc *= 2;
				uint8_t *nb = realloc(buf, nc);
				if (!nb)
					break;
				buf = nb;
				cap = nc;
			}
			if (n == vcap) {
				size_t nc = vcap ? vcap * 2 : 4096;
				struct xrec *nv = realloc(v, nc * sizeof(*nv));
				if (!nv)
					break;
				v = nv;
				vcap = nc;
			}
			/* 8-byte aligned copies: records are multiples of 8;
			 * one that wraps is copied in two pieces. */
			size_t at = (size_t)(tail % size), first = h.size;

			if (first > size - at)
				first = (size_t)(size - at);
			memcpy(buf + len, data + at, first);
			memcpy(buf + len + first, data, h.size - first);
			v[n++] = (struct xrec){ rec_time(buf + len, h.size), (uint32_t)len, h.size };
			len += h.size;
			tail += h.size;
		}
		__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_xrec);
	for (size_t i = 0; i < n; i++)
		on_record(x, (const struct perf_event_header *)(void *)(buf + v[i].off),
			  buf + v[i].off + sizeof(struct perf_event_header));
	free(buf);
	free(v);
	return (int)(x->samples - before);
}

/* ---- thread names ---------------------------------------------------- */

/* A /proc file's first line, newline removed ("" if unreadable). */
void sprobe_ext__proc_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");

	out[0] = '\0';
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

void sprobe_ext__proc_comm(uint32_t pid, uint32_t tid, char *out, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	sprobe_ext__proc_line(path, out, len);
}


/* Every sampled thread gets a THREAD record: a thread made by clone()
 * has no COMM record of its own (it keeps its creator's name), so one
 * the kernel never named is named from /proc while it lives, else after
 * its process. */
static void ext_name_threads(struct sprobe_ext *x)
{
	for (size_t i = 0; i < x->nimg; i++) {
		struct ximage *im = &x->img[i];
		uint32_t last = 0;

		for (size_t k = 0; k < im->n; k++) {
			uint32_t tid = im->s[k].tid;
			bool known = tid == last;
			char comm[16];

			for (size_t t = 0; t < x->nthr && !known; t++)
				known = x->thr[t].pid == im->pid && x->thr[t].tid == tid;
			last = tid;
			if (known)
				continue;
			sprobe_ext__proc_comm(im->pid, tid, comm, sizeof(comm));
			sprobe_ext__thread_comm(x, im->pid, tid, comm[0] ? comm : im->comm);
		}
	}
}

int sprobe_ext__finish(struct sprobe_ext *x)
{
	int n = 0, err;

	for (int c = 0; c < x->ncpu; c++)
		if (x->fd[c] >= 0)
			ioctl(x->fd[c], PERF_EVENT_IOC_DISABLE, 0);
	for (size_t i = 0; i < x->ntfd; i++)
		ioctl(x->tfd[i], PERF_EVENT_IOC_DISABLE, 0);
	sprobe_ext__poll(x);
	ext_name_threads(x);
	for (size_t i = 0; i < x->nimg; i++) {
		/* Images with samples, and the command's own first one. */
		if (!x->img[i].n &&
		    !(x->img[i].pid == (uint32_t)x->root && x->img[i].exec_index == x->root_exec))
			continue;
		err = sprobe_ext__write_part(x, &x->img[i]);
		if (err < 0)
			return err;
		n += err;
	}
	return n;
}

void sprobe_ext__set_root(struct sprobe_ext *x, pid_t pid, unsigned exec_index, pid_t ppid)
{
	/* Images of the root made already (sprobe_ext__attach() makes the
	 * running one) are renumbered from exec_index. The events may be on
	 * a thread that is about to exec (pid given to _open() a tid): after
	 * the exec it is the process pid. */
	for (size_t i = 0; i < x->nimg; i++)
		if (x->img[i].pid == (uint32_t)x->root)
			x->img[i].pid = (uint32_t)pid;
	x->root = pid;
	for (size_t i = 0; i < x->nimg; i++)
		if (x->img[i].pid == (uint32_t)x->root) {
			x->img[i].exec_index = x->img[i].exec_index - x->root_exec + exec_index;
			if (ppid > 0)
				x->img[i].ppid = (uint32_t)ppid;
		}
	x->root_exec = exec_index;
	x->root_ppid = ppid > 0 ? (uint32_t)ppid : 0;
}

/* Is pid gone (no such process, or a zombie nobody needs sampled)? */
static bool pid_gone(uint32_t pid)
{
	char path[64], buf[256], *rp;
	bool gone = true;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	if (!(f = fopen(path, "re")))
		return true;
	if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')))
		gone = rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
	else
		gone = false;
	fclose(f);
	return gone;
}

bool sprobe_ext__gone(const struct sprobe_ext *x)
{
	if (!pid_gone((uint32_t)x->root))
		return false;
	for (size_t i = 0; i < x->nimg; i++)
		if (!pid_gone(x->img[i].pid))
			return false;
	return true;
}

void sprobe_ext__counts(const struct sprobe_ext *x, unsigned long long *samples,
			unsigned long long *lost)
{
	*samples = x->samples;
	*lost = x->lost;
}

void sprobe_ext__free(struct sprobe_ext *x)
{
	if (!x)
		return;
	/* The threads' events first: they write into the rings below. */
	for (size_t i = 0; i < x->ntfd; i++)
		close(x->tfd[i]);
	free(x->tfd);
	free(x->tids);
	for (int c = 0; c < x->ncpu; c++) {
		if (x->ring[c] && x->ring[c] != MAP_FAILED)
			munmap(x->ring[c], x->ring_lens[c]);
		if (x->fd[c] >= 0)
			close(x->fd[c]);
	}
	for (size_t i = 0; i < x->nimg; i++) {
		sprobe_unwinder__free(x->img[i].unw);
		sprobe_modules__free(x->img[i].mods);
		free(x->img[i].s);
		free(x->img[i].pcs);
	}
	sprobe_ext__ksyms_free(&x->ksyms);
	free(x->scratch);
	free(x->img);
	free(x->thr);
	free(x->dir);
	free(x);
}
