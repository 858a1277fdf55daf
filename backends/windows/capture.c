/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Windows capture backend: thread suspension (x86_64 and aarch64).
 *
 * THE SUSPEND-WINDOW RULE (the Windows form of the rule stated in
 * capture.h): between SuspendThread() and ResumeThread() of a sibling, that
 * sibling may hold any lock of the process -- the heap's, the loader's, the
 * CRT's. So inside the window this file does only: GetThreadContext(), two
 * plain loads from the thread's TEB (stack bounds), a bounds-checked
 * memcpy() into a buffer the snapshot allocated earlier, and
 * QueryPerformanceCounter() (reads the TSC/shared page; no lock). No heap,
 * no critical section, no loader call, no output. Every function on that
 * path is tagged NO HEAP ALLOCATIONS below.
 *
 * Order per capture:
 *   1. enumerate the process's threads (toolhelp snapshot), before any
 *      window: it allocates;
 *   2. per sibling, sequentially: OpenThread + NtQueryInformationThread for
 *      its TEB (outside the window), then the window: SuspendThread,
 *      GetThreadContext (also what guarantees the suspension has taken
 *      effect: SuspendThread is asynchronous), copy [sp, StackBase) capped,
 *      ResumeThread; then CloseHandle.
 * One thread is suspended at a time, so the pause each thread feels is one
 * window, whatever the strategy option says (it is accepted and ignored).
 *
 * Guard page: the copy starts at the captured stack pointer and never goes
 * below it; a thread's stack is committed from StackLimit (the guard page is
 * below it) up to StackBase, and a thread whose sp is outside
 * [StackLimit, StackBase) is dropped (NO_STACK) rather than read. There is
 * no red zone in the Windows x64 or arm64 ABIs.
 */
#include <windows.h>
#include <tlhelp32.h>
#include <winternl.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"

/* ThreadBasicInformation's layout; winternl.h does not declare it. */
struct sprobe_thread_basic_info {
	LONG exit_status;
	PVOID teb;
	CLIENT_ID client_id;
	ULONG_PTR affinity;
	LONG priority;
	LONG base_priority;
};

struct sprobe_capturer {
	size_t max_stack_bytes;
	uint64_t timeout_ns;
	LARGE_INTEGER qpc_freq;
	/* Serialises captures: two concurrent ones could suspend each
	 * other's threads in a cycle. Never taken inside a window. */
	CRITICAL_SECTION lock;
};

/* NO HEAP ALLOCATIONS: QueryPerformanceCounter reads the TSC or the shared
 * user page; no lock. The result is ns on QPC's clock (not comparable with
 * CLOCK_MONOTONIC on Linux: only differences are meaningful). */
static uint64_t qpc_ns(const struct sprobe_capturer *c)
{
	LARGE_INTEGER now;
	QueryPerformanceCounter(&now);
	uint64_t t = (uint64_t)now.QuadPart, f = (uint64_t)c->qpc_freq.QuadPart;
	/* Split to avoid overflowing t * 1e9. */
	return t / f * 1000000000ull + t % f * 1000000000ull / f;
}

struct sprobe_capturer *sprobe_capturer__new(const struct sprobe_capture_opts *opts)
{
	struct sprobe_capture_opts o = { .sz = sizeof(o) };

	if (opts) {
		if (opts->sz < offsetof(struct sprobe_capture_opts, max_threads) + sizeof(uint32_t) ||
		    opts->sz > 4096) {
			errno = EINVAL;
			return NULL;
		}
		memcpy(&o, opts, sizeof(o));
	}
	/* There are no signals on Windows: signo is ignored. Only thread
	 * suspension exists here, so a request for a signal-based method is
	 * refused rather than silently replaced. */
	if (o.method != SPROBE_METHOD_NONE && o.method != SPROBE_METHOD_SUSPEND) {
		errno = ENOTSUP;
		return NULL;
	}
	if (o.max_stack_bytes > SPROBE_MAX_STACK_BYTES || o.strategy > SPROBE_STRATEGY_SEQUENTIAL ||
	    o.max_threads > SPROBE_MAX_THREADS_LIMIT) {
		errno = EINVAL;
		return NULL;
	}
	struct sprobe_capturer *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->max_stack_bytes = o.max_stack_bytes ? o.max_stack_bytes : SPROBE_MAX_STACK_BYTES;
	c->timeout_ns = o.timeout_ns ? o.timeout_ns : SPROBE_DEFAULT_TIMEOUT_NS;
	if (!QueryPerformanceFrequency(&c->qpc_freq) || c->qpc_freq.QuadPart <= 0) {
		free(c);
		errno = EIO;
		return NULL;
	}
	InitializeCriticalSection(&c->lock);
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
	DeleteCriticalSection(&c->lock);
	free(c);
}

int sprobe_capturer__signo(const struct sprobe_capturer *c)
{
	/* No signal is involved on Windows. */
	return c ? 0 : -EINVAL;
}

static bool thread_has_exited(HANDLE h)
{
	return WaitForSingleObject(h, 0) == WAIT_OBJECT_0;
}

#if defined(__x86_64__) || defined(_M_AMD64)
#define CTX_SP(c) ((c)->Rsp)
/* NO HEAP ALLOCATIONS */
static void sample_regs(struct sprobe_thread_sample *t, const CONTEXT *x)
{
	/* DWARF numbering, see SPROBE_NREGS. */
	t->regs[0] = x->Rax; t->regs[1] = x->Rdx; t->regs[2] = x->Rcx;
	t->regs[3] = x->Rbx; t->regs[4] = x->Rsi; t->regs[5] = x->Rdi;
	t->regs[6] = x->Rbp; t->regs[7] = x->Rsp;
	t->regs[8] = x->R8; t->regs[9] = x->R9; t->regs[10] = x->R10;
	t->regs[11] = x->R11; t->regs[12] = x->R12; t->regs[13] = x->R13;
	t->regs[14] = x->R14; t->regs[15] = x->R15; t->regs[16] = x->Rip;
	t->ip = x->Rip;
	t->sp = x->Rsp;
	t->fp = x->Rbp;
	t->lr = 0;
	t->has_lr = false;
}
#elif defined(__aarch64__) || defined(_M_ARM64)
#define CTX_SP(c) ((c)->Sp)
/* NO HEAP ALLOCATIONS */
static void sample_regs(struct sprobe_thread_sample *t, const CONTEXT *x)
{
	for (unsigned int i = 0; i < 29; i++)
		t->regs[i] = x->X[i];
	t->regs[29] = x->Fp;
	t->regs[30] = x->Lr;
	t->regs[31] = x->Sp;
	t->regs[32] = x->Pc;
	t->ip = x->Pc;
	t->sp = x->Sp;
	t->fp = x->Fp;
	t->lr = x->Lr;
	t->has_lr = true;
}
#else
#error "stackprobe: the Windows backend supports x86_64 and aarch64 only"
#endif

/*
 * The window for one thread. NO HEAP ALLOCATIONS, no locks, no output
 * between SuspendThread and ResumeThread. Returns SPROBE_DROP_NONE with t
 * filled (stage RAW) or the drop reason.
 */
static uint32_t capture_one(const struct sprobe_capturer *c, HANDLE h, const NT_TIB *tib,
			    struct sprobe_thread_sample *t, uint8_t *buf, size_t cap)
{
	CONTEXT ctx;
	memset(&ctx, 0, sizeof(ctx));
	ctx.ContextFlags = CONTEXT_CONTROL | CONTEXT_INTEGER;

	t->signal_ns = t->entry_ns = qpc_ns(c);
	if (SuspendThread(h) == (DWORD)-1)
		return thread_has_exited(h) ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	/* --- window open --- */
	if (!GetThreadContext(h, &ctx)) {
		ResumeThread(h);
		t->exit_ns = qpc_ns(c);
		return thread_has_exited(h) ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR;
	}
	/* The TEB lives as long as the thread, which cannot exit while
	 * suspended. StackLimit moves down as the stack grows: read it now. */
	uint64_t base = (uint64_t)(uintptr_t)tib->StackBase;
	uint64_t limit = (uint64_t)(uintptr_t)tib->StackLimit;
	uint64_t sp = CTX_SP(&ctx);
	if (sp < limit || sp >= base) {
		ResumeThread(h);
		t->exit_ns = qpc_ns(c);
		return SPROBE_DROP_NO_STACK;
	}
	size_t len = (size_t)(base - sp);
	bool truncated = false;
	if (len > cap) {
		len = cap;
		truncated = true;
	}
	memcpy(buf, (const void *)(uintptr_t)sp, len);
	ResumeThread(h);
	/* --- window closed --- */
	t->exit_ns = qpc_ns(c);

	sample_regs(t, &ctx);
	t->stack = buf;
	t->stack_len = len;
	t->stack_addr = sp;
	t->stack_top = base;
	t->truncated = truncated;
	t->method = SPROBE_METHOD_SUSPEND;
	t->stage = SPROBE_STAGE_RAW;
	return SPROBE_DROP_NONE;
}

/* The TEB of thread h, or NULL. Outside any window (ntdll call). */
static const NT_TIB *thread_tib(HANDLE h)
{
	struct sprobe_thread_basic_info tbi;
	ULONG got = 0;
	memset(&tbi, 0, sizeof(tbi));
	NTSTATUS st = NtQueryInformationThread(h, (THREADINFOCLASS)0 /* ThreadBasicInformation */,
					       &tbi, sizeof(tbi), &got);
	if (st < 0 || !tbi.teb)
		return NULL;
	/* NT_TIB is the first member of the TEB. */
	return (const NT_TIB *)tbi.teb;
}

static int win_errno(DWORD err)
{
	switch (err) {
	case ERROR_NOT_ENOUGH_MEMORY:
	case ERROR_OUTOFMEMORY: return -ENOMEM;
	case ERROR_ACCESS_DENIED: return -EACCES;
	case ERROR_TOO_MANY_OPEN_FILES: return -EMFILE;
	default: return -EIO;
	}
}

int sprobe_backend__capture(struct sprobe_capturer *c, struct sprobe_snapshot *s)
{
	if (!c || !s)
		return -EINVAL;

	size_t cap = c->max_stack_bytes < s->max_stack_bytes ? c->max_stack_bytes
							      : s->max_stack_bytes;
	DWORD self_pid = GetCurrentProcessId(), self_tid = GetCurrentThreadId();

	EnterCriticalSection(&c->lock);
	uint64_t deadline = qpc_ns(c) + c->timeout_ns;

	/* 1. Enumerate, before any window: toolhelp allocates. The list
	 * is system-wide: keep this process's threads except the caller. A
	 * thread created after this point is not captured (it did not exist
	 * when the capture started). */
	HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0);
	if (snap == INVALID_HANDLE_VALUE) {
		int err = win_errno(GetLastError());
		LeaveCriticalSection(&c->lock);
		return err;
	}
	THREADENTRY32 te;
	te.dwSize = sizeof(te);
	uint32_t n = 0;
	for (BOOL ok = Thread32First(snap, &te); ok; ok = Thread32Next(snap, &te)) {
		if (te.dwSize < offsetof(THREADENTRY32, th32OwnerProcessID) + sizeof(DWORD) ||
		    te.th32OwnerProcessID != self_pid || te.th32ThreadID == self_tid) {
			te.dwSize = sizeof(te);
			continue;
		}
		te.dwSize = sizeof(te);
		s->stats.threads_total++;
		if (n >= s->max_threads) {
			sprobe_snapshot__drop(s, NULL, SPROBE_DROP_NO_SLOT);
			continue;
		}
		/* The sample holds the tid until its turn comes. */
		sprobe_snapshot__sample_init(s, n++, (pid_t)te.th32ThreadID);
	}
	CloseHandle(snap);

	/* 2. One window per sibling. */
	for (uint32_t i = 0; i < n; i++) {
		struct sprobe_thread_sample *t = &s->samples[i];
		DWORD tid = (DWORD)t->tid;

		if (qpc_ns(c) > deadline) {
			sprobe_snapshot__drop(s, t, SPROBE_DROP_TIMEOUT);
			continue;
		}
		HANDLE h = OpenThread(THREAD_SUSPEND_RESUME | THREAD_GET_CONTEXT |
				      THREAD_QUERY_INFORMATION | SYNCHRONIZE, FALSE, tid);
		if (!h) {
			/* ERROR_INVALID_PARAMETER: no such thread any more. */
			DWORD e = GetLastError();
			sprobe_snapshot__drop(s, t, e == ERROR_INVALID_PARAMETER
							    ? SPROBE_DROP_EXITED : SPROBE_DROP_ERROR);
			continue;
		}
		const NT_TIB *tib = thread_tib(h);
		uint32_t why;
		if (!tib)
			why = thread_has_exited(h) ? SPROBE_DROP_EXITED : SPROBE_DROP_NO_STACK;
		else
			why = capture_one(c, h, tib, t, sprobe_snapshot__buffer(s, i), cap);
		CloseHandle(h);
		if (why != SPROBE_DROP_NONE)
			sprobe_snapshot__drop(s, t, why);
	}
	LeaveCriticalSection(&c->lock);
	return 0;
}

int sprobe_backend__task_dir(const struct sprobe_capturer *c)
{
	(void)c;
	return -ENOTSUP;
}
