/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier's state, shared by its files (not an interface: the
 * contract is external.h). perf_tree.c opens the events and reads the
 * rings into process images; perf_part.c writes an image as a part;
 * perf_attach.c attaches to a process already running (record -p).
 * Not thread-safe (the record command's main thread).
 */
#ifndef SPROBE_USERSPACE_EXTERNAL_EXT_STATE_H
#define SPROBE_USERSPACE_EXTERNAL_EXT_STATE_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackprobe/capture.h>
#include <stackprobe/symbolize.h>
#include <stackprobe/unwind.h>

#include "userspace/external/external.h"

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

/* /proc/kallsyms' text symbols, sorted by address (loaded once, when a
 * part first has a kernel frame; n == 0 when the addresses are hidden:
 * kernel.kptr_restrict). */
struct sprobe_ext_ksym {
	uint64_t addr;
	uint32_t name;		/* offset in names */
};
struct sprobe_ext_ksyms {
	bool loaded;
	struct sprobe_ext_ksym *v;
	size_t n;
	char *names;
};

struct sprobe_ext {
	/* One event and ring per CPU: the kernel refuses to map the ring of
	 * an inherited event that follows the task on every CPU. */
	int ncpu;
	int fd[MAX_CPUS];
	void *ring[MAX_CPUS];
	size_t ring_len, ring_lens[MAX_CPUS];
	/* The sample layout asked for (xsample.h reads it). */
	uint64_t sample_type, regs_mask;
	struct sprobe_thread_sample *scratch; /* one walk's (its frames: the unwinder's buffer) */
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
	/* Why kernel time is not sampled ("": it is), and the kernel's
	 * symbols naming its frames (perf_kernel.c). */
	char kernel_why[192];
	struct sprobe_ext_ksyms ksyms;
};

/* A new image of pid (its first, or the next after an exec) started at
 * t; NULL when out of memory. Pointers to images move with it. */
struct ximage *sprobe_ext__image_new(struct sprobe_ext *x, uint32_t pid, uint32_t ppid, uint64_t t);
/* Read im's modules from /proc once, while its process lives, and make
 * its unwinder on them. */
void sprobe_ext__image_mods(struct ximage *im);
/* Name thread tid of pid (a later name replaces the earlier). */
void sprobe_ext__thread_comm(struct sprobe_ext *x, uint32_t pid, uint32_t tid, const char *comm);
/* A /proc file's first line, newline removed ("" if unreadable). */
void sprobe_ext__proc_line(const char *path, char *out, size_t len);
/* /proc/PID/task/TID/comm ("" if the thread has gone). */
void sprobe_ext__proc_comm(uint32_t pid, uint32_t tid, char *out, size_t len);
/* Is pc the kernel's (the upper half of the address space)? */
static inline bool sprobe_ext__kernel_pc(uint64_t pc)
{
	return (int64_t)pc < 0;
}
/* The name of the kernel function holding pc, NULL when not known (the
 * addresses hidden, no /proc/kallsyms). Loads them on first use. */
const char *sprobe_ext__ksym(struct sprobe_ext_ksyms *k, uint64_t pc);
void sprobe_ext__ksyms_free(struct sprobe_ext_ksyms *k);
/* Write im as DIR/PID.EXEC.part (perf_part.c). 1 written, 0 left to the
 * agent's part of that name, or -errno. */
int sprobe_ext__write_part(struct sprobe_ext *x, struct ximage *im);

#endif
