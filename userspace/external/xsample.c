/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The external tier's samples: registers and stack bytes from the kernel,
 * unwound like the agent's copies (contract in xsample.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "userspace/external/xsample.h"

#if defined(__x86_64__)
/* perf's x86_64 user registers (asm/perf_regs.h) -> DWARF numbers. */
static const struct {
	uint8_t perf, dwarf;
} reg_map[] = {
	{ 0, 0 },   /* ax */ { 1, 3 },	 /* bx */ { 2, 2 },   /* cx */ { 3, 1 },   /* dx */
	{ 4, 4 },   /* si */ { 5, 5 },	 /* di */ { 6, 6 },   /* bp */ { 7, 7 },   /* sp */
	{ 8, 16 },  /* ip */ { 16, 8 },	 /* r8 */ { 17, 9 },  { 18, 10 }, { 19, 11 },
	{ 20, 12 }, { 21, 13 }, { 22, 14 }, { 23, 15 }, /* r15 */
};
#define REGS_IP 16
#define REGS_SP 7
#define REGS_FP 6
#elif defined(__aarch64__)
/* perf's arm64 user registers are the DWARF numbers: x0..x30, sp, pc. */
#define REGS_IP 32
#define REGS_SP 31
#define REGS_FP 29
#define REGS_LR 30
#endif

static uint64_t regs_mask(void)
{
#if defined(__x86_64__)
	uint64_t m = 0;

	for (size_t i = 0; i < sizeof(reg_map) / sizeof(reg_map[0]); i++)
		m |= 1ull << reg_map[i].perf;
	return m;
#else
	return (1ull << 33) - 1;
#endif
}

static uint64_t stack_bytes(void)
{
	const char *e = getenv("STACKPROBE_EXT_STACK_BYTES");
	char *endp;
	unsigned long long v;

	if (!e || !*e)
		return SPROBE_XSAMPLE_STACK_BYTES;
	errno = 0;
	v = strtoull(e, &endp, 10);
	if (errno || *endp || v < 1024 || v > 60000)
		return SPROBE_XSAMPLE_STACK_BYTES;
	return v & ~7ull;
}

void sprobe_xsample__attr(struct perf_event_attr *a)
{
	a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	a->sample_regs_user = regs_mask();
	a->sample_stack_user = (uint32_t)stack_bytes();
}

size_t sprobe_xsample__ring_bytes(double freq_hz, size_t page)
{
	/* A sample: header, ip, tid, time, call chain (<= 128 entries),
	 * registers, the stack copy with its two sizes. */
	double rec = 8 + 24 + 8 + 8 * 128 + 8 + 8 * 33 + 16 + (double)stack_bytes();
	double want = (freq_hz > 0 ? freq_hz : 99) * rec * 0.4;
	size_t pages = 64;

	while (pages < 4096 && (double)pages * (double)page < want)
		pages *= 2;
	return (1 + pages) * page;
}

void *sprobe_xsample__map_ring(int fd, size_t *len, size_t page)
{
	size_t pages = *len / page - 1;

	for (;;) {
		void *r = mmap(NULL, (1 + pages) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (r != MAP_FAILED) {
			*len = (1 + pages) * page;
			return r;
		}
		if (errno != EPERM || pages <= 8)
			return MAP_FAILED;
		pages /= 2;
	}
}

static int take(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	if (end - *p < 8)
		return -EINVAL;
	memcpy(v, *p, 8);
	*p += 8;
	return 0;
}

int sprobe_xsample__parse(uint64_t st, uint64_t rmask, const uint8_t *p, const uint8_t *end,
			  struct sprobe_xraw *r)
{
	uint64_t v;

	memset(r, 0, sizeof(*r));
	if (st & ~(uint64_t)(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
			     PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID |
			     PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
			     PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER))
		return -EINVAL;
	/* In the kernel's order (perf_output_sample()). */
	if ((st & PERF_SAMPLE_IDENTIFIER) && take(&p, end, &v))
		return -EINVAL;
	if ((st & PERF_SAMPLE_IP) && take(&p, end, &r->ip))
		return -EINVAL;
	if (st & PERF_SAMPLE_TID) {
		if (take(&p, end, &v))
			return -EINVAL;
		r->pid = (uint32_t)v; /* little-endian: pid first, then tid */
		r->tid = (uint32_t)(v >> 32);
	}
	if ((st & PERF_SAMPLE_TIME) && take(&p, end, &r->time))
		return -EINVAL;
	if ((st & PERF_SAMPLE_ADDR) && take(&p, end, &v))
		return -EINVAL;
	if ((st & PERF_SAMPLE_ID) && take(&p, end, &v))
		return -EINVAL;
	if ((st & PERF_SAMPLE_STREAM_ID) && take(&p, end, &v))
		return -EINVAL;
	if ((st & PERF_SAMPLE_CPU) && take(&p, end, &v))
		return -EINVAL;
	if ((st & PERF_SAMPLE_PERIOD) && take(&p, end, &v))
		return -EINVAL;
	if (st & PERF_SAMPLE_CALLCHAIN) {
		if (take(&p, end, &r->nchain) || r->nchain > (uint64_t)(end - p) / 8)
			return -EINVAL;
		r->chain = p;
		p += r->nchain * 8;
	}
	if (st & PERF_SAMPLE_REGS_USER) {
		uint64_t abi;

		if (take(&p, end, &abi))
			return -EINVAL;
		if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
			uint64_t perf[64] = { 0 };

			for (int b = 0; b < 64; b++)
				if ((rmask >> b) & 1 && take(&p, end, &perf[b]))
					return -EINVAL;
#if defined(__x86_64__)
			for (size_t i = 0; i < sizeof(reg_map) / sizeof(reg_map[0]); i++)
				r->regs[reg_map[i].dwarf] = perf[reg_map[i].perf];
#else
			for (int i = 0; i < SPROBE_NREGS; i++)
				r->regs[i] = perf[i];
#endif
			/* A 32-bit task's registers are not this unwinder's. */
			r->has_regs = abi == PERF_SAMPLE_REGS_ABI_64;
		}
	}
	if (st & PERF_SAMPLE_STACK_USER) {
		if (take(&p, end, &r->stack_req))
			return -EINVAL;
		if (r->stack_req) {
			if (r->stack_req > (uint64_t)(end - p))
				return -EINVAL;
			r->stack = p;
			p += r->stack_req;
			if (take(&p, end, &r->stack_len) || r->stack_len > r->stack_req)
				return -EINVAL;
		}
	}
	return 0;
}

static uint64_t chain_at(const struct sprobe_xraw *r, uint64_t i)
{
	uint64_t v;

	memcpy(&v, r->chain + i * 8, 8);
	return v;
}

/* The part of the kernel's call chain in context ctx (PERF_CONTEXT_USER
 * or _KERNEL), without its context markers, into pcs. */
static uint32_t chain_part(const struct sprobe_xraw *r, uint64_t ctx, uint64_t *pcs, uint32_t max)
{
	uint64_t cur = 0;
	uint32_t n = 0;

	for (uint64_t i = 0; i < r->nchain && n < max; i++) {
		uint64_t v = chain_at(r, i);

		if (v >= (uint64_t)PERF_CONTEXT_MAX)
			cur = v;
		else if (cur == ctx)
			pcs[n++] = v;
	}
	return n;
}

uint64_t sprobe_xsample__user_pc(const struct sprobe_xraw *r)
{
	return r->regs[REGS_IP];
}

/* The user frames (the contract of sprobe_xsample__frames, without the
 * kernel's). */
static uint32_t user_frames(struct sprobe_unwinder *u, struct sprobe_thread_sample *t,
			    const struct sprobe_xraw *r, uint64_t *pcs, uint32_t max)
{
	enum sprobe_unwind_stop why = SPROBE_UNWIND_BAD;
	uint64_t chain[SPROBE_MAX_FRAMES];
	uint32_t nchain = chain_part(r, (uint64_t)PERF_CONTEXT_USER, chain, SPROBE_MAX_FRAMES);
	uint32_t n = 0;

	if (max > SPROBE_MAX_FRAMES)
		max = SPROBE_MAX_FRAMES;
	if (u && r->has_regs && r->stack && r->stack_len) {
		memset(t, 0, offsetof(struct sprobe_thread_sample, frames));
		t->tid = (pid_t)r->tid;
		t->stage = SPROBE_STAGE_RAW;
		t->method = SPROBE_METHOD_PERF_EVENT;
		memcpy(t->regs, r->regs, sizeof(t->regs));
		t->ip = r->regs[REGS_IP];
		t->sp = r->regs[REGS_SP];
		t->fp = r->regs[REGS_FP];
#ifdef REGS_LR
		t->lr = r->regs[REGS_LR];
		t->has_lr = true;
#endif
		/* The kernel copies from sp up (no red zone: nothing below
		 * sp is a caller's). A copy shorter than asked reached the
		 * end of the stack's mapping. */
		t->stack = r->stack;
		t->stack_len = r->stack_len;
		t->stack_addr = t->sp;
		t->truncated = r->stack_len == r->stack_req;
		t->stack_top = t->truncated ? UINT64_MAX : t->sp + r->stack_len;
		if (sprobe_unwinder__unwind(u, t, &why) > 0) {
			for (uint32_t i = 0; i < t->nframes && n < max; i++)
				pcs[n++] = t->frames[i].pc;
		}
	}
	if (n <= 1 && nchain > n) {
		/* Nothing above the interrupted frame: the kernel's frame
		 * pointers found more. */
		memcpy(pcs, chain, (nchain < max ? nchain : max) * sizeof(*pcs));
		return nchain < max ? nchain : max;
	}
	if (n > 1 && n < max && nchain >= 2 && why != SPROBE_UNWIND_END &&
	    why != SPROBE_UNWIND_MAX_FRAMES) {
		/* The walk stopped early (the copy ran out, or a frame it
		 * could not pass): the kernel's chain, which reads live
		 * memory, may go on. It may skip frames (a function that
		 * does not set up a frame pointer), never add one: align it
		 * with the walk from the ip on, the chain's pcs matched in
		 * order against the walk's (so a recursion's repeated
		 * return address matches at its own depth). If the walk's
		 * last frame is matched, the chain's outer frames are the
		 * rest of the stack. */
		struct sprobe_modules *mods = sprobe_unwinder__modules(u);
		uint32_t j = 0;
		bool last = false;

		for (uint32_t i = 0; i < n; i++) {
			last = j < nchain && pcs[i] == chain[j];
			j += last;
		}
		/* Up to the first address in no module: a frame pointer walk
		 * that ran into code built without them (glibc's start code)
		 * reads garbage from there. */
		for (; last && j < nchain && n < max; j++) {
			if (!sprobe_modules__find(mods, chain[j]))
				break;
			pcs[n++] = chain[j];
		}
	}
	if (!n) /* in the kernel, r->ip is the kernel's */
		pcs[n++] = r->has_regs ? r->regs[REGS_IP] : r->ip;
	return n;
}

uint32_t sprobe_xsample__frames(struct sprobe_unwinder *u, struct sprobe_thread_sample *t,
				const struct sprobe_xraw *r, uint64_t *pcs, uint32_t max)
{
	if (max > SPROBE_MAX_FRAMES)
		max = SPROBE_MAX_FRAMES;
	/* In the kernel: its frames first, leaving the user stack at least
	 * half of the room. */
	uint32_t nk = chain_part(r, (uint64_t)PERF_CONTEXT_KERNEL, pcs, max / 2);

	if (!nk)
		return user_frames(u, t, r, pcs, max);
	/* A thread in the kernel with no user context (a kernel thread's
	 * sample, or a user stack the kernel could not name) has no more. */
	if (!r->has_regs && !chain_part(r, (uint64_t)PERF_CONTEXT_USER, pcs + nk, 1))
		return nk;
	return nk + user_frames(u, t, r, pcs + nk, max - nk);
}
