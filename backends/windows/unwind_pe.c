/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Unwinding a captured Windows stack with the PE unwind data.
 *
 * The capture (backends/windows/capture.c) leaves, per thread, the registers and a
 * copy of [sp, stack_top) (capped). Here, after every thread runs again, we
 * walk that copy with the OS's own unwinder: RtlLookupFunctionEntry finds
 * the RUNTIME_FUNCTION of pc, RtlVirtualUnwind applies its unwind codes to a
 * CONTEXT. RtlVirtualUnwind reads saved registers and return addresses
 * through the CONTEXT's stack and frame registers, so before each step every
 * register that points into the original stack range is *translated* into
 * the copy (value + delta), and after the step every register that points
 * into the copy is translated back. Values loaded from the stack (saved rbp,
 * return addresses) are original addresses and are left alone. The live
 * stack of the thread is never read: it has moved on since the capture.
 *
 * Invariant that keeps RtlVirtualUnwind inside the copy: before a step we
 * check that the bytes it may read, [frame base, frame base + extent),
 * lie in the copy, where extent is computed from the unwind codes
 * (x86_64). A truncated copy therefore ends the walk early instead of
 * reading past the buffer.
 */
#include <windows.h>

#include <errno.h>
#include <string.h>

#include <stackprobe/win.h>

#include "backends/frames.h"

struct copy_map {
	uint64_t orig_lo, orig_hi;	/* original stack range */
	uint64_t copy_lo, copy_hi;	/* where those bytes are now */
};

static uint64_t to_copy(const struct copy_map *m, uint64_t v)
{
	if (v >= m->orig_lo && v < m->orig_hi)
		return v - m->orig_lo + m->copy_lo;
	/* One past the end is a valid stack pointer for an empty frame. */
	if (v == m->orig_hi)
		return m->copy_hi;
	return v;
}

static uint64_t to_orig(const struct copy_map *m, uint64_t v)
{
	if (v >= m->copy_lo && v <= m->copy_hi)
		return v - m->copy_lo + m->orig_lo;
	return v;
}

static bool in_copy(const struct copy_map *m, uint64_t lo, uint64_t len)
{
	return lo >= m->copy_lo && lo <= m->copy_hi && len <= m->copy_hi - lo;
}

#if defined(__x86_64__) || defined(_M_AMD64)

#define PC(c) ((c)->Rip)
#define SP(c) ((c)->Rsp)

static DWORD64 *gp_reg(CONTEXT *c, unsigned int n)
{
	/* Windows x64 register numbering (as in UNWIND_INFO.FrameRegister). */
	switch (n) {
	case 0: return &c->Rax;
	case 1: return &c->Rcx;
	case 2: return &c->Rdx;
	case 3: return &c->Rbx;
	case 4: return &c->Rsp;
	case 5: return &c->Rbp;
	case 6: return &c->Rsi;
	case 7: return &c->Rdi;
	case 8: return &c->R8;
	case 9: return &c->R9;
	case 10: return &c->R10;
	case 11: return &c->R11;
	case 12: return &c->R12;
	case 13: return &c->R13;
	case 14: return &c->R14;
	default: return &c->R15;
	}
}
#define NGP 16

static void context_from_sample(CONTEXT *c, const struct sprobe_thread_sample *s)
{
	/* DWARF numbering in s->regs: 0 rax 1 rdx 2 rcx 3 rbx 4 rsi 5 rdi
	 * 6 rbp 7 rsp 8..15 r8..r15 16 rip. */
	c->Rax = s->regs[0]; c->Rdx = s->regs[1]; c->Rcx = s->regs[2];
	c->Rbx = s->regs[3]; c->Rsi = s->regs[4]; c->Rdi = s->regs[5];
	c->Rbp = s->regs[6]; c->Rsp = s->sp;
	c->R8 = s->regs[8]; c->R9 = s->regs[9]; c->R10 = s->regs[10];
	c->R11 = s->regs[11]; c->R12 = s->regs[12]; c->R13 = s->regs[13];
	c->R14 = s->regs[14]; c->R15 = s->regs[15];
	c->Rip = s->ip;
	c->ContextFlags = CONTEXT_FULL;
}

/*
 * Bytes above the frame base that unwinding this function may read: every
 * push, allocation and machine frame of its prolog (and of the chain of
 * parent entries), plus the return address. An overestimate while pc is
 * still in the prolog, which only makes the bounds check stricter.
 * Returns 0 for unwind info we do not understand (the walk then stops).
 */
static uint64_t x64_frame_extent(uint64_t image_base, const RUNTIME_FUNCTION *fe,
				 unsigned int *frame_reg, unsigned int *frame_off)
{
	uint64_t extent = 8;	/* the return address */
	*frame_reg = 0;
	*frame_off = 0;
	for (int depth = 0; depth < 32; depth++) {
		const uint8_t *ui = (const uint8_t *)(uintptr_t)(image_base + fe->UnwindData);
		unsigned int version = ui[0] & 7, flags = ui[0] >> 3;
		unsigned int ncodes = ui[2];
		const uint16_t *codes = (const uint16_t *)(ui + 4);
		if (version != 1 && version != 2)
			return 0;
		if (depth == 0) {
			*frame_reg = ui[3] & 15;
			*frame_off = (ui[3] >> 4) * 16u;
		}
		for (unsigned int i = 0; i < ncodes;) {
			unsigned int op = (codes[i] >> 8) & 15, info = codes[i] >> 12;
			switch (op) {
			case 0: /* UWOP_PUSH_NONVOL */
				extent += 8; i += 1; break;
			case 1: /* UWOP_ALLOC_LARGE */
				if (info == 0) {
					if (i + 1 >= ncodes)
						return 0;
					extent += (uint64_t)codes[i + 1] * 8; i += 2;
				} else {
					if (i + 2 >= ncodes)
						return 0;
					extent += (uint64_t)codes[i + 1] | ((uint64_t)codes[i + 2] << 16);
					i += 3;
				}
				break;
			case 2: /* UWOP_ALLOC_SMALL */
				extent += info * 8u + 8; i += 1; break;
			case 3: /* UWOP_SET_FPREG */
				i += 1; break;
			case 4: /* UWOP_SAVE_NONVOL */
			case 8: /* UWOP_SAVE_XMM128 */
				i += 2; break;
			case 5: /* UWOP_SAVE_NONVOL_FAR */
			case 9: /* UWOP_SAVE_XMM128_FAR */
				i += 3; break;
			case 6: /* v1: SAVE_XMM (2 slots); v2: EPILOG (1 slot) */
				i += version == 2 ? 1 : 2; break;
			case 7: /* v1: SAVE_XMM_FAR (3 slots); v2: spare */
				if (version != 1)
					return 0;
				i += 3; break;
			case 10: /* UWOP_PUSH_MACHFRAME */
				extent += info ? 48 : 40; i += 1; break;
			default:
				return 0;
			}
		}
		if (!(flags & UNW_FLAG_CHAININFO))
			return extent;
		/* The parent entry follows the (even-padded) code array. */
		fe = (const RUNTIME_FUNCTION *)(codes + ((ncodes + 1) & ~1u));
	}
	return 0;
}

#elif defined(__aarch64__) || defined(_M_ARM64)

#define PC(c) ((c)->Pc)
#define SP(c) ((c)->Sp)

static DWORD64 *gp_reg(CONTEXT *c, unsigned int n)
{
	/* 0..28 x0..x28, 29 fp, 30 lr, 31 sp */
	if (n < 29)
		return &c->X[n];
	if (n == 29)
		return &c->Fp;
	if (n == 30)
		return &c->Lr;
	return &c->Sp;
}
#define NGP 32

static void context_from_sample(CONTEXT *c, const struct sprobe_thread_sample *s)
{
	/* DWARF numbering: 0..30 x0..x30, 31 sp, 32 pc. */
	for (unsigned int i = 0; i < 29; i++)
		c->X[i] = s->regs[i];
	c->Fp = s->regs[29];
	c->Lr = s->lr;
	c->Sp = s->sp;
	c->Pc = s->ip;
	c->ContextFlags = CONTEXT_FULL;
}

#else
#error "stackprobe: Windows unwinding supports x86_64 and aarch64 only"
#endif

/* What translate_in() changed, so translate_out() can undo exactly that. */
struct translation {
	DWORD64 before[NGP], after[NGP];
	bool moved[NGP];
};

static void translate_in(CONTEXT *c, const struct copy_map *m, struct translation *tr)
{
	for (unsigned int i = 0; i < NGP; i++) {
		DWORD64 *r = gp_reg(c, i);
		tr->before[i] = *r;
		*r = to_copy(m, *r);
		tr->after[i] = *r;
		tr->moved[i] = tr->before[i] != tr->after[i];
	}
}

/*
 * After a step: a register the step did not touch gets its original value
 * back; the stack pointer, which the unwinder computed from copy
 * coordinates, is mapped back. A register the step loaded from the stack
 * already holds an original value and is left alone, even if that value
 * happens to lie inside the copy buffer's own address range.
 */
static void translate_out(CONTEXT *c, const struct copy_map *m, const struct translation *tr)
{
	for (unsigned int i = 0; i < NGP; i++) {
		DWORD64 *r = gp_reg(c, i);
		if (r == &SP(c))
			*r = to_orig(m, *r);
		else if (tr->moved[i] && *r == tr->after[i])
			*r = tr->before[i];
	}
}

static void push_frame(struct sprobe_thread_sample *s, uint64_t pc, uint64_t fp, uint32_t method)
{
	struct sprobe_frame *f = &s->frames[s->nframes++];
	f->pc = pc;
	f->fp = fp;
	f->method = method;
	f->_pad = 0;
}

/* The walk, into s->frames[0..max). */
static int walk(struct sprobe_thread_sample *s, uint32_t max)
{

	struct copy_map m = {
		.orig_lo = s->stack_addr,
		.orig_hi = s->stack_addr + s->stack_len,
		.copy_lo = (uint64_t)(uintptr_t)s->stack,
		.copy_hi = (uint64_t)(uintptr_t)s->stack + s->stack_len,
	};
	CONTEXT ctx;
	memset(&ctx, 0, sizeof(ctx));
	context_from_sample(&ctx, s);

	s->nframes = 0;
	push_frame(s, PC(&ctx), SP(&ctx), SPROBE_FRAME_IP);

	while (s->nframes < max) {
		uint64_t pc = PC(&ctx), sp = SP(&ctx);
		struct translation tr;
		translate_in(&ctx, &m, &tr);
		if (!in_copy(&m, SP(&ctx), 8))
			break;

		DWORD64 image_base = 0;
		PRUNTIME_FUNCTION fe = RtlLookupFunctionEntry(pc, &image_base, NULL);
		if (!fe) {
			/* No unwind entry: a leaf that neither moved sp nor saved
			 * anything. */
#if defined(__x86_64__) || defined(_M_AMD64)
			ctx.Rip = *(const DWORD64 *)(uintptr_t)ctx.Rsp;
			ctx.Rsp += 8;
#else
			/* Only the innermost frame can be an lr leaf; anywhere
			 * else lr was clobbered by the call we came back from. */
			if (s->nframes != 1)
				break;
			ctx.Pc = ctx.Lr;
#endif
		} else {
#if defined(__x86_64__) || defined(_M_AMD64)
			unsigned int freg, foff;
			uint64_t extent = x64_frame_extent(image_base, fe, &freg, &foff);
			uint64_t base = SP(&ctx);
			if (extent == 0)
				break;
			/* Past the prolog of a function with a frame register,
			 * RtlVirtualUnwind finds the frame through that register:
			 * it must point into the copy too. */
			if (freg && pc - image_base >= fe->BeginAddress +
				    ((const uint8_t *)(uintptr_t)(image_base + fe->UnwindData))[1])
				base = *gp_reg(&ctx, freg) - foff;
			if (!in_copy(&m, base, extent) || !in_copy(&m, SP(&ctx), 8))
				break;
#else
			/* aarch64 unwind codes are not parsed for an extent:
			 * require a generous margin instead. Compile-checked only
			 * (no Windows arm64 machine to run on). */
			if (!in_copy(&m, SP(&ctx), s->truncated ? 4096 : 16))
				break;
#endif
			PVOID handler_data = NULL;
			DWORD64 establisher = 0;
			RtlVirtualUnwind(UNW_FLAG_NHANDLER, image_base, pc, fe, &ctx,
					 &handler_data, &establisher, NULL);
		}
		translate_out(&ctx, &m, &tr);

		uint64_t npc = PC(&ctx), nsp = SP(&ctx);
		/* End of the chain (thread start has pc 0) or no progress. */
		if (npc == 0 || nsp < sp || (npc == pc && nsp == sp))
			break;
		push_frame(s, npc, nsp, SPROBE_FRAME_PE);
		if (nsp >= m.orig_hi)
			break;
	}
	s->stage = SPROBE_STAGE_UNWOUND;
	return (int)s->nframes;
}

int sprobe_unwind_pe(struct sprobe_thread_sample *s)
{
	struct sprobe_frame scratch[SPROBE_MAX_FRAMES];
	struct sprobe_frames_walk w;
	uint32_t max;

	if (!s || s->stage != SPROBE_STAGE_RAW || !s->stack || !s->stack_len)
		return -EINVAL;
	/* A snapshot's sample: through scratch, then kept in its storage;
	 * the caller's array: straight in (backends/frames.h). */
	if (sprobe__frames_kind(s) == SPROBE_FRAMES_NONE)
		return -ENOBUFS;
	max = sprobe__frames_begin(s, scratch, &w);
	walk(s, max);
	sprobe__frames_end(s, &w);
	return (int)s->nframes;
}

int sprobe_snapshot__unwind_pe(struct sprobe_snapshot *snap)
{
	if (!snap)
		return -EINVAL;
	uint32_t n = sprobe_snapshot__nthreads(snap);
	for (uint32_t i = 0; i < n; i++) {
		struct sprobe_thread_sample *t = sprobe_snapshot__thread(snap, i);
		if (t && t->stage == SPROBE_STAGE_RAW)
			sprobe_unwind_pe(t);
	}
	sprobe_snapshot__set_frames_resolved(snap, true);
	return 0;
}
