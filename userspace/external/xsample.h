/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * One sample of the external tier (external.h): what the perf event asks
 * the kernel to copy (the user registers the unwinder needs and the top of
 * the user stack, PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER, with the
 * kernel's frame-pointer call chain as a fallback), how a
 * PERF_RECORD_SAMPLE is read, and how it becomes return addresses: the
 * project's deferred unwinder on an inventory of the sampled process,
 * reading code and unwind tables from its module files (unwind.h, "Other
 * processes"), exactly as from the agent's copies. Sizes and why:
 * docs/PERFORMANCE.md, "External tier".
 *
 * Not thread-safe (the record command's main thread); nothing here is
 * async-signal-safe.
 */
#ifndef SPROBE_USERSPACE_EXTERNAL_XSAMPLE_H
#define SPROBE_USERSPACE_EXTERNAL_XSAMPLE_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stackprobe/capture.h>
#include <stackprobe/unwind.h>

/* Bytes of user stack copied per sample unless STACKPROBE_EXT_STACK_BYTES
 * says otherwise (a multiple of 8, 1024..60000: the record's size is a
 * u16). */
#define SPROBE_XSAMPLE_STACK_BYTES 16384u

/* Add the user registers and stack to a's sample (sample_type,
 * sample_regs_user, sample_stack_user). */
void sprobe_xsample__attr(struct perf_event_attr *a);

/* Ring size for one CPU's event at freq_hz: room for about 0.4 s of
 * samples (the record loop polls every 50-250 ms), a power of two of
 * pages, 64..4096 pages plus the control page. In bytes. */
size_t sprobe_xsample__ring_bytes(double freq_hz, size_t page);

/*
 * mmap the ring of fd, *len bytes (from sprobe_xsample__ring_bytes()), or
 * as much as the locked-memory limit allows: an EPERM (perf_event_mlock_kb
 * and RLIMIT_MEMLOCK, for a user without CAP_IPC_LOCK) halves the data
 * part, down to 8 pages. Returns the mapping (*len set to its size) or
 * MAP_FAILED with errno.
 */
void *sprobe_xsample__map_ring(int fd, size_t *len, size_t page);

/* A PERF_RECORD_SAMPLE read (pointers into the record). */
struct sprobe_xraw {
	uint64_t ip, time;
	uint32_t pid, tid;
	const uint8_t *chain;	/* nchain u64 of the kernel's call chain */
	uint64_t nchain;
	bool has_regs;		/* the thread was in user mode with an ABI */
	uint64_t regs[SPROBE_NREGS]; /* DWARF-numbered (capture.h) */
	const uint8_t *stack;	/* stack_len bytes copied from regs' sp up */
	uint64_t stack_len, stack_req; /* copied (dyn_size), asked for */
};

/* Read the sample [p, end) (after its header) laid out by sample_type
 * and regs_mask (the event's attr). 0, or -EINVAL (too short, or a field
 * this reader does not know). */
int sprobe_xsample__parse(uint64_t sample_type, uint64_t regs_mask, const uint8_t *p,
			  const uint8_t *end, struct sprobe_xraw *r);

/* The user pc of a sample with registers (has_regs): where the thread
 * was in user space, also when the sample was taken in the kernel. */
uint64_t sprobe_xsample__user_pc(const struct sprobe_xraw *r);

/*
 * The sample's return addresses, innermost first, into pcs[max]: the
 * unwinder's walk of its registers and stack (u NULL: none, e.g. the
 * process's modules could not be read), spliced with the kernel's call
 * chain where the walk ended short of it (the stack copy ran out and the
 * chain goes on from the walk's last frame), or the kernel's chain alone
 * when the walk found nothing above the interrupted frame and the chain
 * did. A sample taken in the kernel (an event that includes it) has the
 * kernel's call chain first, innermost first, then its user frames (from
 * the registers the thread had when it entered the kernel). scratch is
 * the caller's (a thread sample is big). Returns the number of pcs (>= 1:
 * at least the ip).
 */
uint32_t sprobe_xsample__frames(struct sprobe_unwinder *u, struct sprobe_thread_sample *scratch,
				const struct sprobe_xraw *r, uint64_t *pcs, uint32_t max);

#endif
