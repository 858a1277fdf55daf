/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier's sampler: one inherited perf event on a process
 * tree, its ring buffer read by `record`, one data-file part per process
 * image (contract in external.h).
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

#include "userspace/external/external.h"
#include "userspace/external/xsample.h"

/* A sample, unwound when read: its pcs are im->pcs[pc0, pc0 + nframes). */
struct xsample {
	uint32_t tid;
	uint32_t nframes;
	uint64_t time_ns;
	size_t pc0;
};

struct ximage {
	uint32_t pid, ppid, exec_index;
	bool implicit;		/* made by its first sample, before its FORK */
	uint64_t start_ns;
	char comm[16];
	char exe[256];
	struct sprobe_modules *mods; /* from /proc/PID/maps, while it lived */
	struct sprobe_unwinder *unw; /* on mods: reads the module files */
	uint64_t refresh_ns;	/* sample time of the last re-read of maps */
	struct xsample *s;
	size_t n, cap;
	uint64_t *pcs;		/* every sample's frames, one after another */
	size_t npcs, cappcs;
};

struct xthread {
	uint32_t pid, tid;
	char comm[16];
};

#define MAX_CPUS 1024

struct sprobe_ext {
	/* One event and ring per CPU: the kernel refuses to map the ring of
	 * an inherited event that follows the task on every CPU. */
	int ncpu;
	int fd[MAX_CPUS];
	void *ring[MAX_CPUS];
	size_t ring_len, ring_lens[MAX_CPUS];
	/* The sample layout asked for (xsample.h reads it). */
	uint64_t sample_type, regs_mask;
	struct sprobe_thread_sample *scratch; /* one walk's (big) */
	pid_t root;
	uint32_t root_exec, root_ppid; /* sprobe_ext__set_root() */
	double freq;
	char *dir;
	struct ximage *img;
	size_t nimg, capimg;
	struct xthread *thr;
	size_t nthr, capthr;
	unsigned long long samples, lost;
	/* record -p (sprobe_ext__attach): the attr of the events, and those
	 * of the threads other than the first, each writing into its CPU's
	 * ring (PERF_EVENT_IOC_SET_OUTPUT to fd[cpu]). */
	struct perf_event_attr attr;
	int *tfd;
	size_t ntfd, captfd;
	uint32_t *tids;		/* threads with events of their own */
	size_t ntids, captids;
};

static void ext_name_threads(struct sprobe_ext *x);

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
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.exclude_callchain_kernel = 1;
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

static struct ximage *image_new(struct sprobe_ext *x, uint32_t pid, uint32_t ppid, uint64_t t)
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
static void image_mods(struct ximage *im)
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

static void thread_comm(struct sprobe_ext *x, uint32_t pid, uint32_t tid, const char *comm)
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
			if (!(im = image_new(x, r.pid, 0, r.time)))
				return;
			im->implicit = true;
		}
		image_mods(im);
		/* A pc in no module: something was mapped since the maps were
		 * read (dlopen). Read them again, at most every 250 ms of the
		 * samples' time (a pc in anonymous memory, JIT code, stays
		 * in none). */
		if (im->mods && !sprobe_modules__find(im->mods, r.ip) &&
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
		if (!x->scratch && !(x->scratch = malloc(sizeof(*x->scratch))))
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
				im = image_new(x, u32[0], 0, t);
			} else if (im->mods) {
				sprobe_unwinder__free(im->unw);
				im->unw = NULL;
				sprobe_modules__free(im->mods);
				im->mods = NULL;
			}
			if (im) {
				snprintf(im->comm, sizeof(im->comm), "%s", comm);
				image_mods(im);
			}
		}
		thread_comm(x, u32[0], u32[1], comm);
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

			im = image_new(x, u32[0], u32[1], u64);
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

/* ---- parts ------------------------------------------------------------ */

static int write_part(struct sprobe_ext *x, struct ximage *im)
{
	char path[4096];
	struct sprobe_df_record rec;
	struct timespec rt, mt;
	int fd, err = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%u.%u.part", x->dir, im->pid, im->exec_index) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	/* An agent may have written this name (a child that could be
	 * entered): that part is the better one. */
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	struct sprobe_datafile_writer *w = sprobe_datafile_writer__new(fd, NULL);

	if (!w) {
		err = -errno;
		close(fd);
		return err;
	}
	clock_gettime(CLOCK_REALTIME, &rt);
	clock_gettime(CLOCK_MONOTONIC, &mt);
	int64_t off = ((int64_t)rt.tv_sec - mt.tv_sec) * 1000000000ll + (rt.tv_nsec - mt.tv_nsec);
	uint64_t start = im->start_ns ? im->start_ns : (im->n ? im->s[0].time_ns : 0);

	memset(&rec, 0, sizeof(rec));
	rec.type = SPROBE_DF_HEADER;
	rec.header = (struct sprobe_df_header){ .pid = im->pid, .mode = SPROBE_DF_MODE_CPU,
						.freq_hz = (uint32_t)(x->freq + 0.5),
						.start_realtime_ns = (uint64_t)((int64_t)start + off),
						.start_mono_ns = start, .cmdline = im->comm,
						.cmdline_len = (uint32_t)strlen(im->comm) };
	err = sprobe_datafile_writer__write(w, &rec);
	static const char note[] = "sampled through the kernel (perf event, cpu time)";
	rec.type = SPROBE_DF_PROCESS;
	rec.process = (struct sprobe_df_process){
		.pid = im->pid, .ppid = im->ppid, .exec_index = im->exec_index, .start_mono_ns = start,
		.name = im->comm, .name_len = (uint32_t)strlen(im->comm), .exe = im->exe,
		.exe_len = (uint32_t)strlen(im->exe), .note = note, .note_len = sizeof(note) - 1,
	};
	if (!err)
		err = sprobe_datafile_writer__write(w, &rec);
	for (size_t i = 0; i < x->nthr && !err; i++) {
		if (x->thr[i].pid != im->pid)
			continue;
		rec.type = SPROBE_DF_THREAD;
		rec.thread = (struct sprobe_df_thread){ .tid = x->thr[i].tid, .name = x->thr[i].comm,
							.name_len = (uint32_t)strlen(x->thr[i].comm) };
		err = sprobe_datafile_writer__write(w, &rec);
	}
	size_t nm = im->mods ? sprobe_modules__count(im->mods) : 0;

	for (size_t i = 0; i < nm && !err; i++) {
		const struct sprobe_module *m = sprobe_modules__get(im->mods, i);
		struct sprobe_df_range rg[SPROBE_MODULE_MAX_SEGS];
		uint32_t nr = 0;

		for (uint32_t k = 0; k < m->nsegs; k++)
			if (m->segs[k].prot & SPROBE_SEG_X)
				rg[nr++] = (struct sprobe_df_range){ m->segs[k].start, m->segs[k].end,
								     m->segs[k].file_offset };
		rec.type = SPROBE_DF_MODULE;
		rec.module = (struct sprobe_df_module){
			.index = (uint32_t)i, .load_bias = m->bias, .build_id = m->build_id,
			.build_id_len = m->build_id_len, .path = m->path,
			.path_len = (uint32_t)strlen(m->path), .ranges = rg, .nranges = nr,
		};
		err = sprobe_datafile_writer__write(w, &rec);
	}
	for (size_t i = 0; i < im->n && !err; i++) {
		rec.type = SPROBE_DF_SAMPLE;
		rec.sample = (struct sprobe_df_sample){ .time_ns = im->s[i].time_ns, .tid = im->s[i].tid,
							.method = SPROBE_METHOD_PERF_EVENT,
							.pcs = im->pcs + im->s[i].pc0,
							.nframes = im->s[i].nframes, .weight = 1 };
		err = sprobe_datafile_writer__write(w, &rec);
	}
	/* Symbols of every distinct pc (return addresses looked up at pc - 1,
	 * so a call at the end of a function is not its neighbour's); an open
	 * addressing set keeps each pc once. */
	size_t setcap = 1024;

	while (setcap < im->n * 4 && setcap < (1u << 24))
		setcap *= 2;
	uint64_t *set = im->mods ? calloc(setcap, sizeof(*set)) : NULL;

	for (size_t i = 0; i < im->n && !err && set; i++) {
		for (uint32_t k = 0; k < im->s[i].nframes && !err; k++) {
			uint64_t pc = im->pcs[im->s[i].pc0 + k];
			size_t h = (size_t)((pc * 0x9e3779b97f4a7c15ull) >> 20) & (setcap - 1);
			bool seen = false;

			if (!pc)
				continue;
			for (size_t probe = 0; probe < setcap; probe++, h = (h + 1) & (setcap - 1)) {
				if (set[h] == pc) {
					seen = true;
					break;
				}
				if (!set[h]) {
					set[h] = pc;
					break;
				}
			}
			if (seen)
				continue;
			struct sprobe_symbol sym;

			if (sprobe_modules__symbolize(im->mods, k ? pc - 1 : pc, &sym) != 0 || !sym.name)
				continue;
			rec.type = SPROBE_DF_SYMBOL;
			rec.symbol = (struct sprobe_df_symbol){
				.pc = pc, .module = SPROBE_DF_NO_MODULE, .offset = pc - sym.sym_start,
				.name = sym.name, .name_len = (uint32_t)strlen(sym.name),
			};
			for (size_t mi = 0; mi < nm; mi++)
				if (sprobe_modules__get(im->mods, mi) == sym.module)
					rec.symbol.module = (uint32_t)mi;
			err = sprobe_datafile_writer__write(w, &rec);
		}
	}
	free(set);
	struct sprobe_df_trailer tr = { .end_realtime_ns = (uint64_t)rt.tv_sec * 1000000000ull +
							   (uint64_t)rt.tv_nsec,
					.end_mono_ns = im->n ? im->s[im->n - 1].time_ns : start };
	if (!err)
		err = sprobe_datafile_writer__finish(w, &tr);
	sprobe_datafile_writer__free(w);
	if (close(fd) != 0 && !err)
		err = -errno;
	return err ? err : 1;
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
		err = write_part(x, &x->img[i]);
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
	free(x->scratch);
	free(x->img);
	free(x->thr);
	free(x->dir);
	free(x);
}

/* ---- record -p: attaching to a running process ------------------------ */

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

/* A /proc file's first line, newline removed ("" if unreadable). */
static void proc_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "re");

	out[0] = '\0';
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

static void proc_comm(uint32_t pid, uint32_t tid, char *out, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	proc_line(path, out, len);
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
	proc_line(path, line, sizeof(line));
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
	struct ximage *im = image_new(x, (uint32_t)pid, (uint32_t)ppid,
				      (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
	if (im) {
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		proc_line(path, im->comm, sizeof(im->comm));
		image_mods(im);
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
		proc_comm((uint32_t)x->root, tids[i], comm, sizeof(comm));
		if (comm[0])
			thread_comm(x, (uint32_t)x->root, tids[i], comm);
	}
	free(tids);
	return (int)n;
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
			proc_comm(im->pid, tid, comm, sizeof(comm));
			thread_comm(x, im->pid, tid, comm[0] ? comm : im->comm);
		}
	}
}
